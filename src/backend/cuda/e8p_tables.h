// The rk2v4-e8 K code (E8P-W, kv/codecs/rk2v4_e8.cpp) expanded by decode_comp_kernel's two
// shared tables (FMT 4 and 6): a magnitude entry per abs pattern (the code's low byte) and an
// XOR entry per high byte (the 7 stored signs and the +-1 shift t). The 8th sign is the parity
// of the 7 and of the pattern's sign parity p(a); p(a) is folded into the magnitude entry
// (value 7 stored negated when p(a) = 1), so the XOR lookup depends on the code's byte alone
// and both indices are the code's two bytes. Plain C++ as well as CUDA, so that
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

// XOR entry of a code's byte 1 (bits 8..15: the 7 stored signs and t's bit 15): per-byte
// masks of values 0..3 (x) and 4..7 (y) that turn the magnitude entry into 4 y_i = s_i 2 v_i + t
// with one XOR. Every magnitude byte b is = 2 mod 4 (2 v, v odd, or its negation), so -b =
// ~b + 1 = b ^ 0xFC (the +1 sets bit 1 back, no carry), b + 1 = b ^ 0x01 and b - 1 = b ^ 0x03:
// a mask byte is (0xFC if the value is negated) ^ (0x01 for t = +1, 0x03 for t = -1). The 8th
// sign is the parity of the 7.
NINFER_HD void xor_masks(uint32_t b1, uint32_t& x, uint32_t& y) {
  const uint32_t s7 = b1 & 0x7Fu, sb = s7 | ((e8p_alu::popc32(s7) & 1u) << 7);
  const uint32_t t = (b1 & 0x80u) ? 0x03u : 0x01u;
  x = y = 0;
  for (int k = 0; k < 4; ++k) {
    x |= ((((sb >> k) & 1u) * 0xFCu) ^ t) << (8 * k);
    y |= ((((sb >> (k + 4)) & 1u) * 0xFCu) ^ t) << (8 * k);
  }
}

// 4 y_i as int8 bytes (lo: values 0..3, hi: 4..7) of a code whose entries are (x, y) =
// magnitudes(entry[code & 0xFF]) and (mx, my) = xor_masks(code >> 8).
NINFER_HD void apply(uint32_t x, uint32_t y, uint32_t mx, uint32_t my, uint32_t& lo, uint32_t& hi) {
  lo = x ^ mx;
  hi = y ^ my;
}

}  // namespace ninfer::cuda::e8p_tables
