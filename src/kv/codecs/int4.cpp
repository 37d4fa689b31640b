// `int4`: the control format. 4-bit integers with one fp16 scale per 64-group; K rotated by
// H_D, V rotated by H_64 per group.
//
// Row layout (per side), D = head_dim:
//   bytes [0, D/2)            codes: one byte per pair, value 2j in the low nibble, 2j+1 in
//                             the high nibble; nibble = 4-bit two's complement (-8..7)
//   bytes [D/2, D/2 + D/32)   scales: fp16 little-endian, group g at byte D/2 + 2g
// Encode (per 64-group of the prepared row x, see common.h for NaN/Inf and rotation):
//   s = fp16(amax(x_g) / 7)                  the rounded scale is used below
//   q_i = clamp(rint(x_i / s), -7, 7) (half to even); s == 0 -> q_i = 0 (-8 is never written)
// Decode: x_i = q_i * s.
#include "kv/codecs/codecs.h"
#include "kv/codecs/common.h"

namespace ninfer::codecs {
namespace {

constexpr KvPlane kPlanes[] = {{"int4 pairs", DType::U8, 2, 1, 0}, {"scales", DType::F16, 64, 1, 0}};
size_t int4_bytes(int d) { return planes_bytes(kPlanes, d); }

// 4-bit two's complement, branch-free: flipping the sign bit and subtracting 8 sign-extends.
inline int nibble_to_int(uint32_t n) { return int((n & 0xF) ^ 0x8) - 8; }

template <KvRotation R>
NINFER_HOT_LOOP void int4_encode(const float* raw, int d, uint8_t* out) {
  float x[kMaxHeadDim];
  prepare_row(raw, d, R, x);
  uint8_t* scales = out + d / 2;
  for (int g = 0; g < d; g += 64) {
    uint16_t sbits;
    const float s = fp16_scale(amax(x + g, 64) / 7.0f, &sbits);
    store_u16(scales + g / 32, sbits);
    for (int i = g; i < g + 64; i += 2) {
      int q[2];
      for (int k = 0; k < 2; ++k)
        q[k] = s > 0.0f ? int(std::fmin(std::fmax(rne(x[i + k] / s), -7.0f), 7.0f)) : 0;
      out[i / 2] = uint8_t((q[0] & 0xF) | ((q[1] & 0xF) << 4));
    }
  }
}

NINFER_HOT_LOOP void int4_decode(const uint8_t* in, int d, float* out) {
  const uint8_t* scales = in + d / 2;
  for (int g = 0; g < d; g += 64) {
    const float s = f16_to_f32(load_u16(scales + g / 32));
    for (int b = g; b < g + 64; b += 8) {
      const uint32_t w = load_u32(in + b / 2);  // values b..b+7
      NINFER_BLOCK_LANES
      for (int i = 0; i < 8; ++i) out[b + i] = float(nibble_to_int(nibble(w, i))) * s;
    }
  }
}

}  // namespace

constinit const KvFormat kInt4Format{
    "int4", "int4 pairs, fp16 scale per 64 (amax/7); K rotated H_D, V rotated H_64", 64,
    {KvRotation::HadamardHead, int4_bytes, int4_encode<KvRotation::HadamardHead>, int4_decode, kPlanes},
    {KvRotation::Hadamard64, int4_bytes, int4_encode<KvRotation::Hadamard64>, int4_decode, kPlanes}};

}  // namespace ninfer::codecs
