// Shared pieces of the paged-attention GPU tests (test_attention.cpp, test_prefill_attention.cpp):
// a case's cache appended by the GPU kernel over stale bytes in shuffled pages, its queries,
// runs of PagedAttention on them, and the fp64 reference on the *decoded* cache (the CPU
// codec's decoder applied to the bytes the GPU append wrote), with the causal mask and an
// optional sliding window.
#pragma once
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cuda/attention.h"
#include "backend/cuda/kv_cache.h"
#include "cuda_test_util.h"
#include "kv/format.h"
#include "kv/page_table.h"

namespace ninfer::test {

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
  int window = 0;        // AttnShape::window (0: none)
  int kv_mode = 0;       // 0: uniform random K/V; 1: outliers (every 97th key's K x40, every 13th
                         // query x8); 2: all K rows of a kv head equal (every score of a row equal)
  int check_stride = 1;  // the reference checks every check_stride-th token of a chunk (long cases)
  int scratch_pages = 0;  // PagedAttention::force_prefill_scratch_pages (0: the default pool)
};

inline void PrintTo(const AttnCase& c, std::ostream* os) { *os << c.name; }

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
  std::vector<std::vector<int32_t>> tables;
  std::vector<float> q;
  DevBuf<float> d_q;
  DevBuf<uint8_t> k_pool, v_pool;
  bool history_ready = false;  // run's history_ready (first pages read before the decode kernel's wait)
  bool q_ready = false;        // run's q_ready (the decode kernel's Q prologue before its wait)
  int prefill_kernel = 0;      // PagedAttention::force_prefill_kernel
  int window = 0;              // AttnShape::window of run() (starts as the case's)
  bool used_sm90 = false;      // the last run() sent prefill tiles to the sm_90 kernel
  int segments = 0;            // the last run()'s expansion segments (PagedAttention::prefill_segments)

  explicit AttnFixture(const AttnCase& cs)
      : c(cs), fmt(find_kv_format(cs.fmt)), d(cs.head_dim), nh(cs.n_heads), nkv(cs.n_kv_heads), g(nh / nkv),
        seed(777u + uint32_t(d * 31 + nh * 7 + nkv)), window(cs.window) {
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
    {
      size_t next = 0;
      for (const SeqSpec& s : c.seqs) {
        const int np = (s.start + s.n_tokens + 63) / 64;
        tables.emplace_back(perm.begin() + long(next), perm.begin() + long(next) + np);
        next += size_t(np);
      }
    }
    // K/V source rows for every cached position, appended by the GPU kernel.
    const int ld = 2 * nkv * d;
    std::vector<float> kv = test::random_floats(size_t(total_ctx) * ld, seed);
    if (c.kv_mode == 1)
      for (int t = 0; t < total_ctx; t += 97)
        for (int j = 0; j < nkv * d; ++j) kv[size_t(t) * ld + size_t(j)] *= 40.0f;
    if (c.kv_mode == 2)
      for (int t = 1; t < total_ctx; ++t)
        std::copy(kv.begin(), kv.begin() + long(nkv) * d, kv.begin() + long(t) * ld);
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
    k_pool.resize(size_t(n_pages) * nkv * kblk);
    v_pool.resize(size_t(n_pages) * nkv * vblk);
    // NOTE: stale finite garbage in unused slots (the kernel must mask it, not rely on zeros).
    {
      std::vector<uint8_t> junk(k_pool.size());
      for (size_t i = 0; i < junk.size(); ++i) junk[i] = uint8_t((i * 131 + 7) % 97);
      k_pool.upload(junk);
      junk.resize(v_pool.size());
      for (size_t i = 0; i < junk.size(); ++i) junk[i] = uint8_t((i * 131 + 7) % 97);
      v_pool.upload(junk);
    }
    test::append_kv_rows(d_kv.get(), total_ctx, nkv, d, kind, fmt.k.rotation == KvRotation::HadamardHead,
                         d_page.get(), d_slot.get(), k_pool.get(), v_pool.get());
    // Queries (fp32, post rope in a real forward).
    q = test::random_floats(size_t(total_q) * nh * d, seed + 1);
    for (float& v : q) v *= c.q_scale;
    if (c.kv_mode == 1)
      for (int t = 0; t < total_q; t += 13)
        for (int j = 0; j < nh * d; ++j) q[size_t(t) * nh * d + size_t(j)] *= 8.0f;
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
    cuda::AttnShape sh{nh, nkv, d, kind, int(fmt.k.rotation), int(fmt.v.rotation), window};
    cuda::PagedAttention attn(sh);
    attn.force_splits(splits);
    attn.force_prefill_kernel(prefill_kernel);
    attn.force_cta_cap(cta_cap);
    attn.force_prefill_scratch_pages(c.scratch_pages);
    std::vector<cuda::AttnSeq> seqs;
    int tok0 = 0;
    for (size_t s = 0; s < c.seqs.size(); ++s) {
      seqs.push_back({tok0, c.seqs[s].n_tokens, c.seqs[s].start, tables[s].data(), int(tables[s].size())});
      tok0 += c.seqs[s].n_tokens;
    }
    attn.plan(seqs.data(), int(seqs.size()), total_q, nullptr);
    DevBuf<uint16_t> d_out(size_t(total_q) * nh * d);
    d_out.poison();
    attn.run(d_q.get(), q_ld, k_pool.get(), v_pool.get(), d_out.get(), nh * d, nullptr, history_ready, q_ready);
    if (splits_used) *splits_used = attn.splits(0);
    if (splits_prefill) *splits_prefill = attn.splits(1);
    used_sm90 = attn.prefill_sm90();
    segments = attn.prefill_segments();
    return d_out.download();
  }
};

// The fp64 reference of every checked output element, [total_q][n_heads][head_dim] as the
// output (NaN where not checked: tokens off the case's check_stride), for window `window`.
inline std::vector<float> attention_reference(const AttnFixture& fx, int window) {
  const AttnCase& c = fx.c;
  const int d = fx.d, nh = fx.nh, nkv = fx.nkv, g = fx.g;
  const std::vector<uint8_t> kh = fx.k_pool.download(), vh = fx.v_pool.download();
  auto decode = [&](const std::vector<uint8_t>& pool, int side, const KvSideCodec& codec, int page, int h, int slot,
                    float* dst) {
    const uint8_t* b = pool.data() + (size_t(page) * nkv + h) * (side == 0 ? fx.kblk : fx.vblk);
    std::vector<uint8_t> row(cuda::cache_code_bytes(fx.kind, d, side) + cuda::cache_scale_bytes(fx.kind, d, side));
    cuda::gather_cpu_row(fx.kind, side, b, d, slot, row.data());
    codec.decode(row.data(), d, dst);
  };
  std::vector<float> ref(size_t(fx.total_q) * nh * d, NAN);
  int tok0 = 0;
  for (size_t s = 0; s < c.seqs.size(); ++s) {
    const int start = c.seqs[s].start, n_ctx = start + c.seqs[s].n_tokens;
    std::vector<float> K(size_t(nkv) * n_ctx * d), V(size_t(nkv) * n_ctx * d);
    for (int h = 0; h < nkv; ++h)
      for (int p = 0; p < n_ctx; ++p) {
        decode(kh, 0, fx.fmt.k, fx.tables[s][size_t(p / 64)], h, p % 64, K.data() + (size_t(h) * n_ctx + p) * d);
        decode(vh, 1, fx.fmt.v, fx.tables[s][size_t(p / 64)], h, p % 64, V.data() + (size_t(h) * n_ctx + p) * d);
      }
    for (int i = 0; i < c.seqs[s].n_tokens; ++i) {
      if (i % std::max(1, c.check_stride) != 0 && i != c.seqs[s].n_tokens - 1) continue;
      const int pos = start + i, lo = window > 0 ? std::max(0, pos - window + 1) : 0;
      for (int hq = 0; hq < nh; ++hq) {
        const int h = hq / g;
        std::vector<float> qr(fx.q.begin() + (long(tok0 + i) * nh + hq) * d,
                              fx.q.begin() + (long(tok0 + i) * nh + hq + 1) * d);
        rotate_kv(fx.fmt.k.rotation, qr.data(), d);
        std::vector<double> sc(size_t(pos + 1 - lo));
        double mx = -1e300;
        for (int p = lo; p <= pos; ++p) {
          double dot = 0;
          for (int j = 0; j < d; ++j) dot += double(qr[size_t(j)]) * K[(size_t(h) * n_ctx + p) * d + j];
          sc[size_t(p - lo)] = dot / std::sqrt(double(d));
          mx = std::max(mx, sc[size_t(p - lo)]);
        }
        double den = 0;
        for (double& v : sc) den += (v = std::exp(v - mx));
        std::vector<double> o(size_t(d), 0.0);
        for (int p = lo; p <= pos; ++p)
          for (int j = 0; j < d; ++j) o[size_t(j)] += sc[size_t(p - lo)] / den * V[(size_t(h) * n_ctx + p) * d + j];
        std::vector<float> of(o.begin(), o.end());
        rotate_kv(fx.fmt.v.rotation, of.data(), d);
        std::copy(of.begin(), of.end(), ref.begin() + (long(tok0 + i) * nh + hq) * d);
      }
    }
    tok0 += c.seqs[s].n_tokens;
  }
  return ref;
}

struct AttnErr {
  double max_err = 0, rel = 0;
  size_t n_nan = 0;  // NaN (unwritten) outputs among the checked ones
};

// out (bf16) against ref over the elements ref checks.
inline AttnErr attention_error(const std::vector<uint16_t>& out, const std::vector<float>& ref) {
  AttnErr r;
  double err2 = 0, ref2 = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isnan(ref[i])) continue;
    const float got = bf16f(out[i]);
    if (std::isnan(got)) {
      ++r.n_nan;
      continue;
    }
    const double e = std::fabs(double(got) - ref[i]);
    r.max_err = std::max(r.max_err, e);
    err2 += e * e;
    ref2 += double(ref[i]) * ref[i];
  }
  r.rel = std::sqrt(err2 / std::max(ref2, 1e-30));
  return r;
}

}  // namespace ninfer::test
