// The scheduler over an engine with the prefix cache, on the reference model and the CPU
// backend: requests sharing a long prefix, batched and preempted, produce exactly what
// Engine::generate produces for each alone on an engine without the cache; later requests
// report their cached prompt tokens; shared pages are counted once and every reference is
// given back (no page in use once all requests have ended, cached pages stay free to take).
#include <gtest/gtest.h>

#include "runtime/scheduler.h"
#include "server_harness.h"
#include "test_paths.h"
#include "text/chat_template.h"

namespace ninfer {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<Engine> make_engine(int64_t max_context, int64_t kv_capacity, bool cache) {
  EngineOptions o;
  o.device = "cpu";
  o.threads = 1;
  o.max_context = max_context;
  o.kv_capacity = kv_capacity;
  o.prefix_cache = cache;
  o.quiet = true;
  return Engine::create(test::model_dir("ref-qwen3-d256"), o);
}

// A long common preamble (several pages), then a question that differs per request.
std::vector<int32_t> shared_prompt(const Engine& e, const std::string& name, int number) {
  std::string text;
  for (int i = 0; i < 12; ++i) text += "The weather was calm and the fields were quiet that year. ";
  text += "The secret number for " + name + " is " + std::to_string(number) + ". What is the secret number for " +
          name + "?";
  return e.encode_chat({ChatMessage{"user", text}});
}

RequestParams greedy(std::vector<int32_t> prompt, int max_tokens, bool ignore_eos = false) {
  RequestParams p;
  p.prompt = std::move(prompt);
  p.max_tokens = max_tokens;
  p.sampling.temperature = 0;
  p.ignore_eos = ignore_eos;
  return p;
}

std::string reference(Engine& e, const RequestParams& p) {
  GenerateOptions g;
  g.max_new_tokens = int(p.max_tokens);
  g.sampling = p.sampling;
  g.ignore_eos = p.ignore_eos;
  return e.generate(p.prompt, g).text;
}

const char* kNames[] = {"Alice", "Bob", "Carol", "Dave", "Erin", "Frank"};

TEST(SchedulerPrefix, SharedPrefixRequestsEqualSingleRequestsAndReportCachedTokens) {
  NINFER_REQUIRE_MODEL("ref-qwen3-d256");
  auto ref = make_engine(512, 0, false);
  auto eng = make_engine(512, 0, true);
  std::vector<RequestParams> reqs;
  std::vector<std::string> want;
  for (int i = 0; i < 6; ++i) {
    reqs.push_back(greedy(shared_prompt(*eng, kNames[i], 100 + 7 * i), 16 + i, i % 2 == 1));
    want.push_back(reference(*ref, reqs.back()));
  }
  ASSERT_GT(reqs[0].prompt.size(), size_t(3 * kPageSize)) << "the preamble should span several pages";
  // The common head of all prompts, in whole pages: what a later request can find.
  size_t common = reqs[0].prompt.size();
  for (const RequestParams& r : reqs)
    common = std::min(common, size_t(std::mismatch(r.prompt.begin(), r.prompt.end(), reqs[0].prompt.begin(),
                                                   reqs[0].prompt.end()).first -
                                     r.prompt.begin()));
  const int common_pages = int(common / kPageSize);
  ASSERT_GE(common_pages, 2);

  SchedulerOptions so;
  so.max_concurrency = 6;
  so.step_tokens = 48;  // prefill over several steps, chunks not page-aligned
  Scheduler s(*eng, so);
  RequestOutput first = s.submit(reqs[0]).wait_done();
  EXPECT_EQ(first.text, want[0]);
  EXPECT_EQ(first.cached_tokens, 0);
  std::vector<RequestHandle> hs;
  for (size_t i = 1; i < reqs.size(); ++i) hs.push_back(s.submit(reqs[i]));
  for (size_t i = 1; i < reqs.size(); ++i) {
    RequestOutput o = hs[i - 1].wait_done();
    EXPECT_EQ(o.text, want[i]) << "request " << i;
    EXPECT_GE(o.cached_tokens, common_pages * kPageSize) << "request " << i;
    EXPECT_EQ(o.cached_tokens % kPageSize, 0);
    EXPECT_LT(o.cached_tokens, o.prompt_tokens);
  }
  ASSERT_TRUE(test::wait_until([&] { return s.stats().kv_pages_used == 0; }, 2s));
  const SchedulerStats st = s.stats();
  EXPECT_TRUE(st.prefix_cache);
  EXPECT_GE(st.prefix_cache_hits, uint64_t(5 * common_pages * kPageSize));
  EXPECT_GE(st.prefix_cache_queries, st.prompt_tokens);
  EXPECT_GT(st.kv_pages_cached, 0);
  EXPECT_EQ(st.kv_pages_free, st.kv_pages_total);
  // Prefill work saved: fed tokens = prompt tokens - hits (no preemption here).
  EXPECT_EQ(st.preemptions, 0u);
  EXPECT_EQ(st.prefill_tokens, st.prompt_tokens - st.prefix_cache_hits);
}

TEST(SchedulerPrefix, PreemptionReleasesSharedPagesAndOutputsStayExact) {
  NINFER_REQUIRE_MODEL("ref-qwen3-d256");
  // 5 pages (320 tokens) for 4 sequences that share their first 2 pages and each grow to 4
  // pages: shared pages are counted once at admission (two sequences fit, 2 + 1 + 1 pages),
  // their growth to 2 + 2 + 2 pages preempts the newer one, which re-attaches the cached pages
  // when re-admitted.
  auto ref = make_engine(320, 0, false);
  auto eng = make_engine(320, 5 * kPageSize, true);
  std::vector<int32_t> head;
  for (int i = 0; i < 2 * kPageSize; ++i) head.push_back(int32_t(3 + (i * 131) % 8000));
  std::vector<RequestParams> reqs;
  std::vector<std::string> want;
  for (int i = 0; i < 4; ++i) {
    std::vector<int32_t> p = head;
    for (int j = 0; j < 10 + i; ++j) p.push_back(int32_t(100 + 17 * i + j));
    reqs.push_back(greedy(std::move(p), 100, true));
    want.push_back(reference(*ref, reqs.back()));
  }
  SchedulerOptions so;
  so.max_concurrency = 4;
  Scheduler s(*eng, so);
  // The first request publishes the shared pages; the other three then arrive together.
  RequestHandle h0 = s.submit(reqs[0]);
  ASSERT_TRUE(test::wait_until([&] { return s.stats().generated_tokens > 0; }, 60s));
  std::vector<RequestHandle> hs;
  for (size_t i = 1; i < reqs.size(); ++i) hs.push_back(s.submit(reqs[i]));
  EXPECT_EQ(h0.wait_done().text, want[0]);
  for (size_t i = 1; i < reqs.size(); ++i) {
    RequestOutput o = hs[i - 1].wait_done();
    EXPECT_EQ(o.text, want[i]) << "request " << i;
    EXPECT_EQ(o.completion_tokens, 100);
    EXPECT_EQ(o.cached_tokens, 2 * kPageSize) << "request " << i;
  }
  ASSERT_TRUE(test::wait_until([&] { return s.stats().kv_pages_used == 0; }, 2s));
  const SchedulerStats st = s.stats();
  EXPECT_GT(st.preemptions, 0u) << "the test did not exercise preemption";
  EXPECT_EQ(st.kv_pages_free, st.kv_pages_total);
  s.stop();
  EXPECT_EQ(eng->pages().n_used(), 0);
  EXPECT_EQ(eng->pages().n_used() + eng->pages().n_free(), eng->pages().n_pages());
}

}  // namespace
}  // namespace ninfer
