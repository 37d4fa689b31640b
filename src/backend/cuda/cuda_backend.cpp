// The CUDA backend: the Backend interface (backend/backend.h) on one GPU.
//
// Forward pass of a batch of T new tokens (all chunks concatenated): the embedding, then each
// layer as its family's sequence of operations (model/family.h, LayerOps), implemented here:
//   norm      rmsnorm -> bf16 act [T, hidden]                 (ops.cu)
//   linear    act W^T (+ bias) -> fp32 [T, out] (=, +=, alpha) (cuBLAS; our GEMV for <= 8 rows;
//             q|k|v and gate|up fused)
//   qk_norm_rope  q/k RMSNorm + rope in place on qkv           (ops.cu)
//   attention K/V of the new tokens -> cache pages (kv_append.cu), paged attention -> bf16
//             [T, q_dim] (attention.cu; one PagedAttention per distinct sliding window). A
//             head_dim the kernels lack (96) runs them at a padded width (kv/capacity.h,
//             cuda_kv_head_dim): q/k/v heads copied zero-padded first, the output's heads cut
//             back after (head_pad.h); pages hold the padded rows
//   gated_act act(g) * u -> bf16; norm_add (post-norms); moe (router, top-k, the chosen
//             experts: a gathered GEMV for decode, per-expert GEMMs over sorted rows for prefill)
// then the rows that need logits: rmsnorm -> lm_head GEMM -> fp32 logits (scaled, soft-capped)
// -> host.
// The residual stream x stays fp32. Dense weights are bf16 on the device, converted once from
// whatever the checkpoint stores; quantised projections (fp8-e4m3, int8, int4: a quantised
// checkpoint or --weights) stay quantised in gemv_quant.h's layout: decode reads them with the
// quantised GEMVs, prefill runs per-channel fp8 through cuBLASLt's FP8 GEMM (activations
// quantised per token) and everything else through bf16 tiles dequantised on the device and
// the bf16 GEMM (QuantDev below). With CudaGemmMode::Split the GEMM inputs carry a lo half
// (ops.h) and every GEMM runs over 2T rows followed by an epilogue that adds the halves.
#include "backend/cuda/cuda_backend.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "backend/cuda/attention.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/delta_net.h"
#include "backend/cuda/gemv_quant.h"
#include "backend/cuda/head_pad.h"
#include "backend/cuda/kv_cache.h"
#include "backend/cuda/quant_upload.h"
#include "backend/cuda/ops.h"
#include "core/dtype.h"
#include "core/env.h"
#include "core/error.h"
#include "kv/capacity.h"
#include "kv/page_table.h"
#include "model/model.h"

#define NINFER_CUBLAS_CHECK(call)                                                                   \
  do {                                                                                              \
    cublasStatus_t _st = (call);                                                                    \
    if (_st != CUBLAS_STATUS_SUCCESS)                                                               \
      ::ninfer::fail("cuBLAS error {} ({}) in {} at {}:{}", int(_st), cublasGetStatusString(_st), #call, \
                     __FILE__, __LINE__);                                                           \
  } while (0)

namespace ninfer {
namespace {

static_assert(cuda::kCachePageSize == kPageSize, "CUDA cache page size must match the page table's");

// A device allocation that frees itself.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), bytes_(o.bytes_) {
    o.p_ = nullptr;
    o.bytes_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = o.p_;
      bytes_ = o.bytes_;
      o.p_ = nullptr;
      o.bytes_ = 0;
    }
    return *this;
  }
  void reset() {
    if (p_) cudaFree(p_);
    p_ = nullptr;
    bytes_ = 0;
  }
  void alloc(size_t bytes) {
    reset();
    if (bytes == 0) return;
    cudaError_t e = cudaMalloc(&p_, bytes);
    if (e != cudaSuccess) {
      p_ = nullptr;
      size_t fr = 0, tot = 0;
      cudaGetLastError();
      cudaMemGetInfo(&fr, &tot);
      fail("CUDA out of memory allocating {:.1f} MiB ({:.1f} MiB free of {:.1f} MiB)", bytes / 1048576.0,
           fr / 1048576.0, tot / 1048576.0);
    }
    bytes_ = bytes;
  }
  // Grows (contents lost) to at least `bytes`.
  void ensure(size_t bytes) {
    if (bytes > bytes_) alloc(bytes);
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(p_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

std::vector<uint16_t> to_bf16(const WeightRef& w) {
  std::vector<uint16_t> out(size_t(w.t->numel()));
  if (w.t->dtype == DType::BF16) {
    std::memcpy(out.data(), w.t->data, out.size() * 2);
  } else {
    std::vector<float> f(out.size());
    convert_to_f32(w.t->dtype, w.t->data, f.data(), f.size());
    for (size_t i = 0; i < f.size(); ++i) out[i] = f32_to_bf16(f[i]);
  }
  return out;
}

std::vector<float> to_f32(const WeightRef& w) {
  std::vector<float> out(size_t(w.t->numel()));
  convert_to_f32(w.t->dtype, w.t->data, out.data(), out.size());
  return out;
}

// A quantised projection (or, for experts, all experts' matrices one after another) in the
// device layout of cuda/gemv_quant.h, and the view the kernels take.
struct QuantDev {
  DeviceBuffer codes, scales, zeros, g_idx, col_perm;
  DeviceBuffer x_perm;  // col_perm: the launch's permuted activations (not weights)
  cuda::QuantWeights w;
  std::string name;        // the first part's checkpoint tensor, for errors
  bool fp8_gemm = false;   // fp8, one scale per output row, k and n multiples of 16: cuBLASLt FP8 prefill
  size_t bytes() const { return codes.bytes() + scales.bytes() + zeros.bytes() + g_idx.bytes() + col_perm.bytes(); }
};

struct Matrix {  // bf16 [n, k] row-major on the device, or quantised (q)
  DeviceBuffer buf;
  int n = 0, k = 0;
  std::unique_ptr<QuantDev> q;
  const uint16_t* ptr() const { return buf.as<uint16_t>(); }
};

struct LayerDev {
  std::array<Matrix, size_t(Proj::kCount)> proj;
  std::array<DeviceBuffer, size_t(Proj::kCount)> bias;  // fp32, empty when absent
  std::array<DeviceBuffer, size_t(Vec::kCount)> vec;    // fp32, empty when absent
  DeviceBuffer experts_gu, experts_down;  // bf16 [n_experts][2 moe_ffn][hidden], [n_experts][hidden][moe_ffn]
  std::unique_ptr<QuantDev> qexperts_gu, qexperts_down;  // quantised experts instead (expert_* strides)
};

bool proj_quantised(const ProjWeights& p) {
  for (const ProjWeights::Part& part : p.parts)
    if (part.w.q) return true;
  return false;
}

// The quantised parts of a projection packed for the device (regroup: g_idx may become col_perm;
// not for experts); a dense part or rows of a quantised tensor (not a whole one) are refused
// naming the tensor.
QuantHost pack_quant(const ProjWeights& p, bool regroup) {
  std::vector<const QuantMatrix*> parts;
  const QuantMatrix* q0 = nullptr;
  for (const ProjWeights::Part& part : p.parts)
    if (part.w.q && !q0) q0 = part.w.q;
  NINFER_CHECK(q0 != nullptr, "pack_quant of a dense projection");
  for (const ProjWeights::Part& part : p.parts) {
    if (!part.w.q)
      fail("tensor '{}' is held as {} but another part of the same projection is dense; the CUDA backend needs one "
           "weight format per fused projection (use --device cpu)", q0->name, q0->format->name);
    if (part.row0 != 0 || part.rows != part.w.q->rows)
      fail("tensor '{}': rows {}..{} of a quantised tensor; the CUDA backend uploads whole quantised tensors",
           part.w.q->name, part.row0, part.row0 + part.rows);
    parts.push_back(part.w.q);
  }
  return pack_quant_parts(parts, regroup);
}

CudaGemmMode mode_from_env(const CudaBackendOptions& opt) {
  if (!opt.gemm_mode_from_env) return opt.gemm_mode;
  const char* e = std::getenv("NINFER_CUDA_GEMM");
  if (!e || !*e) return opt.gemm_mode;
  const std::string v = e;
  if (v == "split") return CudaGemmMode::Split;
  if (v == "bf16") return CudaGemmMode::Bf16;
  fail("NINFER_CUDA_GEMM must be 'bf16' or 'split', got '{}'", v);
}

bool cuda_kv_supported(const KvFormat& f, cuda::CacheKind* kind) { return cuda::cache_kind_for(f.name, kind); }

class CudaBackend final : public Backend, private LayerOps {
 public:
  CudaBackend(const Model& model, const CudaBackendOptions& opt) : c_(model.config) {
    mode_ = mode_from_env(opt);
    use_gemv_ = env_switch("NINFER_CUDA_GEMV");
    use_graphs_ = env_switch("NINFER_CUDA_GRAPHS");
    fuse_norm_ = env_switch("NINFER_CUDA_FUSE_NORM", true);
    fuse_route_ = env_switch("NINFER_CUDA_FUSE_ROUTE", true);
    fuse_act_ = env_switch("NINFER_CUDA_FUSE_ACT", true);
    fuse_combine_ = env_switch("NINFER_CUDA_FUSE_COMBINE", true);
    kd_ = cuda_kv_head_dim(c_.head_dim);
    if (kd_ == 0)
      fail("the CUDA backend supports head_dim 64, 128, 256 and 96 (run as 128); {} has head_dim {} (use --device cpu)",
           model.dir.string(), c_.head_dim);
    if (c_.n_heads % c_.n_kv_heads != 0)
      fail("{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", model.dir.string(), c_.n_heads,
           c_.n_kv_heads);
    std::string why;
    if (!cuda_supports_model(c_, &why)) fail("{}: {} (use --device cpu)", model.dir.string(), why);
    NINFER_CUDA_CHECK(cudaSetDevice(opt.device));
    cudaDeviceProp prop{};
    NINFER_CUDA_CHECK(cudaGetDeviceProperties(&prop, opt.device));
    device_name_ = prop.name;
    NINFER_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    NINFER_CUBLAS_CHECK(cublasCreate(&cublas_));
    NINFER_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
    // NOTE: our own cuBLAS workspace, allocated before the KV pool takes the free memory.
    cublas_ws_.alloc(size_t(32) << 20);
    NINFER_CUBLAS_CHECK(cublasSetWorkspace(cublas_, cublas_ws_.as<void>(), cublas_ws_.bytes()));
    NINFER_CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));
    if (c_.n_experts > 256) fail("{}: the CUDA backend routes at most 256 experts, the model has {}", model.dir.string(), c_.n_experts);
    fp8_gemm_ = opt.fp8_gemm && env_switch("NINFER_CUDA_FP8_GEMM");
    upload_weights(model);
    if (deq_rows_max_ > 0 || has_fp8_gemm_) NINFER_CUBLAS_CHECK(cublasLtCreate(&lt_));
    if (deq_rows_max_ > 0) {
      // NOTE: the bf16 tile that prefill dequantises int8 / int4 / block-scaled fp8 weights into,
      // allocated before the KV pool takes the free memory: at most 64 MiB (whole matrices up to
      // that size, else row tiles of it; the GEMM per tile stays large).
      deq_.alloc(std::min<size_t>(deq_rows_max_, size_t(64) << 20));
    }
    size_t off = 0;
    for (const LayerSpec& l : c_.layers) {
      dn_offset_.push_back(off);
      if (l.mixer == Mixer::DeltaNet) off += c_.dn.state_floats();
    }
    slot_floats_ = off;
    if (c_.n_experts > 0) {  // the fused router's arrival counter (GemvFuse::done), kept at 0 between launches
      moe_done_.alloc(sizeof(int));
      NINFER_CUDA_CHECK(cudaMemset(moe_done_.as<void>(), 0, sizeof(int)));
    }
    ensure_tokens(512, 16);
  }

  ~CudaBackend() override {
    if (stream_) cudaStreamSynchronize(stream_);
    for (auto& [key, plan] : lt_plans_) plan.destroy();
    if (lt_) cublasLtDestroy(lt_);
    if (graph_exec_) cudaGraphExecDestroy(graph_exec_);
    attns_.clear();
    if (pinned_) cudaFreeHost(pinned_);
    if (cublas_) cublasDestroy(cublas_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  std::string name() const override { return "cuda"; }

  void init_kv(const KvFormat& fmt, int n_pages) override {
    cuda::CacheKind kind;
    if (!cuda_kv_supported(fmt, &kind))
      fail("--kv-dtype {} has no CUDA kernels yet (the CUDA backend supports bf16, int8, fp8, nvfp4, k8v4, "
           "int4, rk4v4-e8 and rk2v4-e8); use --device cpu for {}", fmt.name, fmt.name);
    // NOTE: the format must hold the model's head_dim as the CPU oracle does (head_dim 96: f32 and
    // bf16 only), whatever width the pages have.
    fmt.check_head_dim(c_.head_dim);
    NINFER_CHECK(n_pages > 0, "init_kv with {} pages", n_pages);
    NINFER_CUDA_CHECK(cudaStreamSynchronize(stream_));
    pool_.reset();
    if (graph_exec_) cudaGraphExecDestroy(graph_exec_);
    graph_exec_ = nullptr;
    graph_key_.clear();
    last_key_.clear();
    kind_ = kind;
    fmt_ = &fmt;
    n_pages_ = n_pages;
    // NOTE: K and V blocks differ in size for rk2v4-e8 (16-bit K codes, 32-bit V codes).
    k_side_bytes_ = size_t(n_pages) * c_.n_kv_heads * cuda::cache_block_bytes(kind, kd_, 0);
    v_side_bytes_ = size_t(n_pages) * c_.n_kv_heads * cuda::cache_block_bytes(kind, kd_, 1);
    // Attention layers only: a DeltaNet layer keeps no KV (attn_index_).
    attn_index_.assign(size_t(c_.n_layers), -1);
    int na = 0;
    for (int l = 0; l < c_.n_layers; ++l)
      if (c_.layers[size_t(l)].mixer == Mixer::Attention) attn_index_[size_t(l)] = na++;
    n_attn_layers_ = na;
    pool_.alloc((k_side_bytes_ + v_side_bytes_) * size_t(na));
    // NOTE: zeroed so that never-written slots hold finite values (they are masked anyway).
    NINFER_CUDA_CHECK(cudaMemsetAsync(pool_.as<void>(), 0, pool_.bytes(), stream_));
    cuda::AttnShape sh;
    sh.n_heads = c_.n_heads;
    sh.n_kv_heads = c_.n_kv_heads;
    sh.head_dim = kd_;
    sh.kind = kind;
    sh.q_rotation = int(fmt.k.rotation);
    sh.o_rotation = int(fmt.v.rotation);
    sh.softcap = c_.attn_softcap;
    // One attention object per distinct window (each plans its own pages per batch).
    attns_.clear();
    layer_attn_.assign(size_t(c_.n_layers), 0);
    for (int l = 0; l < c_.n_layers; ++l) {
      if (attn_index_[size_t(l)] < 0) continue;
      const int w = c_.layers[size_t(l)].window;
      size_t i = 0;
      while (i < attns_.size() && attns_[i]->shape().window != w) ++i;
      if (i == attns_.size()) {
        sh.window = w;
        attns_.push_back(std::make_unique<cuda::PagedAttention>(sh));
      }
      layer_attn_[size_t(l)] = int(i);
    }
    NINFER_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  const KvFormat& kv_format() const override {
    NINFER_CHECK(fmt_ != nullptr, "init_kv was not called");
    return *fmt_;
  }

  void init_state(int n_slots) override {
    NINFER_CHECK(n_slots >= 0, "init_state: {} slots", n_slots);
    if (slot_floats_ == 0) return;
    NINFER_CUDA_CHECK(cudaStreamSynchronize(stream_));
    DeviceBuffer fresh;
    fresh.alloc(size_t(n_slots) * slot_floats_ * 4);
    const size_t keep = size_t(std::min(n_slots, n_slots_)) * slot_floats_ * 4;
    if (keep) NINFER_CUDA_CHECK(cudaMemcpy(fresh.as<void>(), state_.as<void>(), keep, cudaMemcpyDeviceToDevice));
    state_ = std::move(fresh);
    n_slots_ = n_slots;
    // NOTE: a replayed graph would read the old state buffer.
    if (graph_exec_) cudaGraphExecDestroy(graph_exec_);
    graph_exec_ = nullptr;
    graph_key_.clear();
  }

  size_t page_bytes(const KvFormat& fmt) const override { return kv_page_bytes(c_, fmt, kd_); }

  MemoryInfo memory() const override {
    MemoryInfo m;
    size_t fr = 0, tot = 0;
    NINFER_CUDA_CHECK(cudaMemGetInfo(&fr, &tot));
    m.total = tot;
    m.free = fr;
    m.weights = weight_bytes_;
    return m;
  }

  void set_kv_observer(KvObserver obs) override { observer_ = std::move(obs); }

  // A page's blocks of one layer and side are contiguous (n_kv_heads blocks) and layers are
  // a fixed pitch apart, so each (page pair, side) is one 2D copy of n_layers rows.
  void copy_kv_pages(std::span<const int32_t> src, std::span<const int32_t> dst) override {
    NINFER_CHECK(fmt_ != nullptr, "init_kv was not called");
    NINFER_CHECK(src.size() == dst.size(), "copy_kv_pages: {} sources, {} destinations", src.size(), dst.size());
    const size_t kb = size_t(c_.n_kv_heads) * cuda::cache_block_bytes(kind_, kd_, 0);
    const size_t vb = size_t(c_.n_kv_heads) * cuda::cache_block_bytes(kind_, kd_, 1);
    const size_t pitch = k_side_bytes_ + v_side_bytes_;
    uint8_t* base = pool_.as<uint8_t>();
    for (size_t i = 0; i < src.size(); ++i) {
      NINFER_CHECK(src[i] >= 0 && src[i] < n_pages_ && dst[i] >= 0 && dst[i] < n_pages_ && src[i] != dst[i],
                   "copy_kv_pages: bad page pair {} -> {} ({} pages)", src[i], dst[i], n_pages_);
      NINFER_CUDA_CHECK(cudaMemcpy2DAsync(base + size_t(dst[i]) * kb, pitch, base + size_t(src[i]) * kb, pitch, kb,
                                          size_t(n_attn_layers_), cudaMemcpyDeviceToDevice, stream_));
      uint8_t* vbase = base + k_side_bytes_;
      NINFER_CUDA_CHECK(cudaMemcpy2DAsync(vbase + size_t(dst[i]) * vb, pitch, vbase + size_t(src[i]) * vb, pitch, vb,
                                          size_t(n_attn_layers_), cudaMemcpyDeviceToDevice, stream_));
    }
    NINFER_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  void forward(std::span<const SeqChunk> chunks, std::vector<float>& logits) override;

 private:
  // Enqueues embedding .. lm_head for a prepared batch on stream_ (capturable).
  void enqueue_forward(int T, int R, bool split, const int32_t* d_ids, const int32_t* d_rows,
                       const std::vector<int32_t>& meta);
  // LayerOps (model/family.h) on layer l_ of the batch being enqueued.
  // NOTE: a decode-sized norm X -> H is deferred (NINFER_CUDA_FUSE_NORM): the GEMVs that read
  // H next compute it in their prologue (cuda::GemvFuse), and it is launched on its own only
  // when something reads H as a buffer. By LayerOps' contract (family.h) H is dead once X
  // changes; a read after that fails here instead of reading a norm of the new X.
  void norm(Buf in, Vec w, Buf out) override {
    NINFER_CHECK(out == Buf::H, "norm writes H");
    h_overwritten();
    if (in == Buf::X && fuse_norm_ && use_gemv_ && !split_ && T_ <= cuda::kGemvMaxRows &&
        cuda::gemv_norm_fits(T_, c_.hidden)) {
      pend_norm_w_ = vec(w);
      return;
    }
    cuda::launch_rmsnorm_bf16(fbuf(in), nullptr, vec(w), act_.as<uint16_t>(), T_, c_.hidden, c_.rms_eps, split_,
                              stream_);
  }
  void norm_add(Buf in, Vec w, Buf acc) override {
    cuda::launch_rmsnorm_add(fbuf(in), vec(w), fbuf(acc), T_, c_.hidden, c_.rms_eps, stream_);
    if (acc == Buf::X) x_written();
  }
  void copy(Buf in, Buf out) override {
    NINFER_CHECK(out == Buf::H, "copy writes H");
    h_overwritten();
    cuda::launch_to_bf16(fbuf(in), act_.as<uint16_t>(), T_, c_.hidden, split_, stream_);
  }
  void linear(Buf in, Proj p, Buf out, bool accumulate, float alpha) override {
    const LayerDev& L = layers_[size_t(l_)];
    const Matrix& m = L.proj[size_t(p)];
    const DeviceBuffer& bias = L.bias[size_t(p)];
    // A deferred norm feeds this GEMV through its prologue (not when the GEMV writes X, the
    // norm's input: other blocks would still be reading it). H stays deferred for later readers.
    if (in == Buf::H && pend_norm_w_ && !pend_stale_ && out != Buf::X && m.n > 0 && m.k == c_.hidden && !m.q) {
      NINFER_CHECK(alpha == 1.0f || bias.bytes() == 0, "a scaled projection with a bias");
      cuda::launch_gemv_fused(m.ptr(), nullptr, fbuf(out), T_, m.n, m.k, accumulate, alpha, pending_norm(), stream_);
      if (bias.bytes()) cuda::launch_add_bias(fbuf(out), bias.as<float>(), T_, m.n, stream_);
      return;
    }
    if (in != Buf::ATT) materialize_h();  // H and FF share act_
    // ATT (the attention output) is plain bf16; H and FF follow the GEMM mode.
    const bool split = in != Buf::ATT && split_;
    const uint16_t* a = in == Buf::ATT ? att_.as<uint16_t>() : act_.as<uint16_t>();
    gemm(a, T_, m, fbuf(out), accumulate, bias, split, alpha);
    if (out == Buf::X) x_written();
  }
  // The deferred norm's state (norm() above).
  void h_overwritten() {
    pend_norm_w_ = nullptr;
    pend_stale_ = false;
  }
  void x_written() {
    if (pend_norm_w_) pend_stale_ = true;
  }
  void materialize_h() {
    if (!pend_norm_w_) return;
    NINFER_CHECK(!pend_stale_, "layer {}: H read after X changed (family.h: H lives until X is next written)", l_);
    cuda::launch_rmsnorm_bf16(x_.as<float>(), nullptr, pend_norm_w_, act_.as<uint16_t>(), T_, c_.hidden, c_.rms_eps,
                              false, stream_);
    h_overwritten();
  }
  cuda::GemvFuse pending_norm() const {
    cuda::GemvFuse f;
    f.norm_x = x_.as<float>();
    f.norm_w = pend_norm_w_;
    f.eps = c_.rms_eps;
    return f;
  }
  void qk_norm_rope() override;
  void attention() override;
  void gated_act(Activation a) override {
    h_overwritten();  // FF shares act_ with H
    cuda::launch_silu_mul_bf16(gu_.as<float>(), act_.as<uint16_t>(), T_, c_.ffn, split_, stream_,
                               a == Activation::GeluTanh ? 1 : 0);
  }
  void moe(float alpha) override;
  void split_attn_gate() override {
    cuda::launch_split_attn_gate(qkv_.as<float>(), dn_scratch_.as<float>(), gate_.as<float>(), T_, c_.n_heads,
                                 c_.head_dim, c_.kv_dim(), stream_);
  }
  void attn_gate() override {
    cuda::launch_attn_gate(att_.as<uint16_t>(), gate_.as<float>(), size_t(T_) * c_.q_dim(), stream_);
  }
  void delta_net() override;
  float* fbuf(Buf b) {
    switch (b) {
      case Buf::X: return x_.as<float>();
      case Buf::QKV: return qkv_.as<float>();
      case Buf::TMP: return tmpx_.as<float>();
      case Buf::GU: return gu_.as<float>();
      default: fail("buffer {} is not an fp32 activation on the GPU", int(b));
    }
  }
  const float* vec(Vec w) const {
    const DeviceBuffer& b = layers_[size_t(l_)].vec[size_t(w)];
    NINFER_CHECK(b.bytes() > 0, "layer {} has no vector {}", l_, int(w));
    return b.as<float>();
  }
  template <typename T>
  void upload(DeviceBuffer& b, const std::vector<T>& v) {
    b.alloc(v.size() * sizeof(T));
    if (!v.empty()) NINFER_CUDA_CHECK(cudaMemcpy(b.as<void>(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  // Rows [row0, row0 + rows) of a part's tensor into device memory at dst as bf16: straight from
  // the (mapped) tensor when it is bf16, else only those rows converted. (Whole-tensor host copies
  // per part cost O(experts^2) for fused 3-D expert tensors and minutes for a 93 GB Mixtral.)
  static void upload_part_bf16(uint16_t* dst, const ProjWeights::Part& part, int64_t in) {
    NINFER_CHECK(part.w.t != nullptr, "quantised tensor '{}' reached the CUDA upload", part.w.q ? part.w.q->name : "?");
    const size_t n = size_t(part.rows * in), off = size_t(part.row0 * in);
    const DType dt = part.w.t->dtype;
    const auto* src = static_cast<const uint8_t*>(part.w.t->data) + off * dtype_size(dt);
    if (dt == DType::BF16) {
      NINFER_CUDA_CHECK(cudaMemcpy(dst, src, n * 2, cudaMemcpyHostToDevice));
      return;
    }
    std::vector<float> f(n);
    convert_to_f32(dt, src, f.data(), n);
    std::vector<uint16_t> b(n);
    for (size_t i = 0; i < n; ++i) b[i] = f32_to_bf16(f[i]);
    NINFER_CUDA_CHECK(cudaMemcpy(dst, b.data(), n * 2, cudaMemcpyHostToDevice));
  }
  // The parts of a projection stacked along its output rows, as bf16, at dst (out() * in halves).
  static void upload_proj_bf16(uint16_t* dst, const ProjWeights& p) {
    for (const ProjWeights::Part& part : p.parts) {
      upload_part_bf16(dst, part, p.in);
      dst += size_t(part.rows * p.in);
    }
  }
  // A quantised projection in the device layout (gemv_quant.h); E > 1: E matrices of one layout
  // one after another (experts), expert e from host[e].
  std::unique_ptr<QuantDev> upload_quant(const std::vector<QuantHost>& host) {
    auto d = std::make_unique<QuantDev>();
    const QuantHost& h0 = host.front();
    d->name = h0.name;
    d->w = h0.w;
    for (const QuantHost& h : host)
      if (h.codes.size() != h0.codes.size() || h.scales.size() != h0.scales.size() ||
          h.g_idx.size() != h0.g_idx.size() || h.w.block_rows != h0.w.block_rows || h.w.n != h0.w.n ||
          !h.col_perm.empty())
        fail("tensor '{}': its layout differs from '{}' (the CUDA backend needs one layout for all experts)", h.name,
             h0.name);
    auto put = [&](DeviceBuffer& b, auto member) {
      using V = typename std::remove_reference_t<decltype(h0.*member)>::value_type;
      const size_t each = (h0.*member).size() * sizeof(V);
      b.alloc(each * host.size());
      for (size_t e = 0; e < host.size(); ++e)
        if (each)
          NINFER_CUDA_CHECK(cudaMemcpy(b.as<uint8_t>() + e * each, (host[e].*member).data(), each,
                                       cudaMemcpyHostToDevice));
    };
    put(d->codes, &QuantHost::codes);
    put(d->scales, &QuantHost::scales);
    put(d->zeros, &QuantHost::zeros);
    put(d->g_idx, &QuantHost::g_idx);
    put(d->col_perm, &QuantHost::col_perm);
    cuda::QuantWeights& w = d->w;
    w.codes = d->codes.as<uint8_t>();
    w.scales = d->scales.as<float>();
    w.zeros = h0.zeros.empty() ? nullptr : d->zeros.as<uint8_t>();
    w.g_idx = h0.g_idx.empty() ? nullptr : d->g_idx.as<int32_t>();
    if (!h0.col_perm.empty()) {
      NINFER_CHECK(host.size() == 1, "tensor '{}': experts with regrouped columns", h0.name);
      w.col_perm = d->col_perm.as<int32_t>();
      d->x_perm.alloc(size_t(w.n_seg) * cuda::kGemvMaxRows * size_t(w.k) * 2);
      w.x_perm = d->x_perm.as<uint16_t>();
    }
    w.expert_codes = h0.codes.size();
    w.expert_scales = h0.scales.size();
    w.expert_gidx = h0.g_idx.size();
    d->fp8_gemm = w.fmt == cuda::QFmt::Fp8 && w.n_groups == 1 && w.block_rows == 1 && !w.g_idx && w.k % 16 == 0 &&
                  w.n % 16 == 0 && w.row_bytes == w.k && host.size() == 1;
    if (d->fp8_gemm && fp8_gemm_) {
      has_fp8_gemm_ = true;
      fp8_k_max_ = std::max(fp8_k_max_, w.k);
    }
    // (fp8 GEMM matrices too: the bf16 tiles are their fallback when cuBLASLt has no algorithm)
    deq_rows_max_ = std::max(deq_rows_max_, size_t(w.n) * size_t(w.k) * 2);
    weight_bytes_ += d->bytes();
    return d;
  }
  void upload_matrix(Matrix& m, const ProjWeights& p) {
    if (!p) return;
    m.n = int(p.out());
    m.k = int(p.in);
    if (proj_quantised(p)) {
      m.q = upload_quant({pack_quant(p, true)});
      return;
    }
    const size_t n = size_t(p.out() * p.in);
    m.buf.alloc(n * 2);
    upload_proj_bf16(m.buf.as<uint16_t>(), p);
    weight_bytes_ += n * 2;
  }
  void upload_matrix(Matrix& m, const WeightRef& w) {
    if (w.q) fail("tensor '{}' is held as {}; the CUDA backend keeps the embedding and lm_head dense", w.q->name,
                  w.q->format->name);
    std::vector<uint16_t> all = to_bf16(w);
    m.n = int(w.t->shape[0]);
    m.k = int(w.t->shape[1]);
    upload(m.buf, all);
    weight_bytes_ += all.size() * 2;
  }
  void upload_vec(DeviceBuffer& b, const WeightRef& w, float offset = 0.0f) {
    if (!w) return;
    std::vector<float> f = to_f32(w);
    for (float& v : f) v += offset;
    upload(b, f);
  }
  // Concatenated biases; zeros stand in for a part without one when another part has one.
  void upload_bias(DeviceBuffer& b, const ProjWeights& p) {
    if (!p.has_bias()) return;
    std::vector<float> all;
    for (const ProjWeights::Part& part : p.parts) {
      std::vector<float> f = part.bias ? to_f32(part.bias) : std::vector<float>(size_t(part.rows), 0.0f);
      all.insert(all.end(), f.begin(), f.end());
    }
    upload(b, all);
  }

  void upload_weights(const Model& model) {
    const ModelWeights& w = model.weights;
    const float offset = c_.family->norm_offset_one ? 1.0f : 0.0f;
    upload_matrix(embed_, w.embed);
    if (w.lm_head.t != w.embed.t) {
      upload_matrix(lm_head_, w.lm_head);
      head_ = &lm_head_;
    } else {
      head_ = &embed_;
    }
    upload_vec(final_norm_, w.final_norm, offset);
    layers_.resize(w.layers.size());
    for (size_t i = 0; i < w.layers.size(); ++i) {
      const LayerWeights& L = w.layers[i];
      LayerDev& D = layers_[i];
      for (size_t p = 0; p < D.proj.size(); ++p) {
        upload_matrix(D.proj[p], L.proj[p]);
        upload_bias(D.bias[p], L.proj[p]);
      }
      for (size_t v = 0; v < D.vec.size(); ++v) upload_vec(D.vec[v], L.vec[v], vec_is_norm(Vec(v)) ? offset : 0.0f);
      if (!L.experts.empty() && (proj_quantised(L.experts.front().gate_up) || proj_quantised(L.experts.front().down))) {
        std::vector<QuantHost> gu, down;
        for (const ExpertWeights& e : L.experts) {
          if (!proj_quantised(e.gate_up) || !proj_quantised(e.down))
            fail("layer {}: an expert's gate|up and down are quantised and dense mixed; the CUDA backend needs every "
                 "expert of a layer in one quantised layout (use --device cpu)", i);
          gu.push_back(pack_quant(e.gate_up, false));
          down.push_back(pack_quant(e.down, false));
        }
        D.qexperts_gu = upload_quant(gu);
        D.qexperts_down = upload_quant(down);
      } else if (!L.experts.empty()) {
        const ExpertWeights& e0 = L.experts.front();
        const size_t gu_n = size_t(e0.gate_up.out() * e0.gate_up.in), down_n = size_t(e0.down.out() * e0.down.in);
        const size_t E = L.experts.size();
        D.experts_gu.alloc(E * gu_n * 2);
        D.experts_down.alloc(E * down_n * 2);
        for (size_t x = 0; x < E; ++x) {
          const ExpertWeights& e = L.experts[x];
          NINFER_CHECK(size_t(e.gate_up.out() * e.gate_up.in) == gu_n && size_t(e.down.out() * e.down.in) == down_n,
                       "layer {} expert {}: shape differs from expert 0's", i, x);
          upload_proj_bf16(D.experts_gu.as<uint16_t>() + x * gu_n, e.gate_up);
          upload_proj_bf16(D.experts_down.as<uint16_t>() + x * down_n, e.down);
        }
        weight_bytes_ += E * (gu_n + down_n) * 2;
      }
    }
  }

  // Grows the per-forward buffers to hold t tokens and r logits rows.
  void ensure_tokens(int t, int r) {
    const size_t T = size_t(t), halves = mode_ == CudaGemmMode::Split ? 2 : 1;
    const size_t H = size_t(c_.hidden), F = size_t(c_.ffn), qkvn = size_t(c_.qkv_width());
    const size_t S = size_t(c_.shared_ffn);
    x_.ensure(T * H * 4);
    act_.ensure(halves * T * std::max({H, F, S}) * 2);
    qkv_.ensure(T * qkvn * 4);
    att_.ensure(T * std::max(size_t(c_.q_dim()), size_t(c_.dn.value_dim())) * 2);
    if (kd_ != c_.head_dim) {
      qkv_pad_.ensure(T * size_t(c_.n_heads + 2 * c_.n_kv_heads) * size_t(kd_) * 4);
      att_pad_.ensure(T * size_t(c_.n_heads) * size_t(kd_) * 2);
    }
    if (c_.attn_gate) {
      gate_.ensure(T * size_t(c_.q_dim()) * 4);
      dn_scratch_.ensure(T * qkvn * 4);
    }
    if (c_.n_deltanet_layers() > 0) dn_y_.ensure(T * size_t(c_.dn.conv_dim()) * 4);
    if (S > 0) {
      sh_gu_.ensure(T * 2 * S * 4);
      sh_act_.ensure(T * S * 2);
      sh_y_.ensure(T * H * 4);
      sh_g_.ensure(T * 4);
    }
    gu_.ensure(T * 2 * F * 4);
    tmpx_.ensure(T * H * 4);
    if (c_.n_experts > 0) {
      const size_t TK = T * size_t(c_.top_k), Fm = size_t(c_.moe_ffn);
      moe_logits_.ensure(T * size_t(c_.n_experts) * 4);
      moe_ids_.ensure(TK * 4 * 3);  // expert ids [TK], then the sorted order's token rows and slots
      moe_w_.ensure(TK * 4);
      moe_x_.ensure(TK * H * 2);
      moe_gu_.ensure(TK * 2 * Fm * 4);
      moe_act_.ensure(TK * Fm * 2);
      moe_y_.ensure(TK * H * 4);
      moe_ys_.ensure(TK * H * 4);
    }
    logits_.ensure(size_t(r) * size_t(c_.vocab) * 4);
    if (has_fp8_gemm_ && t > cuda::kGemvMaxRows) {
      qact_.ensure(T * size_t(fp8_k_max_));
      qact_s_.ensure(T * 4);
      qtmp_.ensure(T * H * 4);  // an accumulating FP8 GEMM (o_proj, down) into the residual stream
    }
    if (mode_ == CudaGemmMode::Split) {
      const size_t maxn = std::max({qkvn, H, 2 * F, 2 * S});
      tmp_.ensure(std::max(2 * T * maxn, 2 * size_t(r) * size_t(c_.vocab)) * 4);
    }
    meta_.ensure(T * 4 * 6 + 64);
  }

  // A cuBLASLt FP8 GEMM D [rows, n] fp32 = A^T B for e4m3 A [n][k] (the weights' codes) and B
  // [rows][k] (the quantised activations), its algorithm picked once per shape. Fused: the
  // weights' per-row and the activations' per-token scales applied by cuBLASLt (outer-vector
  // scaling, CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F) with D = alpha (s_w s_x) A^T B + beta D;
  // otherwise a plain FP8 GEMM and our epilogue kernel.
  struct LtPlan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool ok = false;
    void destroy() {
      if (op) cublasLtMatmulDescDestroy(op);
      if (a) cublasLtMatrixLayoutDestroy(a);
      if (b) cublasLtMatrixLayoutDestroy(b);
      if (d) cublasLtMatrixLayoutDestroy(d);
      *this = LtPlan{};
    }
  };
  LtPlan& lt_plan(int n, int k, int rows, bool fused, const float* a_scale, const float* b_scale) {
    const std::array<int, 4> key{n, k, rows, fused ? 1 : 0};
    auto it = lt_plans_.find(key);
    if (it != lt_plans_.end()) return it->second;
    LtPlan& p = lt_plans_[key];
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    auto good = [](cublasStatus_t st) { return st == CUBLAS_STATUS_SUCCESS; };
    bool ok = good(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F)) &&
              good(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta))) &&
              good(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb))) &&
              good(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_8F_E4M3, uint64_t(k), uint64_t(n), int64_t(k))) &&
              good(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_8F_E4M3, uint64_t(k), uint64_t(rows), int64_t(k))) &&
              good(cublasLtMatrixLayoutCreate(&p.d, CUDA_R_32F, uint64_t(n), uint64_t(rows), int64_t(n)));
    if (ok && fused) {
      const int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
      ok = good(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof(mode))) &&
           good(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof(mode))) &&
           good(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale, sizeof(a_scale))) &&
           good(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale, sizeof(b_scale)));
    }
    if (ok) {
      cublasLtMatmulPreference_t pref = nullptr;
      const uint64_t ws = cublas_ws_.bytes();
      cublasLtMatmulHeuristicResult_t res{};
      int found = 0;
      ok = good(cublasLtMatmulPreferenceCreate(&pref)) &&
           good(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws))) &&
           good(cublasLtMatmulAlgoGetHeuristic(lt_, p.op, p.a, p.b, p.d, p.d, pref, 1, &res, &found)) && found > 0;
      if (pref) cublasLtMatmulPreferenceDestroy(pref);
      if (ok) p.algo = res.algo;
    }
    if (!ok) p.destroy();
    p.ok = ok;
    return p;
  }

  // The FP8 tensor-core prefill of a per-channel fp8 matrix: activations quantised per token
  // (launch_quantize_act_e4m3), then the fused plan (scales in cuBLASLt, dst accumulated by
  // beta; a bias added after), else the plain plan into D (dst, or qtmp_ when accumulating)
  // and the scale epilogue. False (nothing launched) when cuBLASLt has neither for this shape
  // or the accumulate scratch is too small; the caller then takes the bf16 tiles.
  bool gemm_fp8(const uint16_t* act, int rows, const QuantDev& q, float* dst, bool accumulate, const DeviceBuffer& bias,
                float alpha) {
    const cuda::QuantWeights& w = q.w;
    if (size_t(rows) * w.k > qact_.bytes() || size_t(rows) * 4 > qact_s_.bytes()) return false;
    uint8_t* qa = qact_.as<uint8_t>();
    float* qs = qact_s_.as<float>();
    const float one = 1.0f, zero = 0.0f;
    LtPlan& f = lt_plan(w.n, w.k, rows, true, w.scales, qs);
    if (f.ok) {
      cuda::launch_quantize_act_e4m3(act, rows, w.k, w.k, qa, qs, stream_);
      NINFER_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(f.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w.scales, sizeof(w.scales)));
      NINFER_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(f.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &qs, sizeof(qs)));
      const cublasStatus_t st = cublasLtMatmul(lt_, f.op, &alpha, w.codes, f.a, qa, f.b, accumulate ? &one : &zero, dst,
                                               f.d, dst, f.d, &f.algo, cublas_ws_.as<void>(), cublas_ws_.bytes(), stream_);
      if (st == CUBLAS_STATUS_SUCCESS) {
        if (bias.bytes()) cuda::launch_add_bias(dst, bias.as<float>(), rows, w.n, stream_);
        return true;
      }
      // NOTE: refused at run time (nothing was written): this shape takes the plain plan from now on.
      std::fprintf(stderr, "notice: cuBLASLt's scaled FP8 GEMM failed (%s) for %d x %d x %d; using the plain one\n",
                   cublasGetStatusString(st), w.n, w.k, rows);
      f.destroy();
    }
    if (accumulate && size_t(rows) * w.n * 4 > qtmp_.bytes()) return false;
    const LtPlan& p = lt_plan(w.n, w.k, rows, false, nullptr, nullptr);
    if (!p.ok) {
      if (!lt_warned_)
        std::fprintf(stderr, "notice: cuBLASLt has no FP8 GEMM for %d x %d x %d here; fp8 prefill dequantises to bf16\n",
                     w.n, w.k, rows);
      lt_warned_ = true;
      return false;
    }
    float* d = accumulate ? qtmp_.as<float>() : dst;
    cuda::launch_quantize_act_e4m3(act, rows, w.k, w.k, qa, qs, stream_);
    NINFER_CUBLAS_CHECK(cublasLtMatmul(lt_, p.op, &one, w.codes, p.a, qa, p.b, &zero, d, p.d, d, p.d, &p.algo,
                                       cublas_ws_.as<void>(), cublas_ws_.bytes(), stream_));
    cuda::launch_fp8_scale_epilogue(d, qs, w.scales, bias.bytes() ? bias.as<float>() : nullptr, dst, rows, w.n,
                                    accumulate, alpha, stream_);
    return true;
  }

  static constexpr int kQuantGemvLoopRows = 32;  // gemm_quant: up to this many rows, GEMV launches of 8
  // gemm() of a quantised matrix: the quantised GEMV for decode-sized batches (<= 8 rows; up to
  // kQuantGemvLoopRows in launches of 8, except per-channel fp8); prefill through gemm_fp8 where
  // it applies, else row tiles dequantised to bf16 (deq_) and the bf16 GEMM.
  void gemm_quant(const uint16_t* act, int rows, const QuantDev& q, float* dst, bool accumulate,
                  const DeviceBuffer& bias, bool split, float alpha) {
    const cuda::QuantWeights& w = q.w;
    const int gemm_rows = split ? 2 * rows : rows;
    if (!split && !(use_gemv_ && gemm_rows <= cuda::kGemvMaxRows) && q.fp8_gemm && fp8_gemm_ &&
        gemm_fp8(act, rows, q, dst, accumulate, bias, alpha))
      return;
    float* out = split ? tmp_.as<float>() : dst;
    const bool acc_out = !split && accumulate;
    if (use_gemv_ && gemm_rows <= cuda::kGemvMaxRows) {
      cuda::launch_gemv_quant(w, act, out, gemm_rows, acc_out, alpha, stream_);
    } else if (use_gemv_ && gemm_rows <= kQuantGemvLoopRows) {
      // NOTE: a batch of up to 32 rows (batched decode) reads the quantised weights once per 8
      // rows: int4 4 x 0.54 bytes per weight at 32 rows against the bf16 tiles' ~4.5 (codes
      // read, a bf16 tile written and read), and no dequantisation pass.
      for (int r0 = 0; r0 < gemm_rows; r0 += cuda::kGemvMaxRows)
        cuda::launch_gemv_quant(w, act + size_t(r0) * w.k, out + size_t(r0) * w.n,
                                std::min(cuda::kGemvMaxRows, gemm_rows - r0), acc_out, alpha, stream_);
    } else {
      gemm_dequant(act, gemm_rows, w, 0, out, acc_out, alpha);
    }
    if (!split) {
      if (bias.bytes()) cuda::launch_add_bias(dst, bias.as<float>(), rows, w.n, stream_);
    } else {
      cuda::launch_gemm_epilogue(out, 2, dst, bias.bytes() ? bias.as<float>() : nullptr, rows, w.n, accumulate,
                                 stream_);
    }
  }
  // out [rows, w.n] (=, or += when accumulate) alpha act [rows, w.k] dequant(expert e of w)^T,
  // through bf16 row tiles of the weights in deq_ (int8 / int4 / block-scaled fp8 prefill).
  void gemm_dequant(const uint16_t* act, int rows, const cuda::QuantWeights& w, int expert, float* out,
                    bool accumulate, float alpha) {
    NINFER_CHECK(deq_.bytes() >= size_t(w.k) * 2, "no dequantisation tile for a quantised matrix");
    // (at most 65535 rows: the dequantiser's grid.y is its tile rows)
    const int tile = int(std::min<size_t>({size_t(w.n), deq_.bytes() / (size_t(w.k) * 2), size_t(65535)}));
    const float one = 1.0f, zero = 0.0f;
    for (int r0 = 0; r0 < w.n; r0 += tile) {
      const int nr = std::min(tile, w.n - r0);
      cuda::launch_dequant_bf16(w, expert, r0, nr, deq_.as<uint16_t>(), stream_);
      NINFER_CUBLAS_CHECK(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, nr, rows, w.k, &alpha, deq_.as<uint16_t>(),
                                       CUDA_R_16BF, w.k, act, CUDA_R_16BF, w.k, accumulate ? &one : &zero, out + r0,
                                       CUDA_R_32F, w.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
  }

  // dst [rows, m.n] (=, or += when accumulate) act [rows (x2 when split), m.k] m^T + bias.
  void gemm(const uint16_t* act, int rows, const Matrix& m, float* dst, bool accumulate, const DeviceBuffer& bias,
            bool split, float alpha = 1.0f) {
    NINFER_CHECK(m.n > 0, "layer {}: a projection the model does not have", l_);
    // NOTE: the bias is added after alpha; no family scales a projection that has a bias.
    NINFER_CHECK(alpha == 1.0f || bias.bytes() == 0, "a scaled projection with a bias");
    if (m.q) {
      gemm_quant(act, rows, *m.q, dst, accumulate, bias, split, alpha);
      return;
    }
    const float one = 1.0f, zero = 0.0f;
    const int gemm_rows = split ? 2 * rows : rows;
    // NOTE: decode-sized batches use our GEMV (one pass over the weights with 16-byte loads)
    // unless NINFER_CUDA_GEMV=0; larger ones go to cuBLAS.
    const bool gemv = use_gemv_ && gemm_rows <= cuda::kGemvMaxRows && m.k % 8 == 0;
    if (!split) {
      if (gemv) {
        cuda::launch_gemv_bf16(m.ptr(), act, dst, rows, m.n, m.k, accumulate, stream_, alpha);
      } else {
        NINFER_CUBLAS_CHECK(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, m.n, rows, m.k, &alpha, m.ptr(),
                                         CUDA_R_16BF, m.k, act, CUDA_R_16BF, m.k, accumulate ? &one : &zero, dst,
                                         CUDA_R_32F, m.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      }
      if (bias.bytes()) cuda::launch_add_bias(dst, bias.as<float>(), rows, m.n, stream_);
    } else {
      float* tmp = tmp_.as<float>();
      if (gemv) {
        cuda::launch_gemv_bf16(m.ptr(), act, tmp, 2 * rows, m.n, m.k, false, stream_, alpha);
      } else {
        // alpha scales both halves before the epilogue sums them (no bias with alpha: checked above)
        NINFER_CUBLAS_CHECK(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, m.n, 2 * rows, m.k, &alpha, m.ptr(),
                                         CUDA_R_16BF, m.k, act, CUDA_R_16BF, m.k, &zero, tmp, CUDA_R_32F, m.n,
                                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      }
      cuda::launch_gemm_epilogue(tmp, 2, dst, bias.bytes() ? bias.as<float>() : nullptr, rows, m.n, accumulate,
                                 stream_);
    }
  }

  ModelConfig c_;
  int kd_ = 0;  // the KV pages' and attention kernels' head width (cuda_kv_head_dim): c_.head_dim or padded
  CudaGemmMode mode_ = CudaGemmMode::Bf16;
  bool use_gemv_ = true;
  bool use_graphs_ = true;
  // Quantised weights: the FP8 GEMM for per-channel fp8 prefill (NINFER_CUDA_FP8_GEMM=0: the
  // bf16 tiles instead), its plans, the activations' codes and scales and the accumulate
  // scratch; the bf16 dequantisation tile (deq_rows_max_: the largest matrix it must hold).
  bool fp8_gemm_ = true, has_fp8_gemm_ = false, lt_warned_ = false;
  cublasLtHandle_t lt_ = nullptr;
  std::map<std::array<int, 4>, LtPlan> lt_plans_;
  DeviceBuffer qact_, qact_s_, qtmp_, deq_;
  size_t deq_rows_max_ = 0;
  int fp8_k_max_ = 0;
  // NINFER_CUDA_FUSE_*: off by default until they have run on a GPU (written 2026-12-07 without one)
  bool fuse_norm_ = false, fuse_route_ = false, fuse_act_ = false, fuse_combine_ = false;
  const float* pend_norm_w_ = nullptr;  // a deferred norm X -> H: its weight (norm())
  bool pend_stale_ = false;             // X has changed since
  cudaGraphExec_t graph_exec_ = nullptr;
  std::vector<uintptr_t> graph_key_, last_key_;
  std::string device_name_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  DeviceBuffer cublas_ws_;
  Matrix embed_, lm_head_;
  const Matrix* head_ = nullptr;
  DeviceBuffer final_norm_;
  std::vector<LayerDev> layers_;
  size_t weight_bytes_ = 0;
  // KV cache
  const KvFormat* fmt_ = nullptr;
  cuda::CacheKind kind_ = cuda::CacheKind::Bf16;
  int n_pages_ = 0;
  size_t k_side_bytes_ = 0, v_side_bytes_ = 0;  // one layer's K (V) pool
  DeviceBuffer pool_;  // [n_layers][K, V][n_pages][n_kv_heads] blocks
  std::vector<std::unique_ptr<cuda::PagedAttention>> attns_;  // one per distinct window
  std::vector<int> layer_attn_;                               // [n_layers] index into attns_
  std::vector<int> attn_index_;  // [n_layers] the layer's place in pool_ (-1: a DeltaNet layer, no KV)
  int n_attn_layers_ = 0;
  // Recurrent state (DeltaNet layers): n_slots_ slots of slot_floats_ fp32, layer l's part at
  // dn_offset_[l] (conv history, then S); the batch's chunks (cuda::DeltaNetChunk) in dn_meta_.
  DeviceBuffer state_, dn_meta_;
  std::vector<size_t> dn_offset_;
  size_t slot_floats_ = 0;
  int n_slots_ = 0, n_dn_chunks_ = 0;
  DeviceBuffer gate_, dn_scratch_, dn_y_, sh_gu_, sh_act_, sh_y_, sh_g_;
  // per-forward buffers
  DeviceBuffer x_, act_, qkv_, att_, gu_, tmpx_, logits_, tmp_, meta_;
  DeviceBuffer qkv_pad_, att_pad_;  // kd_ != head_dim: q|k|v heads padded to kd_ (fp32), the attention output (bf16)
  DeviceBuffer moe_logits_, moe_ids_, moe_w_, moe_x_, moe_gu_, moe_act_, moe_y_, moe_ys_, moe_done_;
  // Rope tables of the batch: per rope spec, per chunk [1 + rotary_dim / 2] (ops.h RopeParams).
  DeviceBuffer rope_tab_;
  std::vector<size_t> rope_off_;  // [n_ropes] float offset of each spec's tables
  // The batch being enqueued (LayerOps state).
  int T_ = 0, l_ = 0;
  bool split_ = false;
  const int32_t *d_pos_ = nullptr, *d_page_ = nullptr, *d_slot_ = nullptr, *d_tok_tab_ = nullptr;
  const std::vector<int32_t>* meta_host_ = nullptr;
  std::vector<float> obs_host_;
  void* pinned_ = nullptr;
  size_t pinned_bytes_ = 0;
  KvObserver observer_;

  void* pinned(size_t bytes) {
    if (bytes > pinned_bytes_) {
      if (pinned_) NINFER_CUDA_CHECK(cudaFreeHost(pinned_));
      pinned_bytes_ = std::max(bytes, size_t(1) << 20);
      NINFER_CUDA_CHECK(cudaMallocHost(&pinned_, pinned_bytes_));
    }
    return pinned_;
  }
};

void CudaBackend::qk_norm_rope() {
  const int qd = c_.q_dim(), kvd = c_.kv_dim(), ld = qd + 2 * kvd;
  float* qkv = qkv_.as<float>();
  const LayerDev& L = layers_[size_t(l_)];
  if (c_.qk_norm_full) {
    cuda::launch_rmsnorm_rows_f32(qkv, ld, vec(Vec::QNorm), T_, qd, c_.rms_eps, stream_);
    cuda::launch_rmsnorm_rows_f32(qkv + qd, ld, vec(Vec::KNorm), T_, kvd, c_.rms_eps, stream_);
  }
  const int r = c_.layers[size_t(l_)].rope;
  cuda::RopeParams rp;
  rp.pos = d_pos_;
  rp.tok_table = d_tok_tab_;
  rp.tables = rope_tab_.as<float>() + rope_off_[size_t(r)];
  rp.rotary_dim = c_.ropes[size_t(r)].rotary_dim;
  // NOTE: the kernels scale scores by 1/sqrt(kd_), their head width; another score scale (and
  // for padded heads the model's 1/sqrt(head_dim) itself) is folded into q.
  rp.q_mult = c_.score_scale() * std::sqrt(float(kd_));
  const bool per_head = c_.qk_norm;
  cuda::launch_qk_norm_rope(qkv, ld, T_, c_.n_heads, c_.n_kv_heads, c_.head_dim,
                            per_head ? L.vec[size_t(Vec::QNorm)].as<float>() : nullptr,
                            per_head ? L.vec[size_t(Vec::KNorm)].as<float>() : nullptr, c_.rms_eps, rp, stream_);
}

void CudaBackend::attention() {
  const int qd = c_.q_dim(), kvd = c_.kv_dim(), qkvn = qd + 2 * kvd;
  float* qkv = qkv_.as<float>();
  // The kernels' view: q|k|v heads of kd_ values (padded copies when kd_ != head_dim).
  const bool padded = kd_ != c_.head_dim;
  const int pqd = c_.n_heads * kd_, pkvd = c_.n_kv_heads * kd_, pqkvn = pqd + 2 * pkvd;
  float* kq = padded ? qkv_pad_.as<float>() : qkv;
  uint16_t* kout = padded ? att_pad_.as<uint16_t>() : att_.as<uint16_t>();
  if (padded)
    cuda::launch_copy_heads_f32(qkv, qkvn, c_.head_dim, kq, pqkvn, kd_, T_, c_.n_heads + 2 * c_.n_kv_heads, stream_);
  uint8_t* k_pool = pool_.as<uint8_t>() + size_t(attn_index_[size_t(l_)]) * (k_side_bytes_ + v_side_bytes_);
  uint8_t* v_pool = k_pool + k_side_bytes_;
  cuda::KvAppendParams ap;
  ap.src = kq;
  ap.ld = pqkvn;
  ap.k_col = pqd;
  ap.v_col = pqd + pkvd;
  ap.tok_page = d_page_;
  ap.tok_slot = d_slot_;
  ap.k_pool = k_pool;
  ap.v_pool = v_pool;
  ap.n_tokens = T_;
  ap.n_kv_heads = c_.n_kv_heads;
  ap.head_dim = kd_;
  ap.kind = kind_;
  ap.k_rotate = fmt_->k.rotation == KvRotation::HadamardHead;
  cuda::launch_kv_append(ap, stream_);
  if (observer_) {
    obs_host_.resize(size_t(T_) * qkvn);
    NINFER_CUDA_CHECK(cudaMemcpyAsync(obs_host_.data(), qkv, obs_host_.size() * 4, cudaMemcpyDeviceToHost, stream_));
    NINFER_CUDA_CHECK(cudaStreamSynchronize(stream_));
    // NOTE: the observer sees K after rope; with a score scale folded into q (ops.h), q differs, k does not.
    for (size_t t = 0; t < size_t(T_); ++t)
      observer_(l_, (*meta_host_)[size_t(T_) + t], obs_host_.data() + t * qkvn + qd,
                obs_host_.data() + t * qkvn + qd + kvd);
  }
  // history_ready: the append above writes only the new tokens' slots; every older slot was
  // written before it started (page copies are synchronous, copy_kv_pages). q_ready: the
  // append does not write q, and it starts only after the rope kernel (or the padding copy)
  // that does has finished (plain launches).
  attns_[size_t(layer_attn_[size_t(l_)])]->run(kq, pqkvn, k_pool, v_pool, kout, pqd, stream_, true, true);
  if (padded)
    cuda::launch_copy_heads_bf16(kout, pqd, kd_, att_.as<uint16_t>(), qd, c_.head_dim, T_, c_.n_heads, stream_);
}

// Router logits -> top-k ids and weights on the device; then either (decode-sized batches,
// graph-capturable) one gathered GEMV per expert matrix over the T * k (token, choice) rows,
// reading only the chosen experts' weights, or (prefill) the rows sorted by expert on the host
// and one cuBLAS GEMM per expert over its rows. Either way the k outputs of a token are summed
// in choice order (deterministic). Expert MLPs take the hi half of split activations.
//
// Decode fusions (each with its NINFER_CUDA_FUSE_* switch, docs/GPU.md): the deferred FFN norm
// in the router's and gate|up's prologues, routing in the router GEMV's last block, the
// activation in the gate|up GEMV's epilogue, the combine in the down GEMV's epilogue: 3 kernels
// a layer instead of 7, the same values bit for bit.
void CudaBackend::moe(float alpha) {
  const LayerDev& L = layers_[size_t(l_)];
  const int H = c_.hidden, E = c_.n_experts, K = c_.top_k, Fm = c_.moe_ffn, TK = T_ * K;
  static const DeviceBuffer kNoBias;
  const bool decode = T_ <= cuda::kGemvMaxRows;
  const Matrix& router = L.proj[size_t(Proj::Router)];
  // Quantised router or experts: the plain kernels (the fusions read bf16 weights).
  const bool quant = router.q || L.qexperts_gu;
  const bool router_plain = L.bias[size_t(Proj::Router)].bytes() == 0;
  // H as a buffer: the shared expert reads it after the combine has changed X, and the
  // unfused gate|up and a router with a bias read it as one.
  if (c_.shared_ffn > 0 || !fuse_act_ || !router_plain || !decode || pend_stale_ || quant) materialize_h();
  const bool norm_fused = pend_norm_w_ != nullptr;
  const bool route_fused = fuse_route_ && decode && use_gemv_ && !split_ && router_plain && !quant;
  int32_t* ids = moe_ids_.as<int32_t>();
  if (norm_fused || route_fused) {
    cuda::GemvFuse f = norm_fused ? pending_norm() : cuda::GemvFuse{};
    if (route_fused) {
      f.done = moe_done_.as<int>();
      f.route_k = K;
      f.route_norm = c_.norm_topk;
      f.route_ids = ids;
      f.route_w = moe_w_.as<float>();
    }
    cuda::launch_gemv_fused(router.ptr(), act_.as<uint16_t>(), moe_logits_.as<float>(), T_, E, H, false, 1.0f, f,
                            stream_);
  } else {
    gemm(act_.as<uint16_t>(), T_, router, moe_logits_.as<float>(), false, kNoBias, split_);
  }
  if (!route_fused)
    cuda::launch_moe_route(moe_logits_.as<float>(), T_, E, K, c_.norm_topk, ids, moe_w_.as<float>(), stream_);
  const size_t gu_stride = size_t(2) * Fm * H, down_stride = size_t(H) * Fm;
  const uint16_t* wgu = L.experts_gu.as<uint16_t>();
  const uint16_t* wdown = L.experts_down.as<uint16_t>();
  bool combined = false;
  const QuantDev* qgu = L.qexperts_gu.get();
  const QuantDev* qdown = L.qexperts_down.get();
  if (decode && qgu) {  // decode, quantised experts: the quantised gathered GEMVs
    cuda::launch_gemv_gathered_quant(qgu->w, ids, act_.as<uint16_t>(), K, moe_gu_.as<float>(), TK, stream_);
    cuda::launch_silu_mul_bf16(moe_gu_.as<float>(), moe_act_.as<uint16_t>(), TK, Fm, false, stream_);
    cuda::launch_gemv_gathered_quant(qdown->w, ids, moe_act_.as<uint16_t>(), 1, moe_y_.as<float>(), TK, stream_);
  } else if (decode) {  // decode: gathered GEMVs reading only the chosen experts
    if (fuse_act_) {
      const cuda::GemvFuse nf = norm_fused ? pending_norm() : cuda::GemvFuse{};
      cuda::launch_gemv_gate_up_act(wgu, gu_stride, ids, act_.as<uint16_t>(), K, nf, moe_act_.as<uint16_t>(), TK, Fm,
                                    H, stream_);
    } else {
      cuda::launch_gemv_gathered_bf16(wgu, gu_stride, ids, act_.as<uint16_t>(), K, moe_gu_.as<float>(), TK, 2 * Fm,
                                      H, stream_);
      cuda::launch_silu_mul_bf16(moe_gu_.as<float>(), moe_act_.as<uint16_t>(), TK, Fm, false, stream_);
    }
    if (fuse_combine_ && K <= cuda::kGemvDownCombineMaxK) {
      cuda::launch_gemv_down_combine(wdown, down_stride, ids, moe_w_.as<float>(), moe_act_.as<uint16_t>(), T_, K, H,
                                     Fm, alpha, x_.as<float>(), stream_);
      combined = true;
    } else {
      cuda::launch_gemv_gathered_bf16(wdown, down_stride, ids, moe_act_.as<uint16_t>(), 1, moe_y_.as<float>(), TK, H,
                                      Fm, stream_);
    }
  } else {  // prefill: tokens sorted by expert, a GEMM per expert
    std::vector<int32_t> h_ids(static_cast<size_t>(TK));
    NINFER_CUDA_CHECK(cudaMemcpyAsync(h_ids.data(), ids, size_t(TK) * 4, cudaMemcpyDeviceToHost, stream_));
    NINFER_CUDA_CHECK(cudaStreamSynchronize(stream_));
    // Sorted order: rows of expert 0, then expert 1, ...; tok[i] the token, slot[i] = t * K + j.
    std::vector<int32_t> order(size_t(2) * TK);
    std::vector<int> count(static_cast<size_t>(E), 0), first(static_cast<size_t>(E) + 1, 0);
    for (int32_t e : h_ids) ++count[size_t(e)];
    for (int e = 0; e < E; ++e) first[size_t(e) + 1] = first[size_t(e)] + count[size_t(e)];
    std::vector<int> fill(first.begin(), first.end() - 1);
    for (int i = 0; i < TK; ++i) {
      const int at = fill[size_t(h_ids[size_t(i)])]++;
      order[size_t(at)] = i / K;
      order[size_t(TK + at)] = i;
    }
    int32_t* d_order = ids + TK;
    NINFER_CUDA_CHECK(cudaMemcpyAsync(d_order, order.data(), order.size() * 4, cudaMemcpyHostToDevice, stream_));
    uint16_t* xs = moe_x_.as<uint16_t>();
    cuda::launch_gather_rows_bf16(act_.as<uint16_t>(), d_order, xs, TK, H, stream_);
    const float one = 1.0f, zero = 0.0f;
    float* gu = moe_gu_.as<float>();
    uint16_t* act = moe_act_.as<uint16_t>();
    float* ys = moe_ys_.as<float>();
    for (int e = 0; e < E; ++e) {
      if (count[size_t(e)] == 0) continue;
      const int n = count[size_t(e)], r0 = first[size_t(e)];
      if (qgu) {  // the expert's bf16 tiles, dequantised
        gemm_dequant(xs + size_t(r0) * H, n, qgu->w, e, gu + size_t(r0) * 2 * Fm, false, 1.0f);
        continue;
      }
      NINFER_CUBLAS_CHECK(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, 2 * Fm, n, H, &one, wgu + e * gu_stride,
                                       CUDA_R_16BF, H, xs + size_t(r0) * H, CUDA_R_16BF, H, &zero,
                                       gu + size_t(r0) * 2 * Fm, CUDA_R_32F, 2 * Fm, CUBLAS_COMPUTE_32F,
                                       CUBLAS_GEMM_DEFAULT));
    }
    cuda::launch_silu_mul_bf16(gu, act, TK, Fm, false, stream_);
    for (int e = 0; e < E; ++e) {
      if (count[size_t(e)] == 0) continue;
      const int n = count[size_t(e)], r0 = first[size_t(e)];
      if (qdown) {
        gemm_dequant(act + size_t(r0) * Fm, n, qdown->w, e, ys + size_t(r0) * H, false, 1.0f);
        continue;
      }
      NINFER_CUBLAS_CHECK(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, H, n, Fm, &one, wdown + e * down_stride,
                                       CUDA_R_16BF, Fm, act + size_t(r0) * Fm, CUDA_R_16BF, Fm, &zero,
                                       ys + size_t(r0) * H, CUDA_R_32F, H, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
    cuda::launch_scatter_rows_f32(ys, d_order + TK, moe_y_.as<float>(), TK, H, stream_);
  }
  if (!combined)
    cuda::launch_moe_combine(moe_y_.as<float>(), moe_w_.as<float>(), T_, K, H, alpha, x_.as<float>(), stream_);
  x_written();
  if (c_.shared_ffn == 0) return;
  // The shared expert on every token, x += alpha * sigmoid(H w_sg) * down(silu(gate(H)) * up(H)).
  const int S = c_.shared_ffn;
  gemm(act_.as<uint16_t>(), T_, L.proj[size_t(Proj::SharedGateUp)], sh_gu_.as<float>(), false, kNoBias, split_);
  cuda::launch_silu_mul_bf16(sh_gu_.as<float>(), sh_act_.as<uint16_t>(), T_, S, false, stream_);
  gemm(sh_act_.as<uint16_t>(), T_, L.proj[size_t(Proj::SharedDown)], sh_y_.as<float>(), false, kNoBias, false);
  gemm(act_.as<uint16_t>(), T_, L.proj[size_t(Proj::SharedGate)], sh_g_.as<float>(), false, kNoBias, split_);
  cuda::launch_gated_add(sh_y_.as<float>(), sh_g_.as<float>(), T_, H, alpha, x_.as<float>(), stream_);
}

// The layer's Gated DeltaNet over every chunk of the batch (cuda/delta_net.h): QKV holds the
// projection rows; ATT receives the gated-norm output in bf16.
void CudaBackend::delta_net() {
  const DeltaNetShape& d = c_.dn;
  cuda::DeltaNetParams p;
  p.nk = d.nk, p.nv = d.nv, p.dk = d.dk, p.dv = d.dv, p.conv = d.conv, p.grouped = d.grouped;
  p.proj = qkv_.as<float>();
  p.ld_proj = d.proj_dim();
  p.conv_w = vec(Vec::DnConv);
  p.a_log = vec(Vec::DnALog);
  p.dt_bias = vec(Vec::DnDtBias);
  p.norm_w = vec(Vec::DnNorm);
  p.eps = c_.rms_eps;
  p.state = state_.as<float>();
  p.slot_floats = slot_floats_;
  p.layer_offset = dn_offset_[size_t(l_)];
  p.chunks = dn_meta_.as<cuda::DeltaNetChunk>();
  p.n_chunks = n_dn_chunks_;
  p.n_tokens = T_;
  p.y = dn_y_.as<float>();
  p.out = att_.as<uint16_t>();
  cuda::launch_delta_net(p, stream_);
}

void CudaBackend::enqueue_forward(int T, int R, bool split, const int32_t* d_ids, const int32_t* d_rows,
                                  const std::vector<int32_t>& meta) {
  const int H = c_.hidden;
  T_ = T;
  split_ = split;
  d_pos_ = d_ids + T;
  d_page_ = d_ids + 2 * T;
  d_slot_ = d_ids + 3 * T;
  d_tok_tab_ = d_ids + 4 * T;
  meta_host_ = &meta;
  cuda::launch_embed(d_ids, embed_.ptr(), x_.as<float>(), T, H, stream_, c_.embed_scale);
  h_overwritten();
  for (l_ = 0; l_ < c_.n_layers; ++l_) c_.family->layer(c_, l_, *this);
  h_overwritten();  // the final norm writes act_
  cuda::launch_rmsnorm_bf16(x_.as<float>(), d_rows, final_norm_.as<float>(), act_.as<uint16_t>(), R, H, c_.rms_eps,
                            split, stream_);
  static const DeviceBuffer kNoBias;
  gemm(act_.as<uint16_t>(), R, *head_, logits_.as<float>(), false, kNoBias, split);
  if (c_.logit_scale != 1.0f || c_.final_softcap > 0)
    cuda::launch_logits_post(logits_.as<float>(), size_t(R) * c_.vocab, c_.logit_scale, c_.final_softcap, stream_);
}

void CudaBackend::forward(std::span<const SeqChunk> chunks, std::vector<float>& logits) {
  NINFER_CHECK(fmt_ != nullptr, "init_kv was not called");
  const bool split = mode_ == CudaGemmMode::Split;
  int T = 0;
  for (const SeqChunk& ch : chunks) {
    NINFER_CHECK(ch.n_tokens > 0, "empty chunk");
    NINFER_CHECK(int64_t(ch.n_blocks) * kPageSize >= ch.start_pos + ch.n_tokens,
                 "block table of {} pages cannot hold {} tokens", ch.n_blocks, ch.start_pos + ch.n_tokens);
    for (int b = 0; b < ch.n_blocks; ++b)
      NINFER_CHECK(ch.block_table[b] >= 0 && ch.block_table[b] < n_pages_, "page id {} out of range",
                   ch.block_table[b]);
    for (int i = 0; i < ch.n_tokens; ++i)
      if (ch.tokens[i] < 0 || ch.tokens[i] >= c_.vocab)
        fail("token id {} is outside the vocabulary (0..{})", ch.tokens[i], c_.vocab - 1);
    T += ch.n_tokens;
  }
  // Host metadata: ids, pos, page, slot, rope table (the chunk) [T] each, then logits rows [R].
  std::vector<int32_t> meta(size_t(T) * 5);
  std::vector<int32_t> rows;
  std::vector<cuda::AttnSeq> seqs;
  {
    int t = 0;
    for (const SeqChunk& ch : chunks) {
      seqs.push_back(cuda::AttnSeq{t, ch.n_tokens, ch.start_pos, ch.block_table, ch.n_blocks});
      for (int i = 0; i < ch.n_tokens; ++i, ++t) {
        const int p = ch.start_pos + i;
        meta[size_t(t)] = ch.tokens[i];
        meta[size_t(T + t)] = p;
        meta[size_t(2 * T + t)] = ch.block_table[p / kPageSize];
        meta[size_t(3 * T + t)] = p % kPageSize;
        meta[size_t(4 * T + t)] = int32_t(seqs.size() - 1);  // the chunk's rope table
        if (ch.all_logits || i == ch.n_tokens - 1) rows.push_back(t);
      }
    }
  }
  const int R = int(rows.size());
  meta.insert(meta.end(), rows.begin(), rows.end());
  ensure_tokens(T, R);
  if (slot_floats_ > 0) {  // the DeltaNet layers' chunks: rows, state slot, fresh
    std::vector<cuda::DeltaNetChunk> dc;
    int t0 = 0;
    for (const SeqChunk& ch : chunks) {
      NINFER_CHECK(ch.state_slot >= 0 && ch.state_slot < n_slots_, "state slot {} out of range ({} slots)",
                   ch.state_slot, n_slots_);
      dc.push_back(cuda::DeltaNetChunk{t0, ch.n_tokens, ch.state_slot, ch.start_pos == 0 ? 1 : 0});
      t0 += ch.n_tokens;
    }
    dn_meta_.ensure(std::max<size_t>(dc.size(), 64) * sizeof(cuda::DeltaNetChunk));
    NINFER_CUDA_CHECK(cudaStreamSynchronize(stream_));
    NINFER_CUDA_CHECK(cudaMemcpy(dn_meta_.as<void>(), dc.data(), dc.size() * sizeof(cuda::DeltaNetChunk),
                                 cudaMemcpyHostToDevice));
    n_dn_chunks_ = int(dc.size());
  }
  // Rope tables: per spec, one per chunk for its length (model/rope.h), staged after the meta.
  std::vector<float> tabs;
  rope_off_.clear();
  for (const RopeSpec& rs : c_.ropes) {
    rope_off_.push_back(tabs.size());
    for (const SeqChunk& ch : chunks) {
      const RopeTable t = rope_table(rs, ch.start_pos + ch.n_tokens);
      tabs.push_back(t.attention_factor);
      tabs.insert(tabs.end(), t.inv_freq.begin(), t.inv_freq.end());
    }
  }
  rope_tab_.ensure(std::max<size_t>(tabs.size() * 4, 4096));
  {
    const size_t mb = meta.size() * 4;
    void* h = pinned(std::max(mb + tabs.size() * 4, size_t(R) * c_.vocab * 4));
    NINFER_CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::memcpy(h, meta.data(), mb);
    std::memcpy(static_cast<char*>(h) + mb, tabs.data(), tabs.size() * 4);
    NINFER_CUDA_CHECK(cudaMemcpyAsync(meta_.as<void>(), h, mb, cudaMemcpyHostToDevice, stream_));
    NINFER_CUDA_CHECK(cudaMemcpyAsync(rope_tab_.as<void>(), static_cast<char*>(h) + mb, tabs.size() * 4,
                                      cudaMemcpyHostToDevice, stream_));
  }
  const int32_t* d_ids = meta_.as<int32_t>();
  const int32_t* d_rows = d_ids + 5 * T;
  for (auto& a : attns_) a->plan(seqs.data(), int(seqs.size()), T, stream_);

  // NOTE: decode-sized steps (every GEMM a GEMV, no KV observer) replay a CUDA graph of the
  // whole layer stack: ~11 launches per layer cost more than their kernels at batch 1. The
  // graph is captured on the second consecutive step with the same launch signature (so one-time
  // initialisation happened eagerly) and reused while the signature holds; the per-step inputs
  // (token ids, positions, pages, block tables) live in device buffers the graph reads.
  const bool graphable = use_graphs_ && !observer_ && (split ? 2 * T : T) <= cuda::kGemvMaxRows && use_gemv_;
  if (graphable) {
    std::vector<uintptr_t> key;
    for (auto& a : attns_) {
      std::vector<uintptr_t> k = a->launch_signature();
      key.insert(key.end(), k.begin(), k.end());
    }
    for (const DeviceBuffer* b : {&x_, &act_, &qkv_, &att_, &gu_, &tmpx_, &logits_, &tmp_, &meta_, &pool_, &rope_tab_,
                                  &moe_logits_, &moe_ids_, &moe_w_, &moe_gu_, &moe_act_, &moe_y_, &state_, &dn_meta_,
                                  &gate_, &dn_scratch_, &dn_y_, &sh_gu_, &sh_act_, &sh_y_, &sh_g_, &qkv_pad_,
                                  &att_pad_})
      key.push_back(uintptr_t(b->as<void>()));
    key.push_back(uintptr_t(T));
    key.push_back(uintptr_t(R));
    key.push_back(uintptr_t(chunks.size()));  // the rope tables' offsets (rope_off_)
    if (graph_exec_ && key == graph_key_) {
      NINFER_CUDA_CHECK(cudaGraphLaunch(graph_exec_, stream_));
    } else if (key == last_key_) {
      cudaGraph_t graph = nullptr;
      NINFER_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
      enqueue_forward(T, R, split, d_ids, d_rows, meta);
      NINFER_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
      if (graph_exec_) cudaGraphExecDestroy(graph_exec_);
      graph_exec_ = nullptr;
      NINFER_CUDA_CHECK(cudaGraphInstantiate(&graph_exec_, graph, 0));
      cudaGraphDestroy(graph);
      graph_key_ = key;
      NINFER_CUDA_CHECK(cudaGraphLaunch(graph_exec_, stream_));
    } else {
      enqueue_forward(T, R, split, d_ids, d_rows, meta);
    }
    last_key_ = key;
  } else {
    enqueue_forward(T, R, split, d_ids, d_rows, meta);
  }
  const size_t n_logits = size_t(R) * c_.vocab;
  void* h = pinned(n_logits * 4);
  NINFER_CUDA_CHECK(cudaMemcpyAsync(h, logits_.as<void>(), n_logits * 4, cudaMemcpyDeviceToHost, stream_));
  NINFER_CUDA_CHECK(cudaStreamSynchronize(stream_));
  logits.resize(n_logits);
  std::memcpy(logits.data(), h, n_logits * 4);
}

}  // namespace

bool cuda_device_available() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    cudaGetLastError();
    return false;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return prop.major >= 8;
}

bool cuda_supports_model(const ModelConfig& c, std::string* why) {
  if (cuda_kv_head_dim(c.head_dim) == 0) {
    if (why) *why = fmt::format("the CUDA backend supports head_dim 64, 128, 256 and 96 (run as 128), the model has {}",
                                c.head_dim);
    return false;
  }
  if (c.n_kv_heads <= 0 || c.n_heads % c.n_kv_heads != 0) {
    if (why) *why = "num_attention_heads is not a multiple of num_key_value_heads";
    return false;
  }
  if (c.n_deltanet_layers() > 0) {
    const DeltaNetShape& d = c.dn;
    // NOTE: the recurrent kernel holds one head's state [dk][dv] in shared memory, a column
    // per thread (delta_net.cu).
    if (d.dv % 32 != 0 || d.dv > 1024 || d.conv > 9 || size_t(d.dk) * d.dv * 4 + size_t(d.dk) * 8 + 128 > 227 * 1024) {
      if (why)
        *why = fmt::format("the CUDA DeltaNet kernel needs linear_value_head_dim a multiple of 32 up to 1024, "
                           "linear_conv_kernel_dim <= 9 and a key x value head state within 227 KiB; the model has "
                           "{} x {}, conv {}", d.dk, d.dv, d.conv);
      return false;
    }
  }
  return true;
}

bool cuda_supports_kv_format(std::string_view name) { return cuda::cache_kind_for(name, nullptr); }

std::unique_ptr<Backend> make_cuda_backend(const Model& model) { return make_cuda_backend(model, CudaBackendOptions{}); }

std::unique_ptr<Backend> make_cuda_backend(const Model& model, const CudaBackendOptions& opt) {
  return std::make_unique<CudaBackend>(model, opt);
}

}  // namespace ninfer
