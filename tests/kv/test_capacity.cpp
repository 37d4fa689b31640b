// Capacity planning against hand-computed numbers for real model shapes (Llama-3-8B,
// Qwen3-32B configs in tests/data/configs). Hand arithmetic, written out:
//   Llama-3-8B params = 32 * (4096*4096*2 + 2*4096*1024 + 3*4096*14336 + 2*4096)
//                       + 2 * 128256*4096 + 4096 = 8,030,261,248 -> bf16 weights 16,060,522,496 B
//   workspace = 256 MiB + 512 MiB (prefill scratch) + 512 * (3*4096 + 2*4096 + 2*1024 + 2*14336 + 128256) * 4
//             = 1,172,832,256 B
//   24 GiB: headroom = 25,769,803,776 / 25 = 1,030,792,151 B;
//           available = 25,769,803,776 - 16,060,522,496 - 1,172,832,256 - 1,030,792,151
//                     = 7,505,656,873 B
//   bf16 KV per token = 32 layers * 8 heads * 128 * 2 (K,V) * 2 B = 131,072 B; page = 8 MiB
//           -> 894 pages = 57,216 tokens
//   int8 (264 B/head-token at D=128): 67,584 B/token -> 1,735 pages = 111,040 tokens
//   rk2v4-e8 (104 B/head-token): 26,624 B/token -> 4,404 pages = 281,856 tokens
//   Llama-3-8B projections: 32 * (2*4096*4096 + 2*1024*4096 + 3*4096*14336) = 6,979,321,856
//   params over 1,376,256 rows (32 * (4096 + 2*1024 + 4096 + 3 * ... 14336 + 14336 + 4096)),
//   the rest (embeddings, norms) 1,050,939,392 params as bf16 = 2,101,878,784 B:
//     --weights int4 (g128): codes 3,489,660,928 + params / 128 * (4 B scale + 1 B zero)
//                            272,629,760 + 2,101,878,784 = 5,864,169,472 B
//     --weights fp8 / int8:  codes 6,979,321,856 + 1,376,256 rows * 4 B + 2,101,878,784 = 9,086,705,664 B
//     fp8 checkpoint, 128 x 128 blocks: codes + params / 16384 * 4 B + 2,101,878,784 = 9,082,904,576 B
//   Qwen3-32B params = 32,762,123,264 (64 layers, q/k norms); at 80 GiB:
//   bf16 932 pages = 59,648 tokens; int8 1,808 pages; rk2v4-e8 4,591 pages; at 24 GiB nothing fits.
//   Phi-3-mini-4k (head_dim 96; tests/data/configs/phi3-mini.json) params = 32 * (3072*9216 + 3072*3072
//     + 3072*16384 + 8192*3072 + 2*3072) + 2 * 32064*3072 + 3072 = 3,821,079,552 -> 7,642,159,104 B;
//   the GPU stores its heads zero-padded to 128 (cuda_kv_head_dim):
//   workspace = 768 MiB + 512 * ((3*3072 + 2*3072 + 2*3072 + 2*8192 + 32064) * 4
//               + (32 + 2*32) * 128 * 4 + 32 * 128 * 2) = 805,306,368 + 512 * 337,152 = 977,928,192 B
//   24 GiB: available = 25,769,803,776 - 7,642,159,104 - 977,928,192 - 1,030,792,151 = 16,118,924,329 B
//   bf16 KV per token, 96-wide rows (the CPU) = 32 * 32 * 96 * 2 * 2 = 393,216 B; 128-wide (the GPU)
//   = 524,288 B, a page 32 MiB -> 480 pages = 30,720 tokens (640 pages at the CPU's width).
#include <gtest/gtest.h>

#include "core/error.h"
#include "kv/capacity.h"
#include "kv/page_table.h"
#include "model/config.h"
#include "model/weight_format.h"

#include <nlohmann/json.hpp>
#include "test_paths.h"

namespace ninfer {
namespace {

ModelConfig cfg(const std::string& name) {
  std::filesystem::path p = test::test_data_dir() / "configs" / (name + ".json");
  return parse_model_config(read_file(p), p.string());
}

int64_t pages_at(const ModelConfig& c, const char* fmt, size_t memory, const WeightFormat* at_load = nullptr) {
  CapacityInputs in;
  in.memory = memory;
  in.weights = device_weight_bytes(c, at_load);
  in.workspace = workspace_estimate(c, 512);
  in.page_bytes = kv_bytes_per_token(c, find_kv_format(fmt)) * kPageSize;
  in.max_context = 4096;
  return plan_capacity(in).pages;
}

constexpr size_t GiB = size_t(1) << 30;

TEST(Capacity, Llama3_8B) {
  ModelConfig c = cfg("llama3-8b");
  EXPECT_EQ(c.n_params(), 8030261248);
  EXPECT_EQ(device_weight_bytes(c), 16060522496u);
  EXPECT_EQ(workspace_estimate(c, 512), 1172832256u);
  EXPECT_EQ(capacity_headroom(24 * GiB), 1030792151u);
  EXPECT_EQ(kv_bytes_per_token(c, find_kv_format("bf16")), 131072u);
  EXPECT_EQ(pages_at(c, "bf16", 24 * GiB), 894);
  EXPECT_EQ(pages_at(c, "int8", 24 * GiB), 1735);
  EXPECT_EQ(pages_at(c, "rk2v4-e8", 24 * GiB), 4404);
  EXPECT_EQ(pages_at(c, "bf16", 80 * GiB), 7776);
}

TEST(Capacity, QuantisedWeightsCountTheirRealBytes) {
  ModelConfig c = cfg("llama3-8b");
  EXPECT_EQ(device_weight_bytes(c, parse_weights_option("int4")), 5864169472u);
  EXPECT_EQ(device_weight_bytes(c, parse_weights_option("fp8")), 9086705664u);
  EXPECT_EQ(device_weight_bytes(c, parse_weights_option("int8")), 9086705664u);
  EXPECT_EQ(device_weight_bytes(c, parse_weights_option("bf16")), 16060522496u);
  EXPECT_GT(pages_at(c, "bf16", 24 * GiB, parse_weights_option("int4")), 2 * pages_at(c, "bf16", 24 * GiB));
  // The same shape as an fp8 block-wise checkpoint (Qwen3-*-FP8's quantization_config).
  std::filesystem::path p = test::test_data_dir() / "configs" / "llama3-8b.json";
  nlohmann::json j = nlohmann::json::parse(read_file(p));
  j["quantization_config"] = {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"weight_block_size", {128, 128}}};
  EXPECT_EQ(device_weight_bytes(parse_model_config(j.dump(), p.string())), 9082904576u);
}

TEST(Capacity, Qwen3_32B) {
  ModelConfig c = cfg("qwen3-32b");
  EXPECT_EQ(c.n_params(), 32762123264);
  EXPECT_EQ(pages_at(c, "bf16", 80 * GiB), 932);
  EXPECT_EQ(pages_at(c, "int8", 80 * GiB), 1808);
  EXPECT_EQ(pages_at(c, "rk2v4-e8", 80 * GiB), 4591);
  EXPECT_THROW(pages_at(c, "bf16", 24 * GiB), Error);  // weights alone exceed 24 GiB
}

TEST(Capacity, GpuHeadDims) {
  for (int d : {64, 128, 256}) EXPECT_EQ(cuda_kv_head_dim(d), d);
  EXPECT_EQ(cuda_kv_head_dim(96), 128);
  for (int d : {8, 32, 80, 112, 160, 192, 512}) EXPECT_EQ(cuda_kv_head_dim(d), 0) << d;
}

// The GPU pool of a head_dim 96 model holds 128-wide rows: its pages, and so its capacity, are
// counted at that width (the hand arithmetic at the top).
TEST(Capacity, Phi3MiniPaddedOnTheGpu) {
  ModelConfig c = cfg("phi3-mini");
  ASSERT_EQ(c.head_dim, 96);
  EXPECT_EQ(c.n_params(), 3821079552);
  EXPECT_EQ(device_weight_bytes(c), 7642159104u);
  EXPECT_EQ(workspace_estimate(c, 512), 977928192u);
  const KvFormat& bf16 = find_kv_format("bf16");
  EXPECT_EQ(kv_bytes_per_token(c, bf16), 393216u);
  EXPECT_EQ(kv_bytes_per_token(c, bf16, cuda_kv_head_dim(c.head_dim)), 524288u);
  EXPECT_EQ(kv_page_bytes(c, bf16, cuda_kv_head_dim(c.head_dim)), size_t(32) << 20);
  CapacityInputs in;
  in.memory = 24 * GiB;
  in.weights = device_weight_bytes(c);
  in.workspace = workspace_estimate(c, 512);
  in.max_context = 4096;
  in.page_bytes = kv_page_bytes(c, bf16, cuda_kv_head_dim(c.head_dim));
  EXPECT_EQ(plan_capacity(in).pages, 480);
  in.page_bytes = kv_page_bytes(c, bf16);
  EXPECT_EQ(plan_capacity(in).pages, 640);
}

TEST(Capacity, ExplicitCapacityRoundsUpAndIsChecked) {
  CapacityInputs in;
  in.memory = 8 * GiB;
  in.page_bytes = 1 << 20;
  in.max_context = 1000;
  in.kv_capacity = 1000;  // 16 pages (15.6 rounded up)
  CapacityPlan p = plan_capacity(in);
  EXPECT_EQ(p.pages, 16);
  EXPECT_EQ(p.tokens, 1024);
  EXPECT_FALSE(p.automatic);
  in.kv_capacity = 500;  // cannot hold one 1000-token sequence
  EXPECT_THROW(plan_capacity(in), Error);
  in.kv_capacity = 64 * 8000;  // 8000 pages of 1 MiB > 8 GiB - headroom
  EXPECT_THROW(plan_capacity(in), Error);
}

TEST(Capacity, LineAndParsing) {
  CapacityPlan p;
  p.tokens = 181568;
  p.pages = 2837;
  p.pages_fit = 4096;
  p.runtime_bytes = size_t(7.31 * double(GiB));
  p.free_bytes = size_t(2.30 * double(GiB));
  p.automatic = true;
  EXPECT_EQ(capacity_line(p, find_kv_format("bf16")),
            "capacity | KV 181,568 tokens, bf16, auto | pages 2,837/4,096 | runtime 7.31 GiB | free 2.30 GiB");
  // The max-context statement: whole sequences of ceil(32,768 / 64) = 512 pages in 2,837 pages: 5;
  // one token more takes a 513th page per sequence, still 5; 1M tokens = 16,384 pages: none fits
  // (plan_capacity would have thrown; the line still says so rather than rounding up).
  p.max_context = 32768;
  EXPECT_EQ(capacity_line(p, find_kv_format("bf16")),
            "capacity | KV 181,568 tokens, bf16, auto | pages 2,837/4,096 | max-context 32,768 fits 5 sequences | "
            "runtime 7.31 GiB | free 2.30 GiB");
  p.max_context = 181568;
  EXPECT_NE(capacity_line(p, find_kv_format("bf16")).find("| max-context 181,568 fits 1 sequence |"),
            std::string::npos);
  p.max_context = 181569;
  EXPECT_NE(capacity_line(p, find_kv_format("bf16")).find("| max-context 181,569 fits 0 sequences |"),
            std::string::npos);
  EXPECT_EQ(parse_bytes("24GiB", "--memory"), 24 * GiB);
  EXPECT_EQ(parse_bytes("1.5G", "--memory"), size_t(1.5 * double(GiB)));
  EXPECT_EQ(parse_bytes("80GB", "--memory"), size_t(80e9));
  EXPECT_EQ(parse_bytes("123", "--memory"), 123u);
  EXPECT_THROW(parse_bytes("lots", "--memory"), Error);
  EXPECT_THROW(parse_bytes("12XB", "--memory"), Error);
}

TEST(PageTableTest, AllocateFreeReuseNoLeak) {
  PageTable pt(10);
  int32_t a = pt.create_sequence(), b = pt.create_sequence();
  EXPECT_TRUE(pt.reserve(a, 64));   // exactly one page
  EXPECT_EQ(pt.block_table(a).size(), 1u);
  EXPECT_TRUE(pt.reserve(a, 65));   // one past a page
  EXPECT_EQ(pt.block_table(a).size(), 2u);
  EXPECT_TRUE(pt.reserve(b, 63));
  EXPECT_EQ(pt.n_used(), 3);
  EXPECT_FALSE(pt.reserve(b, 64 * 9));  // needs 8 more, only 7 free: nothing allocated
  EXPECT_EQ(pt.n_used(), 3);
  pt.release(a);
  EXPECT_EQ(pt.n_used(), 1);
  for (int round = 0; round < 100; ++round) {
    int32_t s = pt.create_sequence();
    ASSERT_TRUE(pt.reserve(s, 64 * 9));
    pt.release(s);
  }
  EXPECT_EQ(pt.n_used(), 1);
  pt.release(b);
  EXPECT_EQ(pt.n_free(), 10);
}

}  // namespace
}  // namespace ninfer
