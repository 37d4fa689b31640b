// The CPU reference backend: fp32 math on weights converted once from their stored dtype
// (quantised projections stay quantised and are dequantised per block of rows in the matmul),
// OpenMP threads, paged KV cache in any registered format (rows are encoded on write and
// decoded on read; attention runs in fp32 in the formats' stored basis: Q rotated by the K
// rotation, the output rotated back by the V rotation). It implements the families'
// operations (model/family.h, LayerOps); the family's layer function says what a layer does.
//
// Page pool layout, per layer and per side (K, V):
//   [n_pages][n_kv_heads][kPageSize][row_bytes]   row_bytes = fmt.k_bytes(head_dim) / v_bytes
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <numeric>
#include <optional>

#include "backend/backend.h"
#include "backend/cpu/cpu_fast.h"
#include "backend/cpu/cpu_fast_attention.h"
#include "backend/cpu/delta_net.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/thread_pool.h"
#include "core/dtype.h"
#include "core/error.h"
#include "kv/capacity.h"
#include "kv/page_table.h"
#include "model/model.h"

namespace ninfer {
namespace {

namespace fast = cpu::fast;

std::vector<float> to_f32(const WeightRef& w, float offset = 0.0f) {
  if (!w) return {};
  std::vector<float> out(size_t(w.t->numel()));
  convert_to_f32(w.t->dtype, w.t->data, out.data(), out.size());
  if (offset != 0.0f)
    for (float& v : out) v += offset;
  return out;
}

// The fast path's instruction set and threads (null: the reference path).
struct FastCtx {
  fast::Isa isa;
  cpu::ThreadPool* pool;
};

// A projection as the CPU holds it: its parts stacked along the output rows, each dense fp32
// (converted once from its stored dtype), packed bf16 (the fast path, for parts stored in
// bf16) or quantised (model/weight_format.h, dequantised per block of rows inside the matmul);
// biases in fp32 (zeros for a part without one, when another part has one).
struct ProjCpu {
  struct Part {
    std::vector<float> w;          // [rows, in] (dense parts)
    fast::PackedBf16 pk;           // dense bf16 parts on the fast path
    const QuantMatrix* q = nullptr;  // quantised parts
    int rows = 0;
  };
  std::vector<Part> parts;
  std::vector<float> b;  // [out] or empty
  int out = 0, in = 0;

  explicit operator bool() const { return !parts.empty(); }
  bool all_packed() const {
    if (parts.size() > 8) return false;
    for (const Part& p : parts)
      if (!p.pk) return false;
    return true;
  }
  size_t bytes() const {
    size_t n = 4 * b.size();
    for (const Part& p : parts) n += p.q ? p.q->bytes() : p.pk ? p.pk.bytes() : 4 * p.w.size();
    return n;
  }
  // y [m, out] = x [m, in] W^T (+ b)
  void apply(const float* x, float* y, int m, const FastCtx* f) const {
    if (f && all_packed()) {  // one parallel region for every part
      fast::GemmPart gp[8];
      int off = 0;
      for (size_t i = 0; i < parts.size(); ++i) {
        gp[i] = {&parts[i].pk, b.empty() ? nullptr : b.data() + off, y + off};
        off += parts[i].rows;
      }
      fast::gemm_parts(f->isa, *f->pool, x, m, {gp, parts.size()}, out);
      return;
    }
    int off = 0;
    for (const Part& p : parts) {
      const float* bias = b.empty() ? nullptr : b.data() + off;
      if (p.pk)
        fast::gemm(f->isa, *f->pool, x, m, p.pk, bias, y + off, out);
      else if (p.q)
        cpu::matmul_wt_quant(x, *p.q, bias, y + off, m, out);
      else
        cpu::matmul_wt_ld(x, p.w.data(), bias, y + off, m, p.rows, in, out);
      off += p.rows;
    }
  }
};

// Rows [row0, row0 + rows) of a bf16 tensor, packed for the fast kernels.
fast::PackedBf16 pack_bf16_rows(const TensorInfo& t, int64_t row0, int64_t rows, int64_t cols) {
  std::vector<uint16_t> bits(size_t(rows * cols));
  std::memcpy(bits.data(), static_cast<const uint8_t*>(t.data) + size_t(row0 * cols) * 2, bits.size() * 2);
  return fast::PackedBf16::from_bf16(bits.data(), int(rows), int(cols), size_t(cols));
}

ProjCpu to_cpu(const ProjWeights& p, bool fast_path) {
  ProjCpu f;
  if (!p) return f;
  f.out = int(p.out());
  f.in = int(p.in);
  for (const ProjWeights::Part& part : p.parts) {
    ProjCpu::Part cp;
    cp.rows = int(part.rows);
    if (part.w.q) {
      NINFER_CHECK(part.row0 == 0 && part.w.q->rows == part.rows && part.w.q->cols == p.in,
                   "quantised part '{}' does not match its projection", part.w.q->name);
      cp.q = part.w.q;
    } else if (fast_path && part.w.t->dtype == DType::BF16) {
      cp.pk = pack_bf16_rows(*part.w.t, part.row0, part.rows, p.in);
    } else {
      std::vector<float> all = to_f32(part.w);
      const size_t off = size_t(part.row0) * f.in, n = size_t(part.rows) * f.in;
      cp.w.assign(all.begin() + off, all.begin() + off + n);
    }
    f.parts.push_back(std::move(cp));
  }
  if (p.has_bias()) {
    for (const ProjWeights::Part& part : p.parts) {
      std::vector<float> b = part.bias ? to_f32(part.bias) : std::vector<float>(size_t(part.rows), 0.0f);
      f.b.insert(f.b.end(), b.begin(), b.end());
    }
  }
  return f;
}

struct ExpertCpu {
  ProjCpu gate_up, down;
};

struct LayerF32 {
  std::array<std::vector<float>, size_t(Vec::kCount)> vec;
  std::array<ProjCpu, size_t(Proj::kCount)> proj;
  std::vector<ExpertCpu> experts;
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

class CpuBackend final : public Backend, private LayerOps {
 public:
  CpuBackend(const Model& model, const CpuBackendOptions& opt) : c_(model.config) {
    if (opt.kernels == CpuKernels::Fast) {
      pool_ = std::make_unique<cpu::ThreadPool>(opt.threads);
      fast_ = FastCtx{fast::select_isa(), pool_.get()};
    } else if (opt.threads > 0) {
      omp_set_num_threads(opt.threads);
    }
    const bool fp = bool(fast_);
    const ModelWeights& w = model.weights;
    const float norm_offset = c_.family->norm_offset_one ? 1.0f : 0.0f;
    embed_ = to_f32(w.embed);
    final_norm_ = to_f32(w.final_norm, norm_offset);
    const TensorInfo* head = w.lm_head.t ? w.lm_head.t : w.embed.t;
    if (fp && head->dtype == DType::BF16) {
      head_pk_ = pack_bf16_rows(*head, 0, c_.vocab, c_.hidden);
      weight_bytes_ += head_pk_.bytes();
    } else if (w.lm_head.t != w.embed.t) {
      lm_head_ = to_f32(w.lm_head);
    }
    weight_bytes_ += 4 * (embed_.size() + lm_head_.size());
    for (const LayerWeights& L : w.layers) {
      LayerF32 f;
      for (size_t i = 0; i < f.vec.size(); ++i) f.vec[i] = to_f32(L.vec[i], vec_is_norm(Vec(i)) ? norm_offset : 0.0f);
      for (size_t i = 0; i < f.proj.size(); ++i) {
        f.proj[i] = to_cpu(L.proj[i], fp);
        weight_bytes_ += f.proj[i].bytes();
      }
      for (const ExpertWeights& e : L.experts) {
        f.experts.push_back({to_cpu(e.gate_up, fp), to_cpu(e.down, fp)});
        weight_bytes_ += f.experts.back().gate_up.bytes() + f.experts.back().down.bytes();
      }
      layers_.push_back(std::move(f));
    }
    // Where each DeltaNet layer's state sits in a sequence's slot.
    size_t off = 0;
    for (const LayerSpec& l : c_.layers) {
      dn_offset_.push_back(off);
      if (l.mixer == Mixer::DeltaNet) off += c_.dn.state_floats();
    }
    slot_floats_ = off;
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
      if (c_.layers[size_t(l)].mixer != Mixer::Attention) continue;  // a DeltaNet layer keeps no KV
      k_pool_[size_t(l)].assign(per_page_k * size_t(n_pages), 0);
      v_pool_[size_t(l)].assign(per_page_v * size_t(n_pages), 0);
    }
  }

  void init_state(int n_slots) override {
    NINFER_CHECK(n_slots >= 0, "init_state: {} slots", n_slots);
    n_slots_ = n_slots;
    state_.resize(size_t(n_slots) * slot_floats_, 0.0f);
  }

  void init_kv_window(const KvWindow& w, int n_slots) override {
    NINFER_CHECK(n_slots >= 0, "init_kv_window: {} slots", n_slots);
    const size_t per_slot = size_t(w.exact_pages()) * c_.n_kv_heads * kPageSize * size_t(c_.head_dim);
    if (!(w == win_) || win_k_.size() != size_t(c_.n_layers)) {
      win_k_.assign(size_t(c_.n_layers), {});
      win_v_.assign(size_t(c_.n_layers), {});
    }
    win_ = w;
    n_win_slots_ = w.on() ? n_slots : 0;
    for (int l = 0; l < c_.n_layers; ++l) {
      if (c_.layers[size_t(l)].mixer != Mixer::Attention) continue;
      win_k_[size_t(l)].resize(per_slot * size_t(n_win_slots_), 0);
      win_v_[size_t(l)].resize(per_slot * size_t(n_win_slots_), 0);
    }
  }
  KvWindow kv_window() const override { return win_; }
  bool implements_kv_window() const override { return true; }

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
        if (k_pool_[size_t(l)].empty()) continue;
        uint8_t* k = k_pool_[size_t(l)].data();
        uint8_t* v = v_pool_[size_t(l)].data();
        std::memcpy(k + size_t(dst[i]) * kb, k + size_t(src[i]) * kb, kb);
        std::memcpy(v + size_t(dst[i]) * vb, v + size_t(src[i]) * vb, vb);
      }
    }
  }

  void forward(std::span<const SeqChunk> chunks, std::vector<float>& logits) override;

 private:
  // LayerOps (model/family.h) on the current layer l_ of the current batch.
  void norm(Buf in, Vec w, Buf out) override {
    cpu::rmsnorm(buf(in).data(), L().vec[size_t(w)].data(), buf(out).data(), T_, c_.hidden, c_.rms_eps);
  }
  void norm_add(Buf in, Vec w, Buf acc) override {
    std::vector<float>& src = buf(in);
    cpu::rmsnorm(src.data(), L().vec[size_t(w)].data(), src.data(), T_, c_.hidden, c_.rms_eps);
    std::vector<float>& dst = buf(acc);
    for (size_t i = 0; i < size_t(T_) * c_.hidden; ++i) dst[i] += src[i];
  }
  void copy(Buf in, Buf out) override { buf(out) = buf(in); }
  void linear(Buf in, Proj p, Buf out, bool accumulate, float alpha) override {
    const ProjCpu& P = L().proj[size_t(p)];
    NINFER_CHECK(bool(P), "layer {} has no projection {}", l_, int(p));
    float* y = buf(out).data();
    if (!accumulate && alpha == 1.0f) {
      P.apply(buf(in).data(), y, T_, fast());
      return;
    }
    tmp2_.resize(size_t(T_) * P.out);
    P.apply(buf(in).data(), tmp2_.data(), T_, fast());
    for (size_t i = 0; i < tmp2_.size(); ++i) y[i] = (accumulate ? y[i] : 0.0f) + alpha * tmp2_[i];
  }
  void qk_norm_rope() override;
  void attention() override;
  void gated_act(Activation a) override {
    const int f = int(gu_.size() / size_t(T_) / 2);
    ff_.resize(size_t(T_) * f);
    for (int t = 0; t < T_; ++t) {
      const float* g = gu_.data() + size_t(t) * 2 * f;
      float* o = ff_.data() + size_t(t) * f;
      if (a == Activation::Silu)
        cpu::silu_mul(g, g + f, o, size_t(f));
      else
        cpu::gelu_tanh_mul(g, g + f, o, size_t(f));
    }
  }
  void moe(float alpha) override;
  void split_attn_gate() override;
  void attn_gate() override;
  void delta_net() override;

  std::vector<float>& buf(Buf b) {
    switch (b) {
      case Buf::X: return x_;
      case Buf::H: return h_;
      case Buf::QKV: return qkv_;
      case Buf::ATT: return att_;
      case Buf::TMP: return tmp_;
      case Buf::GU: return gu_;
      case Buf::FF: return ff_;
    }
    fail("bad buffer");
  }
  const LayerF32& L() const { return layers_[size_t(l_)]; }
  const FastCtx* fast() const { return fast_ ? &*fast_ : nullptr; }
  uint8_t* k_slot(int layer, int page, int head, int slot) {
    return k_pool_[size_t(layer)].data() +
           ((size_t(page) * c_.n_kv_heads + size_t(head)) * kPageSize + size_t(slot)) * k_row_;
  }
  uint8_t* v_slot(int layer, int page, int head, int slot) {
    return v_pool_[size_t(layer)].data() +
           ((size_t(page) * c_.n_kv_heads + size_t(head)) * kPageSize + size_t(slot)) * v_row_;
  }
  void attend(int layer, const SeqChunk& ch, const float* q, int ld, float* out, const fast::ExactKv& exact);

  ModelConfig c_;
  std::unique_ptr<cpu::ThreadPool> pool_;  // the fast path's threads
  std::optional<FastCtx> fast_;            // unset: the reference path
  std::vector<float> embed_, final_norm_, lm_head_;
  fast::PackedBf16 head_pk_;               // the output projection on the fast path
  std::vector<LayerF32> layers_;
  size_t weight_bytes_ = 0;
  const KvFormat* fmt_ = nullptr;
  int n_pages_ = 0;
  size_t k_row_ = 0, v_row_ = 0;
  std::vector<std::vector<uint8_t>> k_pool_, v_pool_;
  // The exact window (kv/kv_window.h): per layer, n_win_slots_ slots of win_.exact_pages()
  // bf16 pages [n_kv_heads][kPageSize][head_dim], K and V, rows in the raw basis.
  KvWindow win_;
  int n_win_slots_ = 0;
  std::vector<std::vector<uint16_t>> win_k_, win_v_;
  size_t win_slot_values() const { return size_t(win_.exact_pages()) * c_.n_kv_heads * kPageSize * size_t(c_.head_dim); }
  fast::ExactKv exact_kv(const SeqChunk& ch, const float* rows, int ld) const {
    fast::ExactKv e;
    if (!win_.on()) return e;
    e.w = win_;
    e.k = win_k_[size_t(l_)].data() + size_t(ch.window_slot) * win_slot_values();
    e.v = win_v_[size_t(l_)].data() + size_t(ch.window_slot) * win_slot_values();
    e.k_new = rows + c_.q_dim();
    e.v_new = rows + c_.q_dim() + c_.kv_dim();
    e.ld_new = ld;
    e.new_start = ch.start_pos;
    return e;
  }
  // The current forward: its chunks, tokens, positions and activations (model/family.h).
  std::span<const SeqChunk> chunks_;
  int T_ = 0, l_ = 0;
  std::vector<int> pos_;
  std::vector<float> x_, h_, qkv_, att_, tmp_, gu_, ff_, tmp2_, gate_;
  // Recurrent state of the DeltaNet layers: n_slots_ slots of slot_floats_, each the layers'
  // states at dn_offset_[l] (DeltaNetShape::state_floats: conv history, then S).
  std::vector<float> state_;
  std::vector<size_t> dn_offset_;
  size_t slot_floats_ = 0;
  int n_slots_ = 0;
  // Scratch for attend(): decoded K [n_kv_heads][n_keys][head_dim], decoded V transposed
  // [n_kv_heads][head_dim][n_keys], gathered queries, scores and outputs of one KV head.
  std::vector<float> kd_, vt_, qh_, sc_, oh_;
  KvObserver observer_;
};

// On QKV [T, q_dim + 2 kv_dim]: q/k norms, then rope with the layer's table for each chunk's
// length (model/rope.h).
void CpuBackend::qk_norm_rope() {
  const int d = c_.head_dim, qd = c_.q_dim(), kvd = c_.kv_dim(), ld = qd + 2 * kvd;
  const LayerF32& W = L();
  for (int t = 0; t < T_; ++t) {
    float* q = qkv_.data() + size_t(t) * ld;
    float* k = q + qd;
    if (c_.qk_norm) {
      cpu::rmsnorm(q, W.vec[size_t(Vec::QNorm)].data(), q, c_.n_heads, d, c_.rms_eps);
      cpu::rmsnorm(k, W.vec[size_t(Vec::KNorm)].data(), k, c_.n_kv_heads, d, c_.rms_eps);
    }
    if (c_.qk_norm_full) {
      cpu::rmsnorm(q, W.vec[size_t(Vec::QNorm)].data(), q, 1, qd, c_.rms_eps);
      cpu::rmsnorm(k, W.vec[size_t(Vec::KNorm)].data(), k, 1, kvd, c_.rms_eps);
    }
  }
  const RopeSpec& rs = c_.ropes[size_t(c_.layers[size_t(l_)].rope)];
  int t0 = 0;
  for (const SeqChunk& ch : chunks_) {
    const RopeTable tab = rope_table(rs, ch.start_pos + ch.n_tokens);
    for (int i = 0; i < ch.n_tokens; ++i) {
      float* q = qkv_.data() + size_t(t0 + i) * ld;
      cpu::rope_inplace(q, c_.n_heads, d, ch.start_pos + i, tab.inv_freq.data(), rs.rotary_dim, tab.attention_factor);
      cpu::rope_inplace(q + qd, c_.n_kv_heads, d, ch.start_pos + i, tab.inv_freq.data(), rs.rotary_dim,
                        tab.attention_factor);
    }
    t0 += ch.n_tokens;
  }
}

void CpuBackend::attention() {
  const int d = c_.head_dim, qd = c_.q_dim(), kvd = c_.kv_dim(), ld = qd + 2 * kvd;
  int t0 = 0;
  for (const SeqChunk& ch : chunks_) {
    // side 0: K, 1: V, 2: both
    auto encode = [&](int i, int h, int side) {
      const int p = ch.start_pos + i;
      const int page = ch.block_table[p / kPageSize], slot = p % kPageSize;
      const float* row = qkv_.data() + size_t(t0 + i) * ld + qd + size_t(h) * d;
      // NOTE: with an exact window a token is encoded from its bf16-rounded row, the value
      // the window holds, so its code does not depend on how the tokens were chunked.
      thread_local std::vector<float> rounded;
      if (win_.on()) {
        rounded.resize(size_t(2) * d);
        for (int j = 0; j < d; ++j) {
          rounded[size_t(j)] = bf16_to_f32(f32_to_bf16(row[j]));
          rounded[size_t(d + j)] = bf16_to_f32(f32_to_bf16(row[kvd + j]));
        }
      }
      const float* kr = win_.on() ? rounded.data() : row;
      const float* vr = win_.on() ? rounded.data() + d : row + kvd;
      if (side != 1) fmt_->k.encode(kr, d, k_slot(l_, page, h, slot));
      if (side != 0) fmt_->v.encode(vr, d, v_slot(l_, page, h, slot));
    };
    if (fast_) {
      // NOTE: K and V rows are separate tasks: the E8 encoders cost ~60 us a row, so even one
      // decode token is worth spreading.
      const int nkv = c_.n_kv_heads;
      pool_->parallel_for(ch.n_tokens * nkv * 2, [&](int task, int) { encode(task / (2 * nkv), task / 2 % nkv, task % 2); });
    } else {
#pragma omp parallel for collapse(2) schedule(static) if (ch.n_tokens * c_.n_kv_heads > 8)
      for (int i = 0; i < ch.n_tokens; ++i)
        for (int h = 0; h < c_.n_kv_heads; ++h) encode(i, h, 2);
    }
    if (observer_) {
      for (int i = 0; i < ch.n_tokens; ++i) {
        const float* row = qkv_.data() + size_t(t0 + i) * ld + qd;
        observer_(l_, ch.start_pos + i, row, row + kvd);
      }
    }
    t0 += ch.n_tokens;
  }
  att_.resize(size_t(T_) * qd);
  t0 = 0;
  for (const SeqChunk& ch : chunks_) {
    if (fast_) {
      fast::AttnParams a;
      a.fmt = fmt_;
      a.k_pool = k_pool_[size_t(l_)].data();
      a.v_pool = v_pool_[size_t(l_)].data();
      a.k_row = k_row_;
      a.v_row = v_row_;
      a.block_table = ch.block_table;
      a.start_pos = ch.start_pos;
      a.n_tokens = ch.n_tokens;
      a.n_heads = c_.n_heads;
      a.n_kv_heads = c_.n_kv_heads;
      a.head_dim = d;
      a.window = c_.layers[size_t(l_)].window;
      a.scale = c_.score_scale();
      a.softcap = c_.attn_softcap;
      a.q = qkv_.data() + size_t(t0) * ld;
      a.ldq = ld;
      a.out = att_.data() + size_t(t0) * qd;
      a.exact = exact_kv(ch, qkv_.data() + size_t(t0) * ld, ld);
      fast::attend(a, fast_->isa, *pool_);
    } else {
      const fast::ExactKv e = exact_kv(ch, qkv_.data() + size_t(t0) * ld, ld);
      // With a recent window, runs of query tokens that read the same keys exactly.
      for (int i = 0, n = 0; i < ch.n_tokens; i += n) {
        n = 1;
        while (i + n < ch.n_tokens &&
               (win_.recent == 0 || win_.boundary(ch.start_pos + i + n + 1) == win_.boundary(ch.start_pos + i + 1)))
          ++n;
        SeqChunk part = ch;
        part.tokens += i;
        part.start_pos += i;
        part.n_tokens = n;
        attend(l_, part, qkv_.data() + size_t(t0 + i) * ld, ld, att_.data() + size_t(t0 + i) * qd, e);
      }
    }
    t0 += ch.n_tokens;
  }
  if (!win_.on()) return;
  // The window keeps the chunk's tokens it must hold from now on (after attention: a long
  // chunk's later pages reuse the ring pages its earlier queries read).
  t0 = 0;
  for (const SeqChunk& ch : chunks_) {
    const int64_t n = ch.start_pos + ch.n_tokens;
    uint16_t* wk = win_k_[size_t(l_)].data() + size_t(ch.window_slot) * win_slot_values();
    uint16_t* wv = win_v_[size_t(l_)].data() + size_t(ch.window_slot) * win_slot_values();
    for (int i = 0; i < ch.n_tokens; ++i) {
      const int p = ch.start_pos + i;
      if (!win_.holds(p, n)) continue;
      for (int h = 0; h < c_.n_kv_heads; ++h) {
        const size_t at = ((size_t(win_.page_of(p)) * c_.n_kv_heads + size_t(h)) * kPageSize + size_t(p % kPageSize)) * d;
        const float* row = qkv_.data() + size_t(t0 + i) * ld + qd + size_t(h) * d;
        for (int j = 0; j < d; ++j) {
          wk[at + size_t(j)] = f32_to_bf16(row[j]);
          wv[at + size_t(j)] = f32_to_bf16(row[kvd + j]);
        }
      }
    }
    t0 += ch.n_tokens;
  }
}

// Attention of one chunk over its sequence's cached tokens, as two matrix products per KV
// head: S = (scale * R_k q) K^T over the keys any of its tokens can see (a window drops the
// oldest; the rest are masked per row after the product), soft-capping, row softmax, O = P V,
// then O rotated back by the V rotation.
// Keys that the exact window holds for these queries (the same for all of them: the caller
// splits a chunk where that changes) are read from it instead of decoded.
// q: [n_tokens, ld] (post rope, q heads first); out: [n_tokens, q_dim].
void CpuBackend::attend(int layer, const SeqChunk& ch, const float* q, int ld, float* out,
                        const fast::ExactKv& exact) {
  const int d = c_.head_dim, nkv = c_.n_kv_heads, nh = c_.n_heads, group = nh / nkv;
  const int window = c_.layers[size_t(layer)].window;
  const int n_ctx = ch.start_pos + ch.n_tokens, nt = ch.n_tokens, rows = group * nt;
  const int k0 = window > 0 ? std::max(0, ch.start_pos - window + 1) : 0;  // first key any row sees
  const int nk = n_ctx - k0;
  kd_.resize(size_t(nkv) * nk * d);
  vt_.resize(size_t(nkv) * d * nk);
  const KvFormat& fmt = *fmt_;
#pragma omp parallel
  {
    std::vector<float> vrow(static_cast<size_t>(d));
#pragma omp for collapse(2) schedule(static)
    for (int h = 0; h < nkv; ++h) {
      for (int j = 0; j < nk; ++j) {
        const int p = k0 + j, page = ch.block_table[p / kPageSize], slot = p % kPageSize;
        if (exact.w.on() && exact.w.exact(p, ch.start_pos)) {
          fast::load_exact(exact, fmt, 0, nkv, d, h, p, kd_.data() + (size_t(h) * nk + j) * d);
          fast::load_exact(exact, fmt, 1, nkv, d, h, p, vrow.data());
        } else {
          fmt.k.decode(k_slot(layer, page, h, slot), d, kd_.data() + (size_t(h) * nk + j) * d);
          fmt.v.decode(v_slot(layer, page, h, slot), d, vrow.data());
        }
        float* vt = vt_.data() + size_t(h) * d * nk;  // [d][nk]
        for (int i = 0; i < d; ++i) vt[size_t(i) * nk + j] = vrow[size_t(i)];
      }
    }
  }
  const float scale = c_.score_scale(), cap = c_.attn_softcap;
  qh_.resize(size_t(rows) * d);
  sc_.resize(size_t(rows) * nk);
  oh_.resize(size_t(rows) * d);
  for (int h = 0; h < nkv; ++h) {
    // Rows ordered (g, t): query head h * group + g at token t.
    for (int g = 0; g < group; ++g) {
      for (int t = 0; t < nt; ++t) {
        float* dst = qh_.data() + (size_t(g) * nt + t) * d;
        const float* src = q + size_t(t) * ld + size_t(h * group + g) * d;
        for (int i = 0; i < d; ++i) dst[i] = src[i] * scale;
        rotate_kv(fmt.k.rotation, dst, d);
      }
    }
    cpu::matmul_wt(qh_.data(), kd_.data() + size_t(h) * nk * d, nullptr, sc_.data(), rows, nk, d);
#pragma omp parallel for schedule(static) if (int64_t(rows) * nk > 20000)
    for (int r = 0; r < rows; ++r) {
      const int t = r % nt, qpos = ch.start_pos + t;
      const int hi = qpos + 1 - k0;                                        // causal: keys < hi
      const int lo = window > 0 ? std::max(0, qpos - window + 1 - k0) : 0;  // window: keys >= lo
      float* srow = sc_.data() + size_t(r) * nk;
      if (cap > 0)
        for (int p = lo; p < hi; ++p) srow[p] = cap * std::tanh(srow[p] / cap);
      float mx = -INFINITY;
      for (int p = lo; p < hi; ++p) mx = std::max(mx, srow[p]);
      double sum = 0;
      for (int p = lo; p < hi; ++p) {
        srow[p] = std::exp(srow[p] - mx);
        sum += srow[p];
      }
      const float inv = float(1.0 / sum);
      for (int p = 0; p < nk; ++p) srow[p] = (p >= lo && p < hi) ? srow[p] * inv : 0.0f;
    }
    cpu::matmul_wt(sc_.data(), vt_.data() + size_t(h) * d * nk, nullptr, oh_.data(), rows, d, nk);
    for (int g = 0; g < group; ++g) {
      for (int t = 0; t < nt; ++t) {
        float* o = oh_.data() + (size_t(g) * nt + t) * d;
        rotate_kv(fmt.v.rotation, o, d);
        std::memcpy(out + size_t(t) * nh * d + size_t(h * group + g) * d, o, size_t(d) * 4);
      }
    }
  }
}

// X += alpha * sum_k p_k expert_k(H): the router's softmax (fp32) over all experts, the top k
// (ties to the lower index, as torch.topk), renormalised when the model says so; each expert
// runs on the rows routed to it.
void CpuBackend::moe(float alpha) {
  const LayerF32& W = L();
  const int E = c_.n_experts, K = c_.top_k, H = c_.hidden, F = c_.moe_ffn;
  std::vector<float> logits(size_t(T_) * E);
  W.proj[size_t(Proj::Router)].apply(h_.data(), logits.data(), T_, fast());
  std::vector<std::vector<std::pair<int, float>>> routed(static_cast<size_t>(E));  // expert -> (token, weight)
  std::vector<int32_t> ids(static_cast<size_t>(K));
  std::vector<float> w(static_cast<size_t>(K));
  for (int t = 0; t < T_; ++t) {
    cpu::moe_route(logits.data() + size_t(t) * E, E, K, c_.norm_topk, ids.data(), w.data());
    for (int k = 0; k < K; ++k) routed[size_t(ids[size_t(k)])].push_back({t, w[size_t(k)]});
  }
  std::vector<float> xin, gu, act, y;
  for (int e = 0; e < E; ++e) {
    const auto& rt = routed[size_t(e)];
    if (rt.empty()) continue;
    const int n = int(rt.size());
    const ExpertCpu& X = W.experts[size_t(e)];
    xin.resize(size_t(n) * H);
    for (int i = 0; i < n; ++i)
      std::memcpy(xin.data() + size_t(i) * H, h_.data() + size_t(rt[size_t(i)].first) * H, size_t(H) * 4);
    gu.resize(size_t(n) * 2 * F);
    X.gate_up.apply(xin.data(), gu.data(), n, fast());
    act.resize(size_t(n) * F);
    for (int i = 0; i < n; ++i)
      cpu::silu_mul(gu.data() + size_t(i) * 2 * F, gu.data() + size_t(i) * 2 * F + F, act.data() + size_t(i) * F,
                    size_t(F));
    y.resize(size_t(n) * H);
    X.down.apply(act.data(), y.data(), n, fast());
    for (int i = 0; i < n; ++i) {
      float* dst = x_.data() + size_t(rt[size_t(i)].first) * H;
      const float wgt = alpha * rt[size_t(i)].second;
      for (int j = 0; j < H; ++j) dst[j] += wgt * y[size_t(i) * H + j];
    }
  }
  const ProjCpu& sgu = W.proj[size_t(Proj::SharedGateUp)];
  if (!sgu) return;
  // The shared expert on every token, scaled by sigmoid(H w_sg).
  const int S = sgu.out / 2;
  std::vector<float> sg(static_cast<size_t>(T_));
  W.proj[size_t(Proj::SharedGate)].apply(h_.data(), sg.data(), T_, fast());
  gu.resize(size_t(T_) * 2 * S);
  sgu.apply(h_.data(), gu.data(), T_, fast());
  act.resize(size_t(T_) * S);
  for (int t = 0; t < T_; ++t)
    cpu::silu_mul(gu.data() + size_t(t) * 2 * S, gu.data() + size_t(t) * 2 * S + S, act.data() + size_t(t) * S, size_t(S));
  y.resize(size_t(T_) * H);
  W.proj[size_t(Proj::SharedDown)].apply(act.data(), y.data(), T_, fast());
  for (int t = 0; t < T_; ++t) {
    const float wgt = alpha / (1.0f + std::exp(-sg[size_t(t)]));
    float* dst = x_.data() + size_t(t) * H;
    for (int j = 0; j < H; ++j) dst[j] += wgt * y[size_t(t) * H + j];
  }
}

// QKV rows [T, 2 q_dim + 2 kv_dim] as q_proj | k_proj | v_proj wrote them, q_proj giving
// [query_h | gate_h] per head: the gates go to gate_ [T, q_dim] and the rows close up to
// [T, q_dim + 2 kv_dim] in place (each row moves down, never over a row not yet read).
void CpuBackend::split_attn_gate() {
  const int d = c_.head_dim, qd = c_.q_dim(), kvd = c_.kv_dim(), ld_in = 2 * qd + 2 * kvd, ld = qd + 2 * kvd;
  gate_.resize(size_t(T_) * qd);
  std::vector<float> row(static_cast<size_t>(ld_in));
  for (int t = 0; t < T_; ++t) {
    std::memcpy(row.data(), qkv_.data() + size_t(t) * ld_in, size_t(ld_in) * 4);
    float* dst = qkv_.data() + size_t(t) * ld;
    for (int h = 0; h < c_.n_heads; ++h) {
      std::memcpy(dst + size_t(h) * d, row.data() + size_t(h) * 2 * d, size_t(d) * 4);
      std::memcpy(gate_.data() + size_t(t) * qd + size_t(h) * d, row.data() + size_t(h) * 2 * d + d, size_t(d) * 4);
    }
    std::memcpy(dst + qd, row.data() + 2 * qd, size_t(2 * kvd) * 4);
  }
}

void CpuBackend::attn_gate() {
  for (size_t i = 0; i < gate_.size(); ++i) att_[i] *= 1.0f / (1.0f + std::exp(-gate_[i]));
}

// One sequence at a time (its state is sequential in the tokens); within one, channels and
// value heads in parallel (backend/cpu/delta_net.h). NOTE: the recurrent form throughout: on 2
// cores the chunked form's loops measured 20 % slower at prefill 512 (3,490 vs 4,200 tok/s).
void CpuBackend::delta_net() {
  const DeltaNetShape& d = c_.dn;
  const LayerF32& W = L();
  const int vd = d.value_dim(), ld = d.proj_dim();
  att_.resize(size_t(T_) * vd);
  cpu::ParallelFor par = [&](int n, const std::function<void(int)>& fn) {
    if (fast_) {
      pool_->parallel_for(n, [&](int i, int) { fn(i); });
    } else {
#pragma omp parallel for schedule(dynamic)
      for (int i = 0; i < n; ++i) fn(i);
    }
  };
  int t0 = 0;
  for (const SeqChunk& ch : chunks_) {
    float* st = state_.data() + size_t(ch.state_slot) * slot_floats_ + dn_offset_[size_t(l_)];
    const size_t conv_floats = size_t(d.conv - 1) * d.conv_dim();
    if (ch.start_pos == 0) std::fill(st, st + d.state_floats(), 0.0f);  // a new sequence starts from zeros
    cpu::DeltaNetParams p;
    p.nk = d.nk, p.nv = d.nv, p.dk = d.dk, p.dv = d.dv, p.conv = d.conv, p.grouped = d.grouped;
    p.n_tokens = ch.n_tokens;
    p.proj = qkv_.data() + size_t(t0) * ld;
    p.ld_proj = ld;
    p.conv_w = W.vec[size_t(Vec::DnConv)].data();
    p.a_log = W.vec[size_t(Vec::DnALog)].data();
    p.dt_bias = W.vec[size_t(Vec::DnDtBias)].data();
    p.norm_w = W.vec[size_t(Vec::DnNorm)].data();
    p.eps = c_.rms_eps;
    p.conv_state = st;
    p.state = st + conv_floats;
    p.out = att_.data() + size_t(t0) * vd;
    p.ld_out = vd;
    cpu::delta_net_forward(p, par);
    t0 += ch.n_tokens;
  }
}

void CpuBackend::forward(std::span<const SeqChunk> chunks, std::vector<float>& logits) {
  NINFER_CHECK(fmt_ != nullptr, "init_kv was not called");
  const int H = c_.hidden;
  int T = 0;
  for (const SeqChunk& ch : chunks) {
    NINFER_CHECK(ch.n_tokens > 0, "empty chunk");
    NINFER_CHECK(int64_t(ch.n_blocks) * kPageSize >= ch.start_pos + ch.n_tokens,
                 "block table of {} pages cannot hold {} tokens", ch.n_blocks, ch.start_pos + ch.n_tokens);
    for (int b = 0; b < ch.n_blocks; ++b)
      NINFER_CHECK(ch.block_table[b] >= 0 && ch.block_table[b] < n_pages_, "page id {} out of range",
                   ch.block_table[b]);
    if (win_.on())
      NINFER_CHECK(ch.window_slot >= 0 && ch.window_slot < n_win_slots_, "window slot {} out of range ({} slots)",
                   ch.window_slot, n_win_slots_);
    if (slot_floats_ > 0)
      NINFER_CHECK(ch.state_slot >= 0 && ch.state_slot < n_slots_, "state slot {} out of range ({} slots)",
                   ch.state_slot, n_slots_);
    T += ch.n_tokens;
  }
  chunks_ = chunks;
  T_ = T;
  const size_t Ts = static_cast<size_t>(T);
  x_.assign(Ts * H, 0.0f);
  h_.assign(Ts * H, 0.0f);
  tmp_.assign(Ts * H, 0.0f);
  qkv_.assign(Ts * size_t(c_.qkv_width()), 0.0f);
  gu_.assign(Ts * 2 * size_t(c_.ffn), 0.0f);
  {
    int t = 0;
    for (const SeqChunk& ch : chunks) {
      for (int i = 0; i < ch.n_tokens; ++i, ++t) {
        const int32_t id = ch.tokens[i];
        if (id < 0 || id >= c_.vocab) fail("token id {} is outside the vocabulary (0..{})", id, c_.vocab - 1);
        const float* e = embed_.data() + size_t(id) * H;
        float* x = x_.data() + size_t(t) * H;
        for (int j = 0; j < H; ++j) x[j] = e[j] * c_.embed_scale;
      }
    }
  }
  for (l_ = 0; l_ < c_.n_layers; ++l_) c_.family->layer(c_, l_, *this);
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
    std::memcpy(xr.data() + size_t(r) * H, x_.data() + size_t(rows[size_t(r)]) * H, size_t(H) * 4);
  cpu::rmsnorm(xr.data(), final_norm_.data(), xr.data(), R, H, c_.rms_eps);
  logits.resize(size_t(R) * c_.vocab);
  if (head_pk_) {
    fast::gemm(fast_->isa, *pool_, xr.data(), R, head_pk_, nullptr, logits.data(), c_.vocab);
  } else {
    const float* head = lm_head_.empty() ? embed_.data() : lm_head_.data();
    cpu::matmul_wt(xr.data(), head, nullptr, logits.data(), R, c_.vocab, H);
  }
  const float cap = c_.final_softcap, ls = c_.logit_scale;
  if (cap > 0 || ls != 1.0f)
    for (float& v : logits) {
      v *= ls;
      if (cap > 0) v = cap * std::tanh(v / cap);
    }
}

}  // namespace

CpuKernels cpu_kernels_from_env() {
  const char* v = std::getenv("NINFER_CPU_KERNELS");
  if (!v || !*v || std::string_view(v) == "fast") return CpuKernels::Fast;
  if (std::string_view(v) == "reference") return CpuKernels::Reference;
  fail("NINFER_CPU_KERNELS must be fast or reference, got '{}'", v);
}

std::unique_ptr<Backend> make_cpu_backend(const Model& model, const CpuBackendOptions& opt) {
  return std::make_unique<CpuBackend>(model, opt);
}

}  // namespace ninfer
