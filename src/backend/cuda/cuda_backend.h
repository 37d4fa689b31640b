// The CUDA backend's public entry points. This header has no CUDA types so that the runtime
// (compiled by the C++ compiler, built with or without CUDA) can include it.
//
// What runs on the GPU (see docs/GPU.md): weights uploaded once as bf16, or quantised ones
// (fp8-e4m3, int8, int4) kept quantised (gemv_quant.h); cuBLAS for the dense GEMMs (bf16 in,
// fp32 accumulate and out; cuBLASLt FP8 for per-channel fp8 prefill); our kernels for embedding, RMSNorm, q/k-norm,
// rope, SiLU-mul, the KV append (bf16, int8, int4, rk4v4-e8 and rk2v4-e8 encoders) and paged
// attention over those caches (attention.h). Other formats are refused at init_kv with a
// message naming them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"

namespace ninfer {

struct Model;

// True when the CUDA runtime finds at least one device of compute capability >= 8.0.
bool cuda_device_available();

struct ModelConfig;
// Whether the CUDA backend can run this model (head_dim 64/128/256, or 96 run as 128:
// kv/capacity.h cuda_kv_head_dim; q heads a multiple of kv heads); when not, *why says so. For `--device auto` to fall back to the CPU instead of
// failing in make_cuda_backend.
bool cuda_supports_model(const ModelConfig& c, std::string* why = nullptr);
// Whether the CUDA backend has kernels for this --kv-dtype (cache_kind_for in kv_cache.h: every
// shipped format; not f32 or e8-root-ref).
bool cuda_supports_kv_format(std::string_view name);

// How activations enter the bf16 GEMMs.
enum class CudaGemmMode {
  Bf16,   // activations rounded to bf16 (the fast default)
  Split,  // activations as a bf16 hi + lo pair (x ~= hi + lo to ~2^-16 relative): one GEMM
          // over 2x the rows, fp32-grade accuracy for 2x the GEMM FLOPs (weight bytes read
          // once, so decode barely slows). Tests use it to reproduce fp32 golden logits.
};

struct CudaBackendOptions {
  int device = 0;
  // Default from the environment: NINFER_CUDA_GEMM=split|bf16 (unset: bf16).
  CudaGemmMode gemm_mode = CudaGemmMode::Bf16;
  bool gemm_mode_from_env = true;
  // Prefill of per-channel fp8 weights through cuBLASLt's FP8 GEMM (activations quantised to
  // e4m3 per token); false, or NINFER_CUDA_FP8_GEMM=0: dequantised bf16 tiles and the bf16 GEMM.
  bool fp8_gemm = true;
};

std::unique_ptr<Backend> make_cuda_backend(const Model& model);
std::unique_ptr<Backend> make_cuda_backend(const Model& model, const CudaBackendOptions& opt);

// Device-to-device copy bandwidth (bytes read + bytes written per second) over a `bytes`
// buffer, median of repeats: the memory-bandwidth ceiling that benchmarks quote.
double cuda_copy_bandwidth(size_t bytes = size_t(1) << 30);

// One decode step of paged attention alone, on synthetic data (ninfer bench --attention).
struct AttentionBenchConfig {
  std::string kv_dtype = "bf16";
  int ctx = 8192;        // cached tokens per sequence
  int batch = 1;         // sequences
  int n_heads = 32;
  int n_kv_heads = 8;
  int head_dim = 128;
  int n_query = 1;       // query tokens per sequence
  int splits = 0;        // KV splits forced on the kernels (1..128; 0: the planner's choice)
  int window = 0;        // sliding window of the attention (AttnShape::window; 0: none)
  int repeats = 50;
  bool cold_l2 = false;  // overwrite a buffer of twice the L2 size before each timed repeat
  bool graph = false;    // time CUDA-graph replays of 20 steps back to back (per-step time)
  uint64_t seed = 1;
};
struct AttentionBenchResult {
  double median_ms = 0, min_ms = 0;
  double kv_bytes = 0;     // K+V bytes (codes and scales) the step must read (with a window: of the keys it sees)
  double gbps = 0;         // kv_bytes / median time
  int splits = 0;          // KV splits per (sequence, kv head) the kernel chose
  std::string device_name;
};
AttentionBenchResult cuda_bench_decode_attention(const AttentionBenchConfig& cfg);
// The K and V pool bytes of one such call (0 for a format without CUDA kernels).
size_t cuda_bench_kv_bytes(const AttentionBenchConfig& cfg);
// Allocates `bytes` of device memory now (unless as much is reserved already), from which the
// process's later cuda_bench_decode_attention calls take their K and V pools, as a server
// allocates its pool once. With an allocation and a free per call, a batch-1 row measured
// after larger ones could run much slower than the same row in a fresh process (H200, session
// 13, graph timing: int4 32/8/128 32K 17.82 us against 14.58 alone; 14.60 with the arena).
// rk2v4-e8's rows keep ~3 % of such a difference with the arena (16.18 against 15.55 us).
void cuda_bench_reserve_kv(size_t bytes);

}  // namespace ninfer
