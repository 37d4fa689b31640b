// Engine-level properties of the paged cache: results do not depend on where pages sit
// physically, sequences crossing page boundaries at +-1 agree with one-shot prefill, pages
// come back after every request, and a full pool is a clean KvFullError.
#include <gtest/gtest.h>

#include "runtime/engine.h"
#include "test_paths.h"

namespace ninfer {
namespace {

std::unique_ptr<Engine> make(const std::string& kv, uint64_t shuffle, int64_t capacity = 0) {
  EngineOptions o;
  o.device = "cpu";
  o.kv_dtype = kv;
  o.max_context = 512;
  o.kv_capacity = capacity;
  o.max_sequences = 4;
  o.page_shuffle_seed = shuffle;
  o.quiet = true;
  return Engine::create(test::model_dir("ref-qwen3-d256"), o);
}

std::vector<int32_t> tokens(int n) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(int32_t(3 + (i * 131) % 8000));
  return t;
}

// Logits of the last token after feeding `n` tokens as chunks of `chunk`, in a sequence
// created after `fill` other tokens were cached (so its pages are not the first ones).
std::vector<float> last_logits(Engine& e, int n, int chunk, int fill) {
  int32_t other = -1;
  std::vector<float> logits;
  if (fill > 0) {
    other = e.new_sequence();
    std::vector<int32_t> f = tokens(fill);
    e.prefill(other, f, logits);
  }
  int32_t s = e.new_sequence();
  std::vector<int32_t> t = tokens(n);
  for (int i = 0; i < n; i += chunk) {
    StepItem item{s, std::span<const int32_t>(t).subspan(size_t(i), size_t(std::min(chunk, n - i))), false};
    e.step({&item, 1}, logits);
  }
  e.free_sequence(s);
  if (other >= 0) e.free_sequence(other);
  return logits;
}

TEST(EnginePaged, PageBoundariesAndPlacementDoNotChangeLogits) {
  NINFER_REQUIRE_MODEL("ref-qwen3-d256");
  for (const char* kv : {"f32", "rk4v4-e8"}) {
    auto ident = make(kv, 0);
    auto shuffled = make(kv, 987654321);
    for (int n : {63, 64, 65, 127, 128, 129}) {
      // One-shot prefill in identity page order is the reference ("contiguous").
      std::vector<float> ref = last_logits(*ident, n, n, 0);
      // Same tokens, shuffled physical pages behind another sequence's pages.
      EXPECT_EQ(last_logits(*shuffled, n, n, 70), ref) << kv << " n=" << n;
      // Token-by-token decode across the boundary: the same function with other summation
      // lengths, so within fp32 reassociation error. Only for the exact cache: in a lossy
      // format a last-bit difference in a row can move it across a quantizer boundary.
      if (std::string(kv) != "f32") continue;
      std::vector<float> step = last_logits(*shuffled, n, 1, 0);
      double max_err = 0, max_ref = 0;
      for (size_t i = 0; i < ref.size(); ++i) {
        max_err = std::max(max_err, double(std::fabs(step[i] - ref[i])));
        max_ref = std::max(max_ref, double(std::fabs(ref[i])));
      }
      EXPECT_LT(max_err / max_ref, 1e-4) << kv << " n=" << n;
    }
    EXPECT_EQ(ident->pages().n_used(), 0);
    EXPECT_EQ(shuffled->pages().n_used(), 0);
  }
}

TEST(EnginePaged, GenerateReturnsPagesAndFullPoolIsACleanError) {
  NINFER_REQUIRE_MODEL("ref-qwen3-d256");
  auto e = make("bf16", 0, 512);  // 8 pages: one max-context sequence
  EXPECT_EQ(e->pages().n_pages(), 8);
  GenerateOptions g;
  g.max_new_tokens = 8;
  g.ignore_eos = true;
  for (int i = 0; i < 5; ++i) {
    GenerateResult r = e->generate(tokens(100), g);
    EXPECT_EQ(r.tokens.size(), 8u);
    EXPECT_EQ(e->pages().n_used(), 0);
  }
  int32_t a = e->new_sequence();
  std::vector<float> logits;
  e->prefill(a, tokens(400), logits);  // 7 pages
  EXPECT_EQ(e->pages().n_used(), 7);
  int32_t b = e->new_sequence();
  std::vector<int32_t> t = tokens(100);  // needs 2 pages, 1 free
  StepItem item{b, t, false};
  EXPECT_THROW(e->step({&item, 1}, logits), KvFullError);
  EXPECT_EQ(e->pages().n_used(), 7);  // nothing allocated by the failed step
  EXPECT_EQ(e->sequence_length(b), 0);
  e->free_sequence(a);
  e->step({&item, 1}, logits);  // fits now
  e->free_sequence(b);
  EXPECT_EQ(e->pages().n_used(), 0);
}

}  // namespace
}  // namespace ninfer
