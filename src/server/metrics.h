// /metrics: Prometheus text exposition (format 0.0.4) of the scheduler's counters and
// gauges (requests, tokens, queue, KV pages, prefill/decode rates) and the HTTP layer's own
// (responses by route and status) and request-timing histograms, each under our name and
// under the name vLLM's dashboards read (vllm:time_to_first_token_seconds, ...).
#pragma once
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "runtime/scheduler.h"

namespace ninfer::server {

// A Prometheus histogram: cumulative counts per upper bound, a sum and a count.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  // The exposition of this histogram under `name` (its buckets, _sum, _count).
  std::string render(const std::string& name, const std::string& help) const;
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;   // ascending upper bounds; +Inf is implied
  std::vector<uint64_t> counts_;  // per bucket (not cumulative), one more for +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

// The times of one successful completion request, in seconds (negative: not known).
struct RequestTiming {
  double e2e = -1;          // request received to last byte
  double queue = -1;        // scheduler submission to first admission (first choice)
  double first_token = -1;  // request received to the first sampled token
  double prefill = -1;      // admission to the first sampled token (the prompt's prefill), that choice's
  std::vector<double> token_gaps;  // between consecutive sampled tokens, every choice
};

class HttpMetrics {
 public:
  HttpMetrics();
  // Thread-safe.
  void record(const std::string& route, int status);
  void record_request(const RequestTiming& t);
  std::string render() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> responses_;
  Histogram e2e_, queue_, ttft_, prefill_, itl_;
};

std::string render_metrics(const SchedulerStats& s, const SchedulerOptions& so, const HttpMetrics& http);

}  // namespace ninfer::server
