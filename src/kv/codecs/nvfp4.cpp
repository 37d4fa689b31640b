// `nvfp4`: e2m1 values with one e4m3 scale per 16 values (src/kv/minifloat.h). K is rotated
// by H_D; V (the table's "same") is rotated by H_64 per group, the V convention of
// KV_FORMATS.md. There is no second-level (per-tensor) scale in this byte budget, so a block
// whose amax exceeds 6 * 448 = 2688 saturates, and one below ~2^-10 flushes to zero.
//
// Row layout (per side), D = head_dim:
//   bytes [0, D/2)            codes: one byte per pair, value 2j in the low nibble, 2j+1 in
//                             the high nibble; nibble = sign (bit 3) | magnitude code (0..7)
//   bytes [D/2, D/2 + D/16)   scales: e4m3, block b (values 16b..16b+15) at byte D/2 + b
// Encode (per 16-block of the prepared row x, see common.h for NaN/Inf and rotation):
//   s = e4m3(amax(x_b) / 6)  (round half to even, saturating)   the decoded s is used below
//   c_i = e2m1(x_i / s): round half to even, saturating at +-6, -0 -> +0; s == 0 -> c_i = 0
// Decode: x_i = e2m1_to_f32(c_i) * e4m3_to_f32(s).
#include "kv/codecs/codecs.h"
#include "kv/codecs/common.h"
#include "kv/codecs/sides.h"
#include "core/minifloat.h"

namespace ninfer::codecs {

constexpr KvPlane kNvfp4Planes[2] = {{"e2m1 pairs", DType::U8, 2, 1, 0},
                                     {"e4m3 scales", DType::U8, 16, 1, 0}};
size_t nvfp4_bytes(int d) { return planes_bytes(kNvfp4Planes, d); }

template <KvRotation R>
NINFER_HOT_LOOP void nvfp4_encode(const float* raw, int d, uint8_t* out) {
  float x[kMaxHeadDim];
  prepare_row(raw, d, R, x);
  uint8_t* scales = out + d / 2;
  for (int b = 0; b < d; b += 16) {
    const uint8_t sb = f32_to_e4m3(amax(x + b, 16) / kE2m1Max);
    const float s = e4m3_to_f32(sb);
    scales[b / 16] = sb;
    for (int i = b; i < b + 16; i += 2) {
      const uint8_t lo = s > 0.0f ? f32_to_e2m1(x[i] / s) : 0;
      const uint8_t hi = s > 0.0f ? f32_to_e2m1(x[i + 1] / s) : 0;
      out[i / 2] = uint8_t(lo | (hi << 4));
    }
  }
}
template void nvfp4_encode<KvRotation::HadamardHead>(const float*, int, uint8_t*);
template void nvfp4_encode<KvRotation::Hadamard64>(const float*, int, uint8_t*);

NINFER_HOT_LOOP void nvfp4_decode(const uint8_t* in, int d, float* out) {
  const uint8_t* scales = in + d / 2;
  for (int b = 0; b < d; b += 16) {
    const float s = e4m3_value(scales[b / 16]);
    for (int h = b; h < b + 16; h += 8) {
      const uint32_t w = load_u32(in + h / 2);  // values h..h+7
      NINFER_BLOCK_LANES
      for (int i = 0; i < 8; ++i) out[h + i] = e2m1_value(nibble(w, i)) * s;
    }
  }
}

constinit const KvFormat kNvfp4Format{
    "nvfp4", "e2m1 pairs, e4m3 scale per 16; K rotated H_D, V rotated H_64", 64,
    {KvRotation::HadamardHead, nvfp4_bytes, nvfp4_encode<KvRotation::HadamardHead>, nvfp4_decode, kNvfp4Planes},
    {KvRotation::Hadamard64, nvfp4_bytes, nvfp4_encode<KvRotation::Hadamard64>, nvfp4_decode, kNvfp4Planes}};

}  // namespace ninfer::codecs
