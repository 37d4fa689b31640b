// The rk2v4-e8 K code (E8P-W, kv/codecs/rk2v4_e8.cpp) expanded to the int8 operand of the
// attention kernels with one 4-byte table lookup and integer arithmetic: the alternative to
// decode_comp_kernel's two shared tables (magnitudes, then sign masks indexed by the first
// lookup's parity bit). Plain C++ as well as CUDA, so that a CPU test checks it against the
// reference decoder on all 65,536 codes (tests/kv/test_e8p_alu.cpp).
#pragma once
#include <cstdint>

#include "kv/codecs/rk2v4_e8.h"

#if defined(__CUDACC__)
#define NINFER_HD __host__ __device__ __forceinline__
#else
#define NINFER_HD inline
#endif

namespace ninfer::cuda::e8p_alu {

// Entry idx of the device abs table (e8p_device_tables, kv_append.cu): the CPU reference's
// abs pattern (nibble i = v_i = 2 |y_i - shift|: 1, 3 or 5) with the pattern's sign parity
// p(a) = (number of 3s) mod 2 in bit 3 of nibble 0 (free: v_i <= 5).
inline uint32_t abs_entry(int idx) {
  const uint32_t a = codecs::e8p16::abs_pattern(idx);
  uint32_t threes = 0;
  for (int i = 0; i < 8; ++i) threes += ((a >> (4 * i)) & 0xFu) == 3u;
  return a | ((threes & 1u) << 3);
}

// The lookup word of an abs entry: byte k = 2 v_k | (2 v_{k+4}) << 4 (2 v <= 10 fits a
// nibble), and p(a) in bit 0 (free: 2 v is even).
NINFER_HD uint32_t table_word(uint32_t entry) {
  uint32_t w = (entry >> 3) & 1u;
  for (int k = 0; k < 4; ++k) {
    w |= ((entry >> (4 * k)) & 7u) * 2u << (8 * k);
    w |= ((entry >> (4 * k + 16)) & 7u) * 2u << (8 * k + 4);
  }
  return w;
}

NINFER_HD uint32_t popc32(uint32_t x) {
#if defined(__CUDA_ARCH__)
  return uint32_t(__popc(x));
#else
  return uint32_t(__builtin_popcount(x));
#endif
}

// 16-bit code and table_word(entry[code & 0xFF]) -> 4 y as int8 bytes (lo: values 0..3, hi:
// 4..7), exactly rk2v4_e8.cpp decode_block_q4: 4 y_i = s_i 2 v_i + t, s_i = -1 for the sign
// bits 8..14 of the code (value 7: the parity of those bits and p(a)), t = +1, or -1 when bit
// 15 is set. Every step is bytewise without carries or borrows (see the comments).
NINFER_HD void decode(uint32_t code, uint32_t w, uint32_t& lo, uint32_t& hi) {
  const uint32_t s7 = (code >> 8) & 0x7Fu;
  // Bit 0 of popc + w is parity(s7) ^ p(a): the 8th sign.
  const uint32_t sb = s7 | (((popc32(s7) + w) << 7) & 0x80u);
  // Bit k of a nibble -> bit 0 of byte k: the multiplier puts bit k at 7 j + 7 + k for j = 0..3,
  // all distinct (no carries), and at 8 m + 7 only for j = k.
  const uint32_t ml = (((sb & 0xFu) * 0x10204080u) >> 7) & 0x01010101u;
  const uint32_t mh = (((sb >> 4) * 0x10204080u) >> 7) & 0x01010101u;
  // + t per byte: +1 everywhere, or -1 (0xFEFEFEFF = -0x01010101 as a 32-bit word).
  const uint32_t tt = (code & 0x8000u) ? 0xFEFEFEFFu : 0x01010101u;
  // Negate: ~x + 1 (x = 2, 6, 10 -> 0xFE, 0xFA, 0xF6); then + t: positive bytes are 2..10
  // (no borrow at -1), negative ones 0xF6..0xFE (no carry at +1). Exact int8 4 y in [-11, 11].
  lo = ((w & 0x0E0E0E0Eu) ^ (ml * 0xFFu)) + ml + tt;
  hi = (((w >> 4) & 0x0F0F0F0Fu) ^ (mh * 0xFFu)) + mh + tt;
}

}  // namespace ninfer::cuda::e8p_alu
