// The two expansions of rk2v4-e8 K codes used by the CUDA decode kernel, both plain C++ too,
// against the CPU reference decoder on every one of the 65,536 codes: the integer-arithmetic
// one (backend/cuda/e8p_alu.h) must give the reference's 4 y exactly, the two-table one
// (backend/cuda/e8p_tables.h) 4 y less the shift t that the kernel adds separately.
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
// entries, 128 sign entries), looked up at the code's two bit fields.
TEST(E8pTables, EveryCodeExpandsToTheReferenceValuesLessTheShift) {
  uint32_t mx[256], my[256], sm[128][4];
  for (int i = 0; i < 256; ++i) cuda::e8p_tables::magnitudes(cuda::e8p_alu::abs_entry(i), mx[i], my[i]);
  for (uint32_t s = 0; s < 128; ++s) cuda::e8p_tables::sign_masks(s, sm[s]);
  int checked = 0;
  for (uint32_t c = 0; c < 65536; ++c) {
    int q[8];
    codecs::e8p16::decode_block_q4(uint16_t(c), q);
    uint32_t lo = 0, hi = 0;
    cuda::e8p_tables::apply(mx[c & 0xFF], my[c & 0xFF], sm[(c >> 8) & 0x7F], lo, hi);
    const int t = (c & 0x8000u) ? -1 : 1;
    for (int i = 0; i < 8; ++i) {
      const int8_t b = int8_t(((i < 4 ? lo : hi) >> (8 * (i % 4))) & 0xFF);
      ASSERT_EQ(int(b) + t, q[i]) << "code " << c << " value " << i;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 65536);
}

// The sign entry's 8th mask is the parity of the seven stored signs (the pattern's own parity
// lives in the magnitude entry): checked bit by bit against a count.
TEST(E8pTables, SignEntriesNegateTheStoredSignsAndTheirParity) {
  for (uint32_t s = 0; s < 128; ++s) {
    uint32_t m[4];
    cuda::e8p_tables::sign_masks(s, m);
    int ones = 0;
    for (int i = 0; i < 7; ++i) {
      const uint32_t mask = ((i < 4 ? m[0] : m[1]) >> (8 * (i % 4))) & 0xFF;
      ASSERT_EQ(mask, ((s >> i) & 1u) ? 0xFFu : 0u) << "signs " << s << " value " << i;
      ones += int((s >> i) & 1u);
    }
    EXPECT_EQ(m[1] >> 24, (ones % 2) ? 0xFFu : 0u) << "signs " << s;
    EXPECT_EQ(m[2], m[0] & 0x01010101u);
    EXPECT_EQ(m[3], m[1] & 0x01010101u);
  }
}

}  // namespace
}  // namespace ninfer
