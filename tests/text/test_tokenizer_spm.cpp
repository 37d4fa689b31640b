// SentencePiece-style BPE on hand-made tokenizers (tests/data/tokenizers/spm-*), with ids
// worked out by hand from their 28-token vocabulary and 10 merges:
//   ids  0 <unk> 1 <s> 2 </s> 3 <0x0A> 4 <0xE2> 5 <0x82> 6 <0xAC> 7 ▁ 8 h 9 e 10 l 11 o
//       12 w 13 r 14 d 15 a 16 b 17 ▁h 18 ll 19 ▁he 20 ▁hell 21 ▁hello 22 ▁w 23 or
//       24 ▁wor 25 ▁world 26 é 27 ld
//   merges by rank: ▁+h, l+l, ▁h+e, ▁he+ll, ▁hell+o, ▁+w, o+r, l+d, ▁w+or, ▁wor+ld
// spm-normalizer is the stories260k / Llama-2 layout (normalizer Replace/Prepend, decoder
// Replace/ByteFallback/Fuse/Strip); spm-metaspace is the Metaspace pre-tokenizer layout
// (prepend_scheme "first", split) with a ByteFallback + Metaspace decoder.
#include <gtest/gtest.h>

#include "test_paths.h"
#include "text/tokenizer.h"

namespace ninfer {
namespace {

using Ids = std::vector<int32_t>;

Tokenizer load(const char* name) { return Tokenizer::load(test::test_data_dir() / "tokenizers" / name); }

TEST(SpmNormalizer, MergesByRankAcrossTheWholeText) {
  Tokenizer tok = load("spm-normalizer");
  // "hello world" -> "▁hello▁world" -> ▁ h e l l o ▁ w o r l d, merged rank by rank.
  EXPECT_EQ(tok.encode("hello world"), (Ids{1, 21, 25}));
  EXPECT_EQ(tok.encode("hello world", false), (Ids{21, 25}));
  // Leading/trailing spaces removed, runs of spaces collapsed by the normalizer.
  EXPECT_EQ(tok.encode("  hello   world  "), (Ids{1, 21, 25}));
  // Equal ranks: the leftmost pair merges first (l l | l).
  EXPECT_EQ(tok.encode("lll", false), (Ids{7, 18, 10}));
  EXPECT_EQ(tok.encode("é", false), (Ids{7, 26}));
}

TEST(SpmNormalizer, ByteFallbackAndUnknown) {
  Tokenizer tok = load("spm-normalizer");
  // '€' (E2 82 AC) is not in the vocabulary but its three byte tokens are.
  EXPECT_EQ(tok.encode("a€", false), (Ids{7, 15, 4, 5, 6}));
  EXPECT_EQ(tok.encode("a\nb", false), (Ids{7, 15, 3, 16}));
  // '\t' and 'z' have neither a token nor byte tokens: one fused <unk> (fuse_unk).
  EXPECT_EQ(tok.encode("b\tz", false), (Ids{7, 16, 0}));
}

TEST(SpmNormalizer, LineAnchorsInNormalizerRegex) {
  Tokenizer tok = load("spm-normalizer");
  // NOTE: "^ +| +$" is compiled with line anchors as Oniguruma does, so the space before
  // the newline goes too: "▁hello\nworld" -> ▁hello <0x0A> w or ld.
  EXPECT_EQ(tok.encode("hello \nworld", false), (Ids{21, 3, 12, 23, 27}));
}

TEST(SpmNormalizer, SpecialTokensInTextAndEmptyInput) {
  Tokenizer tok = load("spm-normalizer");
  // Each piece between special tokens is normalized on its own (gets its own ▁).
  EXPECT_EQ(tok.encode("<s>hello</s>", false), (Ids{1, 21, 2}));
  EXPECT_EQ(tok.encode("hello</s>world", false), (Ids{21, 2, 25}));
  EXPECT_EQ(tok.encode(""), (Ids{1}));
  EXPECT_EQ(tok.encode("", false), Ids{});
  EXPECT_EQ(tok.encode("   ", false), Ids{});  // stripped to nothing: no ▁ is prepended
}

TEST(SpmNormalizer, Decode) {
  Tokenizer tok = load("spm-normalizer");
  EXPECT_EQ(tok.decode(Ids{1, 21, 25}, true), "hello world");
  EXPECT_EQ(tok.decode(Ids{1, 21, 25}), "<s> hello world");  // Strip only at the very start
  EXPECT_EQ(tok.decode(Ids{7, 15, 4, 5, 6}), "a€");
  EXPECT_EQ(tok.decode(Ids{21, 3, 12, 23, 27}), "hello\nworld");
  // Byte tokens that do not form UTF-8: one U+FFFD per byte, as Hugging Face's ByteFallback.
  EXPECT_EQ(tok.decode(Ids{4, 5}), "\uFFFD\uFFFD");
  EXPECT_EQ(tok.decode(Ids{7, 16, 0}), "b<unk>");
  EXPECT_EQ(tok.decode(Ids{7, 16, 0}, true), "b");
  EXPECT_EQ(tok.token_piece(21), " hello");
  EXPECT_EQ(tok.token_piece(3), "\n");
  EXPECT_EQ(tok.token_piece(4), "\xE2");
}

TEST(SpmNormalizer, VocabularyAndConfig) {
  Tokenizer tok = load("spm-normalizer");
  EXPECT_EQ(tok.vocab_size(), 28);
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_EQ(tok.token_id("▁hello"), 21);
  EXPECT_EQ(tok.token_text(21), "▁hello");
  EXPECT_TRUE(tok.is_special(0));
  EXPECT_FALSE(tok.is_special(21));
  EXPECT_FALSE(tok.is_special(1000));
}

TEST(SpmNormalizer, AddBosAndAddEosFlagsOverrideThePostProcessor) {
  auto dir = test::test_data_dir() / "tokenizers" / "spm-normalizer";
  Tokenizer eos_only = Tokenizer::from_files(dir / "tokenizer.json", dir / "tokenizer_config_eos_only.json");
  EXPECT_EQ(eos_only.encode("hello world"), (Ids{21, 25, 2}));
  // Without tokenizer_config.json the post-processor alone decides: BOS, no EOS.
  Tokenizer bare = Tokenizer::from_files(dir / "tokenizer.json");
  EXPECT_EQ(bare.encode("hello world"), (Ids{1, 21, 25}));
  EXPECT_EQ(bare.bos_id(), std::nullopt);
  EXPECT_EQ(bare.bos_token(), "");
}

TEST(SpmMetaspace, PrependFirstAndSplit) {
  Tokenizer tok = load("spm-metaspace");
  EXPECT_EQ(tok.encode("hello world"), (Ids{1, 21, 25}));
  // Two spaces: the split gives "▁hello", "▁", "▁world".
  EXPECT_EQ(tok.encode("hello  world", false), (Ids{21, 7, 25}));
  // prepend_scheme "first": text after a special token gets no ▁.
  EXPECT_EQ(tok.encode("<s>hello", false), (Ids{1, 8, 9, 18, 11}));
  // Already starting with a space: it becomes the ▁, nothing more is prepended.
  EXPECT_EQ(tok.encode(" hello", false), (Ids{21}));
  EXPECT_EQ(tok.encode("a€", false), (Ids{7, 15, 4, 5, 6}));
}

TEST(SpmMetaspace, DecodeAndConfig) {
  Tokenizer tok = load("spm-metaspace");
  EXPECT_EQ(tok.decode(Ids{21, 25}), "hello world");
  EXPECT_EQ(tok.decode(Ids{1, 21, 25}), "<s> hello world");
  EXPECT_EQ(tok.decode(Ids{1, 21, 25}, true), "hello world");
  EXPECT_EQ(tok.decode(Ids{7, 15, 4, 5, 6}), "a€");
  EXPECT_EQ(tok.bos_token(), "<s>");  // given as {"content": "<s>"}
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
}

}  // namespace
}  // namespace ninfer
