// Encoding against the reference models' golden.json (ids computed by transformers): every
// prompt of every model, BOS handling, and stories260k's greedy text decoded from its ids.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include "test_paths.h"
#include "text/tokenizer.h"

namespace ninfer {
namespace {

nlohmann::json golden(const std::string& model) {
  std::ifstream f(test::model_dir(model) / "golden.json");
  return nlohmann::json::parse(f);
}

class GoldenPrompts : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenPrompts, EncodeReproducesIds) {
  NINFER_REQUIRE_MODEL(GetParam());
  Tokenizer tok = Tokenizer::load(test::model_dir(GetParam()));
  auto g = golden(GetParam());
  ASSERT_FALSE(g["prompts"].empty());
  for (const auto& p : g["prompts"]) {
    std::string text = p["text"].get<std::string>();
    auto want = p["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok.encode(text), want) << "prompt: " << text;
  }
}

TEST_P(GoldenPrompts, DecodeSkippingSpecialsGivesPromptText) {
  NINFER_REQUIRE_MODEL(GetParam());
  Tokenizer tok = Tokenizer::load(test::model_dir(GetParam()));
  const nlohmann::json g = golden(GetParam());  // must outlive the loop over its prompts
  for (const auto& p : g["prompts"]) {
    auto ids = p["ids"].get<std::vector<int32_t>>();
    std::string text = p["text"].get<std::string>();
    // Prompts that spell special tokens keep them when specials are not skipped.
    if (!tok.bos_id() || ids.empty() || ids[0] != *tok.bos_id()) {
      EXPECT_EQ(tok.decode(ids), text);
    } else {
      EXPECT_EQ(tok.decode(ids, /*skip_special=*/true), text);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(RefModels, GoldenPrompts,
                         ::testing::Values("ref-qwen3-d256", "ref-llama-d128", "stories260k"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s)
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           return s;
                         });

TEST(Stories260k, DecodesGreedyIdsToLlama2cText) {
  NINFER_REQUIRE_MODEL("stories260k");
  Tokenizer tok = Tokenizer::load(test::model_dir("stories260k"));
  auto g = golden("stories260k");
  auto ids = g["greedy_from_bos_ids"].get<std::vector<int32_t>>();
  ASSERT_EQ(ids.at(0), 1);  // BOS
  EXPECT_EQ(tok.decode(ids, /*skip_special=*/true), g["llama2c_expected_text"].get<std::string>());
  EXPECT_EQ(tok.decode(ids, true), g["greedy_from_bos_text"].get<std::string>());
  // Not skipping: BOS is spelled out and the leading space of the first word survives,
  // because Strip only removes a space at the very start of the text.
  EXPECT_EQ(tok.decode(std::vector<int32_t>{1, 403}), "<s> Once");
}

TEST(Stories260k, SpecialTokensAndBos) {
  NINFER_REQUIRE_MODEL("stories260k");
  Tokenizer tok = Tokenizer::load(test::model_dir("stories260k"));
  EXPECT_EQ(tok.vocab_size(), 512);
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_EQ(tok.bos_token(), "<s>");
  EXPECT_EQ(tok.eos_token(), "</s>");
  EXPECT_TRUE(tok.is_special(1));
  EXPECT_FALSE(tok.is_special(403));
  EXPECT_EQ(tok.chat_template(), "");
  std::vector<int32_t> without = tok.encode("Once upon a time", /*add_special=*/false);
  std::vector<int32_t> with = tok.encode("Once upon a time");
  ASSERT_EQ(with.size(), without.size() + 1);
  EXPECT_EQ(with[0], 1);
  EXPECT_EQ(std::vector<int32_t>(with.begin() + 1, with.end()), without);
  // "<s>" in the text is the BOS token, not characters.
  EXPECT_EQ(tok.encode("<s>Once", false), (std::vector<int32_t>{1, 403}));
  // A newline is not in the vocabulary: byte fallback to <0x0A> (id 13).
  EXPECT_EQ(tok.token_id("<0x0A>"), 13);
  auto nl = tok.encode("a\nb", false);
  EXPECT_NE(std::find(nl.begin(), nl.end(), 13), nl.end());
  EXPECT_EQ(tok.decode(nl), "a\nb");
}

TEST(RefQwen3, SpecialTokensAndNoBos) {
  NINFER_REQUIRE_MODEL("ref-qwen3-d256");
  Tokenizer tok = Tokenizer::load(test::model_dir("ref-qwen3-d256"));
  EXPECT_EQ(tok.vocab_size(), 8192);
  EXPECT_EQ(tok.bos_id(), std::nullopt);
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_EQ(tok.bos_token(), "");
  EXPECT_EQ(tok.eos_token(), "<|im_end|>");
  EXPECT_EQ(tok.token_id("<|im_start|>"), 1);
  EXPECT_EQ(tok.token_id("<|endoftext|>"), 0);
  EXPECT_EQ(tok.token_id("no such token"), std::nullopt);
  for (int32_t id : {0, 1, 2}) EXPECT_TRUE(tok.is_special(id));
  EXPECT_FALSE(tok.is_special(3));
  EXPECT_EQ(tok.encode("And God", true), tok.encode("And God", false));
  EXPECT_EQ(tok.token_piece(tok.token_id("Ġthe").value()), " the");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{1, 6645, 2}, /*skip_special=*/true), "user");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{1, 6645, 2}), "<|im_start|>user<|im_end|>");
  // Ids outside the vocabulary are skipped, as in Hugging Face.
  EXPECT_EQ(tok.decode(std::vector<int32_t>{6645, 99999, -1}), "user");
}

}  // namespace
}  // namespace ninfer
