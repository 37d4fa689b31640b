// Token sampling: greedy (temperature 0) or temperature / top-k / top-p / min-p with
// repetition (multiplicative, as in transformers/llama.cpp), presence and frequency
// (additive, as in OpenAI) penalties, from a seeded generator so runs are reproducible.
#pragma once
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace ninfer {

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy
  int top_k = 0;             // 0: off
  float top_p = 1.0f;        // 1: off
  float min_p = 0.0f;        // 0: off
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = 0;

  // Throws ninfer::Error naming the first out-of-range field (names as on the CLI / API).
  void validate() const;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& p);
  // logits: [vocab], modified in place. history: tokens so far (prompt and generated) for
  // the penalties.
  int32_t sample(std::span<float> logits, std::span<const int32_t> history);

 private:
  SamplingParams p_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> cand_;
};

int32_t argmax(std::span<const float> logits);

}  // namespace ninfer
