// Device helpers shared by the kernels: bf16 bit conversions that match core/dtype.h exactly,
// warp reductions, cp.async, ldmatrix and the bf16 tensor-core MMA (m16n8k16) wrappers.
// Only .cu files include this.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace ninfer::cuda {

// Same bits as ninfer::f32_to_bf16 (round to nearest even; NaN -> quiet NaN keeping the sign
// and top payload bits), so the bf16 cache is byte-identical to the CPU codec's.
__device__ __forceinline__ uint16_t f32_to_bf16_bits(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
__device__ __forceinline__ float bf16_bits_to_f32(uint16_t h) { return __uint_as_float(uint32_t(h) << 16); }

// Two floats -> bf16x2 (lo in the low half), round to nearest even.
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  return uint32_t(f32_to_bf16_bits(lo)) | (uint32_t(f32_to_bf16_bits(hi)) << 16);
}

// Two finite floats -> bf16x2 (lo in the low half) with the hardware round-to-nearest-even
// conversion (one instruction; equal to pack_bf16x2 for every non-NaN input).
__device__ __forceinline__ uint32_t cvt_bf16x2(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// The split-k reduction of the GEMVs (gemv.cu, gemv_quant.cu): a block of W warps holds, per warp,
// partial sums acc[R][T] of R rows for T activation rows; the S consecutive warps of a group
// split one row group's k. Each warp's lanes are summed (warp_sum), then (s > 1) the group's s
// warps are added in warp order through shared memory, a fixed order, so the sum does not
// depend on timing. The result is in the group's first warp. Every thread of the block calls it
// (it synchronises the block when s > 1). s: the group size, at most S.
template <int W, int R, int T, int S>
__device__ __forceinline__ void reduce_warp_groups(float (&acc)[R][T], int s = S) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < T; ++t) acc[r][t] = warp_sum(acc[r][t]);
  if constexpr (S > 1) {
    if (s == 1) return;
    __shared__ float part[W][R][T];
    if (lane == 0)
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int t = 0; t < T; ++t) part[warp][r][t] = acc[r][t];
    __syncthreads();
    if (warp % s == 0)
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int t = 0; t < T; ++t) {
          float v = part[warp][r][t];
          for (int j = 1; j < s; ++j) v += part[warp + j][r][t];
          acc[r][t] = v;
        }
  }
}

// SiLU as every gated-activation kernel computes it (one definition: a fused epilogue and the
// separate kernel give the same bits).
__device__ __forceinline__ float silu_f32(float g) { return g / (1.0f + expf(-g)); }

// 1 / rms of n_rows rows [n_rows][dim] (n_rows <= kMaxRows) for a block of kThreads threads, as
// the CPU's RMSNorm: the sum of squares in fp64 (thread i sums elements i, i + kThreads, ...,
// then each warp by xor shuffles, then the kThreads / 32 warp sums in order), 1 / sqrtf(float(
// mean) + eps) in fp32. The one definition every RMSNorm kernel and GEMV prologue uses, so a
// norm fused into a GEMV gives the standalone kernel's bits. Every thread of the block calls it;
// inv (shared) [n_rows] holds the results on return.
template <int kThreads, int kMaxRows>
__device__ __forceinline__ void block_inv_rms(const float* x, int n_rows, int dim, float eps, float* inv) {
  __shared__ double part[kThreads / 32][kMaxRows];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int r = 0; r < n_rows; ++r) {
    const float* xr = x + size_t(r) * dim;
    double ss = 0;
    for (int i = threadIdx.x; i < dim; i += kThreads) ss += double(xr[i]) * xr[i];
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (lane == 0) part[warp][r] = ss;
  }
  __syncthreads();
  if (int(threadIdx.x) < n_rows) {
    double t = 0;
    for (int w = 0; w < kThreads / 32; ++w) t += part[w][threadIdx.x];
    inv[threadIdx.x] = 1.0f / sqrtf(float(t / dim) + eps);
  }
  __syncthreads();
}

// Logit soft-capping in the log2 domain: a score s (log2 units, s = s_nat log2(e)) becomes
// c2 tanh(s / c2) with c2 = softcap log2(e), i.e. softcap tanh(s_nat / softcap) in log2 units,
// computed as c2 - 2 c2 / (2^(s k) + 1), k = 2 / softcap (2^(s k) = e^(2 s_nat / softcap)).
// ex2.approx (relative error ~2^-22) and the approximate division (~2 ulp) leave an absolute
// error of a few 1e-7 c2 on the capped score, far below the bf16 rounding of Q (2^-9 relative).
// Saturates cleanly: 2^(s k) = +inf gives c2 (the division returns 0), 0 gives -c2.
__device__ __forceinline__ float softcap_log2(float s, float c2, float k) {
  float e;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(e) : "f"(s * k));
  return c2 - __fdividef(2.0f * c2, e + 1.0f);
}

// Asks the L2 for the line holding ptr (no register, nothing to wait for).
__device__ __forceinline__ void prefetch_l2(const void* ptr) { asm volatile("prefetch.global.L2 [%0];" ::"l"(ptr)); }

// Programmatic dependent launch (Hopper, sm_90): a kernel launched with the
// ProgrammaticStreamSerialization attribute waits here for its predecessor's completion and
// memory; the predecessor may let it be scheduled early. Both are no-ops before sm_90, where
// the host does not set the attribute (launch_merge).
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// 16-byte global->shared copy; src_bytes < 16 zero-fills the rest (0: all zeros).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, int src_bytes) {
  const uint32_t s = uint32_t(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes));
}
// 4-byte global->shared copy (through L1).
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem) {
  const uint32_t s = uint32_t(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// ldmatrix x4: lane l passes the address of one 16-byte row; r[i] receives matrix i's
// elements (row l/4, cols 2(l%4), 2(l%4)+1), or the transpose with .trans.
__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const void* smem) {
  const uint32_t a = uint32_t(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], const void* smem) {
  const uint32_t a = uint32_t(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

// d += a * b, m16n8k16, bf16 inputs, fp32 accumulators. Fragment layouts (PTX ISA):
//   a[0..3]: (row g, k 2c..2c+1), (row g+8, k 2c..), (row g, k 2c+8..), (row g+8, k 2c+8..)
//   b[0..1]: (k 2c..2c+1, col g), (k 2c+8.., col g)
//   d[0..3]: (row g, col 2c), (row g, col 2c+1), (row g+8, col 2c), (row g+8, col 2c+1)
// with g = lane / 4, c = lane % 4.
__device__ __forceinline__ void mma_bf16_16816(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace ninfer::cuda
