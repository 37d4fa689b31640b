// `int8`: 8-bit integers with one fp16 scale per 64-group. K is rotated by H_D, V is not.
//
// Row layout (per side), D = head_dim (a multiple of 64):
//   bytes [0, D)          codes: int8 two's complement, value i at byte i
//   bytes [D, D + D/32)   scales: fp16 little-endian, group g at bytes D + 2g
// Encode (per 64-group g of the prepared row x, see common.h for NaN/Inf and rotation):
//   s = fp16(amax(x_g) / 127)          the rounded scale is used below
//   q_i = clamp(rint(x_i / s), -127, 127) (round half to even); s == 0 -> q_i = 0
// Decode: x_i = q_i * s (in the stored basis).
#include "kv/codecs/codecs.h"
#include "kv/codecs/common.h"

namespace ninfer::codecs {
namespace {

constexpr KvPlane kPlanes[] = {{"codes", DType::I8, 1, 1, 0}, {"scales", DType::F16, 64, 1, 0}};
size_t int8_bytes(int d) { return planes_bytes(kPlanes, d); }

template <KvRotation R>
NINFER_HOT_LOOP void int8_encode(const float* raw, int d, uint8_t* out) {
  float x[kMaxHeadDim];
  prepare_row(raw, d, R, x);
  for (int g = 0; g < d; g += 64) {
    uint16_t sbits;
    const float s = fp16_scale(amax(x + g, 64) / 127.0f, &sbits);
    store_u16(out + d + g / 32, sbits);
    for (int i = g; i < g + 64; ++i) {
      const float q = s > 0.0f ? std::fmin(std::fmax(rne(x[i] / s), -127.0f), 127.0f) : 0.0f;
      out[i] = uint8_t(int8_t(q));
    }
  }
}

NINFER_HOT_LOOP void int8_decode(const uint8_t* in, int d, float* out) {
  for (int g = 0; g < d; g += 64) {
    const float s = f16_to_f32(load_u16(in + d + g / 32));
    for (int i = g; i < g + 64; ++i) out[i] = float(int8_t(in[i])) * s;
  }
}

}  // namespace

constinit const KvFormat kInt8Format{
    "int8", "int8 codes, fp16 scale per 64 (amax/127); K rotated H_D", 64,
    {KvRotation::HadamardHead, int8_bytes, int8_encode<KvRotation::HadamardHead>, int8_decode, kPlanes},
    {KvRotation::None, int8_bytes, int8_encode<KvRotation::None>, int8_decode, kPlanes}};

}  // namespace ninfer::codecs
