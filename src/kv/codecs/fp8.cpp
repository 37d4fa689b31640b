// `fp8`: OCP e4m3 values (src/kv/minifloat.h) with one fp16 scale per row. K is rotated by
// H_D, V is not.
//
// Row layout (per side), D = head_dim:
//   bytes [0, D)       codes: e4m3, value i at byte i
//   bytes [D, D + 2)   scale: fp16 little-endian
// Encode (prepared row x, see common.h for NaN/Inf and rotation):
//   s = fp16(amax(x) / 448)               the rounded scale is used below
//   c_i = e4m3(x_i / s): round half to even, saturating at +-448, -0 -> +0; s == 0 -> c_i = 0
// Decode: x_i = e4m3_to_f32(c_i) * s.
#include "kv/codecs/codecs.h"
#include "kv/codecs/common.h"
#include "kv/codecs/sides.h"
#include "core/minifloat.h"

namespace ninfer::codecs {

constexpr KvPlane kFp8Planes[2] = {{"e4m3 codes", DType::U8, 1, 1, 0},
                                   {"row scale", DType::F16, 0, 0, 1}};
size_t fp8_bytes(int d) { return planes_bytes(kFp8Planes, d); }

template <KvRotation R>
void fp8_encode(const float* raw, int d, uint8_t* out) {
  float x[kMaxHeadDim];
  prepare_row(raw, d, R, x);
  uint16_t sbits;
  const float s = fp16_scale(amax(x, d) / kE4m3Max, &sbits);
  for (int i = 0; i < d; ++i) out[i] = s > 0.0f ? f32_to_e4m3(x[i] / s) : 0;
  store_u16(out + d, sbits);
}
template void fp8_encode<KvRotation::None>(const float*, int, uint8_t*);
template void fp8_encode<KvRotation::HadamardHead>(const float*, int, uint8_t*);

void fp8_decode(const uint8_t* in, int d, float* out) {
  const float s = f16_to_f32(load_u16(in + d));
  for (int i = 0; i < d; ++i) out[i] = e4m3_to_f32(in[i]) * s;
}

constinit const KvFormat kFp8Format{
    "fp8", "e4m3 codes, fp16 scale per row (amax/448); K rotated H_D", 64,
    {KvRotation::HadamardHead, fp8_bytes, fp8_encode<KvRotation::HadamardHead>, fp8_decode, kFp8Planes},
    {KvRotation::None, fp8_bytes, fp8_encode<KvRotation::None>, fp8_decode, kFp8Planes}};

}  // namespace ninfer::codecs
