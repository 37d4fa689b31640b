// The exact KV window's rules (kv/kv_window.h) and its bytes in the capacity plan, against
// hand-computed values. Hand arithmetic, written out:
//   sink 16, recent 128: sink pages ceil(16/64) = 1; ring pages ceil(128/64) + 1 = 3; 4 pages.
//   A page is compressed once (b + 1) * 64 <= n - 128: page 0 at n = 192, page 1 at n = 256.
//   Llama-3-8B (32 layers, 8 KV heads, head_dim 128): one slot = 4 pages * 64 tokens * 32 * 8
//   * 128 * 2 (K, V) * 2 B = 33,554,432 B = 32 MiB, i.e. 256 tokens of bf16 KV (131,072 B each).
//   24 GiB, rk2v4-e8, 4 window slots: available 7,505,656,873 - 4 * 33,554,432 = 7,371,439,145 B;
//   page 64 * 26,624 = 1,703,936 B -> 4,326 pages (4,404 without the window: test_capacity.cpp).
#include <gtest/gtest.h>

#include "core/error.h"
#include "kv/capacity.h"
#include "kv/kv_window.h"
#include "model/config.h"
#include "test_paths.h"

namespace ninfer {
namespace {

TEST(KvWindow, PagesAndBoundaryByHand) {
  const KvWindow w{16, 128};
  EXPECT_TRUE(w.on());
  EXPECT_EQ(w.sink_pages(), 1);
  EXPECT_EQ(w.ring_pages(), 3);
  EXPECT_EQ(w.exact_pages(), 4);
  // Page 0 leaves the window exactly when the sequence reaches 192 tokens (query at 191).
  EXPECT_EQ(w.boundary(191), 0);
  EXPECT_EQ(w.boundary(192), 64);
  EXPECT_EQ(w.boundary(255), 64);
  EXPECT_EQ(w.boundary(256), 128);
  EXPECT_TRUE(w.exact(20, 190));   // query at 190: n = 191, page 0 still in the window
  EXPECT_FALSE(w.exact(20, 191));  // n = 192: page 0 compressed
  EXPECT_TRUE(w.exact(15, 5000));  // the sink stays exact
  EXPECT_FALSE(w.exact(16, 5000));
  EXPECT_TRUE(w.exact(64, 191));
  // Newest tokens exact: between recent and recent + 63 of them.
  EXPECT_TRUE(w.exact(5000 - 128, 4999));
  EXPECT_EQ(w.boundary(5000), 4864);  // (5000 - 128) = 4872 -> page start 4864: 136 exact tokens
  // Slot pages: sink p < 16 on page 0; ring page 1 + (p / 64) % 3.
  EXPECT_EQ(w.page_of(15), 0);
  EXPECT_EQ(w.page_of(16), 1);   // logical page 0 in the ring
  EXPECT_EQ(w.page_of(64), 2);
  EXPECT_EQ(w.page_of(200), 1 + 3 % 3);
  // holds(): what the slot must keep once the sequence has n tokens.
  EXPECT_TRUE(w.holds(3, 1000));
  EXPECT_FALSE(w.holds(500, 1000));                 // boundary(1000) = 832
  EXPECT_TRUE(w.holds(832, 1000));
  EXPECT_FALSE(w.holds(831, 1000));
}

TEST(KvWindow, SinkAcrossPagesAndNoRecent) {
  const KvWindow w{70, 0};  // the sink spans page 0 and 6 tokens of page 1
  EXPECT_EQ(w.sink_pages(), 2);
  EXPECT_EQ(w.ring_pages(), 0);
  EXPECT_EQ(w.page_of(69), 1);
  EXPECT_TRUE(w.exact(69, 69));
  EXPECT_FALSE(w.exact(70, 70));  // no recent window: past the sink every key is compressed at once
  EXPECT_FALSE(w.holds(70, 71));
  EXPECT_FALSE(KvWindow{}.on());
  EXPECT_EQ(KvWindow{}.exact_pages(), 0);
  // recent 1: one page of ring + the page being filled.
  EXPECT_EQ((KvWindow{0, 1}).ring_pages(), 2);
  EXPECT_EQ((KvWindow{0, 64}).ring_pages(), 2);
  EXPECT_EQ((KvWindow{0, 65}).ring_pages(), 3);
}

TEST(KvWindow, BadFlagsNameTheFlag) {
  auto msg = [](int s, int r) {
    try {
      check_kv_window_flags(s, r);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(msg(-2, 0).find("--kv-sink"), std::string::npos);
  EXPECT_NE(msg(0, -5).find("--kv-recent"), std::string::npos);
  EXPECT_NE(msg(0, kMaxKvWindow + 1).find("--kv-recent"), std::string::npos);
  EXPECT_EQ(msg(-1, -1), "");  // -1: the format's default
  EXPECT_EQ(msg(64, 256), "");
  // Explicit flags override the format's default; -1 keeps it.
  EXPECT_EQ(resolve_kv_window("bf16", 8, 64), (KvWindow{8, 64}));
  EXPECT_EQ(resolve_kv_window("bf16", -1, -1), default_kv_window("bf16"));
  EXPECT_FALSE(default_kv_window("bf16").on());
  EXPECT_FALSE(default_kv_window("int8").on());
  EXPECT_FALSE(default_kv_window("rk4v4-e8").on());
  EXPECT_EQ(default_kv_window("rk2v4-e8"), (KvWindow{0, 128}));  // measured: docs/BENCHMARKS.md
  EXPECT_EQ(resolve_kv_window("rk2v4-e8", -1, 0), (KvWindow{0, 0}));
  EXPECT_EQ(resolve_kv_window("rk2v4-e8", 4, -1), (KvWindow{4, 128}));
}

TEST(KvWindowCapacity, SlotBytesAndPlanByHand) {
  std::filesystem::path p = test::test_data_dir() / "configs" / "llama3-8b.json";
  const ModelConfig c = parse_model_config(read_file(p), p.string());
  const KvWindow w{16, 128};
  const size_t slot = kv_window_slot_bytes(w, c.n_attention_layers(), c.n_kv_heads, c.head_dim);
  EXPECT_EQ(slot, size_t(33554432));
  EXPECT_EQ(slot, 256 * kv_bytes_per_token(c, find_kv_format("bf16")));
  CapacityInputs in;
  in.memory = size_t(24) << 30;
  in.weights = device_weight_bytes(c);
  in.workspace = workspace_estimate(c, 512);
  in.page_bytes = kv_page_bytes(c, find_kv_format("rk2v4-e8"));
  in.max_context = 4096;
  EXPECT_EQ(plan_capacity(in).pages, 4404);
  in.window_slots = 4;
  in.window_slot_bytes = slot;
  const CapacityPlan plan = plan_capacity(in);
  EXPECT_EQ(plan.pages, 4326);
  EXPECT_EQ(plan.runtime_bytes, in.weights + in.workspace + 4 * slot + size_t(4326) * in.page_bytes);
  const std::string line = capacity_line(plan, find_kv_format("rk2v4-e8"), w);
  EXPECT_NE(line.find("KV 276,864 tokens, rk2v4-e8 + exact sink 16 / recent 128, auto"), std::string::npos) << line;
  EXPECT_NE(line.find("| window 4 x 32.0 MiB |"), std::string::npos) << line;
}

}  // namespace
}  // namespace ninfer
