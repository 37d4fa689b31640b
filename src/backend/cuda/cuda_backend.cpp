// The CUDA backend: the Backend interface (backend/backend.h) on one GPU.
//
// Forward pass of a batch of T new tokens (all chunks concatenated), per layer:
//   rmsnorm -> bf16 act [T, hidden]            (ops.cu)
//   qkv = act W_qkv^T          fp32 [T, q_dim + 2 kv_dim]   (cuBLAS; wq|wk|wv fused)
//   q/k RMSNorm (Qwen3) + rope in place         (ops.cu)
//   K/V of the new tokens -> cache pages        (kv_append.cu)
//   attention over the pages -> bf16 [T, q_dim] (attention.cu)
//   x += att W_o^T                              (cuBLAS, beta = 1)
//   rmsnorm -> act; gu = act W_gu^T fp32 [T, 2 ffn] (w_gate|w_up fused); silu(g) * u -> bf16
//   x += h W_down^T
// then the rows that need logits: rmsnorm -> lm_head GEMM -> fp32 logits -> host.
// The residual stream x stays fp32. Weights are bf16 on the device, converted once from
// whatever the checkpoint stores. With CudaGemmMode::Split the GEMM inputs carry a lo half
// (ops.h) and every GEMM runs over 2T rows followed by an epilogue that adds the halves.
#include "backend/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backend/cuda/attention.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kv_cache.h"
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

struct Matrix {  // bf16 [n, k] row-major on the device
  DeviceBuffer buf;
  int n = 0, k = 0;
  const uint16_t* ptr() const { return buf.as<uint16_t>(); }
};

struct LayerDev {
  Matrix qkv, o, gu, down;
  DeviceBuffer attn_norm, ffn_norm, q_norm, k_norm;   // fp32
  DeviceBuffer b_qkv, b_o, b_gu, b_down;              // fp32, empty when absent
};

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

class CudaBackend final : public Backend {
 public:
  CudaBackend(const Model& model, const CudaBackendOptions& opt) : c_(model.config) {
    mode_ = mode_from_env(opt);
    use_gemv_ = env_switch("NINFER_CUDA_GEMV");
    use_graphs_ = env_switch("NINFER_CUDA_GRAPHS");
    const int d = c_.head_dim;
    if (d != 64 && d != 128 && d != 256)
      fail("the CUDA backend supports head_dim 64, 128 and 256; {} has head_dim {} (use --device cpu)",
           model.dir.string(), d);
    if (c_.n_heads % c_.n_kv_heads != 0)
      fail("{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", model.dir.string(), c_.n_heads,
           c_.n_kv_heads);
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
    upload_weights(model);
    const int half = d / 2;
    std::vector<float> inv_freq(static_cast<size_t>(half));
    for (int i = 0; i < half; ++i)
      inv_freq[size_t(i)] = 1.0f / std::pow(float(c_.rope_theta), float(2 * i) / float(d));
    upload(inv_freq_, inv_freq);
    ensure_tokens(512, 16);
  }

  ~CudaBackend() override {
    if (stream_) cudaStreamSynchronize(stream_);
    if (graph_exec_) cudaGraphExecDestroy(graph_exec_);
    attn_.reset();
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
    k_side_bytes_ = size_t(n_pages) * c_.n_kv_heads * cuda::cache_block_bytes(kind, c_.head_dim, 0);
    v_side_bytes_ = size_t(n_pages) * c_.n_kv_heads * cuda::cache_block_bytes(kind, c_.head_dim, 1);
    pool_.alloc((k_side_bytes_ + v_side_bytes_) * size_t(c_.n_layers));
    // NOTE: zeroed so that never-written slots hold finite values (they are masked anyway).
    NINFER_CUDA_CHECK(cudaMemsetAsync(pool_.as<void>(), 0, pool_.bytes(), stream_));
    cuda::AttnShape sh;
    sh.n_heads = c_.n_heads;
    sh.n_kv_heads = c_.n_kv_heads;
    sh.head_dim = c_.head_dim;
    sh.kind = kind;
    sh.q_rotation = int(fmt.k.rotation);
    sh.o_rotation = int(fmt.v.rotation);
    attn_ = std::make_unique<cuda::PagedAttention>(sh);
    NINFER_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  const KvFormat& kv_format() const override {
    NINFER_CHECK(fmt_ != nullptr, "init_kv was not called");
    return *fmt_;
  }

  size_t page_bytes(const KvFormat& fmt) const override { return kv_page_bytes(c_, fmt); }

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
    const size_t kb = size_t(c_.n_kv_heads) * cuda::cache_block_bytes(kind_, c_.head_dim, 0);
    const size_t vb = size_t(c_.n_kv_heads) * cuda::cache_block_bytes(kind_, c_.head_dim, 1);
    const size_t pitch = k_side_bytes_ + v_side_bytes_;
    uint8_t* base = pool_.as<uint8_t>();
    for (size_t i = 0; i < src.size(); ++i) {
      NINFER_CHECK(src[i] >= 0 && src[i] < n_pages_ && dst[i] >= 0 && dst[i] < n_pages_ && src[i] != dst[i],
                   "copy_kv_pages: bad page pair {} -> {} ({} pages)", src[i], dst[i], n_pages_);
      NINFER_CUDA_CHECK(cudaMemcpy2DAsync(base + size_t(dst[i]) * kb, pitch, base + size_t(src[i]) * kb, pitch, kb,
                                          size_t(c_.n_layers), cudaMemcpyDeviceToDevice, stream_));
      uint8_t* vbase = base + k_side_bytes_;
      NINFER_CUDA_CHECK(cudaMemcpy2DAsync(vbase + size_t(dst[i]) * vb, pitch, vbase + size_t(src[i]) * vb, pitch, vb,
                                          size_t(c_.n_layers), cudaMemcpyDeviceToDevice, stream_));
    }
    NINFER_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  void forward(std::span<const SeqChunk> chunks, std::vector<float>& logits) override;

 private:
  // Enqueues embedding .. lm_head for a prepared batch on stream_ (capturable).
  void enqueue_forward(int T, int R, bool split, const int32_t* d_ids, const int32_t* d_pos, const int32_t* d_page,
                       const int32_t* d_slot, const int32_t* d_rows, const std::vector<int32_t>& meta);
  template <typename T>
  void upload(DeviceBuffer& b, const std::vector<T>& v) {
    b.alloc(v.size() * sizeof(T));
    if (!v.empty()) NINFER_CUDA_CHECK(cudaMemcpy(b.as<void>(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  void upload_matrix(Matrix& m, std::initializer_list<const WeightRef*> parts) {
    std::vector<uint16_t> all;
    int n = 0, k = 0;
    for (const WeightRef* w : parts) {
      std::vector<uint16_t> b = to_bf16(*w);
      all.insert(all.end(), b.begin(), b.end());
      n += int(w->t->shape[0]);
      k = int(w->t->shape[1]);
    }
    m.n = n;
    m.k = k;
    upload(m.buf, all);
    weight_bytes_ += all.size() * 2;
  }
  void upload_vec(DeviceBuffer& b, const WeightRef& w) {
    if (!w) return;
    upload(b, to_f32(w));
  }
  // Concatenated biases; zeros stand in for a missing part when another part has one.
  void upload_bias(DeviceBuffer& b, std::initializer_list<std::pair<const WeightRef*, int>> parts) {
    bool any = false;
    for (auto& [w, n] : parts) any = any || bool(*w);
    if (!any) return;
    std::vector<float> all;
    for (auto& [w, n] : parts) {
      if (*w) {
        std::vector<float> f = to_f32(*w);
        all.insert(all.end(), f.begin(), f.end());
      } else {
        all.insert(all.end(), size_t(n), 0.0f);
      }
    }
    upload(b, all);
  }

  void upload_weights(const Model& model) {
    const ModelWeights& w = model.weights;
    upload_matrix(embed_, {&w.embed});
    if (w.lm_head.t != w.embed.t) {
      upload_matrix(lm_head_, {&w.lm_head});
      head_ = &lm_head_;
    } else {
      head_ = &embed_;
    }
    upload_vec(final_norm_, w.final_norm);
    layers_.resize(w.layers.size());
    for (size_t i = 0; i < w.layers.size(); ++i) {
      const LayerWeights& L = w.layers[i];
      LayerDev& D = layers_[i];
      upload_matrix(D.qkv, {&L.wq, &L.wk, &L.wv});
      upload_matrix(D.o, {&L.wo});
      upload_matrix(D.gu, {&L.w_gate, &L.w_up});
      upload_matrix(D.down, {&L.w_down});
      upload_vec(D.attn_norm, L.attn_norm);
      upload_vec(D.ffn_norm, L.ffn_norm);
      upload_vec(D.q_norm, L.q_norm);
      upload_vec(D.k_norm, L.k_norm);
      upload_bias(D.b_qkv, {{&L.bq, c_.q_dim()}, {&L.bk, c_.kv_dim()}, {&L.bv, c_.kv_dim()}});
      upload_bias(D.b_o, {{&L.bo, c_.hidden}});
      upload_bias(D.b_gu, {{&L.b_gate, c_.ffn}, {&L.b_up, c_.ffn}});
      upload_bias(D.b_down, {{&L.b_down, c_.hidden}});
    }
  }

  // Grows the per-forward buffers to hold t tokens and r logits rows.
  void ensure_tokens(int t, int r) {
    const size_t T = size_t(t), halves = mode_ == CudaGemmMode::Split ? 2 : 1;
    const size_t H = size_t(c_.hidden), F = size_t(c_.ffn), qkvn = size_t(c_.q_dim() + 2 * c_.kv_dim());
    x_.ensure(T * H * 4);
    act_.ensure(halves * T * std::max(H, F) * 2);
    qkv_.ensure(T * qkvn * 4);
    att_.ensure(T * size_t(c_.q_dim()) * 2);
    gu_.ensure(T * 2 * F * 4);
    logits_.ensure(size_t(r) * size_t(c_.vocab) * 4);
    if (mode_ == CudaGemmMode::Split) {
      const size_t maxn = std::max({qkvn, H, 2 * F});
      tmp_.ensure(std::max(2 * T * maxn, 2 * size_t(r) * size_t(c_.vocab)) * 4);
    }
    meta_.ensure(T * 4 * 5 + 64);
  }

  // dst [rows, m.n] (=, or += when accumulate) act [rows (x2 when split), m.k] m^T + bias.
  void linear(const uint16_t* act, int rows, const Matrix& m, float* dst, bool accumulate, const DeviceBuffer& bias,
              bool split) {
    const float one = 1.0f, zero = 0.0f;
    const int gemm_rows = split ? 2 * rows : rows;
    // NOTE: decode-sized batches use our GEMV (one pass over the weights with 16-byte loads)
    // unless NINFER_CUDA_GEMV=0; larger ones go to cuBLAS.
    const bool gemv = use_gemv_ && gemm_rows <= cuda::kGemvMaxRows && m.k % 8 == 0;
    if (!split) {
      if (gemv) {
        cuda::launch_gemv_bf16(m.ptr(), act, dst, rows, m.n, m.k, accumulate, stream_);
      } else {
        NINFER_CUBLAS_CHECK(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, m.n, rows, m.k, &one, m.ptr(),
                                         CUDA_R_16BF, m.k, act, CUDA_R_16BF, m.k, accumulate ? &one : &zero, dst,
                                         CUDA_R_32F, m.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      }
      if (bias.bytes()) cuda::launch_add_bias(dst, bias.as<float>(), rows, m.n, stream_);
    } else {
      float* tmp = tmp_.as<float>();
      if (gemv) {
        cuda::launch_gemv_bf16(m.ptr(), act, tmp, 2 * rows, m.n, m.k, false, stream_);
      } else {
        NINFER_CUBLAS_CHECK(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, m.n, 2 * rows, m.k, &one, m.ptr(),
                                         CUDA_R_16BF, m.k, act, CUDA_R_16BF, m.k, &zero, tmp, CUDA_R_32F, m.n,
                                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      }
      cuda::launch_gemm_epilogue(tmp, 2, dst, bias.bytes() ? bias.as<float>() : nullptr, rows, m.n, accumulate,
                                 stream_);
    }
  }

  ModelConfig c_;
  CudaGemmMode mode_ = CudaGemmMode::Bf16;
  bool use_gemv_ = true;
  bool use_graphs_ = true;
  cudaGraphExec_t graph_exec_ = nullptr;
  std::vector<uintptr_t> graph_key_, last_key_;
  std::string device_name_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  DeviceBuffer cublas_ws_;
  Matrix embed_, lm_head_;
  const Matrix* head_ = nullptr;
  DeviceBuffer final_norm_, inv_freq_;
  std::vector<LayerDev> layers_;
  size_t weight_bytes_ = 0;
  // KV cache
  const KvFormat* fmt_ = nullptr;
  cuda::CacheKind kind_ = cuda::CacheKind::Bf16;
  int n_pages_ = 0;
  size_t k_side_bytes_ = 0, v_side_bytes_ = 0;  // one layer's K (V) pool
  DeviceBuffer pool_;  // [n_layers][K, V][n_pages][n_kv_heads] blocks
  std::unique_ptr<cuda::PagedAttention> attn_;
  // per-forward buffers
  DeviceBuffer x_, act_, qkv_, att_, gu_, logits_, tmp_, meta_;
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

void CudaBackend::enqueue_forward(int T, int R, bool split, const int32_t* d_ids, const int32_t* d_pos,
                                  const int32_t* d_page, const int32_t* d_slot, const int32_t* d_rows,
                                  const std::vector<int32_t>& meta) {
  const int H = c_.hidden, qd = c_.q_dim(), kvd = c_.kv_dim(), F = c_.ffn, d = c_.head_dim;
  const int qkvn = qd + 2 * kvd;
  float* x = x_.as<float>();
  uint16_t* act = act_.as<uint16_t>();
  float* qkv = qkv_.as<float>();
  uint16_t* att = att_.as<uint16_t>();
  float* gu = gu_.as<float>();
  cuda::launch_embed(d_ids, embed_.ptr(), x, T, H, stream_);
  std::vector<float> obs_host;
  for (int l = 0; l < c_.n_layers; ++l) {
    const LayerDev& L = layers_[size_t(l)];
    cuda::launch_rmsnorm_bf16(x, nullptr, L.attn_norm.as<float>(), act, T, H, c_.rms_eps, split, stream_);
    linear(act, T, L.qkv, qkv, false, L.b_qkv, split);
    cuda::launch_qk_norm_rope(qkv, qkvn, d_pos, T, c_.n_heads, c_.n_kv_heads, d,
                              L.q_norm.bytes() ? L.q_norm.as<float>() : nullptr,
                              L.k_norm.bytes() ? L.k_norm.as<float>() : nullptr, c_.rms_eps, inv_freq_.as<float>(),
                              stream_);
    uint8_t* k_pool = pool_.as<uint8_t>() + size_t(l) * (k_side_bytes_ + v_side_bytes_);
    uint8_t* v_pool = k_pool + k_side_bytes_;
    cuda::KvAppendParams ap;
    ap.src = qkv;
    ap.ld = qkvn;
    ap.k_col = qd;
    ap.v_col = qd + kvd;
    ap.tok_page = d_page;
    ap.tok_slot = d_slot;
    ap.k_pool = k_pool;
    ap.v_pool = v_pool;
    ap.n_tokens = T;
    ap.n_kv_heads = c_.n_kv_heads;
    ap.head_dim = d;
    ap.kind = kind_;
    ap.k_rotate = fmt_->k.rotation == KvRotation::HadamardHead;
    cuda::launch_kv_append(ap, stream_);
    if (observer_) {
      obs_host.resize(size_t(T) * qkvn);
      NINFER_CUDA_CHECK(cudaMemcpyAsync(obs_host.data(), qkv, obs_host.size() * 4, cudaMemcpyDeviceToHost, stream_));
      NINFER_CUDA_CHECK(cudaStreamSynchronize(stream_));
      for (size_t t = 0; t < size_t(T); ++t)
        observer_(l, meta[size_t(T) + t], obs_host.data() + t * qkvn + qd, obs_host.data() + t * qkvn + qd + kvd);
    }
    // history_ready: the append above writes only the new tokens' slots; every older slot was
    // written before it started (page copies are synchronous, copy_kv_pages). q_ready: the
    // append does not write q, and it starts only after the rope kernel that does has finished
    // (a plain launch).
    attn_->run(qkv, qkvn, k_pool, v_pool, att, qd, stream_, true, true);
    linear(att, T, L.o, x, true, L.b_o, false);
    cuda::launch_rmsnorm_bf16(x, nullptr, L.ffn_norm.as<float>(), act, T, H, c_.rms_eps, split, stream_);
    linear(act, T, L.gu, gu, false, L.b_gu, split);
    cuda::launch_silu_mul_bf16(gu, act, T, F, split, stream_);
    linear(act, T, L.down, x, true, L.b_down, split);
  }
  cuda::launch_rmsnorm_bf16(x, d_rows, final_norm_.as<float>(), act, R, H, c_.rms_eps, split, stream_);
  static const DeviceBuffer kNoBias;
  linear(act, R, *head_, logits_.as<float>(), false, kNoBias, split);
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
  // Host metadata: ids, pos, page, slot [T] each, then logits rows [R].
  std::vector<int32_t> meta(size_t(T) * 4);
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
        if (ch.all_logits || i == ch.n_tokens - 1) rows.push_back(t);
      }
    }
  }
  const int R = int(rows.size());
  meta.insert(meta.end(), rows.begin(), rows.end());
  ensure_tokens(T, R);
  {
    void* h = pinned(std::max(meta.size() * 4, size_t(R) * c_.vocab * 4));
    NINFER_CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::memcpy(h, meta.data(), meta.size() * 4);
    NINFER_CUDA_CHECK(cudaMemcpyAsync(meta_.as<void>(), h, meta.size() * 4, cudaMemcpyHostToDevice, stream_));
  }
  const int32_t* d_ids = meta_.as<int32_t>();
  const int32_t* d_pos = d_ids + T;
  const int32_t* d_page = d_ids + 2 * T;
  const int32_t* d_slot = d_ids + 3 * T;
  const int32_t* d_rows = d_ids + 4 * T;
  attn_->plan(seqs.data(), int(seqs.size()), T, stream_);

  // NOTE: decode-sized steps (every GEMM a GEMV, no KV observer) replay a CUDA graph of the
  // whole layer stack: ~11 launches per layer cost more than their kernels at batch 1. The
  // graph is captured on the second consecutive step with the same launch signature (so one-time
  // initialisation happened eagerly) and reused while the signature holds; the per-step inputs
  // (token ids, positions, pages, block tables) live in device buffers the graph reads.
  const bool graphable = use_graphs_ && !observer_ && (split ? 2 * T : T) <= cuda::kGemvMaxRows && use_gemv_;
  if (graphable) {
    std::vector<uintptr_t> key = attn_->launch_signature();
    for (const DeviceBuffer* b : {&x_, &act_, &qkv_, &att_, &gu_, &logits_, &tmp_, &meta_, &pool_})
      key.push_back(uintptr_t(b->as<void>()));
    key.push_back(uintptr_t(T));
    key.push_back(uintptr_t(R));
    if (graph_exec_ && key == graph_key_) {
      NINFER_CUDA_CHECK(cudaGraphLaunch(graph_exec_, stream_));
    } else if (key == last_key_) {
      cudaGraph_t graph = nullptr;
      NINFER_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
      enqueue_forward(T, R, split, d_ids, d_pos, d_page, d_slot, d_rows, meta);
      NINFER_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
      if (graph_exec_) cudaGraphExecDestroy(graph_exec_);
      graph_exec_ = nullptr;
      NINFER_CUDA_CHECK(cudaGraphInstantiate(&graph_exec_, graph, 0));
      cudaGraphDestroy(graph);
      graph_key_ = key;
      NINFER_CUDA_CHECK(cudaGraphLaunch(graph_exec_, stream_));
    } else {
      enqueue_forward(T, R, split, d_ids, d_pos, d_page, d_slot, d_rows, meta);
    }
    last_key_ = key;
  } else {
    enqueue_forward(T, R, split, d_ids, d_pos, d_page, d_slot, d_rows, meta);
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
  const int d = c.head_dim;
  if (d != 64 && d != 128 && d != 256) {
    if (why) *why = fmt::format("the CUDA backend supports head_dim 64, 128 and 256, the model has {}", d);
    return false;
  }
  if (c.n_kv_heads <= 0 || c.n_heads % c.n_kv_heads != 0) {
    if (why) *why = "num_attention_heads is not a multiple of num_key_value_heads";
    return false;
  }
  return true;
}

bool cuda_supports_kv_format(std::string_view name) { return cuda::cache_kind_for(name, nullptr); }

std::unique_ptr<Backend> make_cuda_backend(const Model& model) { return make_cuda_backend(model, CudaBackendOptions{}); }

std::unique_ptr<Backend> make_cuda_backend(const Model& model, const CudaBackendOptions& opt) {
  return std::make_unique<CudaBackend>(model, opt);
}

}  // namespace ninfer
