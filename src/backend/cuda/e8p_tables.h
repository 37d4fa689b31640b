// The rk2v4-e8 K code (E8P-W, kv/codecs/rk2v4_e8.cpp) expanded by decode_comp_kernel's two
// shared tables (FMT 4, the default): a magnitude entry per abs pattern (the code's low byte)
// and a sign-mask entry per 7 stored signs (bits 8..14). The 8th sign is the parity of the 7
// and of the pattern's sign parity p(a); p(a) is folded into the magnitude entry (value 7
// stored negated when p(a) = 1), so the sign lookup depends on the code alone and both
// indices are plain bit fields of it. The +-1 shift t (bit 15) is not applied here: the
// kernel adds it as an fp16 MMA against the Q block sums. Plain C++ as well as CUDA, so that
// a CPU test checks it against the reference decoder on all 65,536 codes
// (tests/kv/test_e8p_alu.cpp).
#pragma once
#include <cstdint>

#include "backend/cuda/e8p_alu.h"  // NINFER_HD, popc32, the abs entries

namespace ninfer::cuda::e8p_tables {

// Magnitude entry of an abs entry (e8p_alu::abs_entry: nibble i = v_i in {1, 3, 5}, p(a) in bit
// 3 of nibble 0): bytes 2 v_i (values 0..3 in x, 4..7 in y), value 7's byte negated (int8
// two's complement) when p(a) = 1.
NINFER_HD void magnitudes(uint32_t entry, uint32_t& x, uint32_t& y) {
  x = y = 0;
  for (int k = 0; k < 4; ++k) {
    x |= ((entry >> (4 * k)) & 7u) * 2u << (8 * k);
    y |= ((entry >> (4 * k + 16)) & 7u) * 2u << (8 * k);
  }
  if ((entry >> 3) & 1u) y = (y & 0x00FFFFFFu) | (((0x100u - (y >> 24)) & 0xFFu) << 24);
}

// Sign entry of the 7 stored signs s7: per-byte masks (0xFF: negate) of values 0..3 (m[0]) and
// 4..7 (m[1]), value 7's from the parity of s7, and those masks & 0x01 per byte (m[2], m[3]).
NINFER_HD void sign_masks(uint32_t s7, uint32_t m[4]) {
  const uint32_t sb = (s7 & 0x7Fu) | ((e8p_alu::popc32(s7 & 0x7Fu) & 1u) << 7);
  m[0] = m[1] = 0;
  for (int k = 0; k < 4; ++k) {
    m[0] |= ((sb >> k) & 1u) * (0xFFu << (8 * k));
    m[1] |= ((sb >> (k + 4)) & 1u) * (0xFFu << (8 * k));
  }
  m[2] = m[0] & 0x01010101u;
  m[3] = m[1] & 0x01010101u;
}

// Signed magnitudes s_i 2 v_i as int8 bytes (lo: values 0..3, hi: 4..7) of a code whose
// entries are (x, y) = magnitudes(entry[code & 0xFF]) and m = sign_masks((code >> 8) & 0x7F):
// 4 y_i = byte_i + t. Negation is ~b + 1 per byte: b != 0 (2 v >= 2, or its negation), so no
// carry leaves a byte.
NINFER_HD void apply(uint32_t x, uint32_t y, const uint32_t m[4], uint32_t& lo, uint32_t& hi) {
  lo = (x ^ m[0]) + m[2];
  hi = (y ^ m[1]) + m[3];
}

}  // namespace ninfer::cuda::e8p_tables
