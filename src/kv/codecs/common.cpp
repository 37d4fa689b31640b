#include "kv/codecs/common.h"

#include "core/error.h"

namespace ninfer::codecs {

void prepare_row(const float* x, int d, KvRotation r, float* out) {
  NINFER_CHECK(d > 0 && d <= kMaxHeadDim, "head_dim {} outside 1..{}", d, kMaxHeadDim);
  for (int i = 0; i < d; ++i) {
    float v = x[i];
    if (std::isnan(v)) v = 0.0f;
    out[i] = std::fmin(std::fmax(v, -kKvInputClamp), kKvInputClamp);
  }
  rotate_kv(r, out, d);
}

}  // namespace ninfer::codecs
