// `iq4nl-ref`: a reference design to measure `rk4v4-e8` against (comparison only, no GPU
// kernels): a 4-bit non-uniform scalar code in the style of llama.cpp's `iq4_nl` cache type, with
// one signed fp16 scale per 32 values (4.5 bits/value) and the rotations of `rk4v4-e8` (K by
// H_D, V by H_64 per group), so that the two codes differ only in the code itself.
//
// Levels (int8 units, ascending): L = {-127, -104, -83, -65, -49, -35, -22, -10,
//                                      1, 13, 25, 38, 53, 69, 89, 113}
// (denser near 0, one extra level on the negative side: the signed scale puts a block's
// largest-magnitude value at whichever end fits it better).
// Row layout (per side), D = head_dim:
//   bytes [0, D/2)            codes: one byte per pair, value 2j in the low nibble, 2j+1 in
//                             the high nibble; nibble = index into L
//   bytes [D/2, D/2 + D/16)   scales: fp16 little-endian (signed), block k of 32 at D/2 + 2k
// Encode (per 32-block x of the prepared row, common.h for NaN/Inf and rotation):
//   m = the value of largest |x_j| (first on ties); m == 0 -> scale 0, every index 8.
//   w_j = x_j^2 (weights: llama.cpp's rule without an importance matrix).
//   Candidates: d = m / 127 and d = m / (t - 127) for t = -7..7. For each, i_j = nearest(x_j / d)
//   (the nearest level, the lower on ties), then the weighted least-squares scale
//   d* = sum w x L[i] / sum w L[i]^2, scored by (sum w x L[i])^2 / sum w L[i]^2 (higher is
//   better, first on ties). s = fp16(the best d*); i_j = nearest(x_j / s) with that rounded s.
// Decode: x_j = s * L[i_j].
#include <cmath>

#include "kv/codecs/codecs.h"
#include "kv/codecs/common.h"

namespace ninfer::codecs {
namespace {

constexpr float kLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// Index of the level nearest to v (the lower on ties; NaN cannot occur after prepare_row).
int nearest_level(float v) {
  int best = 0;
  float best_e = std::fabs(v - kLevels[0]);
  for (int i = 1; i < 16; ++i) {
    const float e = std::fabs(v - kLevels[i]);
    if (e < best_e) best_e = e, best = i;
  }
  return best;
}

constexpr KvPlane kPlanes[] = {{"level index pairs", DType::U8, 2, 1, 0}, {"scales", DType::F16, 32, 1, 0}};
size_t iq4nl_bytes(int d) { return planes_bytes(kPlanes, d); }

// One 32-block: its signed fp16 scale bits and level indices. x: [32]; idx: [32]
uint16_t encode_block(const float* x, int* idx) {
  float m = 0.0f;
  for (int j = 0; j < 32; ++j)
    if (std::fabs(x[j]) > std::fabs(m)) m = x[j];
  if (m == 0.0f) {
    for (int j = 0; j < 32; ++j) idx[j] = 8;
    return 0;
  }
  float best_d = 0.0f, best_score = -1.0f;
  for (int t = -8; t <= 7; ++t) {
    const float d = t == -8 ? m / 127.0f : m / float(t - 127);  // t = -8: the positive candidate
    double sxq = 0.0, sqq = 0.0;
    for (int j = 0; j < 32; ++j) {
      const double q = kLevels[nearest_level(x[j] / d)], w = double(x[j]) * x[j];
      sxq += w * x[j] * q;
      sqq += w * q * q;
    }
    if (sqq > 0.0 && sxq * sxq / sqq > best_score) {
      best_score = float(sxq * sxq / sqq);
      best_d = float(sxq / sqq);
    }
  }
  uint16_t bits = f32_to_f16(std::fmin(std::fmax(best_d, -kF16Max), kF16Max));
  const float s = f16_to_f32(bits);
  for (int j = 0; j < 32; ++j) idx[j] = s != 0.0f ? nearest_level(x[j] / s) : 8;
  return bits;
}

template <KvRotation R>
void iq4nl_encode(const float* raw, int d, uint8_t* out) {
  float x[kMaxHeadDim];
  prepare_row(raw, d, R, x);
  uint8_t* scales = out + d / 2;
  for (int k = 0; k < d; k += 32) {
    int idx[32];
    store_u16(scales + k / 16, encode_block(x + k, idx));
    for (int j = 0; j < 32; j += 2) out[(k + j) / 2] = uint8_t(idx[j] | (idx[j + 1] << 4));
  }
}

void iq4nl_decode(const uint8_t* in, int d, float* out) {
  const uint8_t* scales = in + d / 2;
  for (int k = 0; k < d; k += 32) {
    const float s = f16_to_f32(load_u16(scales + k / 16));
    for (int j = k; j < k + 32; ++j) out[j] = s * kLevels[(in[j / 2] >> (4 * (j & 1))) & 0xF];
  }
}

}  // namespace

constinit const KvFormat kIq4nlRefFormat{
    "iq4nl-ref", "comparison only: llama.cpp iq4_nl-style 16-level code, fp16 scale per 32; rk4v4-e8's rotations", 64,
    {KvRotation::HadamardHead, iq4nl_bytes, iq4nl_encode<KvRotation::HadamardHead>, iq4nl_decode, kPlanes},
    {KvRotation::Hadamard64, iq4nl_bytes, iq4nl_encode<KvRotation::Hadamard64>, iq4nl_decode, kPlanes}};

}  // namespace ninfer::codecs
