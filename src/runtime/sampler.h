// Token sampling: greedy (temperature 0) or temperature / top-k / top-p / min-p with
// logit bias (additive, OpenAI's logit_bias), repetition (multiplicative, as in
// transformers/llama.cpp), presence and frequency (additive, as in OpenAI) penalties, from a
// seeded generator so runs are reproducible. Also the log-probabilities a request can ask
// for (log_softmax of the model's logits, before any of the above).
#pragma once
#include <cstdint>
#include <random>
#include <span>
#include <utility>
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
  // (token id, bias) added to the logits before penalties and sampling; bias in [-100, 100].
  std::vector<std::pair<int32_t, float>> logit_bias;

  // Throws ninfer::Error naming the first out-of-range field (names as on the CLI / API).
  void validate() const;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& p);
  // logits: [vocab], modified in place. history: tokens so far, the first n_prompt of them
  // the prompt. The repetition penalty counts all of history (as transformers and vLLM);
  // presence and frequency penalties count only the generated tokens history[n_prompt:]
  // (as OpenAI and vLLM). n_prompt 0: every token counts as generated.
  int32_t sample(std::span<float> logits, std::span<const int32_t> history, size_t n_prompt = 0);

 private:
  SamplingParams p_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> cand_;
};

int32_t argmax(std::span<const float> logits);

// One token's log-probability under log_softmax(logits) and the top_n most likely tokens
// (descending; ties by lower id), as OpenAI's logprobs / top_logprobs report them.
struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // (token, logprob)
};
// logits: [vocab] (unmodified). Computed in double: a log-probability of a 150k-entry
// softmax keeps ~1e-6 absolute accuracy.
TokenLogprob token_logprob(std::span<const float> logits, int32_t token, int top_n);

}  // namespace ninfer
