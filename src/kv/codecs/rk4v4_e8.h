// Block-level API of the 32-bit E8 lattice code of `rk4v4-e8` (bit format: rk4v4_e8.cpp).
// Exposed for tests and for GPU kernels that must reproduce it.
#pragma once
#include <cstdint>

namespace ninfer::codecs::e8l32 {

// Group scale search: s = fp16(amax(group) / div), three stages of four divisors. Stage 0 tries
// kAmaxDivs; stage k (1, 2) tries best_div + kDivSteps[k - 1][c], where best_div is the divisor
// of the best candidate so far. A candidate replaces the best only with a strictly smaller
// squared error (so the first wins ties). Every divisor is a multiple of 1/16 in [5, 10]: exact
// in fp32. 6 and 7 put a lone spike on a lattice point, 8-9 suit Gaussian-like groups.
// NOTE: 12 candidates measure 0.969x the error of the former 4 ({8.5, 8, 7, 6}) on Gaussian and
// real K rows, within 0.5 % of the best fp16 scale found by trying them all (docs/NOTES.md).
inline constexpr int kScaleStages = 3;
inline constexpr float kAmaxDivs[4] = {6.0f, 7.0f, 8.0f, 9.0f};
inline constexpr float kDivSteps[kScaleStages - 1][4] = {{-0.5f, -0.25f, 0.25f, 0.5f},
                                                         {-0.125f, -0.0625f, 0.0625f, 0.125f}};
// The divisor of candidate c (0..3) of a stage, given the best divisor of the earlier stages.
inline constexpr float stage_div(int stage, int c, float best_div) {
  return stage == 0 ? kAmaxDivs[c] : best_div + kDivSteps[stage - 1][c];
}

// Code of the codeword nearest to u (lattice units). u: [8]; dist (optional): |u - y|^2 as
// computed by the search (fp32).
uint32_t encode_block(const float* u, float* dist = nullptr);
// The same from e8::nearest_d8_box, written plainly: the oracle encode_block (branch-free,
// vectorized) must equal bit for bit.
uint32_t encode_block_reference(const float* u, float* dist = nullptr);
// The 8 blocks of one 64-group x at scale s (u = x / s, or 0 when s is 0): their codes and the
// sum of their distances in block order, each as encode_block gives it.
float encode_group(const float* x, float s, uint32_t codes[8]);
// Codeword in lattice units (multiples of 1/2, in [-8, 7.5]). y: [8]
void decode_block(uint32_t code, float* y);

}  // namespace ninfer::codecs::e8l32
