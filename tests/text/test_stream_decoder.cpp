// Tokenizer::StreamDecoder: every chunk it returns is valid UTF-8, partial characters are
// held back until complete, bytes that can never complete become U+FFFD, and the chunks
// concatenate to decode() of the same ids.
#include <gtest/gtest.h>

#include <random>

#include "test_paths.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

namespace ninfer {
namespace {

using Ids = std::vector<int32_t>;

Tokenizer tiny() { return Tokenizer::load(test::test_data_dir() / "tokenizers" / "bytelevel-tiny"); }

bool valid_utf8(const std::string& s) { return utf8::first_invalid(s) == s.size(); }

TEST(StreamDecoder, HoldsBackPartialCharacters) {
  Tokenizer tok = tiny();  // id = byte value for ids < 256
  Tokenizer::StreamDecoder dec(tok);
  EXPECT_EQ(dec.push(0xC3), "");
  EXPECT_EQ(dec.push(0xA9), "é");
  EXPECT_EQ(dec.push(0xE2), "");
  EXPECT_EQ(dec.push(0x82), "");
  EXPECT_EQ(dec.push(0xAC), "€");
  EXPECT_EQ(dec.push(0xF0), "");
  EXPECT_EQ(dec.push(0x9F), "");
  EXPECT_EQ(dec.push(0x98), "");
  EXPECT_EQ(dec.push(0x80), "😀");
  EXPECT_EQ(dec.push(258), " the");
  EXPECT_EQ(dec.flush(), "");
}

TEST(StreamDecoder, InvalidBytesBecomeReplacementCharacters) {
  Tokenizer tok = tiny();
  Tokenizer::StreamDecoder dec(tok);
  EXPECT_EQ(dec.push(0xFF), "\uFFFD");  // never valid in UTF-8
  EXPECT_EQ(dec.push(0xC3), "");
  EXPECT_EQ(dec.push(' '), "\uFFFD ");  // the held lead byte cannot complete any more
  EXPECT_EQ(dec.push(0xE2), "");
  EXPECT_EQ(dec.flush(), "\uFFFD");  // end of stream inside a character
  EXPECT_EQ(dec.push(-5), "");      // unknown ids are skipped, as in decode()
}

TEST(StreamDecoder, SkipSpecialAndSentencePieceLeadingSpace) {
  Tokenizer tok = Tokenizer::load(test::test_data_dir() / "tokenizers" / "spm-normalizer");
  Tokenizer::StreamDecoder dec(tok, /*skip_special=*/true);
  std::string out;
  for (int32_t id : Ids{1, 7, 15, 4, 5, 6, 25}) {
    std::string chunk = dec.push(id);
    EXPECT_TRUE(valid_utf8(chunk));
    out += chunk;
  }
  out += dec.flush();
  // "▁" "a" <E2 82 AC> "▁world": the first space is stripped, as decode() does.
  EXPECT_EQ(out, "a€ world");
  EXPECT_EQ(out, tok.decode(Ids{1, 7, 15, 4, 5, 6, 25}, true));

  Tokenizer::StreamDecoder with_specials(tok);
  EXPECT_EQ(with_specials.push(1), "<s>");
  EXPECT_EQ(with_specials.push(21), " hello");  // not at the start any more: space kept
}

TEST(StreamDecoder, RandomByteIdsMatchDecode) {
  Tokenizer tok = tiny();
  const uint32_t seed = 1234;
  std::mt19937 rng(seed);
  // Bias towards UTF-8 lead/continuation bytes so that partial and broken characters occur.
  std::uniform_int_distribution<int> pick(0, 9), any(0, 258), cont(0x80, 0xBF), lead(0xC2, 0xF4);
  for (int trial = 0; trial < 200; ++trial) {
    Ids ids;
    int n = 1 + trial % 40;
    for (int k = 0; k < n; ++k) {
      int p = pick(rng);
      ids.push_back(p < 4 ? cont(rng) : p < 7 ? lead(rng) : any(rng));
    }
    Tokenizer::StreamDecoder dec(tok);
    std::string out;
    for (int32_t id : ids) {
      std::string chunk = dec.push(id);
      ASSERT_TRUE(valid_utf8(chunk)) << "seed " << seed << " trial " << trial;
      out += chunk;
    }
    std::string tail = dec.flush();
    ASSERT_TRUE(valid_utf8(tail));
    out += tail;
    EXPECT_EQ(out, tok.decode(ids)) << "seed " << seed << " trial " << trial;
  }
}

TEST(StreamDecoder, Stories260kGreedyText) {
  NINFER_REQUIRE_MODEL("stories260k");
  Tokenizer tok = Tokenizer::load(test::model_dir("stories260k"));
  Ids ids = tok.encode("Once upon a time, 🐉 lived in a café.\nThe end.");
  Tokenizer::StreamDecoder dec(tok, true);
  std::string out;
  for (int32_t id : ids) {
    std::string chunk = dec.push(id);
    ASSERT_TRUE(valid_utf8(chunk));
    out += chunk;
  }
  out += dec.flush();
  EXPECT_EQ(out, tok.decode(ids, true));
  EXPECT_EQ(out, "Once upon a time, 🐉 lived in a café.\nThe end.");
}

}  // namespace
}  // namespace ninfer
