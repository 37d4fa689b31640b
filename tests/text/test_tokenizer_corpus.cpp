// Whole-corpus round trips with the byte-level tokenizers: decode(encode(text)) must give
// back the exact bytes of sotu_dev.txt and wikitext2_test.txt, and encoding a file of about
// 1 MB must take well under a few seconds (the merge loop is O(n log n) per word).
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "test_paths.h"
#include "text/tokenizer.h"

namespace ninfer {
namespace {

std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct Case {
  const char* model;
  const char* corpus;
};

class CorpusRoundTrip : public ::testing::TestWithParam<Case> {};

TEST_P(CorpusRoundTrip, DecodeOfEncodeIsByteIdentical) {
  NINFER_REQUIRE_SHARED();
  NINFER_REQUIRE_MODEL(GetParam().model);
  Tokenizer tok = Tokenizer::load(test::model_dir(GetParam().model));
  std::string text = read_file(test::shared_dir() / "corpus" / GetParam().corpus);
  ASSERT_GT(text.size(), 100000u);

  auto t0 = std::chrono::steady_clock::now();
  std::vector<int32_t> ids = tok.encode(text);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << GetParam().corpus << " with " << GetParam().model << ": " << text.size() << " bytes -> "
            << ids.size() << " tokens in " << secs * 1e3 << " ms (" << text.size() / secs / 1e6
            << " MB/s)\n";
  // A generous bound: about 0.2 s in a release build; 20 s means the merge loop went quadratic.
  EXPECT_LT(secs, 20.0);
  EXPECT_GT(ids.size(), text.size() / 8);  // an 8k-vocabulary BPE makes ~4 bytes/token
  EXPECT_LT(ids.size(), text.size() / 2);

  std::string back = tok.decode(ids);
  ASSERT_EQ(back.size(), text.size());
  EXPECT_TRUE(back == text) << "first difference at byte "
                            << std::mismatch(back.begin(), back.end(), text.begin()).first - back.begin();
}

INSTANTIATE_TEST_SUITE_P(ByteLevel, CorpusRoundTrip,
                         ::testing::Values(Case{"ref-qwen3-d256", "sotu_dev.txt"},
                                           Case{"ref-qwen3-d256", "wikitext2_test.txt"},
                                           Case{"ref-llama-d128", "sotu_dev.txt"},
                                           Case{"ref-llama-d128", "wikitext2_test.txt"}),
                         [](const auto& info) {
                           std::string s = std::string(info.param.model) + "_" + info.param.corpus;
                           for (char& c : s)
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           return s;
                         });

TEST(CorpusTokens, StreamingDecodeEqualsDecode) {
  NINFER_REQUIRE_SHARED();
  NINFER_REQUIRE_MODEL("ref-qwen3-d256");
  Tokenizer tok = Tokenizer::load(test::model_dir("ref-qwen3-d256"));
  std::string text = read_file(test::shared_dir() / "corpus" / "wikitext2_test.txt").substr(0, 200000);
  std::vector<int32_t> ids = tok.encode(text);
  Tokenizer::StreamDecoder dec(tok);
  std::string streamed;
  for (int32_t id : ids) streamed += dec.push(id);
  streamed += dec.flush();
  EXPECT_TRUE(streamed == text);
}

}  // namespace
}  // namespace ninfer
