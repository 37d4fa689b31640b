#include "kv/codecs/common.h"

#include "core/error.h"

namespace ninfer::codecs {

NINFER_HOT_LOOP void prepare_row(const float* x, int d, KvRotation r, float* out) {
  NINFER_CHECK(d > 0 && d <= kMaxHeadDim, "head_dim {} outside 1..{}", d, kMaxHeadDim);
  for (int i = 0; i < d; ++i) {
    float v = x[i];
    if (std::isnan(v)) v = 0.0f;
    // fmin(fmax(v, -C), C) for a v that is not NaN, as compares (std::fmax is a libm call)
    v = v < -kKvInputClamp ? -kKvInputClamp : v;
    out[i] = v > kKvInputClamp ? kKvInputClamp : v;
  }
  rotate_kv(r, out, d);
}

}  // namespace ninfer::codecs
