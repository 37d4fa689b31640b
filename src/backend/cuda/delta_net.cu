// Gated DeltaNet and the gated-attention pieces on the GPU (delta_net.h). The delta rule runs in
// its recurrent form, a token at a time per (sequence, value head) block with the state in
// shared memory: exact, and at decode (one token) what a chunked kernel would do too; prefill of
// long prompts is sequential in the tokens (the chunked formulation is the planned speed-up).
#include <algorithm>
#include <stdexcept>
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/delta_net.h"
#include "backend/cuda/device_utils.cuh"

namespace ninfer::cuda {
namespace {

__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float softplusf(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

// Column of the projection row holding conv channel c (q | k | v) for the layout.
__device__ __forceinline__ int conv_col(const DeltaNetParams& p, int c) {
  if (!p.grouped) return c;
  const int kd = p.nk * p.dk, r = p.nv / p.nk, gw = 2 * p.dk + 2 * r * p.dv;
  if (c < kd) return (c / p.dk) * gw + c % p.dk;
  if (c < 2 * kd) return ((c - kd) / p.dk) * gw + p.dk + (c - kd) % p.dk;
  const int v = c - 2 * kd;
  return (v / (r * p.dv)) * gw + 2 * p.dk + v % (r * p.dv);
}
__device__ __forceinline__ int z_col(const DeltaNetParams& p, int j) {
  const int kd = p.nk * p.dk, vd = p.nv * p.dv;
  if (!p.grouped) return 2 * kd + vd + j;
  const int r = p.nv / p.nk, gw = 2 * p.dk + 2 * r * p.dv;
  return (j / (r * p.dv)) * gw + 2 * p.dk + r * p.dv + j % (r * p.dv);
}
// b (which = 0) or a (which = 1) of value head h.
__device__ __forceinline__ int ba_col(const DeltaNetParams& p, int h, int which) {
  const int kd = p.nk * p.dk, vd = p.nv * p.dv;
  if (!p.grouped) return 2 * kd + 2 * vd + which * p.nv + h;
  const int r = p.nv / p.nk, gw = 2 * p.dk + 2 * r * p.dv;
  return p.nk * gw + (h / r) * 2 * r + which * r + h % r;
}

// grid (channel blocks, chunks): y = silu(causal conv), continuing the slot's conv history.
__global__ void conv_kernel(DeltaNetParams p) {
  const int cd = 2 * p.nk * p.dk + p.nv * p.dv, K = p.conv;
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cd) return;
  const DeltaNetChunk ch = p.chunks[blockIdx.y];
  float* hist = p.state + size_t(ch.slot) * p.slot_floats + p.layer_offset;  // [K - 1][cd]
  float h[8];  // the last K - 1 inputs, oldest first (K <= 9)
  for (int j = 0; j < K - 1; ++j) h[j] = ch.fresh ? 0.0f : hist[size_t(j) * cd + c];
  float w[9];
  for (int j = 0; j < K; ++j) w[j] = p.conv_w[size_t(c) * K + j];
  const int col = conv_col(p, c);
  for (int i = 0; i < ch.n; ++i) {
    const int t = ch.t0 + i;
    const float x = p.proj[size_t(t) * p.ld_proj + col];
    float acc = 0.0f;
    for (int j = 0; j < K - 1; ++j) acc += w[j] * h[j];
    acc += w[K - 1] * x;
    p.y[size_t(t) * cd + c] = silu(acc);
    for (int j = 0; j + 1 < K - 1; ++j) h[j] = h[j + 1];
    if (K > 1) h[K - 2] = x;
  }
  for (int j = 0; j < K - 1; ++j) hist[size_t(j) * cd + c] = h[j];
}

__device__ float block_sum(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float t = 0.0f;
  for (int i = 0; i < nw; ++i) t += red[i];
  return t;
}

// grid (nv, chunks), dv threads: the delta rule on S [dk][dv] (shared memory), column j per
// thread, then the gated RMSNorm of the head's output.
__global__ void delta_rule_kernel(DeltaNetParams p) {
  extern __shared__ float smem[];
  const int dk = p.dk, dv = p.dv, h = blockIdx.x, j = threadIdx.x, r = p.nv / p.nk, hk = h / r;
  const int kd = p.nk * dk, cd = 2 * kd + p.nv * dv;
  float* S = smem;                    // [dk][dv]
  float* q = S + size_t(dk) * dv;     // [dk]
  float* k = q + dk;                  // [dk]
  float* red = k + dk;                // [32]
  const DeltaNetChunk ch = p.chunks[blockIdx.y];
  float* gS = p.state + size_t(ch.slot) * p.slot_floats + p.layer_offset + size_t(p.conv - 1) * cd +
              size_t(h) * dk * dv;
  for (int i = 0; i < dk; ++i) S[size_t(i) * dv + j] = ch.fresh ? 0.0f : gS[size_t(i) * dv + j];
  const float A = expf(p.a_log[h]), dt = p.dt_bias[h], w = p.norm_w[j];
  const float qscale = rsqrtf(float(dk));
  for (int it = 0; it < ch.n; ++it) {
    const int t = ch.t0 + it;
    const float* yt = p.y + size_t(t) * cd;
    const float* row = p.proj + size_t(t) * p.ld_proj;
    __syncthreads();  // q, k of the previous token are no longer read
    float sq = 0.0f, sk = 0.0f;
    for (int i = j; i < dk; i += blockDim.x) {
      const float qi = yt[hk * dk + i], ki = yt[kd + hk * dk + i];
      q[i] = qi;
      k[i] = ki;
      sq += qi * qi;
      sk += ki * ki;
    }
    sq = block_sum(sq, red);
    sk = block_sum(sk, red);  // NOTE: block_sum syncs before it writes, after the last call's reads
    const float nq = qscale / sqrtf(sq + 1e-6f), nkk = 1.0f / sqrtf(sk + 1e-6f);
    const float g = -A * softplusf(row[ba_col(p, h, 1)] + dt);
    const float decay = expf(g), beta = sigmoidf(row[ba_col(p, h, 0)]);
    const float v = yt[2 * kd + h * dv + j];
    float kv = 0.0f;
    for (int i = 0; i < dk; ++i) {
      const float s = S[size_t(i) * dv + j] * decay;
      S[size_t(i) * dv + j] = s;
      kv += s * (k[i] * nkk);
    }
    const float delta = (v - kv) * beta;
    float o = 0.0f;
    for (int i = 0; i < dk; ++i) {
      const float s = S[size_t(i) * dv + j] + (k[i] * nkk) * delta;
      S[size_t(i) * dv + j] = s;
      o += s * (q[i] * nq);
    }
    const float ss = block_sum(o * o, red);
    const float z = row[z_col(p, h * dv + j)];
    const float out = o * rsqrtf(ss / float(dv) + p.eps) * w * silu(z);
    p.out[size_t(t) * p.nv * dv + h * dv + j] = f32_to_bf16_bits(out);
  }
  for (int i = 0; i < dk; ++i) gS[size_t(i) * dv + j] = S[size_t(i) * dv + j];
}

__global__ void split_gate_kernel(const float* src, float* qkv, float* gate, int n_tokens, int n_heads, int hd,
                                  int kvd) {
  const int qd = n_heads * hd, ld_in = 2 * qd + 2 * kvd, ld = qd + 2 * kvd;
  const size_t total = size_t(n_tokens) * ld_in;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x) {
    const int t = int(i / ld_in), c = int(i % ld_in);
    const float v = src[i];
    if (c < 2 * qd) {
      const int head = c / (2 * hd), e = c % (2 * hd);
      if (e < hd)
        qkv[size_t(t) * ld + head * hd + e] = v;
      else
        gate[size_t(t) * qd + head * hd + e - hd] = v;
    } else {
      qkv[size_t(t) * ld + qd + (c - 2 * qd)] = v;
    }
  }
}

__global__ void attn_gate_kernel(uint16_t* att, const float* gate, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    att[i] = f32_to_bf16_bits(bf16_bits_to_f32(att[i]) * sigmoidf(gate[i]));
}

__global__ void gated_add_kernel(const float* y, const float* g, int n_tokens, int dim, float alpha, float* x) {
  const size_t total = size_t(n_tokens) * dim;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x)
    x[i] += alpha * sigmoidf(g[i / dim]) * y[i];
}

int blocks_for(size_t n, int threads) {
  const size_t b = (n + threads - 1) / threads;
  return int(std::min<size_t>(std::max<size_t>(b, 1), 65536));
}

}  // namespace

void launch_delta_net(const DeltaNetParams& p, cudaStream_t s) {
  if (p.n_chunks == 0) return;
  if (p.conv < 2 || p.conv > 9) throw std::runtime_error("delta_net: linear_conv_kernel_dim must be in 2..9 on the GPU");
  if (p.dv > 1024 || p.dv % 32 != 0)
    throw std::runtime_error("delta_net: linear_value_head_dim must be a multiple of 32 up to 1024 on the GPU");
  const int cd = 2 * p.nk * p.dk + p.nv * p.dv;
  conv_kernel<<<dim3(unsigned((cd + 127) / 128), unsigned(p.n_chunks)), 128, 0, s>>>(p);
  NINFER_CUDA_LAUNCH_CHECK();
  const size_t smem = (size_t(p.dk) * p.dv + 2 * size_t(p.dk) + 32) * 4;
  static size_t opted = 0;
  if (smem > 48 * 1024 && smem > opted) {
    NINFER_CUDA_CHECK(cudaFuncSetAttribute(delta_rule_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    opted = smem;
  }
  delta_rule_kernel<<<dim3(unsigned(p.nv), unsigned(p.n_chunks)), unsigned(p.dv), smem, s>>>(p);
  NINFER_CUDA_LAUNCH_CHECK();
}

void launch_split_attn_gate(float* qkv, float* scratch, float* gate, int n_tokens, int n_heads, int head_dim,
                            int kv_dim, cudaStream_t s) {
  const size_t n = size_t(n_tokens) * (2 * n_heads * head_dim + 2 * kv_dim);
  NINFER_CUDA_CHECK(cudaMemcpyAsync(scratch, qkv, n * 4, cudaMemcpyDeviceToDevice, s));
  split_gate_kernel<<<blocks_for(n, 256), 256, 0, s>>>(scratch, qkv, gate, n_tokens, n_heads, head_dim, kv_dim);
  NINFER_CUDA_LAUNCH_CHECK();
}

void launch_attn_gate(uint16_t* att, const float* gate, size_t n, cudaStream_t s) {
  attn_gate_kernel<<<blocks_for(n, 256), 256, 0, s>>>(att, gate, n);
  NINFER_CUDA_LAUNCH_CHECK();
}

void launch_gated_add(const float* y, const float* g, int n_tokens, int dim, float alpha, float* x, cudaStream_t s) {
  gated_add_kernel<<<blocks_for(size_t(n_tokens) * dim, 256), 256, 0, s>>>(y, g, n_tokens, dim, alpha, x);
  NINFER_CUDA_LAUNCH_CHECK();
}

}  // namespace ninfer::cuda
