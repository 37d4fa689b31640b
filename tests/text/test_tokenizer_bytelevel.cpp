// Byte-level BPE on a hand-made tokenizer (tests/data/tokenizers/bytelevel-tiny): the 256
// byte characters with id = byte value, merges "Ġ t" (256 Ġt), "h e" (257 he),
// "Ġt he" (258 Ġthe), special token <|end|> = 259, and the ByteLevel pre-tokenizer with
// its built-in GPT-2 regex (use_regex: true) instead of a Split.
#include <gtest/gtest.h>

#include "core/error.h"
#include "test_paths.h"
#include "text/tokenizer.h"

namespace ninfer {
namespace {

using Ids = std::vector<int32_t>;

Tokenizer load() { return Tokenizer::load(test::test_data_dir() / "tokenizers" / "bytelevel-tiny"); }

TEST(ByteLevelTiny, Gpt2RegexAndMerges) {
  Tokenizer tok = load();
  // "the" | " cat": merges never cross the pre-token boundary.
  EXPECT_EQ(tok.encode("the cat"), (Ids{'t', 257, ' ', 'c', 'a', 't'}));
  EXPECT_EQ(tok.encode(" the"), (Ids{258}));
  EXPECT_EQ(tok.encode("it's"), (Ids{'i', 't', '\'', 's'}));
  // "\s+(?!\S)": of two spaces before a word, the first stands alone, the second joins it.
  EXPECT_EQ(tok.encode("  x"), (Ids{' ', ' ', 'x'}));
  EXPECT_EQ(tok.encode("2024"), (Ids{'2', '0', '2', '4'}));
  EXPECT_EQ(tok.encode("é"), (Ids{0xC3, 0xA9}));
  EXPECT_EQ(tok.encode("the<|end|> the"), (Ids{'t', 257, 259, 258}));
  EXPECT_EQ(tok.encode("x", true), tok.encode("x", false));  // ByteLevel post-processor adds nothing
}

TEST(ByteLevelTiny, DecodeAndPieces) {
  Tokenizer tok = load();
  EXPECT_EQ(tok.decode(Ids{'t', 257, 259, 258}), "the<|end|> the");
  EXPECT_EQ(tok.decode(Ids{'t', 257, 259, 258}, true), "the the");
  EXPECT_EQ(tok.decode(Ids{0xC3, 0xA9}), "é");
  EXPECT_EQ(tok.decode(Ids{0xC3}), "\uFFFD");
  EXPECT_EQ(tok.token_piece(' '), " ");
  EXPECT_EQ(tok.token_piece('\n'), "\n");
  EXPECT_EQ(tok.token_piece(258), " the");
  EXPECT_EQ(tok.token_piece(0xC3), "\xC3");
  EXPECT_EQ(tok.token_text(' '), "Ġ");
  EXPECT_EQ(tok.token_text('\n'), "Ċ");
}

TEST(ByteLevelTiny, Config) {
  Tokenizer tok = load();
  EXPECT_EQ(tok.vocab_size(), 260);
  EXPECT_EQ(tok.eos_id(), 259);
  EXPECT_EQ(tok.bos_id(), std::nullopt);
  EXPECT_TRUE(tok.is_special(259));
  EXPECT_EQ(tok.chat_template(), "DEFAULT");  // the list form: the entry named "default"
}

TEST(ByteLevelTiny, RejectsInvalidUtf8Input) {
  Tokenizer tok = load();
  EXPECT_THROW(tok.encode(std::string("ok\xC3(", 4)), Error);
}

TEST(ByteLevelTiny, EveryByteRoundTrips) {
  Tokenizer tok = load();
  // All 256 byte values in one valid UTF-8 text is impossible; instead each code point
  // class: ASCII controls, Latin-1, CJK, emoji, and the characters GPT-2 remaps.
  std::string text = "\t\r\n\x01\x7f A-z~ \u00a0\u00ad\u00ff \u4e2d\u6587 \U0001F600 end";
  EXPECT_EQ(tok.decode(tok.encode(text)), text);
}

}  // namespace
}  // namespace ninfer
