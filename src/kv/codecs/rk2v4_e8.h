// Block-level API of the 16-bit E8 code of `rk2v4-e8` K (bit format: rk2v4_e8.cpp). Exposed
// for tests and for GPU kernels that must reproduce it.
#pragma once
#include <cstdint>

namespace ninfer::codecs::e8p16 {

// Group scale candidates: s = fp16(rms(group) * kRmsMul) and s = fp16(amax(group) / kAmaxDiv);
// the encoder keeps the one with the least squared error (the rms one on ties). Lattice units
// u = x / s.
inline constexpr float kRmsMul = 0.952381f;  // 1 / 1.05, measured best of 0.83..1.0
inline constexpr float kAmaxDiv = 2.75f;     // the largest codeword coordinate, 5/2 + 1/4

inline constexpr int kPatterns = 255;  // valid abs-pattern indices 0..254; 255 is unused

// Structured exact encoder: the code of the codeword nearest to u. u: [8]; dist (optional):
// |u - y|^2 as computed by the search (fp32).
uint16_t encode_block(const float* u, float* dist = nullptr);
// Brute force over all 65,280 valid codes (tests): nearest codeword, first in code order.
uint16_t encode_block_brute(const float* u);
// The 8 blocks of one 64-group x at scale s (u = x / s, or 0 when s is 0), the blocks as SIMD
// lanes: their codes and the sum of their distances in block order, each as encode_block.
float encode_group(const float* x, float s, uint16_t codes[8]);
// Codeword in lattice units (odd multiples of 1/4). y: [8]
void decode_block(uint16_t code, float* y);
// Same codeword as integers 4*y (odd, in [-11, 11]). q: [8]
void decode_block_q4(uint16_t code, int* q);
// True for the codes the encoder can produce (abs-pattern index != 255).
inline bool is_canonical(uint16_t code) { return (code & 0xFF) != 0xFF; }

// The abs-pattern table entry idx (0..255): nibble i = 2*|y_i - shift| (1, 3 or 5).
uint32_t abs_pattern(int idx);

}  // namespace ninfer::codecs::e8p16
