// The two expansions of rk2v4-e8 K codes used by the CUDA decode kernel, both plain C++ too,
// against the CPU reference decoder on every one of the 65,536 codes: the integer-arithmetic
// one (backend/cuda/e8p_alu.h) and the two-table one (backend/cuda/e8p_tables.h) must both give
// the reference's 4 y exactly.
#include <gtest/gtest.h>

#include "backend/cuda/e8p_alu.h"
#include "backend/cuda/e8p_tables.h"
#include "kv/codecs/rk2v4_e8.h"

namespace ninfer {
namespace {

TEST(E8pAlu, EveryCodeExpandsToTheReferenceValues) {
  uint32_t words[256];
  for (int i = 0; i < 256; ++i) words[i] = cuda::e8p_alu::table_word(cuda::e8p_alu::abs_entry(i));
  int checked = 0;
  for (uint32_t c = 0; c < 65536; ++c) {
    int q[8];
    codecs::e8p16::decode_block_q4(uint16_t(c), q);  // also the non-canonical index 255
    uint32_t lo = 0, hi = 0;
    cuda::e8p_alu::decode(c, words[c & 0xFF], lo, hi);
    for (int i = 0; i < 8; ++i) {
      const int8_t b = int8_t(((i < 4 ? lo : hi) >> (8 * (i % 4))) & 0xFF);
      ASSERT_EQ(int(b), q[i]) << "code " << c << " value " << i;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 65536);
}

// The table word keeps the reference's magnitudes and the pattern's sign parity: the parity
// decides the 8th sign, so a wrong bit would flip value 7 of half of the codes above; here it
// is checked on its own, against the parity of the reference's own decoded signs.
TEST(E8pAlu, TableWordsCarryMagnitudesAndSignParity) {
  for (int idx = 0; idx < 256; ++idx) {
    const uint32_t w = cuda::e8p_alu::table_word(cuda::e8p_alu::abs_entry(idx));
    const uint32_t a = codecs::e8p16::abs_pattern(idx);
    for (int i = 0; i < 8; ++i) {
      const uint32_t v = (a >> (4 * i)) & 0xF;
      const uint32_t nib = (w >> (8 * (i % 4) + 4 * (i / 4))) & 0xF;
      ASSERT_EQ(nib & ~1u, 2 * v) << "pattern " << idx << " value " << i;
    }
    // Code with all seven stored signs clear and t = +1: value 7 is negative iff p(a) = 1.
    int q[8];
    codecs::e8p16::decode_block_q4(uint16_t(idx), q);
    EXPECT_EQ(w & 1u, q[7] < 0 ? 1u : 0u) << "pattern " << idx;
  }
}

// The tables as decode_comp_kernel fills them (256 magnitude entries from the device abs
// entries, 256 XOR entries), looked up at the code's two bytes: 4 y exactly, t included.
TEST(E8pTables, EveryCodeExpandsToTheReferenceValues) {
  uint32_t mx[256], my[256], sx[256], sy[256];
  for (int i = 0; i < 256; ++i) cuda::e8p_tables::magnitudes(cuda::e8p_alu::abs_entry(i), mx[i], my[i]);
  for (uint32_t b = 0; b < 256; ++b) cuda::e8p_tables::xor_masks(b, sx[b], sy[b]);
  int checked = 0;
  for (uint32_t c = 0; c < 65536; ++c) {
    int q[8];
    codecs::e8p16::decode_block_q4(uint16_t(c), q);
    uint32_t lo = 0, hi = 0;
    cuda::e8p_tables::apply(mx[c & 0xFF], my[c & 0xFF], sx[c >> 8], sy[c >> 8], lo, hi);
    for (int i = 0; i < 8; ++i) {
      const int8_t b = int8_t(((i < 4 ? lo : hi) >> (8 * (i % 4))) & 0xFF);
      ASSERT_EQ(int(b), q[i]) << "code " << c << " value " << i;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 65536);
}

// The XOR trick needs every magnitude byte = 2 mod 4 (then negation, +1 and -1 are XORs):
// checked on its own for all 256 entries.
TEST(E8pTables, MagnitudeBytesAreTwoModFour) {
  for (int i = 0; i < 256; ++i) {
    uint32_t x = 0, y = 0;
    cuda::e8p_tables::magnitudes(cuda::e8p_alu::abs_entry(i), x, y);
    for (int k = 0; k < 8; ++k) ASSERT_EQ(((k < 4 ? x : y) >> (8 * (k % 4))) & 3u, 2u) << "entry " << i << " value " << k;
  }
}

// The XOR entry's 8th negation is the parity of the seven stored signs (the pattern's own
// parity lives in the magnitude entry) and its low bits are t's: checked bit by bit.
TEST(E8pTables, XorEntriesNegateTheStoredSignsTheirParityAndAddT) {
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t m[2];
    cuda::e8p_tables::xor_masks(b, m[0], m[1]);
    const uint32_t t_bits = (b & 0x80u) ? 0x03u : 0x01u;
    int ones = 0;
    for (int i = 0; i < 8; ++i) {
      const uint32_t mask = (m[i / 4] >> (8 * (i % 4))) & 0xFF;
      const bool neg = i < 7 ? ((b >> i) & 1u) != 0 : (ones % 2) != 0;
      ASSERT_EQ(mask, (neg ? 0xFCu : 0u) ^ t_bits) << "byte " << b << " value " << i;
      if (i < 7) ones += int((b >> i) & 1u);
    }
  }
}

}  // namespace
}  // namespace ninfer
