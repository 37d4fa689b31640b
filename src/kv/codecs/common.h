// Shared pieces of the reference KV codecs: input sanitizing and rotation, fp16 scales, group
// reductions in a fixed order, little-endian byte access. Every codec file includes this
// first, so the rules below hold for all of them:
//
// - NaN/Inf rule (encoders never throw): before rotation every NaN input becomes 0 and every
//   value is clamped to [-kKvInputClamp, +kKvInputClamp] (so +-Inf become +-2^24). Values
//   beyond what a format's scale can reach saturate to its largest code.
// - Scales are computed in fp32, clamped to the largest finite fp16 (65504), rounded to fp16
//   (round-half-even) and the *rounded* value is what the encoder divides by. A scale that
//   rounds to 0 (an all-zero or subnormal-tiny group) stores 0 and all-zero codes.
// - Quantizing divides (x / s, correctly rounded) and rounds half to even (rintf); there is no
//   FMA contraction anywhere in the codecs (pragma below), so a GPU encoder that uses
//   __fdiv_rn / __fadd_rn / __fmul_rn and the same operation order reproduces every byte.
// - Sums over a 64-group use a fixed pairwise tree (tree_sum64) that a warp can replicate.
#pragma once

// NOTE: GCC contracts a*b+c into FMA at -march=x86-64-v3 even in ISO mode; codes must not
// depend on the compiler's choice, so contraction is off in every file including this header.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "core/hot_loop.h"
#include "kv/format.h"

namespace ninfer::codecs {

// 2^24: large enough for any real K/V value, small enough that H_D sums (<= D * 2^24) stay
// finite in fp32.
inline constexpr float kKvInputClamp = 16777216.0f;
inline constexpr int kMaxHeadDim = 1024;             // stack buffers in the encoders
inline constexpr float kF16Max = 65504.0f;

// out[i] = clamp(x[i] with NaN -> 0), then rotated by r. x, out: [d]; d <= kMaxHeadDim.
void prepare_row(const float* x, int d, KvRotation r, float* out);

// Rounds a non-negative fp32 scale to fp16 (clamped to 65504); returns the rounded value and
// its bits.
inline float fp16_scale(float raw, uint16_t* bits) {
  if (!(raw < kF16Max)) raw = kF16Max;  // also catches NaN (cannot happen after prepare_row)
  *bits = f32_to_f16(raw);
  return f16_to_f32(*bits);
}

inline void store_u16(uint8_t* p, uint16_t v) {
  p[0] = uint8_t(v);
  p[1] = uint8_t(v >> 8);
}
inline uint16_t load_u16(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }
inline void store_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}
inline uint32_t load_u32(const uint8_t* p) {
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}

// max |x[i]|, i < n (exact in any order).
inline float amax(const float* x, int n) {
  float m = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);  // x holds no NaN (prepare_row): fmax(m, a) as a compare
    m = a > m ? a : m;
  }
  return m;
}

// Sum of x[i]^2 over a 64-group in a fixed pairwise tree: t[i] = x[i]^2, then for
// h = 32, 16, ..., 1: t[i] += t[i + h] for i < h. x: [64]
inline float tree_sumsq64(const float* x) {
  float t[64];
  for (int i = 0; i < 64; ++i) t[i] = x[i] * x[i];
  for (int h = 32; h >= 1; h >>= 1)
    for (int i = 0; i < h; ++i) t[i] = t[i] + t[i + h];
  return t[0];
}

// The lattice encoders' scale search over one 64-group x[64]: for each candidate raw scale
// (rounded to fp16 by fp16_scale), encode the 8 blocks of x / s with encode(u[8], &dist) and
// keep the candidate with the smallest sum of block distances times s^2 (the first on ties).
// Writes the winner's 8 codes and returns its fp16 bits. The GPU encoders (kv_codecs.cuh)
// follow this order of operations.
template <class Code, class Encode>
uint16_t best_scale_codes(const float* x, const float* raw_scales, int n_scales, Encode encode,
                          Code best_codes[8]) {
  Code codes[8];
  for (int b = 0; b < 8; ++b) best_codes[b] = Code(0);  // replaced: every err is finite
  uint16_t best_bits = 0;
  float best_err = INFINITY;
  for (int c = 0; c < n_scales; ++c) {
    uint16_t sbits;
    const float s = fp16_scale(raw_scales[c], &sbits);
    float err = 0.0f;  // sum of block distances (lattice units), then * s * s
    for (int b = 0; b < 8; ++b) {
      float u[8], dist;
      for (int i = 0; i < 8; ++i) u[i] = s > 0.0f ? x[8 * b + i] / s : 0.0f;
      codes[b] = encode(u, &dist);
      err = err + dist;
    }
    err = (err * s) * s;
    if (err < best_err) {
      best_err = err;
      best_bits = sbits;
      for (int b = 0; b < 8; ++b) best_codes[b] = codes[b];
    }
  }
  return best_bits;
}

// Decoding helpers. The decoders are the inner loop of the CPU attention (every cached row is
// decoded at every step), so they convert each scale once per group and use these branch-free
// inline conversions, which GCC vectorizes; each equals, bit for bit, the reference it names.

// c ? a : b as a bit mask. NOTE: GCC (12) turns a ternary on integers into control flow that
// its vectorizer gives up on; the mask form vectorizes to and/andnot/or.
inline uint32_t select_u32(bool c, uint32_t a, uint32_t b) {
  const uint32_t m = 0u - uint32_t(c);
  return (a & m) | (b & ~m);
}

// c ? a : b for floats, as a bit mask (see select_u32).
inline float select_f32(bool c, float a, float b) {
  return std::bit_cast<float>(select_u32(c, std::bit_cast<uint32_t>(a), std::bit_cast<uint32_t>(b)));
}

// Marks a decoder's loop over the 8 values of a block. NOTE: at -O3 GCC fully unrolls such a
// loop before its loop vectorizer runs, and the SLP vectorizer then extracts the 8 lanes one by
// one (measured 4x slower than at -O2); kept a loop, it becomes one 8-wide vector iteration.
#if defined(__GNUC__) && !defined(__clang__)
#define NINFER_BLOCK_LANES _Pragma("GCC unroll 1")
#else
#define NINFER_BLOCK_LANES
#endif

// Nibble i (bits 4i..4i+3) of a little-endian 32-bit word: value i of an 8-value block in the
// packed-pair layouts (value 2j in the low nibble of byte j) and the E8 codes. NOTE: decoders
// take 8 values per word so that GCC vectorizes a block as broadcast + variable shift.
inline uint32_t nibble(uint32_t w, int i) { return (w >> (4 * i)) & 0xFu; }

// e4m3_to_f32 (core/minifloat.h) without its branches and libm calls. NOTE: the 7 magnitude
// bits shifted up by 20 are an fp32 exponent/mantissa whose exponent only needs the bias
// 127 - 7 added (normals); subnormals are man * 2^-9 (exact); S.1111.111 is the quiet NaN
// 0x7fc00000 that nanf("") gives; the sign bit is copied (so 0x80 is -0, like -v).
inline float e4m3_value(uint32_t b) {  // b: a code 0..255
  const uint32_t m = b & 0x7Fu;
  const uint32_t normal = (m << 20) + (120u << 23);
  const uint32_t sub = std::bit_cast<uint32_t>(float(int(m & 7u)) * 0x1p-9f);
  const uint32_t u = select_u32(m == 0x7F, 0x7fc00000u, select_u32(m < 8, sub, normal));
  return std::bit_cast<float>(u | (uint32_t(b & 0x80u) << 24));
}

// e2m1_to_f32 (core/minifloat.h) likewise: magnitude codes 0 and 1 (0, 0.5) are code / 2;
// codes 2..7 are the 3 bits shifted up by 22 with the exponent bias 127 - 1 added.
inline float e2m1_value(uint32_t n) {  // n: a nibble 0..15
  const uint32_t c = n & 7u;
  const uint32_t normal = (c << 22) + (126u << 23);
  const uint32_t u = select_u32(c < 2, std::bit_cast<uint32_t>(float(int(c)) * 0.5f), normal);
  return std::bit_cast<float>(u | (uint32_t(n & 8u) << 28));
}

// Round half to even in the current (default, nearest) rounding mode.
inline float rne(float v) { return std::nearbyint(v); }

template <size_t N>
inline size_t planes_bytes(const KvPlane (&planes)[N], int head_dim) {
  size_t b = 0;
  for (const KvPlane& p : planes) b += p.count(head_dim) * dtype_size(p.dtype);
  return b;
}

}  // namespace ninfer::codecs
