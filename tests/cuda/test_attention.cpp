// Paged attention (attention.h) against an fp64 reference computed on the *decoded* cache
// (the CPU codec's decoder applied to the bytes the GPU append wrote), for bf16, int8, the
// compressed caches (int4, rk4v4-e8, rk2v4-e8: Q rotated by H_D, output rotated back by
// H_64 per group) and the minifloat caches (fp8: V not rotated; nvfp4, k8v4: V by H_64), head_dim 64/128/256, GQA ratios 1, 3, 4, 8, decode-class and prefill-class chunks in one
// batch, lengths at page boundaries +-1, shuffled page tables, forced and automatic KV splits;
// sliding windows (AttnShape::window: 1, below a page, 64 +- 1, past the context, over long
// contexts with forced and automatic splits) and logit soft-capping (AttnShape::softcap: 50,
// and 5 with peaky queries), in every format at head_dim 64, 128 and 256. With a window, the
// page-table entries of the pages below the first one a chunk's rows see point at a poison page
// (every byte 0xFF: NaN scales and bf16 values), so an output is NaN if a kernel reads one.
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
// is poisoned with NaN before the run). The softcap's tanh (softcap_log2, attention.cu: a few
// 1e-7 of the cap, absolute, on a score) adds nothing measurable; it shrinks the scores' Q
// rounding errors (tanh' <= 1), so the budgets hold with it.
#include <algorithm>
#include <cmath>
#include <deque>
#include <numeric>
#include <string>
#include <tuple>

#include "backend/cuda/attention.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/kv_cache.h"
#include "core/error.h"
#include "cuda_test_util.h"
#include "kv/format.h"
#include "kv/page_table.h"

namespace ninfer {
namespace {

using test::DevBuf;

struct SeqSpec {
  int start, n_tokens;
};

struct AttnCase {
  const char* name;
  const char* fmt;
  int head_dim, n_heads, n_kv_heads;
  std::vector<SeqSpec> seqs;
  int forced_splits;  // 0: automatic
  float q_scale;      // larger: peakier softmax
  // > 0: V rows scaled by 2^-(v_spread * u), u in [0, 1] varying over the positions (tiny
  // and large V scales interleaved: the running V-scale maxima of the int8 / fp8 decode
  // kernels grow many times during a walk, and small rows' P operands go far below 1).
  float v_spread = 0.0f;
  int window = 0;         // AttnShape::window (0: none)
  float softcap = 0.0f;   // AttnShape::softcap (0: none)
};

void PrintTo(const AttnCase& c, std::ostream* os) { *os << c.name; }

class PagedAttentionTest : public ::testing::TestWithParam<AttnCase> {};

// One case's cache (appended by the GPU kernel, over stale bytes, in shuffled pages) and
// queries, and runs of the attention on them with the planner's choices or forced ones.
struct AttnFixture {
  const AttnCase& c;
  const KvFormat& fmt;
  int d, nh, nkv, g;
  uint32_t seed;
  cuda::CacheKind kind{};
  size_t kblk = 0, vblk = 0;
  int total_q = 0, q_ld = 0;
  std::vector<std::vector<int32_t>> tables;      // the pages the cache was appended to
  std::vector<std::vector<int32_t>> run_tables;  // what the attention gets: with a window, unseen pages -> poison
  std::vector<float> q;
  DevBuf<float> d_q;
  DevBuf<uint8_t> k_pool, v_pool;
  bool history_ready = false;  // run's history_ready (first pages read before the decode kernel's wait)
  bool q_ready = false;        // run's q_ready (the decode kernel's Q prologue before its wait)

  explicit AttnFixture(const AttnCase& cs)
      : c(cs), fmt(find_kv_format(cs.fmt)), d(cs.head_dim), nh(cs.n_heads), nkv(cs.n_kv_heads), g(nh / nkv),
        seed(777u + uint32_t(d * 31 + nh * 7 + nkv)) {
    if (!cuda::cache_kind_for(c.fmt, &kind)) throw std::runtime_error(std::string("no CUDA cache kind for ") + c.fmt);
    kblk = cuda::cache_block_bytes(kind, d, 0);
    vblk = cuda::cache_block_bytes(kind, d, 1);
    // Pages: every sequence gets ceil(n_ctx / 64) pages from one shuffled pool.
    int total_pages = 0, total_ctx = 0;
    for (const SeqSpec& s : c.seqs) {
      total_pages += (s.start + s.n_tokens + 63) / 64;
      total_ctx += s.start + s.n_tokens;
      total_q += s.n_tokens;
    }
    std::vector<int32_t> perm(size_t(total_pages) + 3);
    std::iota(perm.begin(), perm.end(), 0);
    std::mt19937 rng(seed);
    std::shuffle(perm.begin(), perm.end(), rng);
    const int n_pages = int(perm.size());
    const int poison_page = n_pages;  // one more page, every byte 0xFF (the class comment)
    {
      size_t next = 0;
      for (const SeqSpec& s : c.seqs) {
        const int np = (s.start + s.n_tokens + 63) / 64;
        tables.emplace_back(perm.begin() + long(next), perm.begin() + long(next) + np);
        next += size_t(np);
      }
    }
    // The first page any row of a chunk sees: that of its first token's window.
    for (size_t s = 0; s < c.seqs.size(); ++s) {
      run_tables.push_back(tables[s]);
      if (c.window <= 0) continue;
      const int pfirst = std::max(0, c.seqs[s].start - c.window + 1) / 64;
      for (int p = 0; p < pfirst; ++p) run_tables[s][size_t(p)] = poison_page;
    }
    // K/V source rows for every cached position, appended by the GPU kernel.
    const int ld = 2 * nkv * d;
    std::vector<float> kv = test::random_floats(size_t(total_ctx) * ld, seed);
    if (c.v_spread > 0.0f)
      for (int t = 0; t < total_ctx; ++t) {
        const float f = std::exp2(-c.v_spread * float((t * 37) % 101) / 100.0f);
        for (int j = nkv * d; j < ld; ++j) kv[size_t(t) * ld + size_t(j)] *= f;
      }
    std::vector<int32_t> tok_page, tok_slot;
    for (size_t s = 0; s < c.seqs.size(); ++s)
      for (int p = 0; p < c.seqs[s].start + c.seqs[s].n_tokens; ++p) {
        tok_page.push_back(tables[s][size_t(p / 64)]);
        tok_slot.push_back(p % 64);
      }
    DevBuf<float> d_kv;
    d_kv.upload(kv);
    DevBuf<int32_t> d_page, d_slot;
    d_page.upload(tok_page);
    d_slot.upload(tok_slot);
    k_pool.resize(size_t(n_pages + 1) * nkv * kblk);
    v_pool.resize(size_t(n_pages + 1) * nkv * vblk);
    // NOTE: stale finite garbage in unused slots (the kernel must mask it, not rely on zeros),
    // and the poison page (0xFF) last.
    {
      std::vector<uint8_t> junk(k_pool.size());
      for (size_t i = 0; i < junk.size(); ++i)
        junk[i] = i >= size_t(poison_page) * nkv * kblk ? 0xFF : uint8_t((i * 131 + 7) % 97);
      k_pool.upload(junk);
      junk.resize(v_pool.size());
      for (size_t i = 0; i < junk.size(); ++i)
        junk[i] = i >= size_t(poison_page) * nkv * vblk ? 0xFF : uint8_t((i * 131 + 7) % 97);
      v_pool.upload(junk);
    }
    test::append_kv_rows(d_kv.get(), total_ctx, nkv, d, kind, fmt.k.rotation == KvRotation::HadamardHead,
                         d_page.get(), d_slot.get(), k_pool.get(), v_pool.get());
    // Queries (fp32, post rope in a real forward).
    q = test::random_floats(size_t(total_q) * nh * d, seed + 1);
    for (float& v : q) v *= c.q_scale;
    q_ld = nh * d + 5 * d;  // a wider row, as in the fused qkv buffer
    std::vector<float> q_wide(size_t(total_q) * q_ld, 0.0f);
    for (int t = 0; t < total_q; ++t)
      std::copy(q.begin() + long(t) * nh * d, q.begin() + long(t + 1) * nh * d, q_wide.begin() + long(t) * q_ld);
    d_q.upload(q_wide);
  }

  // One plan and run (the output poisoned with NaN before) with the given splits (0:
  // automatic) and CTAs per SM of the register decode kernel (-1: the planner's cap, 0: none);
  // the output.
  std::vector<uint16_t> run(int splits, int cta_cap = -1, int* splits_used = nullptr, int* splits_prefill = nullptr) {
    cuda::AttnShape sh{nh, nkv, d, kind, int(fmt.k.rotation), int(fmt.v.rotation)};
    sh.window = c.window;
    sh.softcap = c.softcap;
    cuda::PagedAttention attn(sh);
    attn.force_splits(splits);
    attn.force_cta_cap(cta_cap);
    std::vector<cuda::AttnSeq> seqs;
    int tok0 = 0;
    for (size_t s = 0; s < c.seqs.size(); ++s) {
      seqs.push_back({tok0, c.seqs[s].n_tokens, c.seqs[s].start, run_tables[s].data(), int(run_tables[s].size())});
      tok0 += c.seqs[s].n_tokens;
    }
    attn.plan(seqs.data(), int(seqs.size()), total_q, nullptr);
    DevBuf<uint16_t> d_out(size_t(total_q) * nh * d);
    d_out.poison();
    attn.run(d_q.get(), q_ld, k_pool.get(), v_pool.get(), d_out.get(), nh * d, nullptr, history_ready, q_ready);
    if (splits_used) *splits_used = attn.splits(0);
    if (splits_prefill) *splits_prefill = attn.splits(1);
    return d_out.download();
  }
};

TEST_P(PagedAttentionTest, MatchesFp64ReferenceOnDecodedCache) {
  NINFER_REQUIRE_GPU();
  const AttnCase c = GetParam();
  AttnFixture fx(c);
  const KvFormat& fmt = fx.fmt;
  const int d = fx.d, nh = fx.nh, nkv = fx.nkv, g = fx.g;
  const cuda::CacheKind kind = fx.kind;
  const size_t kblk = fx.kblk, vblk = fx.vblk;
  const auto& tables = fx.tables;
  const auto& q = fx.q;
  SCOPED_TRACE(::testing::Message() << c.name << " seed " << fx.seed);
  int splits0 = 0, splits1 = 0;  // the splits the planner used (decode, prefill tiles)
  const std::vector<uint16_t> out = fx.run(c.forced_splits, -1, &splits0, &splits1);
  const std::vector<uint8_t> kh = fx.k_pool.download(), vh = fx.v_pool.download();

  // Reference on the decoded cache.
  auto decode = [&](const std::vector<uint8_t>& pool, int side, const KvSideCodec& codec, int page, int h, int slot,
                    float* dst) {
    const uint8_t* b = pool.data() + (size_t(page) * nkv + h) * (side == 0 ? kblk : vblk);
    std::vector<uint8_t> row(cuda::cache_code_bytes(kind, d, side) + cuda::cache_scale_bytes(kind, d, side));
    cuda::gather_cpu_row(kind, side, b, d, slot, row.data());
    codec.decode(row.data(), d, dst);
  };
  double err2 = 0, ref2 = 0, max_err = 0;
  int tok0 = 0;
  for (size_t s = 0; s < c.seqs.size(); ++s) {
    const int n_ctx = c.seqs[s].start + c.seqs[s].n_tokens;
    std::vector<float> K(size_t(nkv) * n_ctx * d), V(size_t(nkv) * n_ctx * d);
    for (int h = 0; h < nkv; ++h)
      for (int p = 0; p < n_ctx; ++p) {
        decode(kh, 0, fmt.k, tables[s][size_t(p / 64)], h, p % 64, K.data() + (size_t(h) * n_ctx + p) * d);
        decode(vh, 1, fmt.v, tables[s][size_t(p / 64)], h, p % 64, V.data() + (size_t(h) * n_ctx + p) * d);
      }
    for (int i = 0; i < c.seqs[s].n_tokens; ++i) {
      for (int hq = 0; hq < nh; ++hq) {
        // Keys [k0, pos]: causal, and with a window of w the keys k > pos - w (transformers'
        // sliding_window_overlay: kv_idx > q_idx - sliding_window).
        const int h = hq / g, pos = c.seqs[s].start + i;
        const int k0 = c.window > 0 ? std::max(0, pos - c.window + 1) : 0;
        std::vector<float> qr(q.begin() + (long(tok0 + i) * nh + hq) * d, q.begin() + (long(tok0 + i) * nh + hq + 1) * d);
        rotate_kv(fmt.k.rotation, qr.data(), d);
        std::vector<double> sc(static_cast<size_t>(pos + 1 - k0));
        double mx = -1e300;
        for (int p = k0; p <= pos; ++p) {
          double dot = 0;
          for (int j = 0; j < d; ++j) dot += double(qr[size_t(j)]) * K[(size_t(h) * n_ctx + p) * d + j];
          double v = dot / std::sqrt(double(d));
          if (c.softcap > 0.0f) v = double(c.softcap) * std::tanh(v / double(c.softcap));  // Gemma 2's soft cap
          sc[size_t(p - k0)] = v;
          mx = std::max(mx, v);
        }
        double den = 0;
        for (double& v : sc) den += (v = std::exp(v - mx));
        std::vector<double> o(size_t(d), 0.0);
        for (int p = k0; p <= pos; ++p)
          for (int j = 0; j < d; ++j) o[size_t(j)] += sc[size_t(p - k0)] / den * V[(size_t(h) * n_ctx + p) * d + j];
        std::vector<float> of(o.begin(), o.end());
        rotate_kv(fmt.v.rotation, of.data(), d);
        for (int j = 0; j < d; ++j) {
          const float got = test::bf16f(out[(size_t(tok0 + i) * nh + hq) * d + j]);
          ASSERT_FALSE(std::isnan(got)) << "unwritten or NaN output at seq " << s << " token " << i << " head " << hq;
          const double e = std::fabs(double(got) - of[size_t(j)]);
          max_err = std::max(max_err, e);
          err2 += e * e;
          ref2 += double(of[size_t(j)]) * of[size_t(j)];
        }
      }
    }
    tok0 += c.seqs[s].n_tokens;
  }
  const double rel = std::sqrt(err2 / std::max(ref2, 1e-30));
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

// Sliding windows and soft caps, every format at head_dim 64 (g 1 or 3), 128 (g 4) and 256 (g 8).
// Per format and head_dim:
//  - kMixed (decode and prefill chunks in one batch, several starting mid-page) under two of
//    the windows 1, 20 (below a page), 63, 64, 65 (64 +- 1) and 100000 (past every context),
//    rotated so that each format meets all six over its head dims and each head dim all six
//    over the formats;
//  - kWinLong (long decode contexts, a 40-token prefill chunk and a 5-token one, starting
//    mid-page) with softcap 50 under a window of 1000 with 7 forced splits (d64), 4096 with the
//    planner's splits at 32/8 heads (d128: splits over the visible pages only) or 65 with 3
//    forced splits (d256: more splits than some tiles have visible pages, so empty splits);
//  - kMixed with peaky queries (q_scale 12) and softcap 5, 2 forced splits, with a window of 40
//    at d128 and none otherwise.
const std::vector<SeqSpec> kWinLong = {{5000, 1}, {4095, 1}, {3000, 2}, {300, 40}, {1000, 5}};

std::vector<AttnCase> window_cases() {
  static std::deque<std::string> names;  // the cases' names live as long as the suite (a deque: stable)
  struct Fmt {
    const char *name, *id;
  };
  const Fmt fmts[] = {{"bf16", "bf16"},         {"int8", "int8"},   {"int4", "int4"}, {"rk4v4-e8", "rk4v4_e8"},
                      {"rk2v4-e8", "rk2v4_e8"}, {"fp8", "fp8"},     {"nvfp4", "nvfp4"}, {"k8v4", "k8v4"}};
  struct Dim {
    int d, nh, nkv;
  };
  const Dim dims[] = {{64, 4, 4}, {128, 8, 2}, {256, 16, 2}};
  const int windows[] = {1, 20, 63, 64, 65, 100000};
  std::vector<AttnCase> out;
  auto add = [&](const Fmt& f, Dim dm, const std::string& tag, const std::vector<SeqSpec>& seqs, int splits, float qs,
                 int window, float cap) {
    names.push_back(std::string(f.id) + "_d" + std::to_string(dm.d) + "_" + tag);
    AttnCase c{names.back().c_str(), f.name, dm.d, dm.nh, dm.nkv, seqs, splits, qs};
    c.window = window;
    c.softcap = cap;
    out.push_back(c);
  };
  for (int fi = 0; fi < 8; ++fi)
    for (int di = 0; di < 3; ++di) {
      const Fmt& f = fmts[fi];
      Dim dm = dims[di];
      if (dm.d == 64 && fi % 2 == 1) dm = {64, 12, 4};  // g 3 for half of the formats
      for (int k = 0; k < 2; ++k) {
        const int w = windows[(2 * di + k + 2 * fi) % 6];
        add(f, dm, "mixed_w" + std::to_string(w), kMixed, 0, 3.0f, w, 0.0f);
      }
      if (di == 0) add(f, dm, "winlong_w1000_split7_cap50", kWinLong, 7, 3.0f, 1000, 50.0f);
      if (di == 1) add(f, {128, 32, 8}, "winlong_w4096_auto_cap50", kWinLong, 0, 3.0f, 4096, 50.0f);
      if (di == 2) add(f, dm, "winlong_w65_split3_cap50", kWinLong, 3, 3.0f, 65, 50.0f);
      add(f, dm, di == 1 ? "mixed_peaky12_cap5_w40" : "mixed_peaky12_cap5", kMixed, 2, 12.0f, di == 1 ? 40 : 0, 5.0f);
    }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Window, PagedAttentionTest, ::testing::ValuesIn(window_cases()),
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
