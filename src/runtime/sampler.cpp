#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "core/error.h"

namespace ninfer {

void SamplingParams::validate() const {
  if (!(temperature >= 0.0f) || !std::isfinite(temperature)) fail("temperature must be >= 0, got {}", temperature);
  if (top_k < 0) fail("top_k must be >= 0, got {}", top_k);
  if (!(top_p > 0.0f && top_p <= 1.0f)) fail("top_p must be in (0, 1], got {}", top_p);
  if (!(min_p >= 0.0f && min_p <= 1.0f)) fail("min_p must be in [0, 1], got {}", min_p);
  if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty))
    fail("repetition_penalty must be > 0, got {}", repetition_penalty);
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f))
    fail("presence_penalty must be in [-2, 2], got {}", presence_penalty);
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f))
    fail("frequency_penalty must be in [-2, 2], got {}", frequency_penalty);
  for (auto [t, b] : logit_bias) {
    if (t < 0) fail("logit_bias: token id {} is negative", t);
    if (!(b >= -100.0f && b <= 100.0f)) fail("logit_bias: the bias of token {} must be in [-100, 100], got {}", t, b);
  }
}

Sampler::Sampler(const SamplingParams& p) : p_(p), rng_(p.seed) {}

int32_t argmax(std::span<const float> logits) {
  return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> history, size_t n_prompt) {
  const int32_t vocab = int32_t(logits.size());
  for (auto [t, b] : p_.logit_bias)
    if (t >= 0 && t < vocab) logits[size_t(t)] += b;
  n_prompt = std::min(n_prompt, history.size());
  if (p_.repetition_penalty != 1.0f) {
    std::unordered_map<int32_t, int> seen;
    for (int32_t t : history)
      if (t >= 0 && t < vocab) seen[t] = 1;
    for (auto [t, n] : seen) {
      float& l = logits[size_t(t)];
      l = l > 0 ? l / p_.repetition_penalty : l * p_.repetition_penalty;
    }
  }
  if (p_.presence_penalty != 0.0f || p_.frequency_penalty != 0.0f) {
    std::unordered_map<int32_t, int> counts;
    for (int32_t t : history.subspan(n_prompt))
      if (t >= 0 && t < vocab) ++counts[t];
    for (auto [t, n] : counts) logits[size_t(t)] -= p_.presence_penalty + p_.frequency_penalty * float(n);
  }
  if (p_.temperature == 0.0f) return argmax(logits);

  // Candidates sorted by logit, descending; top-k first to keep the sort small.
  cand_.clear();
  cand_.reserve(size_t(vocab));
  for (int32_t i = 0; i < vocab; ++i) cand_.emplace_back(logits[size_t(i)] / p_.temperature, i);
  size_t k = cand_.size();
  if (p_.top_k > 0 && size_t(p_.top_k) < k) k = size_t(p_.top_k);
  std::partial_sort(cand_.begin(), cand_.begin() + long(k), cand_.end(),
                    [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
  cand_.resize(k);
  const float mx = cand_[0].first;
  double sum = 0;
  std::vector<double> prob(k);
  for (size_t i = 0; i < k; ++i) sum += prob[i] = std::exp(double(cand_[i].first - mx));
  for (double& q : prob) q /= sum;
  // min-p: drop tokens with probability below min_p * p(max).
  size_t keep = k;
  if (p_.min_p > 0.0f) {
    const double floor = p_.min_p * prob[0];
    keep = 1;
    while (keep < k && prob[keep] >= floor) ++keep;
  }
  // top-p: smallest prefix whose mass reaches top_p.
  if (p_.top_p < 1.0f) {
    double cum = 0;
    size_t n = 0;
    while (n < keep) {
      cum += prob[n++];
      if (cum >= p_.top_p) break;
    }
    keep = std::max<size_t>(1, n);
  }
  double mass = 0;
  for (size_t i = 0; i < keep; ++i) mass += prob[i];
  double r = std::uniform_real_distribution<double>(0.0, mass)(rng_);
  for (size_t i = 0; i < keep; ++i) {
    r -= prob[i];
    if (r <= 0) return cand_[i].second;
  }
  return cand_[keep - 1].second;
}

TokenLogprob token_logprob(std::span<const float> logits, int32_t token, int top_n) {
  const float mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(double(l) - double(mx));
  const double lse = double(mx) + std::log(sum);
  TokenLogprob r;
  r.token = token;
  r.logprob = float(double(logits[size_t(token)]) - lse);
  const size_t k = std::min(logits.size(), size_t(std::max(0, top_n)));
  if (k > 0) {
    std::vector<int32_t> ids(logits.size());
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i);
    std::partial_sort(ids.begin(), ids.begin() + long(k), ids.end(), [&](int32_t a, int32_t b) {
      return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b);
    });
    for (size_t i = 0; i < k; ++i) r.top.emplace_back(ids[i], float(double(logits[size_t(ids[i])]) - lse));
  }
  return r;
}

}  // namespace ninfer
