#include "runtime/scheduler.h"

#include <algorithm>
#include <cstdio>
#include <exception>

#include "kv/page_table.h"
#include "runtime/stop_strings.h"

namespace ninfer {

using Clock = std::chrono::steady_clock;

namespace {

// NOTE: rates on /metrics are averaged over this much wall time: long enough to smooth over
// steps (tens of ms each), short enough to show a load change within seconds.
constexpr double kRateWindow = 10.0;
// NOTE: how long the idle scheduler sleeps before looking at cancellations and rates again;
// new submissions wake it at once.
constexpr auto kIdlePoll = std::chrono::milliseconds(20);


}  // namespace

namespace detail {

struct RequestState {
  uint64_t id = 0;
  RequestParams params;  // read by the scheduler thread after submit
  std::atomic<bool> cancel{false};
  std::mutex mu;
  std::condition_variable cv;
  RequestOutput out;  // text not taken yet, finish state
  std::chrono::steady_clock::time_point submitted = std::chrono::steady_clock::now();
};

}  // namespace detail

// ---------------------------------------------------------------------------------------
// RequestHandle

RequestHandle::RequestHandle(std::shared_ptr<detail::RequestState> s) : s_(std::move(s)) {}

RequestHandle::~RequestHandle() {
  if (s_) cancel();
}

RequestOutput RequestHandle::take(std::chrono::milliseconds timeout) {
  std::unique_lock lk(s_->mu);
  s_->cv.wait_for(lk, timeout, [&] {
    return !s_->out.text.empty() || s_->out.finished || !s_->out.logprobs.empty() || !s_->out.prompt_logprobs.empty();
  });
  RequestOutput r = s_->out;
  s_->out.text.clear();
  s_->out.logprobs.clear();
  s_->out.prompt_logprobs.clear();
  s_->out.token_gaps.clear();
  return r;
}

RequestOutput RequestHandle::wait_done() {
  std::unique_lock lk(s_->mu);
  s_->cv.wait(lk, [&] { return s_->out.finished; });
  RequestOutput r = s_->out;
  s_->out.text.clear();
  s_->out.logprobs.clear();
  s_->out.prompt_logprobs.clear();
  s_->out.token_gaps.clear();
  return r;
}

void RequestHandle::cancel() {
  std::lock_guard lk(s_->mu);
  if (!s_->out.finished) s_->cancel = true;
}

uint64_t RequestHandle::id() const { return s_->id; }
int RequestHandle::prompt_tokens() const { return int(s_->params.prompt.size()); }

// ---------------------------------------------------------------------------------------
// Scheduler

struct Scheduler::Active {
  std::shared_ptr<detail::RequestState> st;
  std::vector<int32_t> tokens;  // prompt + generated: the sequence's full history
  size_t n_prompt = 0;
  int64_t budget = 0;           // tokens to generate at most
  int64_t n_generated = 0;
  int32_t seq = -1;             // engine sequence, -1 while waiting
  size_t n_fed = 0;             // tokens of `tokens` the engine sequence holds
  bool admitted_once = false;
  bool done = false;
  Sampler sampler;
  Tokenizer::StreamDecoder dec;
  std::string pending;          // decoded text held back (partial stop string)
  std::vector<int32_t> stop_ids;
  std::vector<TokenLogprob> prompt_lp;  // prompt_logprobs: positions 1..prompt_lp.size() so far
  bool prompt_lp_sent = false;
  bool timed_first = false;     // the first token's time is in out.first_token_seconds
  Clock::time_point last_token;

  Active(std::shared_ptr<detail::RequestState> s, const Tokenizer& tok)
      : st(std::move(s)), sampler(st->params.sampling), dec(tok) {}
  size_t remaining() const { return tokens.size() - n_fed; }
};

Scheduler::Scheduler(Engine& engine, const SchedulerOptions& opt) : eng_(engine), opt_(opt) {
  if (opt_.max_concurrency < 1) fail("--max-concurrency must be >= 1, got {}", opt_.max_concurrency);
  if (opt_.max_queue < 0) fail("--max-queue must be >= 0, got {}", opt_.max_queue);
  if (opt_.step_tokens < 1) fail("the step token budget must be >= 1, got {}", opt_.step_tokens);
  max_context_ = eng_.max_context();
  n_pages_ = eng_.pages().n_pages();
  vocab_ = eng_.config().vocab;
  local_.max_context = max_context_;
  local_.kv_pages_total = n_pages_;
  local_.kv_pages_free = eng_.pages().n_free();
  local_.kv_pages_used = eng_.pages().n_used();
  local_.kv_pages_cached = eng_.pages().n_cached();
  local_.prefix_cache = eng_.prefix_cache_enabled();
  stats_ = local_;
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() { stop(); }

void Scheduler::stop() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

RequestHandle Scheduler::submit(RequestParams p) {
  if (p.prompt.empty()) fail("the prompt is empty (no tokens to condition on)");
  for (size_t i = 0; i < p.prompt.size(); ++i)
    if (p.prompt[i] < 0 || p.prompt[i] >= vocab_)
      fail("prompt token {} (index {}) is outside the vocabulary (0..{})", p.prompt[i], i, vocab_ - 1);
  p.sampling.validate();
  for (const std::string& s : p.stop_strings)
    if (s.empty()) fail("stop strings must not be empty");
  for (auto [t, b] : p.sampling.logit_bias)
    if (t >= vocab_) fail("logit_bias: token id {} is outside the vocabulary (0..{})", t, vocab_ - 1);
  if (p.logprobs > vocab_) fail("logprobs: {} alternatives asked, the vocabulary has {} tokens", p.logprobs, vocab_);
  if (p.prompt_logprobs && p.logprobs < 0) fail("prompt log-probabilities need logprobs >= 0");
  const int64_t n = int64_t(p.prompt.size());
  if (n >= max_context_)
    throw PromptTooLongError(fmt::format(
        "the prompt has {} tokens but the context limit is {} tokens (--max-context), and at least one "
        "token must be left for the completion", n, max_context_));
  if (pages_for_tokens(n + 1) > n_pages_)
    throw PromptTooLongError(fmt::format("the prompt has {} tokens but the KV cache holds only {} tokens", n,
                                         int64_t(n_pages_) * kPageSize));
  auto st = std::make_shared<detail::RequestState>();
  st->params = std::move(p);
  st->out.prompt_tokens = int(n);
  {
    std::lock_guard lk(mu_);
    if (stopping_) throw ShuttingDownError("the server is shutting down");
    // NOTE: the queue limit counts requests not yet admitted beyond the free concurrency
    // slots, so with idle slots a burst of max_concurrency requests is never refused.
    const int free_slots = std::max(0, opt_.max_concurrency - stats_.running);
    if (n_waiting_shared_ >= opt_.max_queue + free_slots) {
      ++stats_.requests_rejected;
      throw QueueFullError(fmt::format("the server is busy: {} requests are queued (limit {}, --max-queue); retry later",
                                       n_waiting_shared_, opt_.max_queue));
    }
    st->id = next_id_++;
    ++n_waiting_shared_;
    ++stats_.requests_submitted;
    incoming_.push_back(st);
  }
  cv_.notify_all();
  return RequestHandle(st);
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard lk(mu_);
  return stats_;
}

void Scheduler::loop() {
  std::vector<std::shared_ptr<detail::RequestState>> incoming;
  while (true) {
    {
      std::unique_lock lk(mu_);
      if (running_.empty() && waiting_.empty() && incoming_.empty() && !stopping_)
        cv_.wait_for(lk, kIdlePoll, [&] { return !incoming_.empty() || stopping_.load(); });
      if (stopping_) break;
      incoming.swap(incoming_);
    }
    try {
      iterate(incoming);
    } catch (const std::exception& e) {
      // NOTE: a bug in one iteration must not take the server down: fail what is in flight
      // (freeing its pages) and carry on.
      std::fprintf(stderr, "scheduler: internal error, failing %zu running requests: %s\n", running_.size(),
                   e.what());
      for (auto& a : running_) finish(*a, "error", std::string("internal error: ") + e.what());
      running_.clear();
    }
    incoming.clear();
    publish_stats();
  }
  // Shutting down: nothing new is accepted (submit checks stopping_ under mu_).
  {
    std::lock_guard lk(mu_);
    incoming.swap(incoming_);
  }
  for (auto& st : incoming) {
    Active a(st, eng_.tokenizer());
    finish(a, "error", "the server is shutting down");
  }
  for (auto& a : waiting_) finish(*a, "error", "the server is shutting down");
  for (auto& a : running_) finish(*a, "error", "the server is shutting down");
  waiting_.clear();
  running_.clear();
  publish_stats();
}

void Scheduler::iterate(std::vector<std::shared_ptr<detail::RequestState>>& incoming) {
  for (auto& st : incoming) {
    auto a = std::make_unique<Active>(st, eng_.tokenizer());
    const RequestParams& p = st->params;
    a->tokens = p.prompt;
    a->n_prompt = p.prompt.size();
    a->budget = max_context_ - int64_t(a->n_prompt);
    if (p.max_tokens >= 0) a->budget = std::min(a->budget, p.max_tokens);
    if (!p.ignore_eos) a->stop_ids = eng_.generation_config().eos_ids;
    waiting_.push_back(std::move(a));
  }
  // Cancellations and zero-token requests.
  for (auto& a : waiting_)
    if (a->st->cancel) finish(*a, "cancelled");
    else if (a->budget == 0 && !a->st->params.prompt_logprobs) finish(*a, "length");
  for (auto& a : running_)
    if (a->st->cancel) finish(*a, "cancelled");
  auto is_done = [](const std::unique_ptr<Active>& a) { return a->done; };
  waiting_.erase(std::remove_if(waiting_.begin(), waiting_.end(), is_done), waiting_.end());
  running_.erase(std::remove_if(running_.begin(), running_.end(), is_done), running_.end());

  admit();
  run_step();
  running_.erase(std::remove_if(running_.begin(), running_.end(), is_done), running_.end());
}

void Scheduler::admit() {
  int newly_admitted = 0;
  while (!waiting_.empty() && int(running_.size()) < opt_.max_concurrency) {
    Active& a = *waiting_.front();
    // NOTE: the cached pages this request would attach are counted once: those other
    // sequences hold cost nothing, unreferenced ones leave the free count when attached.
    // Prompt log-probabilities need logits at every prompt position: such a request takes
    // nothing from the prefix cache until they are sent.
    const bool attach = !(a.st->params.prompt_logprobs && !a.prompt_lp_sent);
    const PrefixMatch m = attach ? eng_.match_prefix(a.tokens) : PrefixMatch{};
    const int64_t need = pages_for_tokens(int64_t(a.tokens.size()) + 1) - m.n_pages + m.n_unreferenced;
    if (!running_.empty()) {
      // Pages the running sequences still need for the tokens they hold or are about to
      // take, plus one page of growth each (NOTE: a margin against preempting a request
      // right after admitting another; preemption still handles what it does not cover).
      int64_t committed = 0;
      for (auto& r : running_) {
        const int64_t have = int64_t(eng_.pages().block_table(r->seq).size());
        committed += std::max<int64_t>(0, pages_for_tokens(int64_t(r->tokens.size()) + 1) - have) + 1;
      }
      if (eng_.pages().n_free() - committed < need) break;
    }
    a.seq = eng_.new_sequence();
    a.n_fed = attach ? size_t(eng_.attach_prefix(a.seq, a.tokens)) : 0;
    if (!a.admitted_once) {
      a.admitted_once = true;
      ++newly_admitted;
      local_.prompt_tokens += a.n_prompt;
      std::lock_guard lk(a.st->mu);
      a.st->out.cached_tokens = int(std::min(a.n_fed, a.n_prompt));
      a.st->out.queue_seconds = std::chrono::duration<double>(Clock::now() - a.st->submitted).count();
    }
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
  if (newly_admitted > 0) {
    std::lock_guard lk(mu_);
    n_waiting_shared_ -= newly_admitted;
    stats_.running = int(running_.size());  // submit()'s queue limit reads it
  }
}

void Scheduler::preempt(size_t i) {
  Active& a = *running_[i];
  eng_.free_sequence(a.seq);
  a.seq = -1;
  a.n_fed = 0;
  ++local_.preemptions;
  waiting_.push_front(std::move(running_[i]));
  running_.erase(running_.begin() + long(i));
}

void Scheduler::run_step() {
  struct Plan {
    Active* a;
    size_t n;
    bool decode;
  };
  std::vector<Plan> plan;
  const PageTable& pt = eng_.pages();
  auto pages_needed = [&](const Plan& p) {
    const int64_t have = int64_t(pt.block_table(p.a->seq).size());
    return std::max<int64_t>(0, pages_for_tokens(int64_t(p.a->n_fed + p.n)) - have);
  };
  while (!running_.empty()) {
    plan.clear();
    // Decode tokens first (every decoding sequence advances every step), then prefill chunks
    // in admission order from what is left of the budget.
    int64_t budget = opt_.step_tokens;
    for (auto& a : running_)
      if (a->remaining() == 1 && a->n_generated > 0) {
        plan.push_back({a.get(), 1, true});
        --budget;
      }
    for (auto& a : running_) {
      if (a->remaining() == 0 || (a->remaining() == 1 && a->n_generated > 0)) continue;
      if (budget <= 0) break;
      const size_t n = std::min<size_t>(a->remaining(), size_t(budget));
      plan.push_back({a.get(), n, false});
      budget -= int64_t(n);
    }
    int64_t need = 0;
    for (const Plan& p : plan) need += pages_needed(p);
    const int64_t free = pt.n_free();
    // Too few pages: trim prefill chunks from the last one back.
    for (size_t k = plan.size(); need > free && k-- > 0;) {
      Plan& p = plan[k];
      if (p.decode) continue;
      const int64_t mine = pages_needed(p);
      const int64_t avail = free - (need - mine);  // pages this chunk may take
      const int64_t have = int64_t(pt.block_table(p.a->seq).size());
      const int64_t fit = (have + std::max<int64_t>(0, avail)) * kPageSize - int64_t(p.a->n_fed);
      p.n = size_t(std::clamp<int64_t>(fit, 0, int64_t(p.n)));
      need += pages_needed(p) - mine;
    }
    plan.erase(std::remove_if(plan.begin(), plan.end(), [](const Plan& p) { return p.n == 0; }), plan.end());
    if (need <= free && !plan.empty()) break;
    // Still too few (decode growth) or nothing can progress: preempt the latest admitted.
    if (running_.size() == 1) {
      // NOTE: unreachable while the pool holds one max_context sequence (the capacity
      // planner guarantees it); kept so a pool/context mismatch ends the request cleanly.
      finish(*running_[0], "length");
      running_.clear();
      return;
    }
    preempt(running_.size() - 1);
  }
  if (plan.empty()) return;

  std::vector<StepItem> items;
  items.reserve(plan.size());
  // Prompt log-probabilities need every row of the chunks that cover prompt positions.
  auto all_rows = [](const Plan& p) {
    const Active& a = *p.a;
    return !p.decode && a.st->params.prompt_logprobs && !a.prompt_lp_sent && a.n_fed < a.n_prompt;
  };
  for (const Plan& p : plan)
    items.push_back(StepItem{p.a->seq, std::span<const int32_t>(p.a->tokens.data() + p.a->n_fed, p.n), all_rows(p)});
  const auto t0 = Clock::now();
  try {
    eng_.step(items, logits_);
  } catch (const std::exception& e) {
    // NOTE: KvFullError cannot happen (pages were counted above); anything else is a backend
    // failure for this batch: its requests fail, the server carries on.
    for (const Plan& p : plan) finish(*p.a, "error", std::string("inference failed: ") + e.what());
    return;
  }
  local_.step_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
  ++local_.steps;
  const size_t vocab = size_t(vocab_);
  size_t row0 = 0;  // first logits row of plan[k]
  for (size_t k = 0; k < plan.size(); ++k) {
    Active& a = *plan[k].a;
    const bool rows = items[k].all_logits;
    const size_t n_rows = rows ? plan[k].n : 1;
    const size_t start = a.n_fed;
    a.n_fed += plan[k].n;
    if (!plan[k].decode) local_.prefill_tokens += plan[k].n;
    const RequestParams& rp = a.st->params;
    if (rows) {
      // Row j follows the token at position start + j and predicts position start + j + 1.
      for (size_t j = 0; j < n_rows; ++j) {
        const size_t pos = start + j + 1;
        if (pos >= a.n_prompt || pos != a.prompt_lp.size() + 1) continue;
        a.prompt_lp.push_back(
            token_logprob(std::span<const float>(logits_.data() + (row0 + j) * vocab, vocab), a.tokens[pos], rp.logprobs));
      }
    }
    std::span<float> row(logits_.data() + (row0 + n_rows - 1) * vocab, vocab);
    row0 += n_rows;
    if (a.remaining() != 0) continue;  // prefill not complete yet
    if (rp.prompt_logprobs && !a.prompt_lp_sent) {
      a.prompt_lp_sent = true;
      {
        std::lock_guard lk(a.st->mu);
        a.st->out.prompt_logprobs = std::move(a.prompt_lp);
      }
      a.prompt_lp.clear();
      a.st->cv.notify_all();
      // max_tokens 0 with prompt log-probabilities: scoring the prompt is the whole request.
      if (a.budget == 0) {
        finish(a, "length");
        continue;
      }
    }
    const bool want_lp = rp.logprobs >= 0;
    if (want_lp) raw_row_.assign(row.begin(), row.end());
    if (rp.constraint && !rp.constraint->mask(row)) {
      finish(a, "error", "structured output: no token can continue the constrained output");
      continue;
    }
    const int32_t tok = a.sampler.sample(row, a.tokens, a.n_prompt);
    TokenLogprob lp;
    if (want_lp) lp = token_logprob(raw_row_, tok, rp.logprobs);
    emit_token(a, tok, want_lp ? &lp : nullptr);
  }
}

void Scheduler::emit_token(Active& a, int32_t tok, TokenLogprob* lp) {
  ++local_.generated_tokens;
  const std::vector<std::string>& stops = a.st->params.stop_strings;
  std::string out;
  std::string reason;
  const bool stop_token = std::find(a.stop_ids.begin(), a.stop_ids.end(), tok) != a.stop_ids.end();
  if (stop_token) {
    // The held-back text was not a stop string after all: it belongs to the answer.
    out = std::move(a.pending) + a.dec.flush();
    a.pending.clear();
    reason = "stop";
  } else {
    a.tokens.push_back(tok);
    ++a.n_generated;
    a.pending += a.dec.push(tok);
    const std::shared_ptr<TokenConstraint>& constraint = a.st->params.constraint;
    if (constraint) constraint->accept(tok);
    bool hit = false;
    if (!stops.empty()) {
      size_t cut = std::string::npos;
      for (const std::string& s : stops) cut = std::min(cut, a.pending.find(s));
      if (cut != std::string::npos) {
        a.pending.resize(cut);
        hit = true;
      }
    }
    if (hit) {
      out = std::move(a.pending);
      a.pending.clear();
      reason = "stop";
    } else if (a.n_generated >= a.budget || (constraint && constraint->done())) {
      out = std::move(a.pending) + a.dec.flush();
      a.pending.clear();
      reason = a.n_generated >= a.budget && !(constraint && constraint->done()) ? "length" : "stop";
    } else {
      const size_t hold = stop_string_holdback(a.pending, stops);
      out = a.pending.substr(0, a.pending.size() - hold);
      a.pending.erase(0, out.size());
    }
  }
  {
    std::lock_guard lk(a.st->mu);
    a.st->out.text += out;
    a.st->out.completion_tokens = int(a.n_generated);
    if (lp && !stop_token) a.st->out.logprobs.push_back(std::move(*lp));
    const auto now = Clock::now();
    if (!a.timed_first) {
      a.timed_first = true;
      a.st->out.first_token_seconds = std::chrono::duration<double>(now - a.st->submitted).count();
    } else {
      a.st->out.token_gaps.push_back(std::chrono::duration<double>(now - a.last_token).count());
    }
    a.last_token = now;
  }
  a.st->cv.notify_all();
  if (!reason.empty()) finish(a, reason);
}

void Scheduler::finish(Active& a, const std::string& reason, const std::string& error) {
  if (a.done) return;
  a.done = true;
  const bool was_running = a.seq >= 0;
  if (was_running) {
    eng_.free_sequence(a.seq);
    a.seq = -1;
  }
  {
    // NOTE: release the request's place in submit()'s queue limit before its handle sees
    // it finished, so a client that submits again the moment it has its answer is not
    // refused for its own finished request (the stats are republished after the step).
    std::lock_guard lk(mu_);
    if (!a.admitted_once) --n_waiting_shared_;
    if (was_running) stats_.running = std::max(0, stats_.running - 1);
  }
  if (reason == "stop") ++local_.finished_stop;
  else if (reason == "length") ++local_.finished_length;
  else if (reason == "cancelled") ++local_.finished_cancelled;
  else ++local_.finished_error;
  {
    std::lock_guard lk(a.st->mu);
    a.st->out.finished = true;
    a.st->out.finish_reason = reason;
    a.st->out.error = error;
    a.st->out.completion_tokens = int(a.n_generated);
  }
  a.st->cv.notify_all();
}

void Scheduler::publish_stats() {
  const auto now = Clock::now();
  const uint64_t decode_total = local_.generated_tokens;
  if (rate_samples_.empty() || now - rate_samples_.back().t >= std::chrono::milliseconds(100))
    rate_samples_.push_back({now, local_.prefill_tokens, decode_total});
  while (rate_samples_.size() > 2 &&
         std::chrono::duration<double>(now - rate_samples_[1].t).count() >= kRateWindow)
    rate_samples_.pop_front();
  const RateSample& old = rate_samples_.front();
  const double dt = std::chrono::duration<double>(now - old.t).count();
  local_.prefill_tokens_per_s = dt > 0 ? double(local_.prefill_tokens - old.prefill) / dt : 0.0;
  local_.decode_tokens_per_s = dt > 0 ? double(decode_total - old.decode) / dt : 0.0;
  local_.running = int(running_.size());
  local_.kv_pages_free = eng_.pages().n_free();
  local_.kv_pages_used = eng_.pages().n_used();
  local_.kv_pages_cached = eng_.pages().n_cached();
  const PrefixCacheStats pc = eng_.prefix_cache_stats();
  local_.prefix_cache = eng_.prefix_cache_enabled();
  local_.prefix_cache_queries = pc.queries;
  local_.prefix_cache_hits = pc.hits;
  local_.prefix_cache_evictions = pc.evictions;
  std::lock_guard lk(mu_);
  // Submitter-side counters live in stats_; the rest is the scheduler's.
  const uint64_t submitted = stats_.requests_submitted, rejected = stats_.requests_rejected;
  stats_ = local_;
  stats_.requests_submitted = submitted;
  stats_.requests_rejected = rejected;
  stats_.waiting = n_waiting_shared_ + int(std::count_if(waiting_.begin(), waiting_.end(),
                                                         [](const auto& a) { return a->admitted_once; }));
}

}  // namespace ninfer
