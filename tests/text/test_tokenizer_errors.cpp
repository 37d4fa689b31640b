// Malformed or unsupported tokenizer files: each is an Error whose message names the file
// and the field or construct that is wrong. The files are written to a temporary directory.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "core/error.h"
#include "text/tokenizer.h"

namespace ninfer {
namespace {

class TokenizerErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("ninfer_tok_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }
  // Loads dir_ and returns the Error message ("" if it loaded).
  std::string load_error() {
    try {
      Tokenizer::load(dir_);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  // A valid byte-level tokenizer.json with `patch` spliced in as extra top-level fields.
  static std::string tokenizer(const std::string& patch, const std::string& model = kModel) {
    return R"({"added_tokens": [], )" + patch + (patch.empty() ? "" : ", ") + R"("model": )" + model + "}";
  }
  static constexpr const char* kModel =
      R"({"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]})";

  std::filesystem::path dir_;
};

#define EXPECT_ERROR_HAS(msg, ...)                                                     \
  do {                                                                                 \
    std::string m_ = (msg);                                                            \
    for (const char* part : {__VA_ARGS__})                                             \
      EXPECT_NE(m_.find(part), std::string::npos) << "'" << part << "' not in: " << m_; \
  } while (0)

TEST_F(TokenizerErrors, MissingFile) { EXPECT_ERROR_HAS(load_error(), "tokenizer.json", "not found"); }

TEST_F(TokenizerErrors, BadJson) {
  write("tokenizer.json", "{\"model\": {");
  EXPECT_ERROR_HAS(load_error(), "tokenizer.json", "invalid JSON");
}

TEST_F(TokenizerErrors, MissingModel) {
  write("tokenizer.json", R"({"added_tokens": []})");
  EXPECT_ERROR_HAS(load_error(), "tokenizer.json", "\"model\"");
}

TEST_F(TokenizerErrors, UnknownModelType) {
  write("tokenizer.json", tokenizer("", R"({"type": "Unigram", "vocab": [["a", 0.0]]})"));
  EXPECT_ERROR_HAS(load_error(), "tokenizer.json", "unsupported model type 'Unigram'");
}

TEST_F(TokenizerErrors, MergeWithUnknownToken) {
  write("tokenizer.json", tokenizer("", R"({"type": "BPE", "vocab": {"a": 0}, "merges": ["a c"]})"));
  EXPECT_ERROR_HAS(load_error(), "tokenizer.json", "merge #0", "'a c'");
}

TEST_F(TokenizerErrors, MalformedMerge) {
  write("tokenizer.json", tokenizer("", R"({"type": "BPE", "vocab": {"a": 0}, "merges": ["a"]})"));
  EXPECT_ERROR_HAS(load_error(), "tokenizer.json", "model.merges entry 'a'");
}

// Token ids that are not int32 integers (fuzz_tokenizer_load, 2026-12-07: a special token's id
// 1e308 reached nlohmann's float-to-int conversion, undefined behaviour under UBSan).
TEST_F(TokenizerErrors, TokenIdsOutsideInt32AreNamed) {
  write("tokenizer.json",
        tokenizer(R"("post_processor": {"type": "TemplateProcessing", "single": "<s> $A", "special_tokens": )"
                  R"({"<s>": {"id": "<s>", "ids": [1e308]}}})"));
  EXPECT_ERROR_HAS(load_error(), "tokenizer.json", "special_tokens['<s>'].ids", "1e+308");
  write("tokenizer.json", tokenizer(R"("post_processor": {"type": "BertProcessing", "cls": ["a", 2.5], "sep": ["b", 1]})"));
  EXPECT_ERROR_HAS(load_error(), "tokenizer.json", "BertProcessing.cls[1]", "2.5");
  write("tokenizer.json", tokenizer("", R"({"type": "BPE", "vocab": {"a": 4294967296, "b": 1}, "merges": []})"));
  EXPECT_ERROR_HAS(load_error(), "tokenizer.json", "model.vocab['a']", "4294967296");
  write("tokenizer.json", tokenizer("", R"({"type": "BPE", "vocab": {"a": -1, "b": 1}, "merges": []})"));
  EXPECT_ERROR_HAS(load_error(), "tokenizer.json", "model.vocab['a']", "-1");
  write("tokenizer.json", R"({"added_tokens": [{"id": 18446744073709551615, "content": "x"}], "model": )" +
                              std::string(kModel) + "}");
  EXPECT_ERROR_HAS(load_error(), "tokenizer.json", "added_tokens id", "18446744073709551615");
}

// Fields of the wrong JSON type are Errors naming the file, not nlohmann's own exceptions; a count
// that is a float or negative is refused before any conversion (fuzz_tokenizer_load, 2026-12-07:
// a Strip decoder's "start": -9.2e19 reached a float-to-size_t cast, UB).
TEST_F(TokenizerErrors, WrongFieldTypesAndCountsAreNamed) {
  write("tokenizer.json", tokenizer(R"("pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": "x"})"));
  EXPECT_ERROR_HAS(load_error(), "tokenizer.json", "wrong type", "boolean");
  write("tokenizer.json", tokenizer(R"("decoder": {"type": "Strip", "content": " ", "start": -9.2e19, "stop": 0})"));
  EXPECT_ERROR_HAS(load_error(), "tokenizer.json", "decoder Strip \"start\"", "-9.2e+19");
  write("tokenizer.json", tokenizer(R"("decoder": {"type": "Strip", "content": " ", "start": 1, "stop": -1})"));
  EXPECT_ERROR_HAS(load_error(), "tokenizer.json", "decoder Strip \"stop\"", "-1");
}

TEST_F(TokenizerErrors, UnsupportedNormalizer) {
  write("tokenizer.json", tokenizer(R"("normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKD"}, {"type": "Precompiled"}]})"));
  EXPECT_ERROR_HAS(load_error(), "tokenizer.json", "unsupported normalizer type 'Precompiled'");
}

TEST_F(TokenizerErrors, UnsupportedPreTokenizer) {
  write("tokenizer.json", tokenizer(R"("pre_tokenizer": {"type": "BertPreTokenizer"})"));
  EXPECT_ERROR_HAS(load_error(), "tokenizer.json", "unsupported pre_tokenizer type 'BertPreTokenizer'");
}

TEST_F(TokenizerErrors, UnsupportedDecoder) {
  write("tokenizer.json", tokenizer(R"("decoder": {"type": "WordPiece"})"));
  EXPECT_ERROR_HAS(load_error(), "tokenizer.json", "unsupported decoder type 'WordPiece'");
}

TEST_F(TokenizerErrors, UnsupportedPostProcessor) {
  write("tokenizer.json", tokenizer(R"("post_processor": {"type": "Mystery"})"));
  EXPECT_ERROR_HAS(load_error(), "tokenizer.json", "unsupported post_processor type 'Mystery'");
}

TEST_F(TokenizerErrors, BadSplitRegex) {
  write("tokenizer.json",
        tokenizer(R"("pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated"})"));
  EXPECT_ERROR_HAS(load_error(), "tokenizer.json", "pre_tokenizer Split", "(unclosed");
}

TEST_F(TokenizerErrors, UnknownSplitBehavior) {
  write("tokenizer.json",
        tokenizer(R"("pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "Sideways"})"));
  EXPECT_ERROR_HAS(load_error(), "tokenizer.json", "behavior 'Sideways'");
}

TEST_F(TokenizerErrors, TemplateUsesUndeclaredSpecialToken) {
  write("tokenizer.json", tokenizer(R"("post_processor": {"type": "TemplateProcessing", "single": "<s> $A", "special_tokens": {}})"));
  EXPECT_ERROR_HAS(load_error(), "tokenizer.json", "TemplateProcessing", "'<s>'");
}

TEST_F(TokenizerErrors, ConfigBadJsonAndUnknownBos) {
  write("tokenizer.json", tokenizer(""));
  write("tokenizer_config.json", "{bos_token: 1}");
  EXPECT_ERROR_HAS(load_error(), "tokenizer_config.json", "invalid JSON");
  write("tokenizer_config.json", R"({"bos_token": "<s>"})");
  EXPECT_ERROR_HAS(load_error(), "tokenizer_config.json", "bos_token '<s>'");
  write("tokenizer_config.json", R"({"eos_token": 7})");
  EXPECT_ERROR_HAS(load_error(), "tokenizer_config.json", "\"eos_token\"");
}

TEST_F(TokenizerErrors, MinimalTokenizerLoadsAndWorks) {
  write("tokenizer.json", tokenizer(""));
  EXPECT_EQ(load_error(), "");
  Tokenizer tok = Tokenizer::load(dir_);
  EXPECT_EQ(tok.encode("abba"), (std::vector<int32_t>{2, 1, 0}));
  // No decoder: tokens are joined with spaces, as in Hugging Face.
  EXPECT_EQ(tok.decode(std::vector<int32_t>{2, 1, 0}), "ab b a");
  // No unk token: unknown characters are dropped, as in Hugging Face, and the characters
  // around them then merge ("a" "b" -> "ab").
  EXPECT_EQ(tok.encode("axb"), (std::vector<int32_t>{2}));
}

}  // namespace
}  // namespace ninfer
