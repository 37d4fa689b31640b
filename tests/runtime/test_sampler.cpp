// Sampler: greedy, seeded reproducibility, the sampled distribution against the softmax
// computed here in double, and each truncation rule's support.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "core/error.h"
#include "runtime/sampler.h"

namespace ninfer {
namespace {

std::map<int32_t, int> histogram(const SamplingParams& p, std::vector<float> logits, int n,
                                 std::vector<int32_t> history = {}) {
  Sampler s(p);
  std::map<int32_t, int> h;
  for (int i = 0; i < n; ++i) {
    std::vector<float> l = logits;
    ++h[s.sample(l, history)];
  }
  return h;
}

TEST(Sampler, GreedyIsArgmax) {
  SamplingParams p;
  Sampler s(p);
  std::vector<float> l = {0.1f, 2.0f, -1.0f, 1.99f};
  EXPECT_EQ(s.sample(l, {}), 1);
}

TEST(Sampler, SeededRunsRepeat) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 42;
  std::vector<float> l(50);
  for (int i = 0; i < 50; ++i) l[size_t(i)] = std::sin(float(i));
  auto a = histogram(p, l, 200), b = histogram(p, l, 200);
  EXPECT_EQ(a, b);
  p.seed = 43;
  EXPECT_NE(a, histogram(p, l, 200));
}

TEST(Sampler, TemperatureOneMatchesSoftmax) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 7;
  std::vector<float> l = {1.0f, 0.0f, -1.0f, 0.5f};
  const int n = 40000;
  auto h = histogram(p, l, n);
  double z = 0;
  for (float v : l) z += std::exp(double(v));
  for (int i = 0; i < 4; ++i) {
    const double pi = std::exp(double(l[size_t(i)])) / z;
    const double sd = std::sqrt(pi * (1 - pi) / n);
    EXPECT_NEAR(double(h[i]) / n, pi, 5 * sd) << "token " << i;  // 5 sigma: flake odds < 1e-6
  }
}

TEST(Sampler, TopKTopPMinPSupport) {
  // probabilities 0.5, 0.3, 0.15, 0.05 (logits = log p)
  std::vector<float> l = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 2;
  auto h = histogram(p, l, 2000);
  EXPECT_EQ(h.size(), 2u);
  EXPECT_TRUE(h.count(0) && h.count(1));
  p = {};
  p.temperature = 1.0f;
  p.top_p = 0.85f;  // 0.5 + 0.3 = 0.8 < 0.85: three tokens
  h = histogram(p, l, 4000);
  EXPECT_EQ(h.size(), 3u);
  EXPECT_FALSE(h.count(3));
  p = {};
  p.temperature = 1.0f;
  p.min_p = 0.5f;  // keep p >= 0.25: tokens 0 and 1
  h = histogram(p, l, 2000);
  EXPECT_EQ(h.size(), 2u);
}

TEST(Sampler, PenaltiesChangeTheArgmax) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;  // 3.0 -> 1.5 for a token already seen
  Sampler s(p);
  std::vector<float> l = {3.0f, 2.0f};
  EXPECT_EQ(s.sample(l, std::vector<int32_t>{0}), 1);
  SamplingParams q;
  q.presence_penalty = 0.5f;
  q.frequency_penalty = 0.3f;  // token 0 seen twice: 3.0 - 0.5 - 0.6 = 1.9 < 2.0
  Sampler s2(q);
  std::vector<float> l2 = {3.0f, 2.0f};
  EXPECT_EQ(s2.sample(l2, std::vector<int32_t>{0, 0}), 1);
}

TEST(Sampler, PresenceAndFrequencyCountGeneratedTokensOnly) {
  SamplingParams p;
  p.presence_penalty = 2.0f;
  p.frequency_penalty = 2.0f;
  const std::vector<int32_t> history = {0, 0, 0, 1};  // prompt {0, 0, 0}, generated {1}
  // Token 0 is only in the prompt: unpenalised, it stays the argmax (3.0 > 2.5 - 4).
  std::vector<float> l = {3.0f, 2.5f};
  EXPECT_EQ(Sampler(p).sample(l, history, 3), 0);
  EXPECT_FLOAT_EQ(l[0], 3.0f);
  EXPECT_FLOAT_EQ(l[1], 2.5f - 2.0f - 2.0f);
  // n_prompt 0: every token counts (the CLI's behaviour): 3 - 2 - 6 < 2.5 - 4.
  std::vector<float> l2 = {3.0f, 2.5f};
  EXPECT_EQ(Sampler(p).sample(l2, history, 0), 1);
  // The repetition penalty still sees the prompt (transformers / vLLM).
  SamplingParams r;
  r.repetition_penalty = 2.0f;
  // Token 0 (prompt only) 3 -> 1.5, token 1 (generated) 2 -> 1, token 2 (unseen) stays 1.8.
  std::vector<float> l3 = {3.0f, 2.0f, 1.8f};
  EXPECT_EQ(Sampler(r).sample(l3, history, 3), 2);
  EXPECT_FLOAT_EQ(l3[0], 1.5f);
  EXPECT_FLOAT_EQ(l3[1], 1.0f);
}

TEST(Sampler, LogitBiasIsAddedFirst) {
  SamplingParams p;
  p.logit_bias = {{2, 100.0f}, {0, -1.0f}};
  std::vector<float> l = {1.0f, 0.5f, -50.0f};
  EXPECT_EQ(Sampler(p).sample(l, {}), 2);
  EXPECT_FLOAT_EQ(l[0], 0.0f);
  EXPECT_FLOAT_EQ(l[2], 50.0f);
  p.logit_bias = {{1, 101.0f}};
  EXPECT_THROW(p.validate(), Error);
  p.logit_bias = {{-1, 1.0f}};
  EXPECT_THROW(p.validate(), Error);
}

TEST(Sampler, TokenLogprobIsLogSoftmax) {
  // Integer logits: log_softmax by hand. log(e^2 + e^1 + e^0 + e^1).
  const std::vector<float> l = {2.0f, 1.0f, 0.0f, 1.0f};
  const double lse = std::log(std::exp(2.0) + 2 * std::exp(1.0) + 1.0);
  TokenLogprob t = token_logprob(l, 2, 3);
  EXPECT_EQ(t.token, 2);
  EXPECT_NEAR(t.logprob, 0.0 - lse, 1e-6);
  ASSERT_EQ(t.top.size(), 3u);
  EXPECT_EQ(t.top[0].first, 0);
  EXPECT_EQ(t.top[1].first, 1) << "ties: the lower id first";
  EXPECT_EQ(t.top[2].first, 3);
  EXPECT_NEAR(t.top[0].second, 2.0 - lse, 1e-6);
  EXPECT_TRUE(token_logprob(l, 0, 0).top.empty());
  EXPECT_EQ(token_logprob(l, 0, 10).top.size(), 4u);
}

TEST(Sampler, ValidateNamesTheField) {
  SamplingParams p;
  p.top_p = 0.0f;
  try {
    p.validate();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("top_p"), std::string::npos);
  }
  p = {};
  p.temperature = -1;
  EXPECT_THROW(p.validate(), Error);
}

}  // namespace
}  // namespace ninfer
