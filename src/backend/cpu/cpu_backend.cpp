// The CPU reference backend: fp32 math on weights converted once from their stored dtype,
// OpenMP threads, paged KV cache in any registered format (rows are encoded on write and
// decoded on read; attention runs in fp32 in the formats' stored basis: Q rotated by the K
// rotation, the output rotated back by the V rotation).
//
// Page pool layout, per layer and per side (K, V):
//   [n_pages][n_kv_heads][kPageSize][row_bytes]   row_bytes = fmt.k_bytes(head_dim) / v_bytes
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include "backend/backend.h"
#include "backend/cpu/cpu_ops.h"
#include "core/dtype.h"
#include "core/error.h"
#include "kv/capacity.h"
#include "kv/page_table.h"
#include "model/model.h"

namespace ninfer {
namespace {

std::vector<float> to_f32(const WeightRef& w) {
  if (!w) return {};
  std::vector<float> out(size_t(w.t->numel()));
  convert_to_f32(w.t->dtype, w.t->data, out.data(), out.size());
  return out;
}

const float* ptr_or_null(const std::vector<float>& v) { return v.empty() ? nullptr : v.data(); }

struct LayerF32 {
  std::vector<float> attn_norm, wq, wk, wv, wo, bq, bk, bv, bo, q_norm, k_norm;
  std::vector<float> ffn_norm, w_gate, w_up, w_down, b_gate, b_up, b_down;
};

size_t read_meminfo_kb(const char* key) {
  std::ifstream f("/proc/meminfo");
  std::string k;
  size_t v = 0;
  std::string unit;
  while (f >> k >> v >> unit) {
    if (k == key) return v;
  }
  return 0;
}

class CpuBackend final : public Backend {
 public:
  CpuBackend(const Model& model, const CpuBackendOptions& opt) : c_(model.config) {
    if (opt.threads > 0) omp_set_num_threads(opt.threads);
    const ModelWeights& w = model.weights;
    embed_ = to_f32(w.embed);
    final_norm_ = to_f32(w.final_norm);
    if (w.lm_head.t != w.embed.t) lm_head_ = to_f32(w.lm_head);
    for (const LayerWeights& L : w.layers) {
      LayerF32 f;
      f.attn_norm = to_f32(L.attn_norm);
      f.wq = to_f32(L.wq);
      f.wk = to_f32(L.wk);
      f.wv = to_f32(L.wv);
      f.wo = to_f32(L.wo);
      f.bq = to_f32(L.bq);
      f.bk = to_f32(L.bk);
      f.bv = to_f32(L.bv);
      f.bo = to_f32(L.bo);
      f.q_norm = to_f32(L.q_norm);
      f.k_norm = to_f32(L.k_norm);
      f.ffn_norm = to_f32(L.ffn_norm);
      f.w_gate = to_f32(L.w_gate);
      f.w_up = to_f32(L.w_up);
      f.w_down = to_f32(L.w_down);
      f.b_gate = to_f32(L.b_gate);
      f.b_up = to_f32(L.b_up);
      f.b_down = to_f32(L.b_down);
      weight_bytes_ += 4 * (f.wq.size() + f.wk.size() + f.wv.size() + f.wo.size() + f.w_gate.size() +
                            f.w_up.size() + f.w_down.size());
      layers_.push_back(std::move(f));
    }
    weight_bytes_ += 4 * (embed_.size() + lm_head_.size());
    // inv_freq[i] = 1 / theta^(2i / d), formed in fp32 as transformers does.
    const int half = c_.head_dim / 2;
    inv_freq_.resize(size_t(half));
    for (int i = 0; i < half; ++i)
      inv_freq_[size_t(i)] = 1.0f / std::pow(float(c_.rope_theta), float(2 * i) / float(c_.head_dim));
  }

  std::string name() const override { return "cpu"; }

  void init_kv(const KvFormat& fmt, int n_pages) override {
    fmt.check_head_dim(c_.head_dim);
    fmt_ = &fmt;
    n_pages_ = n_pages;
    k_row_ = fmt.k_bytes(c_.head_dim);
    v_row_ = fmt.v_bytes(c_.head_dim);
    const size_t per_page_k = size_t(c_.n_kv_heads) * kPageSize * k_row_;
    const size_t per_page_v = size_t(c_.n_kv_heads) * kPageSize * v_row_;
    k_pool_.assign(size_t(c_.n_layers), std::vector<uint8_t>());
    v_pool_.assign(size_t(c_.n_layers), std::vector<uint8_t>());
    for (int l = 0; l < c_.n_layers; ++l) {
      k_pool_[size_t(l)].assign(per_page_k * size_t(n_pages), 0);
      v_pool_[size_t(l)].assign(per_page_v * size_t(n_pages), 0);
    }
  }

  const KvFormat& kv_format() const override {
    NINFER_CHECK(fmt_ != nullptr, "init_kv was not called");
    return *fmt_;
  }

  size_t page_bytes(const KvFormat& fmt) const override { return kv_page_bytes(c_, fmt); }

  MemoryInfo memory() const override {
    MemoryInfo m;
    m.total = size_t(sysconf(_SC_PHYS_PAGES)) * size_t(sysconf(_SC_PAGE_SIZE));
    m.free = read_meminfo_kb("MemAvailable:") * 1024;
    m.weights = weight_bytes_;
    return m;
  }

  void set_kv_observer(KvObserver obs) override { observer_ = std::move(obs); }

  void copy_kv_pages(std::span<const int32_t> src, std::span<const int32_t> dst) override {
    NINFER_CHECK(fmt_ != nullptr, "init_kv was not called");
    NINFER_CHECK(src.size() == dst.size(), "copy_kv_pages: {} sources, {} destinations", src.size(), dst.size());
    const size_t kb = size_t(c_.n_kv_heads) * kPageSize * k_row_, vb = size_t(c_.n_kv_heads) * kPageSize * v_row_;
    for (size_t i = 0; i < src.size(); ++i) {
      NINFER_CHECK(src[i] >= 0 && src[i] < n_pages_ && dst[i] >= 0 && dst[i] < n_pages_ && src[i] != dst[i],
                   "copy_kv_pages: bad page pair {} -> {} ({} pages)", src[i], dst[i], n_pages_);
      for (int l = 0; l < c_.n_layers; ++l) {
        uint8_t* k = k_pool_[size_t(l)].data();
        uint8_t* v = v_pool_[size_t(l)].data();
        std::memcpy(k + size_t(dst[i]) * kb, k + size_t(src[i]) * kb, kb);
        std::memcpy(v + size_t(dst[i]) * vb, v + size_t(src[i]) * vb, vb);
      }
    }
  }

  void forward(std::span<const SeqChunk> chunks, std::vector<float>& logits) override;

 private:
  uint8_t* k_slot(int layer, int page, int head, int slot) {
    return k_pool_[size_t(layer)].data() +
           ((size_t(page) * c_.n_kv_heads + size_t(head)) * kPageSize + size_t(slot)) * k_row_;
  }
  uint8_t* v_slot(int layer, int page, int head, int slot) {
    return v_pool_[size_t(layer)].data() +
           ((size_t(page) * c_.n_kv_heads + size_t(head)) * kPageSize + size_t(slot)) * v_row_;
  }
  void attend(int layer, const SeqChunk& ch, const float* q, float* out);

  ModelConfig c_;
  std::vector<float> embed_, final_norm_, lm_head_;
  std::vector<LayerF32> layers_;
  std::vector<float> inv_freq_;
  size_t weight_bytes_ = 0;
  const KvFormat* fmt_ = nullptr;
  int n_pages_ = 0;
  size_t k_row_ = 0, v_row_ = 0;
  std::vector<std::vector<uint8_t>> k_pool_, v_pool_;
  // Scratch for attend(): decoded K [n_kv_heads][n_ctx][head_dim], decoded V transposed
  // [n_kv_heads][head_dim][n_ctx], gathered queries, scores and outputs of one KV head.
  std::vector<float> kd_, vt_, qh_, sc_, oh_;
  KvObserver observer_;
};

// Attention of one chunk over its sequence's cached tokens, as two matrix products per KV
// head: S = (scale * R_k q) K^T over all cached positions (future positions are masked after
// the product), row softmax, O = P V, then O rotated back by the V rotation.
// q: [n_tokens, q_dim] (post rope); out: [n_tokens, q_dim].
void CpuBackend::attend(int layer, const SeqChunk& ch, const float* q, float* out) {
  const int d = c_.head_dim, nkv = c_.n_kv_heads, nh = c_.n_heads, group = nh / nkv;
  const int n_ctx = ch.start_pos + ch.n_tokens, nt = ch.n_tokens, rows = group * nt;
  kd_.resize(size_t(nkv) * n_ctx * d);
  vt_.resize(size_t(nkv) * d * n_ctx);
  const KvFormat& fmt = *fmt_;
#pragma omp parallel
  {
    std::vector<float> vrow(static_cast<size_t>(d));
#pragma omp for collapse(2) schedule(static)
    for (int h = 0; h < nkv; ++h) {
      for (int p = 0; p < n_ctx; ++p) {
        const int page = ch.block_table[p / kPageSize], slot = p % kPageSize;
        fmt.k.decode(k_slot(layer, page, h, slot), d, kd_.data() + (size_t(h) * n_ctx + p) * d);
        fmt.v.decode(v_slot(layer, page, h, slot), d, vrow.data());
        float* vt = vt_.data() + size_t(h) * d * n_ctx;  // [d][n_ctx]
        for (int i = 0; i < d; ++i) vt[size_t(i) * n_ctx + p] = vrow[size_t(i)];
      }
    }
  }
  const float scale = 1.0f / std::sqrt(float(d));
  qh_.resize(size_t(rows) * d);
  sc_.resize(size_t(rows) * n_ctx);
  oh_.resize(size_t(rows) * d);
  for (int h = 0; h < nkv; ++h) {
    // Rows ordered (g, t): query head h * group + g at token t.
    for (int g = 0; g < group; ++g) {
      for (int t = 0; t < nt; ++t) {
        float* dst = qh_.data() + (size_t(g) * nt + t) * d;
        const float* src = q + size_t(t) * nh * d + size_t(h * group + g) * d;
        for (int i = 0; i < d; ++i) dst[i] = src[i] * scale;
        rotate_kv(fmt.k.rotation, dst, d);
      }
    }
    cpu::matmul_wt(qh_.data(), kd_.data() + size_t(h) * n_ctx * d, nullptr, sc_.data(), rows, n_ctx, d);
#pragma omp parallel for schedule(static) if (int64_t(rows) * n_ctx > 20000)
    for (int r = 0; r < rows; ++r) {
      const int t = r % nt, n_keys = ch.start_pos + t + 1;  // causal
      float* srow = sc_.data() + size_t(r) * n_ctx;
      float mx = -INFINITY;
      for (int p = 0; p < n_keys; ++p) mx = std::max(mx, srow[p]);
      double sum = 0;
      for (int p = 0; p < n_keys; ++p) {
        srow[p] = std::exp(srow[p] - mx);
        sum += srow[p];
      }
      const float inv = float(1.0 / sum);
      for (int p = 0; p < n_keys; ++p) srow[p] *= inv;
      for (int p = n_keys; p < n_ctx; ++p) srow[p] = 0.0f;
    }
    cpu::matmul_wt(sc_.data(), vt_.data() + size_t(h) * d * n_ctx, nullptr, oh_.data(), rows, d, n_ctx);
    for (int g = 0; g < group; ++g) {
      for (int t = 0; t < nt; ++t) {
        float* o = oh_.data() + (size_t(g) * nt + t) * d;
        rotate_kv(fmt.v.rotation, o, d);
        std::memcpy(out + size_t(t) * nh * d + size_t(h * group + g) * d, o, size_t(d) * 4);
      }
    }
  }
}

void CpuBackend::forward(std::span<const SeqChunk> chunks, std::vector<float>& logits) {
  NINFER_CHECK(fmt_ != nullptr, "init_kv was not called");
  const int H = c_.hidden, qd = c_.q_dim(), kvd = c_.kv_dim(), F = c_.ffn, d = c_.head_dim;
  int T = 0;
  for (const SeqChunk& ch : chunks) {
    NINFER_CHECK(ch.n_tokens > 0, "empty chunk");
    NINFER_CHECK(int64_t(ch.n_blocks) * kPageSize >= ch.start_pos + ch.n_tokens,
                 "block table of {} pages cannot hold {} tokens", ch.n_blocks, ch.start_pos + ch.n_tokens);
    for (int b = 0; b < ch.n_blocks; ++b)
      NINFER_CHECK(ch.block_table[b] >= 0 && ch.block_table[b] < n_pages_, "page id {} out of range",
                   ch.block_table[b]);
    T += ch.n_tokens;
  }
  const size_t Ts = static_cast<size_t>(T);
  std::vector<float> x(Ts * H), xn(Ts * H), q(Ts * qd), k(Ts * kvd), v(Ts * kvd), att(Ts * qd), o(Ts * H),
      g(Ts * F), u(Ts * F);
  std::vector<int> pos(Ts);
  {
    int t = 0;
    for (const SeqChunk& ch : chunks) {
      for (int i = 0; i < ch.n_tokens; ++i, ++t) {
        const int32_t id = ch.tokens[i];
        if (id < 0 || id >= c_.vocab) fail("token id {} is outside the vocabulary (0..{})", id, c_.vocab - 1);
        std::memcpy(x.data() + size_t(t) * H, embed_.data() + size_t(id) * H, size_t(H) * 4);
        pos[size_t(t)] = ch.start_pos + i;
      }
    }
  }
  for (int l = 0; l < c_.n_layers; ++l) {
    const LayerF32& L = layers_[size_t(l)];
    cpu::rmsnorm(x.data(), L.attn_norm.data(), xn.data(), T, H, c_.rms_eps);
    cpu::matmul_wt(xn.data(), L.wq.data(), ptr_or_null(L.bq), q.data(), T, qd, H);
    cpu::matmul_wt(xn.data(), L.wk.data(), ptr_or_null(L.bk), k.data(), T, kvd, H);
    cpu::matmul_wt(xn.data(), L.wv.data(), ptr_or_null(L.bv), v.data(), T, kvd, H);
    if (c_.qk_norm) {
      cpu::rmsnorm(q.data(), L.q_norm.data(), q.data(), T * c_.n_heads, d, c_.rms_eps);
      cpu::rmsnorm(k.data(), L.k_norm.data(), k.data(), T * c_.n_kv_heads, d, c_.rms_eps);
    }
    for (int t = 0; t < T; ++t) {
      cpu::rope_inplace(q.data() + size_t(t) * qd, c_.n_heads, d, pos[size_t(t)], inv_freq_.data());
      cpu::rope_inplace(k.data() + size_t(t) * kvd, c_.n_kv_heads, d, pos[size_t(t)], inv_freq_.data());
    }
    // Write the new tokens' K/V into their pages.
    {
      int t0 = 0;
      for (const SeqChunk& ch : chunks) {
#pragma omp parallel for collapse(2) schedule(static) if (ch.n_tokens * c_.n_kv_heads > 8)
        for (int i = 0; i < ch.n_tokens; ++i) {
          for (int h = 0; h < c_.n_kv_heads; ++h) {
            const int p = ch.start_pos + i;
            const int page = ch.block_table[p / kPageSize], slot = p % kPageSize;
            const size_t off = size_t(t0 + i) * kvd + size_t(h) * d;
            fmt_->k.encode(k.data() + off, d, k_slot(l, page, h, slot));
            fmt_->v.encode(v.data() + off, d, v_slot(l, page, h, slot));
          }
        }
        if (observer_) {
          for (int i = 0; i < ch.n_tokens; ++i)
            observer_(l, ch.start_pos + i, k.data() + size_t(t0 + i) * kvd, v.data() + size_t(t0 + i) * kvd);
        }
        t0 += ch.n_tokens;
      }
    }
    {
      int t0 = 0;
      for (const SeqChunk& ch : chunks) {
        attend(l, ch, q.data() + size_t(t0) * qd, att.data() + size_t(t0) * qd);
        t0 += ch.n_tokens;
      }
    }
    cpu::matmul_wt(att.data(), L.wo.data(), ptr_or_null(L.bo), o.data(), T, H, qd);
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    cpu::rmsnorm(x.data(), L.ffn_norm.data(), xn.data(), T, H, c_.rms_eps);
    cpu::matmul_wt(xn.data(), L.w_gate.data(), ptr_or_null(L.b_gate), g.data(), T, F, H);
    cpu::matmul_wt(xn.data(), L.w_up.data(), ptr_or_null(L.b_up), u.data(), T, F, H);
    cpu::silu_mul(g.data(), u.data(), g.data(), g.size());
    cpu::matmul_wt(g.data(), L.w_down.data(), ptr_or_null(L.b_down), o.data(), T, H, F);
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
  }
  // Rows that need logits.
  std::vector<int> rows;
  {
    int t0 = 0;
    for (const SeqChunk& ch : chunks) {
      if (ch.all_logits) {
        for (int i = 0; i < ch.n_tokens; ++i) rows.push_back(t0 + i);
      } else {
        rows.push_back(t0 + ch.n_tokens - 1);
      }
      t0 += ch.n_tokens;
    }
  }
  const int R = int(rows.size());
  std::vector<float> xr(size_t(R) * H);
  for (int r = 0; r < R; ++r)
    std::memcpy(xr.data() + size_t(r) * H, x.data() + size_t(rows[size_t(r)]) * H, size_t(H) * 4);
  cpu::rmsnorm(xr.data(), final_norm_.data(), xr.data(), R, H, c_.rms_eps);
  logits.resize(size_t(R) * c_.vocab);
  const float* head = lm_head_.empty() ? embed_.data() : lm_head_.data();
  cpu::matmul_wt(xr.data(), head, nullptr, logits.data(), R, c_.vocab, H);
}

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const Model& model, const CpuBackendOptions& opt) {
  return std::make_unique<CpuBackend>(model, opt);
}

}  // namespace ninfer
