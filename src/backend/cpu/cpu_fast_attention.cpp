#include "backend/cpu/cpu_fast_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "kv/page_table.h"

namespace ninfer::cpu::fast {
namespace {

// Query tokens per chunk up to which the split-K decode path is used.
constexpr int kDecodeTokens = 8;
// Query tokens per block of the prefill path (bounds the score matrix).
constexpr int kQueryBlock = 64;

struct View {
  const AttnParams& p;
  int group() const { return p.n_heads / p.n_kv_heads; }
  const uint8_t* krow(int h, int pos) const {
    const int page = p.block_table[pos / kPageSize], slot = pos % kPageSize;
    return p.k_pool + ((size_t(page) * p.n_kv_heads + size_t(h)) * kPageSize + size_t(slot)) * p.k_row;
  }
  const uint8_t* vrow(int h, int pos) const {
    const int page = p.block_table[pos / kPageSize], slot = pos % kPageSize;
    return p.v_pool + ((size_t(page) * p.n_kv_heads + size_t(h)) * kPageSize + size_t(slot)) * p.v_row;
  }
  // Keys [lo, hi) that the query at absolute position qpos sees.
  int lo(int qpos) const { return p.window > 0 ? std::max(0, qpos - p.window + 1) : 0; }
  int hi(int qpos) const { return qpos + 1; }
  // Query rows of KV head h, ordered (token, group member), scaled and rotated by the K rotation.
  void gather_q(int h, int t0, int nt, float* qh) const {
    const int d = p.head_dim, g = group();
    for (int t = 0; t < nt; ++t)
      for (int j = 0; j < g; ++j) {
        float* dst = qh + (size_t(t) * g + j) * d;
        const float* src = p.q + size_t(t0 + t) * p.ldq + size_t(h * g + j) * d;
        for (int i = 0; i < d; ++i) dst[i] = src[i] * p.scale;
        rotate_kv(p.fmt->k.rotation, dst, d);
      }
  }
  void store_out(int h, int t0, int nt, float* oh) const {
    const int d = p.head_dim, g = group();
    for (int t = 0; t < nt; ++t)
      for (int j = 0; j < g; ++j) {
        float* o = oh + (size_t(t) * g + j) * d;
        rotate_kv(p.fmt->v.rotation, o, d);
        std::memcpy(p.out + size_t(t0 + t) * p.n_heads * d + size_t(h * g + j) * d, o, size_t(d) * 4);
      }
  }
};

// Softmax weights of one score row over its visible keys [lo, hi) (relative to the row),
// zero elsewhere; returns the running max / sum update for the online softmax.
// A side whose rows are the plain values (f32 or bf16, no scales or rotation): attention reads
// its pages in place instead of decoding them. DType::U8 for any other code.
DType plain_values(const KvSideCodec& side) {
  if (side.rotation != KvRotation::None || side.planes.size() != 1) return DType::U8;
  const KvPlane& pl = side.planes[0];
  if (pl.group != 1 || pl.per_group != 1 || pl.per_row != 0) return DType::U8;
  return pl.dtype == DType::F32 || pl.dtype == DType::BF16 ? pl.dtype : DType::U8;
}

void softcap_row(float* s, int lo, int hi, float cap) {
  if (cap > 0)
    for (int j = lo; j < hi; ++j) s[j] = cap * std::tanh(s[j] / cap);
}

void attend_decode(const View& v, Isa isa, ThreadPool& pool) {
  const AttnParams& p = v.p;
  const Kernels& K = kernels(isa);
  const int d = p.head_dim, g = v.group(), nt = p.n_tokens, rows = g * nt, nkv = p.n_kv_heads;
  const int n_ctx = p.start_pos + nt;
  const int k0 = v.lo(p.start_pos);
  const int b_first = k0 / kPageSize, b_last = (n_ctx - 1) / kPageSize, n_blocks = b_last - b_first + 1;
  const int splits = std::max(1, std::min(n_blocks, (4 * pool.size() + nkv - 1) / nkv));
  const DType kplain = plain_values(p.fmt->k), vplain = plain_values(p.fmt->v);
  std::vector<float> qh(size_t(nkv) * rows * d);
  for (int h = 0; h < nkv; ++h) v.gather_q(h, 0, nt, qh.data() + size_t(h) * rows * d);
  // Partials per (head, split): o [rows][d], m [rows], l [rows].
  std::vector<float> po(size_t(nkv) * splits * rows * d), pm(size_t(nkv) * splits * rows),
      pl(size_t(nkv) * splits * rows);
  pool.parallel_for(nkv * splits, [&](int task, int) {
    const int h = task / splits, sp = task % splits;
    const int bb = b_first + int(int64_t(n_blocks) * sp / splits), be = b_first + int(int64_t(n_blocks) * (sp + 1) / splits);
    thread_local std::vector<float> kt, vt, s, scale;
    kt.resize(size_t(kPageSize) * d);
    vt.resize(size_t(kPageSize) * d);
    s.resize(size_t(rows) * kPageSize);
    scale.resize(size_t(rows));
    float* o = po.data() + size_t(task) * rows * d;
    float* m = pm.data() + size_t(task) * rows;
    float* l = pl.data() + size_t(task) * rows;
    std::fill(o, o + size_t(rows) * d, 0.0f);
    std::fill(m, m + rows, -INFINITY);
    std::fill(l, l + rows, 0.0f);
    const float* q = qh.data() + size_t(h) * rows * d;
    for (int b = bb; b < be; ++b) {
      const int a0 = std::max(k0, b * kPageSize), a1 = std::min(n_ctx, (b + 1) * kPageSize), nb = a1 - a0;
      // With an exact window (one query token per call, see attend()): a page holding keys
      // that the query reads exactly is assembled key by key.
      const bool mixed = p.exact.w.on() && (a0 < p.exact.w.sink || a1 > p.exact.w.boundary(p.start_pos + 1));
      auto tile = [&](int side, float* dst) {
        const KvSideCodec& codec = side == 0 ? p.fmt->k : p.fmt->v;
        for (int j = 0; j < nb; ++j) {
          if (p.exact.w.exact(a0 + j, p.start_pos))
            load_exact(p.exact, *p.fmt, side, nkv, d, h, a0 + j, dst + size_t(j) * d);
          else
            codec.decode(side == 0 ? v.krow(h, a0 + j) : v.vrow(h, a0 + j), d, dst + size_t(j) * d);
        }
      };
      // A page's rows of one head are contiguous: plain values are read where they lie.
      if (mixed) {
        tile(0, kt.data());
        K.dots(q, rows, d, kt.data(), nb, d, s.data(), kPageSize);
      } else if (kplain == DType::BF16) {
        K.dots_bf16(q, rows, d, reinterpret_cast<const uint16_t*>(v.krow(h, a0)), nb, d, s.data(), kPageSize);
      } else if (kplain == DType::F32) {
        K.dots(q, rows, d, reinterpret_cast<const float*>(v.krow(h, a0)), nb, d, s.data(), kPageSize);
      } else {
        for (int j = 0; j < nb; ++j) p.fmt->k.decode(v.krow(h, a0 + j), d, kt.data() + size_t(j) * d);
        K.dots(q, rows, d, kt.data(), nb, d, s.data(), kPageSize);
      }
      bool any = false;
      for (int r = 0; r < rows; ++r) {
        const int qpos = p.start_pos + r / g;
        const int lo = std::max(v.lo(qpos), a0) - a0, hi = std::min(v.hi(qpos), a1) - a0;
        float* sr = s.data() + size_t(r) * kPageSize;
        if (lo >= hi) {
          std::fill(sr, sr + nb, 0.0f);
          scale[size_t(r)] = 1.0f;
          continue;
        }
        any = true;
        softcap_row(sr, lo, hi, p.softcap);
        float mx = m[r];
        for (int j = lo; j < hi; ++j) mx = std::max(mx, sr[j]);
        const float sc = std::exp(m[r] - mx);
        const float sum = K.exp_sum(sr + lo, hi - lo, mx);
        std::fill(sr, sr + lo, 0.0f);
        std::fill(sr + hi, sr + nb, 0.0f);
        l[r] = l[r] * sc + sum;
        m[r] = mx;
        scale[size_t(r)] = sc;
      }
      if (!any) continue;
      if (mixed) {
        tile(1, vt.data());
        K.pv(s.data(), rows, kPageSize, vt.data(), nb, d, scale.data(), o, d);
      } else if (vplain == DType::BF16) {
        K.pv_bf16(s.data(), rows, kPageSize, reinterpret_cast<const uint16_t*>(v.vrow(h, a0)), nb, d, scale.data(), o, d);
      } else if (vplain == DType::F32) {
        K.pv(s.data(), rows, kPageSize, reinterpret_cast<const float*>(v.vrow(h, a0)), nb, d, scale.data(), o, d);
      } else {
        for (int j = 0; j < nb; ++j) p.fmt->v.decode(v.vrow(h, a0 + j), d, vt.data() + size_t(j) * d);
        K.pv(s.data(), rows, kPageSize, vt.data(), nb, d, scale.data(), o, d);
      }
    }
  });
  std::vector<float> oh(size_t(rows) * d);
  for (int h = 0; h < nkv; ++h) {
    for (int r = 0; r < rows; ++r) {
      float M = -INFINITY;
      for (int sp = 0; sp < splits; ++sp) M = std::max(M, pm[(size_t(h) * splits + sp) * rows + r]);
      float L = 0;
      float* dst = oh.data() + size_t(r) * d;
      std::fill(dst, dst + d, 0.0f);
      for (int sp = 0; sp < splits; ++sp) {
        const size_t t = size_t(h) * splits + sp;
        const float mi = pm[t * rows + r];
        if (mi == -INFINITY) continue;
        const float w = std::exp(mi - M);
        L += w * pl[t * rows + r];
        const float* src = po.data() + (t * rows + r) * d;
        for (int i = 0; i < d; ++i) dst[i] += w * src[i];
      }
      const float inv = 1.0f / L;
      for (int i = 0; i < d; ++i) dst[i] *= inv;
    }
    v.store_out(h, 0, nt, oh.data());
  }
}

void attend_prefill(const View& v, Isa isa, ThreadPool& pool) {
  const AttnParams& p = v.p;
  const Kernels& K = kernels(isa);
  const int d = p.head_dim, g = v.group(), nkv = p.n_kv_heads;
  const int n_ctx = p.start_pos + p.n_tokens, k0 = v.lo(p.start_pos), nk = n_ctx - k0;
  PackedF32 kp, vtp;
  kp.resize(nk, d);
  vtp.resize(d, nk);
  std::vector<float> qh, s, oh;
  std::vector<int> cols, kend;
  for (int h = 0; h < nkv; ++h) {
    // Packs keys [j0, j1) (relative to k0) as the query at qpos reads them.
    auto pack = [&](int j0, int j1, int qpos) {
      constexpr int kKeysPerTask = 64;
      pool.parallel_for((j1 - j0 + kKeysPerTask - 1) / kKeysPerTask, [&](int task, int) {
        thread_local std::vector<float> row;
        row.resize(size_t(d));
        for (int j = j0 + task * kKeysPerTask; j < std::min(j1, j0 + (task + 1) * kKeysPerTask); ++j) {
          const bool ex = p.exact.w.on() && p.exact.w.exact(k0 + j, qpos);
          if (ex)
            load_exact(p.exact, *p.fmt, 0, nkv, d, h, k0 + j, row.data());
          else
            p.fmt->k.decode(v.krow(h, k0 + j), d, row.data());
          kp.set_row(j, row.data());
          if (ex)
            load_exact(p.exact, *p.fmt, 1, nkv, d, h, k0 + j, row.data());
          else
            p.fmt->v.decode(v.vrow(h, k0 + j), d, row.data());
          vtp.set_col(j, row.data());
        }
      });
    };
    pack(0, nk, p.start_pos);
    // NOTE: with an exact window the keys a query reads exactly only shrink as the query
    // advances (kv/kv_window.h): query blocks end where the recent boundary moves, and the
    // keys that left the window are re-packed from their codes before the next block.
    const KvWindow& W = p.exact.w;
    int64_t packed_boundary = W.boundary(p.start_pos + 1);
    for (int t0 = 0, nt = 0; t0 < p.n_tokens; t0 += nt) {
      nt = std::min(kQueryBlock, p.n_tokens - t0);
      if (W.recent > 0) {
        const int64_t b = W.boundary(p.start_pos + t0 + 1);
        if (b != packed_boundary) {
          const int j0 = int(std::max<int64_t>({packed_boundary, int64_t(W.sink), int64_t(k0)}) - k0);
          const int j1 = int(std::max<int64_t>(b, k0) - k0);
          if (j1 > j0) pack(j0, j1, p.start_pos + t0);
          packed_boundary = b;
        }
        int n = 1;
        while (n < nt && W.boundary(p.start_pos + t0 + n + 1) == b) ++n;
        nt = n;
      }
      const int rows = nt * g;
      qh.resize(size_t(rows) * d);
      v.gather_q(h, t0, nt, qh.data());
      cols.resize(size_t(rows));
      kend.resize(size_t(rows));
      for (int r = 0; r < rows; ++r) cols[size_t(r)] = kend[size_t(r)] = v.hi(p.start_pos + t0 + r / g) - k0;
      s.resize(size_t(rows) * nk);
      gemm(isa, pool, qh.data(), rows, kp, s.data(), nk, {cols.data(), nullptr});
      pool.parallel_for((rows + 15) / 16, [&](int task, int) {
        for (int r = task * 16; r < std::min(rows, (task + 1) * 16); ++r) {
          const int qpos = p.start_pos + t0 + r / g, lo = v.lo(qpos) - k0, hi = v.hi(qpos) - k0;
          float* sr = s.data() + size_t(r) * nk;
          softcap_row(sr, lo, hi, p.softcap);
          float mx = -INFINITY;
          for (int j = lo; j < hi; ++j) mx = std::max(mx, sr[j]);
          const float inv = 1.0f / K.exp_sum(sr + lo, hi - lo, mx);
          std::fill(sr, sr + lo, 0.0f);
          for (int j = lo; j < hi; ++j) sr[j] *= inv;
          std::fill(sr + hi, sr + nk, 0.0f);
        }
      });
      oh.resize(size_t(rows) * d);
      gemm(isa, pool, s.data(), rows, vtp, oh.data(), d, {nullptr, kend.data()});
      v.store_out(h, t0, nt, oh.data());
    }
  }
}

}  // namespace

void load_exact(const ExactKv& e, const KvFormat& fmt, int side, int n_kv_heads, int head_dim, int h, int pos,
                float* out) {
  const int d = head_dim;
  if (pos >= e.new_start) {
    const float* src = (side == 0 ? e.k_new : e.v_new) + size_t(pos - e.new_start) * size_t(e.ld_new) + size_t(h) * d;
    for (int i = 0; i < d; ++i) out[i] = bf16_to_f32(f32_to_bf16(src[i]));
  } else {
    const uint16_t* src = (side == 0 ? e.k : e.v) +
                          ((size_t(e.w.page_of(pos)) * n_kv_heads + size_t(h)) * kPageSize + size_t(pos % kPageSize)) * d;
    for (int i = 0; i < d; ++i) out[i] = bf16_to_f32(src[i]);
  }
  rotate_kv(side == 0 ? fmt.k.rotation : fmt.v.rotation, out, d);
}

void attend(const AttnParams& p, Isa isa, ThreadPool& pool) {
  if (p.n_tokens > kDecodeTokens) {
    attend_prefill(View{p}, isa, pool);
  } else if (!p.exact.w.on() || p.n_tokens == 1) {
    attend_decode(View{p}, isa, pool);
  } else {
    // NOTE: a page's keys may be exact for one query of the chunk and compressed for the next;
    // the decode path reads a page once for all its rows, so each query token runs alone.
    for (int t = 0; t < p.n_tokens; ++t) {
      AttnParams one = p;
      one.start_pos = p.start_pos + t;
      one.n_tokens = 1;
      one.q = p.q + size_t(t) * p.ldq;
      one.out = p.out + size_t(t) * p.n_heads * p.head_dim;
      attend_decode(View{one}, isa, pool);
    }
  }
}

}  // namespace ninfer::cpu::fast
