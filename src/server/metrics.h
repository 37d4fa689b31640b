// /metrics: Prometheus text exposition (format 0.0.4) of the scheduler's counters and
// gauges (requests, tokens, queue, KV pages, prefill/decode rates) and the HTTP layer's own
// (responses by route and status, request latency, time to first token).
#pragma once
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "runtime/scheduler.h"

namespace ninfer::server {

class HttpMetrics {
 public:
  // Thread-safe.
  void record(const std::string& route, int status);
  // A completion request that got a 200: its total time and time to first text.
  void record_latency(double seconds, double first_text_seconds);
  std::string render() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> responses_;
  double latency_sum_ = 0, ttft_sum_ = 0;
  uint64_t latency_count_ = 0, ttft_count_ = 0;
};

std::string render_metrics(const SchedulerStats& s, const SchedulerOptions& so, const HttpMetrics& http);

}  // namespace ninfer::server
