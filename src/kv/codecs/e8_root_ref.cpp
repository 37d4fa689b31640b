// `e8-root-ref`: the seed pull request's `rk2v4-e8` K code (an E8-root gain-shape code), kept
// only as a reference design to measure against; it is not offered in help texts. K rotated by
// H_D with an fp16 scale per 64-group; V as the `rk4v4-e8` V (rk4v4_e8.cpp). Same bytes as
// `rk2v4-e8`.
//
// K block code (8 dims, 2 bytes, stored little-endian as uint16 = byte0 | byte1 << 8):
//   byte 0: root index r of the E8 root nearest in direction to the block: 0..111 are
//           +-e_i +-e_j, index = 4*pair + signs (pairs i<j in lexicographic order; signs bit 0
//           = e_i negative, bit 1 = e_j negative); 112..239 are (+-1/2)^8 with an even number
//           of minus signs, index = 112 + m (bit i of m, i < 7: coordinate i negative; the
//           sign of coordinate 7 makes the count even); 240..255 unused (decode as zero).
//   byte 1: low nibble k = log-radius level: 0 = zero block; 1..15 = radius
//           rho_k = g * sqrt(8) * 2^((k - 8) / 3); high nibble = correction axis a (bits 0..2)
//           and its sign (bit 3, 1 = negative).
// Encode (g = fp16(amax(x_group) / 7) of the prepared row): |x| == 0 or g == 0 -> code 0;
//   k = clamp(rint(3 log2(|x| / (g sqrt 8))) + 8, 1, 15); r = argmax_r x . root_r (first max);
//   residual e = x - (x . root_r / 2) root_r; a = argmax |e_i| (first), sign of e_a.
// Decode: c = 2 * root_doubled(r) (+-4 at two dims, or +-2 at all eight) with +-1 added at
//   axis a: an int8 vector on the group-scale grid; x = rho_k * c / |c|.
// NOTE: KV_FORMATS.md describes the seed's code without its exact reconstruction rule; this
// normalizes the int8 vector to the coded radius, which is the most favourable reading.
#include "kv/codecs/e8_root_ref.h"

#include <array>
#include <bit>
#include <cmath>

#include "kv/codecs/codecs.h"
#include "kv/codecs/common.h"
#include "kv/codecs/sides.h"

namespace ninfer::codecs {

namespace e8root {
namespace {

constexpr void root_doubled_impl(int r, int* out) {
  for (int i = 0; i < 8; ++i) out[i] = 0;
  if (r < 112) {
    int pair = r / 4, signs = r % 4, n = 0;
    for (int i = 0; i < 8; ++i)
      for (int j = i + 1; j < 8; ++j, ++n)
        if (n == pair) {
          out[i] = signs & 1 ? -2 : 2;
          out[j] = signs & 2 ? -2 : 2;
        }
  } else if (r < 240) {
    const int m = r - 112;
    int negs = 0;
    for (int i = 0; i < 7; ++i) {
      out[i] = (m >> i) & 1 ? -1 : 1;
      negs += (m >> i) & 1;
    }
    out[7] = negs & 1 ? -1 : 1;
  }
}

// The decoder's tables. kRoots4[r] = 2 * root_doubled(r) (zero for the unused 240..255).
constexpr std::array<std::array<int8_t, 8>, 256> make_roots4() {
  std::array<std::array<int8_t, 8>, 256> t{};
  for (int r = 0; r < 256; ++r) {
    int c[8];
    root_doubled_impl(r, c);
    for (int i = 0; i < 8; ++i) t[r][i] = int8_t(2 * c[i]);
  }
  return t;
}
constexpr auto kRoots4 = make_roots4();
// kLevelGain[k] = 2^((k - 8) / 3), the same exp2f call as decode_block.
const std::array<float, 16> kLevelGain = [] {
  std::array<float, 16> t{};
  for (int k = 0; k < 16; ++k) t[k] = std::exp2(float(k - 8) / 3.0f);
  return t;
}();
// NOTE: |c|^2 = 32 + 1 + 2 (+-1) c_axis with c_axis in {0, +-2, +-4}: 25, 29, 33, 37 or 41,
// and sqrt is correctly rounded, so this table is bit for bit decode_block's std::sqrt.
const std::array<float, 5> kSqrtNorm2 = {std::sqrt(25.0f), std::sqrt(29.0f), std::sqrt(33.0f),
                                         std::sqrt(37.0f), std::sqrt(41.0f)};

}  // namespace

void root_doubled(int r, int* out) { root_doubled_impl(r, out); }

uint16_t encode_block(const float* x, float g) {
  float n2 = 0.0f;
  for (int i = 0; i < 8; ++i) n2 = n2 + x[i] * x[i];
  const float norm = std::sqrt(n2);
  if (!(norm > 0.0f) || !(g > 0.0f)) return 0;
  const float lv = std::nearbyint(3.0f * std::log2(norm / (g * std::sqrt(8.0f)))) + 8.0f;
  const int k = int(std::fmin(std::fmax(lv, 1.0f), 15.0f));
  int best_r = 0;
  float best_dot = -INFINITY;
  for (int r = 0; r < 240; ++r) {
    int c[8];
    root_doubled(r, c);
    float dot = 0.0f;
    for (int i = 0; i < 8; ++i) dot = dot + x[i] * float(c[i]);
    if (dot > best_dot) {
      best_dot = dot;
      best_r = r;
    }
  }
  int c[8];
  root_doubled(best_r, c);
  // root = c/2, |root|^2 = 2: projection coefficient (x . root) / 2 = best_dot / 4.
  int axis = 0;
  float best_e = -1.0f, sign_e = 1.0f;
  for (int i = 0; i < 8; ++i) {
    const float e = x[i] - best_dot * 0.25f * (float(c[i]) * 0.5f);
    if (std::fabs(e) > best_e) {
      best_e = std::fabs(e);
      axis = i;
      sign_e = e;
    }
  }
  const int axis_code = axis | (sign_e < 0.0f ? 8 : 0);
  return uint16_t(best_r | ((k | (axis_code << 4)) << 8));
}

void decode_block(uint16_t code, float g, float* out) {
  const int r = code & 0xFF, k = (code >> 8) & 0xF, axis_code = code >> 12;
  if (k == 0 || r >= 240) {
    for (int i = 0; i < 8; ++i) out[i] = 0.0f;
    return;
  }
  int c[8];
  root_doubled(r, c);
  for (int i = 0; i < 8; ++i) c[i] *= 2;
  c[axis_code & 7] += axis_code & 8 ? -1 : 1;
  float n2 = 0.0f;
  for (int i = 0; i < 8; ++i) n2 = n2 + float(c[i] * c[i]);
  const float rho = g * std::sqrt(8.0f) * std::exp2(float(k - 8) / 3.0f);
  const float f = rho / std::sqrt(n2);
  for (int i = 0; i < 8; ++i) out[i] = float(c[i]) * f;
}

}  // namespace e8root

namespace {

constexpr KvPlane kPlanes[] = {{"root codes (u16 per 8)", DType::U8, 8, 2, 0},
                               {"scales", DType::F16, 64, 1, 0}};
size_t k_bytes(int d) { return planes_bytes(kPlanes, d); }

NINFER_HOT_LOOP void k_encode(const float* raw, int d, uint8_t* out) {
  float x[kMaxHeadDim];
  prepare_row(raw, d, KvRotation::HadamardHead, x);
  uint8_t* scales = out + d / 4;
  for (int g = 0; g < d; g += 64) {
    uint16_t sbits;
    const float s = fp16_scale(amax(x + g, 64) / 7.0f, &sbits);
    store_u16(scales + g / 32, sbits);
    for (int b = g; b < g + 64; b += 8) store_u16(out + b / 4, e8root::encode_block(x + b, s));
  }
}

// e8root::decode_block with its per-block work from tables (roots, level gains, norms), the
// 8 divisions of a group in one vectorizable loop and the zero block as a mask (it is +0 even
// when the scale is Inf or NaN): the CPU attention's inner loop.
NINFER_HOT_LOOP void k_decode(const uint8_t* in, int d, float* out) {
  const uint8_t* scales = in + d / 4;
  for (int g = 0; g < d; g += 64) {
    const float gs = f16_to_f32(load_u16(scales + g / 32)) * std::sqrt(8.0f);
    float rho[8], norm[8], f[8];
    int8_t c[8][8];
    uint32_t keep[8];
    for (int b = 0; b < 8; ++b) {
      const uint32_t code = load_u16(in + (g + 8 * b) / 4);
      const uint32_t r = code & 0xFF, k = (code >> 8) & 0xF, axis_code = code >> 12;
      for (int i = 0; i < 8; ++i) c[b][i] = e8root::kRoots4[r][i];
      const int delta = axis_code & 8 ? -1 : 1, axis = int(axis_code & 7);
      const int n2 = 33 + 2 * delta * c[b][axis];
      c[b][axis] = int8_t(c[b][axis] + delta);
      rho[b] = gs * e8root::kLevelGain[k];
      norm[b] = e8root::kSqrtNorm2[(n2 - 25) / 4];
      keep[b] = 0u - uint32_t(k != 0 && r < 240);
    }
    for (int b = 0; b < 8; ++b) f[b] = rho[b] / norm[b];
    for (int b = 0; b < 8; ++b)
      for (int i = 0; i < 8; ++i)
        out[g + 8 * b + i] = std::bit_cast<float>(std::bit_cast<uint32_t>(float(c[b][i]) * f[b]) & keep[b]);
  }
}

}  // namespace

constinit const KvFormat kE8RootRefFormat{
    "e8-root-ref", "comparison only: the seed's E8-root gain-shape K code (2 B/8 dims); V as rk4v4-e8", 64,
    {KvRotation::HadamardHead, k_bytes, k_encode, k_decode, kPlanes},
    {KvRotation::Hadamard64, e8l32_bytes, e8l32_encode<KvRotation::Hadamard64>, e8l32_decode, kE8L32Planes}};

}  // namespace ninfer::codecs
