// Block-level API of the 32-bit E8 lattice code of `rk4v4-e8` (bit format: rk4v4_e8.cpp).
// Exposed for tests and for GPU kernels that must reproduce it.
#pragma once
#include <cstdint>

namespace ninfer::codecs::e8l32 {

// Group scale candidates: s = fp16(amax(group) / div) for each div; the encoder keeps the one
// with the least squared error (first on ties). 8 and 8.5 suit Gaussian-like groups, 7 and 6
// put a lone spike on a lattice point.
inline constexpr float kAmaxDivs[4] = {8.5f, 8.0f, 7.0f, 6.0f};

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
