#include "kv/hadamard.h"

#include <cmath>

#include "core/error.h"
#include "core/hot_loop.h"

namespace ninfer {

NINFER_HOT_LOOP void hadamard_inplace(float* x, int n) {
  NINFER_CHECK(n > 0 && (n & (n - 1)) == 0, "hadamard size {} is not a power of two", n);
  for (int h = 1; h < n; h <<= 1) {
    for (int i = 0; i < n; i += 2 * h) {
      for (int j = i; j < i + h; ++j) {
        float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
    }
  }
  const float s = 1.0f / std::sqrt(float(n));
  for (int i = 0; i < n; ++i) x[i] *= s;
}

}  // namespace ninfer
