// Engine-level properties of the paged cache: results do not depend on where pages sit
// physically, sequences crossing page boundaries at +-1 agree with one-shot prefill, pages
// come back after every request, and a full pool is a clean KvFullError. Page copies
// (Backend::copy_kv_pages, Engine::extend_by_repeating) move exactly a page's content.
#include <gtest/gtest.h>

#include "backend/backend.h"
#include "copied_page_check.h"
#include "model/model.h"
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

// A page copied with copy_kv_pages behaves exactly as the original: a decode step over
// block table [copy, fresh] gives bitwise the logits of the same step over [orig, fresh']
// (placement never changes results: PageBoundariesAndPlacementDoNotChangeLogits). A wrong
// copy (wrong layer stride, side, or partial page) changes them.
TEST(EnginePaged, CopiedPagesAttendLikeTheOriginals) {
  NINFER_REQUIRE_MODEL("ref-qwen3-d256");
  auto model = load_model(test::model_dir("ref-qwen3-d256"));
  auto be = make_cpu_backend(*model, {});
  for (const char* kv : {"f32", "rk2v4-e8"}) {
    const test::CopiedPageRun r = test::run_copied_page_check(*be, find_kv_format(kv));
    EXPECT_EQ(r.original, r.copied) << kv;
    const int32_t src[1] = {0}, same[1] = {4}, bad[1] = {6};
    EXPECT_THROW(be->copy_kv_pages(same, same), Error);
    EXPECT_THROW(be->copy_kv_pages(src, bad), Error);
  }
}

// extend_by_repeating: lengths, tokens and pages as documented; a full pool or a length
// that is not a whole number of pages is a clean error that changes nothing.
TEST(EnginePaged, ExtendByRepeatingGrowsWithRepeatedPages) {
  NINFER_REQUIRE_MODEL("ref-qwen3-d256");
  auto e = make("bf16", 0, 512);  // 8 pages
  std::vector<float> logits;
  int32_t s = e->new_sequence();
  e->prefill(s, tokens(100), logits);
  EXPECT_THROW(e->extend_by_repeating(s, 300), Error);  // 100 is not a multiple of 64
  e->free_sequence(s);
  s = e->new_sequence();
  e->prefill(s, tokens(128), logits);
  e->extend_by_repeating(s, 450);
  EXPECT_EQ(e->sequence_length(s), 450);
  EXPECT_EQ(e->pages().n_used(), 8);
  const std::vector<int32_t>& got = e->sequence_tokens(s);
  const std::vector<int32_t> t = tokens(128);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], t[i % 128]) << i;
  // The decode step after it works and attends 451 tokens (max_context 512).
  const int32_t x = 5;
  StepItem item{s, {&x, 1}, false};
  e->step({&item, 1}, logits);
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  e->free_sequence(s);
  // Two sequences of 2 pages each, 4 free: growing one to 7 pages needs 5.
  int32_t a = e->new_sequence(), b = e->new_sequence();
  e->prefill(a, tokens(128), logits);
  e->prefill(b, tokens(128), logits);
  EXPECT_THROW(e->extend_by_repeating(a, 448), KvFullError);
  EXPECT_EQ(e->sequence_length(a), 128);
  EXPECT_EQ(e->pages().n_used(), 4);
  EXPECT_THROW(e->extend_by_repeating(a, 600), Error);  // beyond max_context 512
  e->extend_by_repeating(a, 384);
  EXPECT_EQ(e->pages().n_used(), 8);
  e->free_sequence(a);
  e->free_sequence(b);
  EXPECT_EQ(e->pages().n_used(), 0);
}

}  // namespace
}  // namespace ninfer

namespace ninfer {
namespace {

// A prompt of progress_tokens or more reports prefill progress on stderr, ending with the
// total and the time taken; a shorter one prints nothing.
TEST(EngineProgress, LongPromptsReportProgress) {
  NINFER_REQUIRE_MODEL("stories260k");
  EngineOptions o;
  o.device = "cpu";
  o.kv_dtype = "bf16";
  o.max_context = 512;
  o.prefill_chunk = 64;
  o.progress_tokens = 256;
  auto e = Engine::create(test::model_dir("stories260k"), o);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 300; ++i) prompt.push_back(int32_t(3 + i % 400));
  std::vector<float> logits;
  const int32_t s = e->new_sequence();
  testing::internal::CaptureStderr();
  e->prefill(s, prompt, logits);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("prefill 300/300 tokens"), std::string::npos) << err;
  EXPECT_NE(err.find("tokens/s | took"), std::string::npos) << err;
  const int32_t s2 = e->new_sequence();
  testing::internal::CaptureStderr();
  e->prefill(s2, std::span<const int32_t>(prompt).first(100), logits);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

}  // namespace
}  // namespace ninfer
