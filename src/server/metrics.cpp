#include "server/metrics.h"

#include <fmt/format.h>

#include "kv/page_table.h"

namespace ninfer::server {
namespace {

void metric(std::string& out, const char* name, const char* type, const char* help, double v) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, v);
}

}  // namespace

void HttpMetrics::record(const std::string& route, int status) {
  std::lock_guard lk(mu_);
  ++responses_[{route, status}];
}

void HttpMetrics::record_latency(double seconds, double first_text_seconds) {
  std::lock_guard lk(mu_);
  latency_sum_ += seconds;
  ++latency_count_;
  if (first_text_seconds >= 0) {
    ttft_sum_ += first_text_seconds;
    ++ttft_count_;
  }
}

std::string HttpMetrics::render() const {
  std::lock_guard lk(mu_);
  std::string out;
  out += "# HELP ninfer_http_responses_total HTTP responses by route and status code.\n";
  out += "# TYPE ninfer_http_responses_total counter\n";
  for (const auto& [k, n] : responses_)
    out += fmt::format("ninfer_http_responses_total{{route=\"{}\",status=\"{}\"}} {}\n", k.first, k.second, n);
  out += "# HELP ninfer_request_seconds Time from request to last byte, successful completions.\n";
  out += "# TYPE ninfer_request_seconds summary\n";
  out += fmt::format("ninfer_request_seconds_sum {}\nninfer_request_seconds_count {}\n", latency_sum_, latency_count_);
  out += "# HELP ninfer_time_to_first_text_seconds Time from request to the first generated text.\n";
  out += "# TYPE ninfer_time_to_first_text_seconds summary\n";
  out += fmt::format("ninfer_time_to_first_text_seconds_sum {}\nninfer_time_to_first_text_seconds_count {}\n",
                     ttft_sum_, ttft_count_);
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
