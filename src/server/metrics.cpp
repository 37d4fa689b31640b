#include "server/metrics.h"

#include <fmt/format.h>

#include <algorithm>

#include "kv/page_table.h"

namespace ninfer::server {
namespace {

void metric(std::string& out, const char* name, const char* type, const char* help, double v) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, v);
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  const size_t i = size_t(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  ++counts_[i];
  sum_ += v;
  ++count_;
}

std::string Histogram::render(const std::string& name, const std::string& help) const {
  std::string out = fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cum);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, count_, name, sum_, name, count_);
  return out;
}

// NOTE: bucket bounds chosen to cover a tiny model on a CPU (milliseconds) to a 1M-token
// prompt (minutes); the same bounds under both names.
HttpMetrics::HttpMetrics()
    : e2e_({0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 60, 120, 300, 600, 1200, 2400}),
      queue_({0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 60, 120, 300, 600}),
      ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 640}),
      prefill_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 640}),
      itl_({0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2.5, 5}) {}

void HttpMetrics::record(const std::string& route, int status) {
  std::lock_guard lk(mu_);
  ++responses_[{route, status}];
}

void HttpMetrics::record_request(const RequestTiming& t) {
  std::lock_guard lk(mu_);
  if (t.e2e >= 0) e2e_.observe(t.e2e);
  if (t.queue >= 0) queue_.observe(t.queue);
  if (t.first_token >= 0) ttft_.observe(t.first_token);
  if (t.prefill >= 0) prefill_.observe(t.prefill);
  for (double g : t.token_gaps) itl_.observe(g);
}

std::string HttpMetrics::render() const {
  std::lock_guard lk(mu_);
  std::string out;
  out += "# HELP ninfer_http_responses_total HTTP responses by route and status code.\n";
  out += "# TYPE ninfer_http_responses_total counter\n";
  for (const auto& [k, n] : responses_)
    out += fmt::format("ninfer_http_responses_total{{route=\"{}\",status=\"{}\"}} {}\n", k.first, k.second, n);
  struct Named {
    const Histogram& h;
    const char *ours, *vllm, *help;
  };
  for (const Named& n : {
           Named{e2e_, "ninfer_e2e_request_latency_seconds", "vllm:e2e_request_latency_seconds",
                 "Request received to last byte, successful completion requests."},
           Named{queue_, "ninfer_request_queue_time_seconds", "vllm:request_queue_time_seconds",
                 "Scheduler submission to first admission (KV pages and a slot), successful requests."},
           Named{ttft_, "ninfer_time_to_first_token_seconds", "vllm:time_to_first_token_seconds",
                 "Request received to the first sampled token, successful requests."},
           Named{prefill_, "ninfer_request_prefill_time_seconds", "vllm:request_prefill_time_seconds",
                 "Admission to the first sampled token (the prompt's prefill), successful requests."},
           Named{itl_, "ninfer_inter_token_latency_seconds", "vllm:inter_token_latency_seconds",
                 "Time between consecutive sampled tokens of a sequence, successful requests."}}) {
    out += n.h.render(n.ours, n.help);
    out += n.h.render(n.vllm, n.help);
  }
  return out;
}

std::string render_metrics(const SchedulerStats& s, const SchedulerOptions& so, const HttpMetrics& http) {
  std::string out;
  metric(out, "ninfer_requests_running", "gauge", "Requests being prefilled or decoded.", s.running);
  metric(out, "ninfer_requests_waiting", "gauge", "Requests waiting for admission (KV pages or a slot).", s.waiting);
  metric(out, "ninfer_max_concurrency", "gauge", "Sequences that may run at once (--max-concurrency).",
         so.max_concurrency);
  metric(out, "ninfer_max_queue", "gauge", "Waiting requests allowed beyond free slots (--max-queue).", so.max_queue);
  metric(out, "ninfer_requests_submitted_total", "counter", "Requests accepted by the scheduler.",
         double(s.requests_submitted));
  metric(out, "ninfer_requests_rejected_total", "counter", "Requests refused because the queue was full (429).",
         double(s.requests_rejected));
  out += "# HELP ninfer_requests_finished_total Finished requests by reason.\n";
  out += "# TYPE ninfer_requests_finished_total counter\n";
  out += fmt::format("ninfer_requests_finished_total{{reason=\"stop\"}} {}\n", s.finished_stop);
  out += fmt::format("ninfer_requests_finished_total{{reason=\"length\"}} {}\n", s.finished_length);
  out += fmt::format("ninfer_requests_finished_total{{reason=\"cancelled\"}} {}\n", s.finished_cancelled);
  out += fmt::format("ninfer_requests_finished_total{{reason=\"error\"}} {}\n", s.finished_error);
  metric(out, "ninfer_prompt_tokens_total", "counter", "Prompt tokens of admitted requests.", double(s.prompt_tokens));
  metric(out, "ninfer_generation_tokens_total", "counter", "Tokens sampled.", double(s.generated_tokens));
  metric(out, "ninfer_prefill_tokens_total", "counter", "Tokens fed in prefill chunks (recomputation included).",
         double(s.prefill_tokens));
  metric(out, "ninfer_prefill_tokens_per_second", "gauge", "Prefill tokens per second over the last 10 s.",
         s.prefill_tokens_per_s);
  metric(out, "ninfer_decode_tokens_per_second", "gauge", "Generated tokens per second over the last 10 s.",
         s.decode_tokens_per_s);
  metric(out, "ninfer_steps_total", "counter", "Forward calls (batched steps).", double(s.steps));
  metric(out, "ninfer_step_seconds_total", "counter", "Wall time inside forward calls.", s.step_seconds);
  metric(out, "ninfer_preemptions_total", "counter", "Sequences preempted for KV pages (recomputed later).",
         double(s.preemptions));
  metric(out, "ninfer_kv_pages_used", "gauge", "KV cache pages in use.", s.kv_pages_used);
  metric(out, "ninfer_kv_pages_free", "gauge", "KV cache pages free.", s.kv_pages_free);
  metric(out, "ninfer_kv_pages_total", "gauge", "KV cache pages in the pool.", s.kv_pages_total);
  metric(out, "ninfer_kv_page_tokens", "gauge", "Tokens per KV page.", kPageSize);
  const double usage = s.kv_pages_total > 0 ? double(s.kv_pages_used) / double(s.kv_pages_total) : 0.0;
  metric(out, "ninfer_kv_cache_usage_ratio", "gauge",
         "KV pages in use over the pool (0..1; cached pages nobody holds count as free).", usage);
  metric(out, "vllm:kv_cache_usage_perc", "gauge", "KV-cache usage, 1 means 100 percent (as ninfer_kv_cache_usage_ratio).",
         usage);
  metric(out, "ninfer_kv_pages_cached", "gauge",
         "KV pages no sequence holds, kept for prefix reuse (counted in ninfer_kv_pages_free).", s.kv_pages_cached);
  metric(out, "ninfer_prefix_cache_enabled", "gauge", "1 when the prefix cache is on (off: --no-prefix-cache).",
         s.prefix_cache ? 1 : 0);
  metric(out, "ninfer_prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.",
         double(s.prefix_cache_queries));
  metric(out, "ninfer_prefix_cache_hits_total", "counter", "Prompt tokens served from cached KV pages.",
         double(s.prefix_cache_hits));
  metric(out, "ninfer_prefix_cache_evictions_total", "counter", "Cached KV pages evicted for new content.",
         double(s.prefix_cache_evictions));
  metric(out, "ninfer_max_context_tokens", "gauge", "Tokens one sequence may hold (--max-context).",
         double(s.max_context));
  out += http.render();
  return out;
}

}  // namespace ninfer::server
