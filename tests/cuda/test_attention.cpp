// Paged attention (attention.h) against an fp64 reference computed on the *decoded* cache
// (the CPU codec's decoder applied to the bytes the GPU append wrote), for bf16, int8, the
// compressed caches (int4, rk4v4-e8, rk2v4-e8: Q rotated by H_D, output rotated back by
// H_64 per group) and the minifloat caches (fp8: V not rotated; nvfp4, k8v4: V by H_64), head_dim 64/128/256, GQA ratios 1, 3, 4, 8, decode-class and prefill-class chunks in one
// batch, lengths at page boundaries +-1, shuffled page tables, forced and automatic KV splits.
//
// Tolerance (derived): the kernel rounds Q to bf16 (relative 2^-9), P to bf16 (2^-9), and
// int8 and compressed values to bf16 after dequantisation (2^-9; the compressed prefill
// kernel is otherwise the bf16 one); it accumulates in fp32. The int8 decode kernel (and the
// compressed caches' decode kernel, with the same numerics: their codes are exact small
// integers, offsets added back exactly) instead quantises Q to int8 per (row, 64-group) (step
// amax/127: at most 1/254 of the group's largest |q| per element, independent errors) for an exact int8 dot product with K. With |v| <= 1 an
// output element moves by at most ~2^-8 from the P and V roundings; the Q rounding moves a
// score by sum_i |q_i k_i| 2^-9 / sqrt(D) in the worst case but by ~sqrt(D) |q||k| 2^-9 /
// sqrt(3 D) for independent rounding errors (< 0.01 for the scales used here), which moves
// the softmax weights by the same relative amount. The minifloat decode kernel runs on fp16
// tensor cores with exact fp16 K/V values (e4m3 codes times 2^-8, e2m1 times e4m3 scale); Q
// (scaled per row by a power of two into [2^14, 2^15)) and P (fp8 V: p s_j / s_ref <= 1)
// are rounded to fp16, relative 2^-11 (absolute 2^-25 below 2^-14 for P): smaller than the
// bf16 kernel's terms. int8's decode (the register kernel) runs P V the same way: exact fp16
// V codes, P = p s_j / s_ref per 64-group rounded to fp16. Its prefill rounds fp8 values times their scale to bf16 (2^-9, as
// int8's). So the same bounds hold. So: max |err| <= 2e-2 and relative L2
// error <= 1e-2 (METHOD: bf16 operands land between 1e-3 and 1e-2). NaN fails (the output
// is poisoned with NaN before the run).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>

#include "backend/cuda/attention.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/kv_cache.h"
#include "core/error.h"
#include "attention_test_util.h"
#include "cuda_test_util.h"
#include "kv/format.h"
#include "kv/page_table.h"

namespace ninfer {
namespace {

using test::AttnCase;
using test::AttnFixture;
using test::DevBuf;
using test::SeqSpec;

class PagedAttentionTest : public ::testing::TestWithParam<AttnCase> {};

TEST_P(PagedAttentionTest, MatchesFp64ReferenceOnDecodedCache) {
  NINFER_REQUIRE_GPU();
  const AttnCase c = GetParam();
  AttnFixture fx(c);
  const cuda::CacheKind kind = fx.kind;
  SCOPED_TRACE(::testing::Message() << c.name << " seed " << fx.seed);
  int splits0 = 0, splits1 = 0;  // the splits the planner used (decode, prefill tiles)
  const std::vector<uint16_t> out = fx.run(c.forced_splits, -1, &splits0, &splits1);
  const test::AttnErr err = test::attention_error(out, test::attention_reference(fx, 0));
  ASSERT_EQ(err.n_nan, 0u) << "unwritten or NaN outputs";
  const double max_err = err.max_err, rel = err.rel;
  // The register decode kernel (int8, int4, rk4v4-e8, rk2v4-e8) quantises Q to int8: its score
  // error, and the softmax weights' with it, grows in proportion to |q|, so for queries scaled
  // past the 3.0 the budgets above assume, both budgets grow by q_scale / 3 (the peaky cases;
  // measured: rel_l2 ~ 6e-3 at 3.0, ~1.5e-2 at 8 and 12, the same with session 14's kernel).
  const bool int8_q = kind == cuda::CacheKind::Int8 || kind == cuda::CacheKind::Int4 ||
                      kind == cuda::CacheKind::Rk4 || kind == cuda::CacheKind::Rk2;
  const double grow = int8_q ? std::max(1.0, double(c.q_scale) / 3.0) : 1.0;
  EXPECT_LE(max_err, 2e-2 * grow) << "splits used: " << splits0 << "/" << splits1;
  EXPECT_LE(rel, 1e-2 * grow) << "splits used: " << splits0 << "/" << splits1;
  std::printf("[ attn ] %-28s max_err %.2e rel_l2 %.2e splits %d/%d\n", c.name, max_err, rel, splits0, splits1);
}

// Lengths at page boundaries +-1, decode (1-3 tokens) and prefill chunks mixed in one batch.
const std::vector<SeqSpec> kMixed = {{0, 1}, {62, 1}, {63, 1}, {64, 1}, {127, 2}, {200, 3}, {0, 65}, {129, 70}};
const std::vector<SeqSpec> kLong = {{5000, 1}, {4095, 1}, {3000, 2}};

INSTANTIATE_TEST_SUITE_P(
    Cases, PagedAttentionTest,
    ::testing::Values(
        AttnCase{"bf16_d128_g4_mixed", "bf16", 128, 8, 2, kMixed, 0, 3.0f},
        AttnCase{"bf16_d64_g1_mixed", "bf16", 64, 4, 4, kMixed, 0, 3.0f},
        AttnCase{"bf16_d256_g8_mixed", "bf16", 256, 16, 2, kMixed, 0, 3.0f},
        AttnCase{"bf16_d128_g3_mixed", "bf16", 128, 12, 4, kMixed, 0, 3.0f},
        AttnCase{"bf16_d128_g4_long_auto", "bf16", 128, 32, 8, kLong, 0, 3.0f},
        AttnCase{"bf16_d128_g4_long_split7", "bf16", 128, 8, 2, kLong, 7, 3.0f},
        AttnCase{"bf16_d256_g4_long_split3", "bf16", 256, 8, 2, kLong, 3, 3.0f},
        AttnCase{"bf16_d128_peaky", "bf16", 128, 8, 2, kMixed, 2, 12.0f},
        AttnCase{"int8_d128_g4_mixed", "int8", 128, 8, 2, kMixed, 0, 3.0f},
        AttnCase{"int8_d64_g1_mixed", "int8", 64, 4, 4, kMixed, 0, 3.0f},
        AttnCase{"int8_d256_g8_mixed", "int8", 256, 16, 2, kMixed, 0, 3.0f},
        AttnCase{"int8_d128_g4_long_auto", "int8", 128, 32, 8, kLong, 0, 3.0f},
        AttnCase{"int8_d256_g4_long_split5", "int8", 256, 8, 2, kLong, 5, 3.0f},
        AttnCase{"int8_d128_g4_long_vspread", "int8", 128, 32, 8, kLong, 0, 3.0f, 14.0f},
        AttnCase{"int8_d256_g8_mixed_vspread", "int8", 256, 16, 2, kMixed, 0, 3.0f, 14.0f},
        AttnCase{"int8_d64_g3_long_split3_vspread", "int8", 64, 12, 4, kLong, 3, 3.0f, 14.0f},
        AttnCase{"fp8_d128_g4_long_vspread", "fp8", 128, 32, 8, kLong, 0, 3.0f, 14.0f},
        AttnCase{"rk4v4_e8_d128_g4_long_vspread", "rk4v4-e8", 128, 32, 8, kLong, 0, 3.0f, 14.0f},
        AttnCase{"int4_d128_g4_mixed", "int4", 128, 8, 2, kMixed, 0, 3.0f},
        AttnCase{"int4_d64_g1_long_split3", "int4", 64, 4, 4, kLong, 3, 3.0f},
        AttnCase{"rk4v4_e8_d128_g4_mixed", "rk4v4-e8", 128, 8, 2, kMixed, 0, 3.0f},
        AttnCase{"rk4v4_e8_d64_g1_mixed", "rk4v4-e8", 64, 4, 4, kMixed, 0, 3.0f},
        AttnCase{"rk4v4_e8_d256_g8_mixed", "rk4v4-e8", 256, 16, 2, kMixed, 0, 3.0f},
        AttnCase{"rk4v4_e8_d128_g4_long_auto", "rk4v4-e8", 128, 32, 8, kLong, 0, 3.0f},
        AttnCase{"rk4v4_e8_d128_g4_split7", "rk4v4-e8", 128, 8, 2, kMixed, 7, 3.0f},
        AttnCase{"rk2v4_e8_d128_g4_mixed", "rk2v4-e8", 128, 8, 2, kMixed, 0, 3.0f},
        AttnCase{"rk2v4_e8_d64_g3_mixed", "rk2v4-e8", 64, 12, 4, kMixed, 0, 3.0f},
        AttnCase{"rk2v4_e8_d256_g8_mixed", "rk2v4-e8", 256, 16, 2, kMixed, 0, 3.0f},
        AttnCase{"rk2v4_e8_d256_g4_long_split5", "rk2v4-e8", 256, 8, 2, kLong, 5, 3.0f},
        AttnCase{"fp8_d128_g4_mixed", "fp8", 128, 8, 2, kMixed, 0, 3.0f},
        AttnCase{"fp8_d64_g1_mixed", "fp8", 64, 4, 4, kMixed, 0, 3.0f},
        AttnCase{"fp8_d256_g8_mixed", "fp8", 256, 16, 2, kMixed, 0, 3.0f},
        AttnCase{"fp8_d128_g4_long_auto", "fp8", 128, 32, 8, kLong, 0, 3.0f},
        AttnCase{"fp8_d256_g4_long_split5", "fp8", 256, 8, 2, kLong, 5, 3.0f},
        AttnCase{"fp8_d128_peaky", "fp8", 128, 8, 2, kMixed, 2, 12.0f},
        AttnCase{"nvfp4_d128_g4_mixed", "nvfp4", 128, 8, 2, kMixed, 0, 3.0f},
        AttnCase{"nvfp4_d64_g3_mixed", "nvfp4", 64, 12, 4, kMixed, 0, 3.0f},
        AttnCase{"nvfp4_d256_g8_mixed", "nvfp4", 256, 16, 2, kMixed, 0, 3.0f},
        AttnCase{"nvfp4_d128_g4_long_split7", "nvfp4", 128, 8, 2, kLong, 7, 3.0f},
        AttnCase{"k8v4_d128_g4_mixed", "k8v4", 128, 8, 2, kMixed, 0, 3.0f},
        AttnCase{"k8v4_d64_g1_long_split3", "k8v4", 64, 4, 4, kLong, 3, 3.0f},
        AttnCase{"k8v4_d256_g8_mixed", "k8v4", 256, 16, 2, kMixed, 0, 3.0f},
        AttnCase{"k8v4_d128_g4_long_auto", "k8v4", 128, 32, 8, kLong, 0, 3.0f},
        // The register-decode kernel's other paths: int4 at 256, E8 K at 256 with splits, more
        // splits (100) than pages in some sequences (empty splits in the merge).
        AttnCase{"int4_d256_g8_mixed", "int4", 256, 16, 2, kMixed, 0, 3.0f},
        AttnCase{"rk4v4_e8_d256_g4_long_split5", "rk4v4-e8", 256, 8, 2, kLong, 5, 3.0f},
        AttnCase{"rk2v4_e8_d128_g4_long_split100", "rk2v4-e8", 128, 8, 2, kLong, 100, 3.0f},
        // The minifloat kernel through the shared merge with more than 64 splits.
        AttnCase{"fp8_d128_g4_long_split100", "fp8", 128, 8, 2, kLong, 100, 3.0f},
        // Wider score ranges over long walks: a row's running maximum climbs by ~7 (q_scale 8)
        // and ~11 (12) log2 units after its first slice, so the register decode kernel runs
        // both its slices that keep a stale maximum (P up to 2^kSlack) and its rescales.
        AttnCase{"rk2v4_e8_d128_g4_long_peaky8", "rk2v4-e8", 128, 8, 2, kLong, 0, 8.0f},
        AttnCase{"rk2v4_e8_d128_g4_long_peaky12", "rk2v4-e8", 128, 8, 2, kLong, 3, 12.0f},
        AttnCase{"rk2v4_e8_d256_g4_long_peaky8", "rk2v4-e8", 256, 8, 2, kLong, 5, 8.0f},
        AttnCase{"int4_d128_g4_long_peaky8", "int4", 128, 8, 2, kLong, 0, 8.0f},
        AttnCase{"rk4v4_e8_d128_g4_long_peaky12", "rk4v4-e8", 128, 8, 2, kLong, 7, 12.0f}),
    [](const auto& info) { return std::string(info.param.name); });

// The register decode kernel's grid capped at fewer CTAs per SM than fit (dynamic shared
// memory, attention.cu pad_for_ctas_per_sm) computes the same bits as uncapped, and a cap of
// 1 and 2 per SM both launch (the padding fits the device's limits); so does loading the
// first pages before the kernel's wait (run's history_ready). Cases: every register-decode
// format, head_dim 64, 128, 256.
TEST(PagedAttentionProps, CtaCapChangesNoBit) {
  NINFER_REQUIRE_GPU();
  const std::vector<AttnCase> cases = {
      AttnCase{"rk2v4_e8_d128_g4_long_auto", "rk2v4-e8", 128, 32, 8, kLong, 0, 3.0f},
      AttnCase{"rk2v4_e8_d256_g8_long_split9", "rk2v4-e8", 256, 16, 2, kLong, 9, 3.0f},
      AttnCase{"rk4v4_e8_d64_g1_mixed_split3", "rk4v4-e8", 64, 4, 4, kMixed, 3, 3.0f},
      AttnCase{"int4_d256_g4_long_split5", "int4", 256, 8, 2, kLong, 5, 3.0f},
      AttnCase{"int8_d128_g3_long_split7", "int8", 128, 12, 4, kLong, 7, 3.0f, 14.0f},
  };
  for (const AttnCase& c : cases) {
    SCOPED_TRACE(c.name);
    AttnFixture fx(c);
    const std::vector<uint16_t> base = fx.run(c.forced_splits, 0);
    const size_t unwritten = size_t(std::count_if(base.begin(), base.end(), [](uint16_t b) {
      return std::isnan(test::bf16f(b));
    }));
    ASSERT_EQ(unwritten, 0u) << "NaN or unwritten outputs in the uncapped run";
    EXPECT_EQ(fx.run(c.forced_splits, 1), base) << "capped at 1 CTA per SM";
    EXPECT_EQ(fx.run(c.forced_splits, 2), base) << "capped at 2 CTAs per SM";
    fx.history_ready = true;
    EXPECT_EQ(fx.run(c.forced_splits, 0), base) << "first pages read before the wait (history_ready)";
    fx.q_ready = true;
    EXPECT_EQ(fx.run(c.forced_splits, 0), base) << "and the prologue before it (q_ready)";
    fx.q_ready = false;
  }
}

// Batch invariance of the kernel: a sequence's output does not depend on what else is in
// the batch or on the physical pages (bitwise, same number of splits).
TEST(PagedAttentionProps, ResultIndependentOfBatchAndPagePlacement) {
  NINFER_REQUIRE_GPU();
  const int d = 128, nh = 8, nkv = 2, n_ctx = 300;
  const size_t blk = cuda::cache_block_bytes(cuda::CacheKind::Bf16, d, 0);
  const int n_pages = 16;
  std::vector<float> kv = test::random_floats(size_t(n_ctx) * 2 * nkv * d, 99);
  std::vector<float> q = test::random_floats(size_t(2) * nh * d, 100);
  DevBuf<float> d_kv, d_q;
  d_kv.upload(kv);
  d_q.upload(q);
  auto run = [&](const std::vector<int32_t>& table, bool with_other) {
    DevBuf<uint8_t> kp(size_t(n_pages) * nkv * blk), vp(size_t(n_pages) * nkv * blk);
    kp.zero();
    vp.zero();
    std::vector<int32_t> page, slot;
    for (int p = 0; p < n_ctx; ++p) {
      page.push_back(table[size_t(p / 64)]);
      slot.push_back(p % 64);
    }
    DevBuf<int32_t> dp, ds;
    dp.upload(page);
    ds.upload(slot);
    test::append_kv_rows(d_kv.get(), n_ctx, nkv, d, cuda::CacheKind::Bf16, false, dp.get(), ds.get(), kp.get(),
                         vp.get());
    cuda::PagedAttention attn(cuda::AttnShape{nh, nkv, d, cuda::CacheKind::Bf16, 0, 0});
    attn.force_splits(2);
    std::vector<cuda::AttnSeq> seqs;
    seqs.push_back({0, 1, n_ctx - 1, table.data(), int(table.size())});
    if (with_other) seqs.push_back({1, 1, 10, table.data(), 1});
    attn.plan(seqs.data(), int(seqs.size()), 2, nullptr);
    DevBuf<uint16_t> out(size_t(2) * nh * d);
    out.poison();
    attn.run(d_q.get(), nh * d, kp.get(), vp.get(), out.get(), nh * d, nullptr);
    std::vector<uint16_t> o = out.download();
    o.resize(size_t(nh) * d);
    return o;
  };
  const std::vector<int32_t> ident = {0, 1, 2, 3, 4}, shuffled = {9, 2, 14, 5, 7};
  const auto a = run(ident, false), b = run(shuffled, false), c2 = run(ident, true);
  EXPECT_EQ(a, b) << "physical page placement changed the result";
  EXPECT_EQ(a, c2) << "another sequence in the batch changed the result";
}

// bench --attention --splits: the split count reaches the kernels (the bench reports what the
// planner used), and a count the merge cannot take is refused by name.
TEST(AttentionBench, ForcedSplitsReachTheKernelsAndBadOnesAreRefused) {
  NINFER_REQUIRE_GPU();
  AttentionBenchConfig cfg;
  cfg.kv_dtype = "rk4v4-e8";
  cfg.ctx = 4096;
  cfg.batch = 1;
  cfg.n_heads = 16;
  cfg.n_kv_heads = 2;
  cfg.head_dim = 256;
  cfg.repeats = 3;
  for (int s : {1, 8, 64}) {
    cfg.splits = s;
    EXPECT_EQ(cuda_bench_decode_attention(cfg).splits, s) << "forced " << s;
  }
  // The planner's own counts leave no split empty: each split walks ceil(pages / splits)
  // pages, so with one split too many the last gets none (32K at 32/8/128: 33 planned
  // splits, 32 of 16 pages).
  for (const char* fmt : {"int4", "rk2v4-e8"})
    for (const auto& [hq, hkv, d] : {std::tuple{32, 8, 128}, std::tuple{16, 2, 256}})
      for (int ctx : {32768, 20000, 4097}) {
        AttentionBenchConfig pc = cfg;
        pc.kv_dtype = fmt;
        pc.n_heads = hq;
        pc.n_kv_heads = hkv;
        pc.head_dim = d;
        pc.ctx = ctx;
        pc.splits = 0;
        const int s = cuda_bench_decode_attention(pc).splits;
        const int pages = (ctx + kPageSize - 1) / kPageSize, pps = (pages + s - 1) / s;
        EXPECT_GE(s, 1);
        EXPECT_LT((s - 1) * pps, pages) << fmt << " " << hq << "/" << hkv << "/" << d << " ctx " << ctx << ": "
                                        << s << " splits of " << pps << " pages";
      }
  cfg.splits = cuda::kMaxSplits + 1;
  try {
    cuda_bench_decode_attention(cfg);
    ADD_FAILURE() << "--splits 129 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--splits 129"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ninfer
