// Continuous-batching scheduler: many generation requests over one Engine, driven by one
// thread (the engine is not thread-safe). Other threads submit requests and read their
// output through a RequestHandle; nothing here knows about HTTP.
//
// Each iteration of the scheduler thread:
//   1. takes newly submitted requests into the waiting queue (FCFS) and drops cancelled ones
//      (their sequence is freed at once, so their pages return to the pool this iteration);
//   2. admits waiting requests while fewer than max_concurrency run and the free KV pages
//      cover the request's tokens plus one growth page per running sequence; with the engine's
//      prefix cache on, a request first attaches the cached pages its tokens start with
//      (Engine::attach_prefix) and is charged only for the rest: a page another sequence holds
//      costs nothing, an unreferenced cached one costs one (it leaves the free count);
//   3. builds one Engine::step: one token for every decoding sequence, then prefill chunks
//      of the prompts being prefilled (FCFS) from what is left of the step_tokens budget, so
//      a long prompt is fed over several steps while the other streams keep decoding;
//   4. when the step needs more pages than are free, shrinks prefill chunks and then
//      preempts the most recently admitted sequences (pages freed, request put back at the
//      head of the queue; on re-admission its prompt and the tokens generated so far are
//      prefilled again, which continues the generation exactly — "recompute" preemption);
//   5. samples one token per sequence that has consumed all its tokens, detokenizes it
//      (UTF-8 safe, stop strings held back until decided) and posts the text to the handle.
//
// A request is described by token ids: RequestParams. Its lifetime: waiting -> running
// (prefill, decode) -> finished (stop, length, cancelled, error), possibly running -> waiting
// again after a preemption.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "runtime/engine.h"
#include "runtime/sampler.h"
#include "runtime/token_constraint.h"

namespace ninfer {

struct SchedulerOptions {
  int max_concurrency = 16;  // sequences running (prefill or decode) at once
  int max_queue = 64;        // requests waiting for admission; more: QueueFullError
  int step_tokens = 512;     // tokens per forward call: decode tokens + prefill chunks
};

// Submission refused because the waiting queue is at max_queue (HTTP 429).
class QueueFullError : public Error {
 public:
  using Error::Error;
};
// The prompt can never be served: longer than the context or the KV pool (HTTP 413).
class PromptTooLongError : public Error {
 public:
  using Error::Error;
};
// The scheduler is stopping or stopped (HTTP 503).
class ShuttingDownError : public Error {
 public:
  using Error::Error;
};

struct RequestParams {
  std::vector<int32_t> prompt;  // non-empty
  int64_t max_tokens = -1;      // generated tokens at most; < 0: up to the context limit
  SamplingParams sampling;      // validated by submit()
  std::vector<std::string> stop_strings;  // non-empty strings
  bool ignore_eos = false;      // do not stop at the model's EOS tokens
  // >= 0: report each generated token's log-probability and this many most likely
  // alternatives (of the model's distribution, before bias, penalties and constraint).
  int logprobs = -1;
  // Also report the log-probability of every prompt token after the first (logprobs
  // alternatives each); the prompt is then prefilled with logits for every position.
  bool prompt_logprobs = false;
  // Masks the logits before every sample (structured output); null: none. Owned by the
  // request; used only by the scheduler thread after submit.
  std::shared_ptr<TokenConstraint> constraint;
};

// What a request produced since the last take(), and how it ended.
struct RequestOutput {
  std::string text;           // new text (valid UTF-8; stop strings removed)
  bool finished = false;
  std::string finish_reason;  // "stop", "length", "cancelled" or "error" (when finished)
  std::string error;          // message when finish_reason == "error"
  int prompt_tokens = 0;
  int completion_tokens = 0;  // tokens generated so far (a stop token is not counted)
  int cached_tokens = 0;      // prompt tokens served from the prefix cache at first admission
  double queue_seconds = -1;  // submission to first admission (-1 until admitted)
  double first_token_seconds = -1;  // submission to the first sampled token (-1 until then)
  // Seconds between consecutive sampled tokens since the last take, in order (inter-token
  // latency; a preempted request's recomputation falls inside one gap).
  std::vector<double> token_gaps;
  // RequestParams::logprobs >= 0: one entry per generated token since the last take (a
  // stop token has none), in order.
  std::vector<TokenLogprob> logprobs;
  // RequestParams::prompt_logprobs: prompt tokens 1..n-1, delivered once, before any text.
  std::vector<TokenLogprob> prompt_logprobs;
};

namespace detail {
struct RequestState;
}

// The submitter's side of a request. Destroying the last handle of an unfinished request
// cancels it.
class RequestHandle {
 public:
  RequestHandle() = default;
  explicit RequestHandle(std::shared_ptr<detail::RequestState> s);
  RequestHandle(RequestHandle&&) noexcept = default;
  RequestHandle& operator=(RequestHandle&&) noexcept = default;
  ~RequestHandle();

  // Waits until new text arrives, the request finishes, or `timeout` passes; returns the
  // text accumulated since the last call and the finish state (taken, i.e. cleared).
  RequestOutput take(std::chrono::milliseconds timeout);
  // Blocks until the request finishes; returns all text not taken before.
  RequestOutput wait_done();
  // Asks the scheduler to stop the request and free its pages (at the latest after the
  // forward call running now). Idempotent; a finished request is left as it is.
  void cancel();
  uint64_t id() const;
  int prompt_tokens() const;

 private:
  std::shared_ptr<detail::RequestState> s_;
};

// Counters and gauges for /metrics; a consistent snapshot taken by the scheduler thread.
struct SchedulerStats {
  int running = 0, waiting = 0;
  int kv_pages_used = 0, kv_pages_free = 0, kv_pages_total = 0;
  int kv_pages_cached = 0;         // unreferenced pages kept for prefix reuse (counted in free)
  bool prefix_cache = false;       // the engine's prefix cache is on
  uint64_t prefix_cache_queries = 0, prefix_cache_hits = 0;  // prompt tokens looked up / found
  uint64_t prefix_cache_evictions = 0;                        // cached pages reused
  uint64_t requests_submitted = 0, requests_rejected = 0;
  uint64_t finished_stop = 0, finished_length = 0, finished_cancelled = 0, finished_error = 0;
  uint64_t prompt_tokens = 0;      // prompt tokens of admitted requests (counted once)
  uint64_t prefill_tokens = 0;     // tokens fed in prefill chunks (recomputation included)
  uint64_t generated_tokens = 0;   // tokens sampled
  uint64_t steps = 0, preemptions = 0;
  double step_seconds = 0;         // wall time inside Engine::step
  // Rates over the last kRateWindow seconds of wall time.
  double prefill_tokens_per_s = 0, decode_tokens_per_s = 0;
  int64_t max_context = 0;
};

class Scheduler {
 public:
  // Starts the scheduler thread. The engine must outlive the scheduler and be used by no
  // one else while it runs.
  Scheduler(Engine& engine, const SchedulerOptions& opt);
  ~Scheduler();  // stop()
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Thread-safe. Throws Error (bad sampling field, empty prompt, empty stop string),
  // PromptTooLongError, QueueFullError or ShuttingDownError.
  RequestHandle submit(RequestParams params);
  // Thread-safe.
  SchedulerStats stats() const;
  // Finishes every request with an error ("the server is shutting down"), frees their
  // sequences and joins the thread. Idempotent.
  void stop();
  bool running() const { return !stopping_.load(); }

  const SchedulerOptions& options() const { return opt_; }
  // Immutable engine facts, safe from any thread.
  int64_t max_context() const { return max_context_; }
  int kv_pages_total() const { return n_pages_; }

 private:
  struct Active;  // scheduler-thread state of one request
  void loop();
  void iterate(std::vector<std::shared_ptr<detail::RequestState>>& incoming);
  void admit();
  void run_step();
  void preempt(size_t running_index);
  void finish(Active& a, const std::string& reason, const std::string& error = {});
  void emit_token(Active& a, int32_t tok, TokenLogprob* lp);
  void publish_stats();

  Engine& eng_;
  SchedulerOptions opt_;
  int64_t max_context_ = 0;
  int n_pages_ = 0;
  int32_t vocab_ = 0;

  // Shared with submitters.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<detail::RequestState>> incoming_;
  int n_waiting_shared_ = 0;  // incoming + waiting (not preempted), for the queue limit
  std::atomic<bool> stopping_{false};
  std::atomic<bool> wake_{false};
  SchedulerStats stats_;
  uint64_t next_id_ = 1;

  // Scheduler thread only.
  std::deque<std::unique_ptr<Active>> waiting_;
  std::vector<std::unique_ptr<Active>> running_;  // in admission order
  std::vector<float> logits_;
  std::vector<float> raw_row_;  // a row before sampling changes it (logprobs)
  SchedulerStats local_;
  struct RateSample {
    std::chrono::steady_clock::time_point t;
    uint64_t prefill, decode;
  };
  std::deque<RateSample> rate_samples_;

  std::thread thread_;
};

}  // namespace ninfer
