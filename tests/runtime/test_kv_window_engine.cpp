// The exact KV window through the engine: window slots per sequence (batched sequences do not
// see each other's window, slots grow past the planned count), the capacity line's window
// bytes by hand, the perplexity reference without a window, and the refusals that name flags.
//   ref-qwen3-d256: 6 layers, 2 KV heads, head_dim 256. sink 4 / recent 64: 1 + (1 + 1) = 3
//   pages per slot = 3 * 64 * 6 * 2 * 256 * 2 (K, V) * 2 B = 2,359,296 B.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "kv/kv_window.h"
#include "runtime/engine.h"
#include "test_paths.h"

namespace ninfer {
namespace {

std::unique_ptr<Engine> make(int sink, int recent, int max_sequences = 2) {
  EngineOptions o;
  o.device = "cpu";
  o.kv_dtype = "rk2v4-e8";
  o.kv_sink = sink;
  o.kv_recent = recent;
  o.max_context = 512;
  o.max_sequences = max_sequences;
  o.page_shuffle_seed = 5;
  o.quiet = true;
  return Engine::create(test::model_dir("ref-qwen3-d256"), o);
}

std::vector<int32_t> prompt(int n, int salt) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(int32_t(3 + (i * 131 + salt * 977) % 8000));
  return t;
}

TEST(EngineKvWindow, CapacityLineCountsTheWindow) {
  NINFER_REQUIRE_MODEL("ref-qwen3-d256");
  auto e = make(4, 64);
  EXPECT_EQ(kv_window_slot_bytes(e->kv_window(), 6, 2, 256), size_t(2359296));
  EXPECT_EQ(e->kv_window(), (KvWindow{4, 64}));
  EXPECT_NE(e->capacity_line().find("rk2v4-e8 + exact sink 4 / recent 64"), std::string::npos) << e->capacity_line();
  EXPECT_NE(e->capacity_line().find("| window 2 x 2.2 MiB |"), std::string::npos) << e->capacity_line();
  EXPECT_FALSE(e->prefix_cache_enabled());
  // -1 / -1 (the CLI without flags) gives rk2v4-e8 its default; 0 / 0 turns the window off.
  EXPECT_EQ(make(-1, -1)->kv_window(), (KvWindow{0, 128}));
  auto off = make(0, 0);
  EXPECT_FALSE(off->kv_window().on());
  EXPECT_EQ(off->capacity_line().find("window"), std::string::npos);
  // With the prefix cache requested the default falls back to none (the cache stays on);
  // explicit flags keep the window and turn the cache off.
  EngineOptions o;
  o.device = "cpu";
  o.kv_dtype = "rk2v4-e8";
  o.max_context = 512;
  o.prefix_cache = true;
  o.kv_sink = o.kv_recent = -1;  // the format's default, as the CLI asks
  o.quiet = true;
  auto cached = Engine::create(test::model_dir("ref-qwen3-d256"), o);
  EXPECT_FALSE(cached->kv_window().on());
  EXPECT_TRUE(cached->prefix_cache_enabled());
  o.kv_recent = 64;
  auto windowed = Engine::create(test::model_dir("ref-qwen3-d256"), o);
  EXPECT_EQ(windowed->kv_window(), (KvWindow{0, 64}));
  EXPECT_FALSE(windowed->prefix_cache_enabled());
}

// Three sequences (one more than planned) decoded in one batch give each the logits it gets
// alone: the window slots are separate.
TEST(EngineKvWindow, BatchedSequencesKeepTheirOwnWindows) {
  NINFER_REQUIRE_MODEL("ref-qwen3-d256");
  auto e = make(4, 64);
  const int n = 150;
  std::vector<std::vector<float>> alone(3);
  for (int s = 0; s < 3; ++s) {
    const int32_t seq = e->new_sequence();
    const std::vector<int32_t> p = prompt(n, s);
    std::vector<float> lg;
    e->prefill(seq, std::span<const int32_t>(p.data(), size_t(n - 10)), lg);
    for (int i = n - 10; i < n; ++i) {
      StepItem it{seq, std::span<const int32_t>(&p[size_t(i)], 1), false};
      e->step({&it, 1}, lg);
    }
    alone[size_t(s)] = lg;
    e->free_sequence(seq);
  }
  std::vector<int32_t> seqs;
  std::vector<std::vector<int32_t>> ps;
  for (int s = 0; s < 3; ++s) {
    seqs.push_back(e->new_sequence());
    ps.push_back(prompt(n, s));
    std::vector<float> lg;
    e->prefill(seqs.back(), std::span<const int32_t>(ps.back().data(), size_t(n - 10)), lg);
  }
  std::vector<float> lg;
  for (int i = n - 10; i < n; ++i) {
    std::vector<StepItem> items;
    for (int s = 0; s < 3; ++s) items.push_back({seqs[size_t(s)], std::span<const int32_t>(&ps[size_t(s)][size_t(i)], 1), false});
    e->step(items, lg);
  }
  const size_t V = alone[0].size();
  ASSERT_EQ(lg.size(), 3 * V);
  for (int s = 0; s < 3; ++s) {
    double worst = 0;
    for (size_t i = 0; i < V; ++i) worst = std::max(worst, std::fabs(double(lg[size_t(s) * V + i]) - alone[size_t(s)][i]));
    // NOTE: the CPU's kernels are batch-invariant (NOTES.md), so only fp32 noise could differ.
    EXPECT_LT(worst, 1e-4) << "sequence " << s;
  }
}

TEST(EngineKvWindow, RefusalsNameTheFlag) {
  NINFER_REQUIRE_MODEL("ref-qwen3-d256");
  try {
    make(-7, 0);
    ADD_FAILURE() << "no error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("--kv-sink"), std::string::npos) << err.what();
  }
  auto e = make(4, 64);
  const int32_t seq = e->new_sequence();
  std::vector<float> lg;
  const std::vector<int32_t> p = prompt(64, 1);
  e->prefill(seq, p, lg);
  try {
    e->extend_by_repeating(seq, 256);
    ADD_FAILURE() << "no error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("--kv-sink"), std::string::npos) << err.what();
  }
}

}  // namespace
}  // namespace ninfer
