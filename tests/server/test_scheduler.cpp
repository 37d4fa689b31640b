// The continuous-batching scheduler in process, on the reference model and the CPU backend:
// batched, chunk-prefilled and preempted requests produce exactly what Engine::generate
// produces for each request alone (greedy); cancellation, stop strings, limits and page
// accounting.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>
#include <unistd.h>

#include "runtime/scheduler.h"
#include "server_harness.h"
#include "test_paths.h"
#include "text/chat_template.h"

namespace ninfer {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<Engine> make_engine(int64_t max_context, int64_t kv_capacity) {
  EngineOptions o;
  o.device = "cpu";
  o.threads = 1;
  o.max_context = max_context;
  o.kv_capacity = kv_capacity;
  o.quiet = true;
  return Engine::create(test::model_dir("ref-qwen3-d256"), o);
}

std::vector<int32_t> needle_prompt(const Engine& e, const std::string& name, int number, int filler = 0) {
  std::string text;
  for (int i = 0; i < filler; ++i) text += "The weather was calm and the fields were quiet that year. ";
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

struct Ref {
  std::string text;
  std::string finish;
  int tokens;
};

Ref reference(Engine& e, const RequestParams& p) {
  GenerateOptions g;
  g.max_new_tokens = int(p.max_tokens);
  g.sampling = p.sampling;
  g.ignore_eos = p.ignore_eos;
  g.stop_strings = p.stop_strings;
  GenerateResult r = e.generate(p.prompt, g);
  return {r.text, r.finish_reason, int(r.tokens.size())};
}

const char* kNames[] = {"Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Grace", "Heidi"};

TEST(Scheduler, BatchedGreedyEqualsSingleRequest) {
  NINFER_REQUIRE_MODEL("ref-qwen3-d256");
  auto eng = make_engine(512, 0);
  std::vector<RequestParams> reqs;
  std::vector<Ref> refs;
  for (int i = 0; i < 8; ++i) {
    // Different prompt lengths (filler) so prefill chunks and decode steps interleave.
    reqs.push_back(greedy(needle_prompt(*eng, kNames[i], 1000 + 37 * i, i % 3), 20 + i, i % 2 == 1));
    refs.push_back(reference(*eng, reqs.back()));
  }
  SchedulerOptions so;
  so.max_concurrency = 8;
  so.step_tokens = 32;  // small chunks: prompts of 40-80 tokens take several steps
  Scheduler s(*eng, so);
  std::vector<RequestHandle> hs;
  for (auto& r : reqs) hs.push_back(s.submit(r));
  for (size_t i = 0; i < hs.size(); ++i) {
    RequestOutput o = hs[i].wait_done();
    EXPECT_EQ(o.text, refs[i].text) << "request " << i;
    EXPECT_EQ(o.finish_reason, refs[i].finish) << "request " << i;
    EXPECT_EQ(o.completion_tokens, refs[i].tokens) << "request " << i;
    EXPECT_EQ(o.prompt_tokens, int(reqs[i].prompt.size()));
  }
  ASSERT_TRUE(test::wait_until([&] { return s.stats().kv_pages_used == 0; }, 2s));
  SchedulerStats st = s.stats();
  EXPECT_EQ(st.running, 0);
  EXPECT_EQ(st.waiting, 0);
  EXPECT_EQ(st.kv_pages_free, st.kv_pages_total);
  EXPECT_LT(st.steps, 120u) << "requests were not batched (alone they take over 200 steps)";
}

TEST(Scheduler, PreemptionUnderKvPressureKeepsOutputsExact) {
  NINFER_REQUIRE_MODEL("ref-qwen3-d256");
  // 3 pages of KV (192 tokens) for 3 sequences that each grow to 2 pages: two are admitted
  // (one page each), both outgrow the pool, one is preempted and recomputed later, and every
  // output is still exactly the single-request one.
  auto eng = make_engine(128, 192);
  std::vector<RequestParams> reqs;
  std::vector<Ref> refs;
  for (const char* text : {"The secret number", "Fellow-Citizens of the Senate", "Once upon a time"}) {
    reqs.push_back(greedy(eng->tokenizer().encode(text, true), 80, true));
    refs.push_back(reference(*eng, reqs.back()));
  }
  SchedulerOptions so;
  so.max_concurrency = 3;
  Scheduler s(*eng, so);
  std::vector<RequestHandle> hs;
  for (auto& r : reqs) hs.push_back(s.submit(r));
  for (size_t i = 0; i < hs.size(); ++i) {
    RequestOutput o = hs[i].wait_done();
    EXPECT_EQ(o.text, refs[i].text) << "request " << i;
    EXPECT_EQ(o.finish_reason, "length");
    EXPECT_EQ(o.completion_tokens, 80);
  }
  ASSERT_TRUE(test::wait_until([&] { return s.stats().kv_pages_used == 0; }, 2s));
  EXPECT_GT(s.stats().preemptions, 0u) << "the test did not exercise preemption";
}

// A Qwen3.5-MoE hybrid of a small shape with random weights and the reference model's
// tokenizer: DeltaNet layers keep a recurrent state per sequence (a slot the engine hands out),
// which batching, chunked prefill and preemption (recompute from the prompt) must keep exact.
std::unique_ptr<Engine> make_hybrid_engine(int64_t max_context, int64_t kv_capacity, int max_sequences) {
  namespace fs = std::filesystem;
  const fs::path d = fs::temp_directory_path() / ("ninfer_sched_hybrid_" + std::to_string(::getpid()));
  fs::create_directories(d);
  const fs::path ref = test::model_dir("ref-qwen3-d256");
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(ref / f, d / f, fs::copy_options::overwrite_existing);
  std::ofstream(d / "config.json") << R"({"architectures": ["Qwen3_5MoeForConditionalGeneration"],
    "tie_word_embeddings": false, "text_config": {"vocab_size": 8192, "hidden_size": 256, "num_hidden_layers": 4,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 128, "rms_norm_eps": 1e-6,
    "max_position_embeddings": 4096, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 64,
    "linear_value_head_dim": 64, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
    "full_attention_interval": 2, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 64,
    "shared_expert_intermediate_size": 64, "eos_token_id": 2,
    "rope_parameters": {"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25}}})";
  EngineOptions o;
  o.device = "cpu";
  o.threads = 1;
  o.max_context = max_context;
  o.kv_capacity = kv_capacity;
  o.max_sequences = max_sequences;
  o.random_weights_seed = 5;
  o.quiet = true;
  return Engine::create(d, o);
}

TEST(Scheduler, HybridBatchedAndPreemptedEqualSingleRequests) {
  NINFER_REQUIRE_MODEL("ref-qwen3-d256");
  // 3 pages for 4 sequences growing to 2 pages each, and 2 state slots planned for 4 running:
  // batched steps, chunked prefills, more sequences than slots (the engine adds slots) and
  // preemptions, each output still the single-request one.
  auto eng = make_hybrid_engine(128, 192, 2);
  std::vector<RequestParams> reqs;
  std::vector<Ref> refs;
  for (const char* text : {"The secret number", "Fellow-Citizens of the Senate and of the House of Representatives",
                           "Once upon a time", "It was a bright cold day in April"}) {
    reqs.push_back(greedy(eng->tokenizer().encode(text, true), 80, true));
    refs.push_back(reference(*eng, reqs.back()));
  }
  SchedulerOptions so;
  so.max_concurrency = 4;
  so.step_tokens = 8;  // prompts prefill over several steps
  Scheduler s(*eng, so);
  std::vector<RequestHandle> hs;
  for (auto& r : reqs) hs.push_back(s.submit(r));
  for (size_t i = 0; i < hs.size(); ++i) {
    RequestOutput o = hs[i].wait_done();
    EXPECT_EQ(o.text, refs[i].text) << "request " << i;
    EXPECT_EQ(o.completion_tokens, 80);
  }
  ASSERT_TRUE(test::wait_until([&] { return s.stats().kv_pages_used == 0; }, 2s));
  EXPECT_GT(s.stats().preemptions, 0u) << "the test did not exercise preemption";
}

TEST(Scheduler, CancelFreesPagesAtOnce) {
  NINFER_REQUIRE_MODEL("ref-qwen3-d256");
  auto eng = make_engine(1024, 0);
  Scheduler s(*eng, SchedulerOptions{});
  RequestHandle h = s.submit(greedy(needle_prompt(*eng, "Alice", 1), 900, true));
  std::string text;
  while (text.size() < 20) {
    RequestOutput o = h.take(1000ms);
    ASSERT_FALSE(o.finished);
    text += o.text;
  }
  EXPECT_GT(s.stats().kv_pages_used, 0);
  h.cancel();
  RequestOutput o = h.wait_done();
  EXPECT_EQ(o.finish_reason, "cancelled");
  ASSERT_TRUE(test::wait_until([&] { return s.stats().kv_pages_used == 0; }, 2s));
  EXPECT_EQ(s.stats().finished_cancelled, 1u);
}

TEST(Scheduler, StopStringsCutAndStreamInPieces) {
  NINFER_REQUIRE_MODEL("ref-qwen3-d256");
  auto eng = make_engine(512, 0);
  RequestParams p = greedy(needle_prompt(*eng, "Carol", 7777), 30);
  const Ref full = reference(*eng, p);
  ASSERT_GT(full.text.size(), 12u) << full.text;
  const std::string stop = full.text.substr(8, 4);  // somewhere inside the answer
  p.stop_strings = {"never-appears", stop};
  const Ref cut = reference(*eng, p);
  Scheduler s(*eng, SchedulerOptions{});
  RequestHandle h = s.submit(p);
  std::string text;
  RequestOutput o;
  do {
    o = h.take(1000ms);
    text += o.text;
  } while (!o.finished);
  EXPECT_EQ(text, full.text.substr(0, full.text.find(stop)));
  EXPECT_EQ(text, cut.text);
  EXPECT_EQ(o.finish_reason, "stop");
}

// One request runs at a time; max_queue more may wait.
SchedulerOptions one_slot(int max_queue) {
  SchedulerOptions so;
  so.max_concurrency = 1;
  so.max_queue = max_queue;
  return so;
}

TEST(Scheduler, LimitsAreErrors) {
  NINFER_REQUIRE_MODEL("ref-qwen3-d256");
  auto eng = make_engine(128, 0);
  Scheduler s(*eng, one_slot(1));
  EXPECT_THROW(s.submit(greedy(std::vector<int32_t>(128, 5), 4)), PromptTooLongError);
  EXPECT_THROW(s.submit(greedy({}, 4)), Error);
  RequestParams bad = greedy({5, 6}, 4);
  bad.sampling.top_p = 0;
  EXPECT_THROW(s.submit(bad), Error);
  RequestParams bad_id = greedy({5, 1 << 20}, 4);
  EXPECT_THROW(s.submit(bad_id), Error);
  // One running + one queued; the third is refused.
  RequestHandle a = s.submit(greedy({5, 6, 7}, 100, true));
  RequestHandle b = s.submit(greedy({5, 6, 7}, 100, true));
  EXPECT_THROW(s.submit(greedy({5, 6, 7}, 100, true)), QueueFullError);
  a.cancel();
  b.cancel();
  EXPECT_EQ(a.wait_done().finish_reason, "cancelled");
  EXPECT_EQ(b.wait_done().finish_reason, "cancelled");
  // max_tokens 0: finished at once, nothing generated.
  RequestOutput z = s.submit(greedy({5, 6, 7}, 0)).wait_done();
  EXPECT_EQ(z.finish_reason, "length");
  EXPECT_EQ(z.completion_tokens, 0);
  s.stop();
  EXPECT_THROW(s.submit(greedy({5, 6, 7}, 1)), ShuttingDownError);
}

// A request's place under --max-queue is given back before its handle reports it finished,
// so a client that submits again the moment it has its answer is never refused for it.
TEST(Scheduler, AFinishedRequestNoLongerCountsAgainstTheQueueLimit) {
  NINFER_REQUIRE_MODEL("ref-qwen3-d256");
  auto eng = make_engine(128, 0);
  Scheduler s(*eng, one_slot(0));
  for (int i = 0; i < 100; ++i) {
    // Never admitted (nothing to generate) ...
    EXPECT_EQ(s.submit(greedy({5, 6, 7}, 0)).wait_done().finish_reason, "length") << "round " << i;
    // ... and admitted, then cancelled.
    RequestHandle h = s.submit(greedy({5, 6, 7}, 100, true));
    h.cancel();
    EXPECT_EQ(h.wait_done().finish_reason, "cancelled") << "round " << i;
  }
  EXPECT_EQ(s.stats().requests_rejected, 0u);
}

TEST(Scheduler, StopFailsInFlightRequests) {
  NINFER_REQUIRE_MODEL("ref-qwen3-d256");
  auto eng = make_engine(512, 0);
  auto s = std::make_unique<Scheduler>(*eng, SchedulerOptions{});
  RequestHandle h = s->submit(greedy({5, 6, 7}, 400, true));
  h.take(1000ms);
  s->stop();
  RequestOutput o = h.wait_done();
  EXPECT_EQ(o.finish_reason, "error");
  EXPECT_NE(o.error.find("shutting down"), std::string::npos);
  EXPECT_EQ(eng->pages().n_used(), 0);
}

}  // namespace
}  // namespace ninfer
