// Quantised-weight kernels (gemv_quant.h: the device layout and what each launcher computes).
//
// Fast GEMV: a block of kWarps warps owns kWarps / S groups of kRows rows; the S warps of a
// group split the row's 16-byte loads ("chunks": 16 columns of 8-bit codes, 32 of int4)
// between them, lane l of slice j taking chunks j * 32 + l, + 32 S, ... kUnroll chunks of
// every row are in flight per lane. A chunk is dequantised in registers 8 columns at a time:
//   int4  one 32-bit word = 8 nibbles; (w & 0x0F0F0F0F) and (w >> 4 & 0x0F0F0F0F) hold the even
//         and odd columns, one per byte; __byte_perm puts a byte under the exponent of 2^23
//         (0x4B0000qq = 2^23 + q) and subtracting 2^23 + z gives q - z exactly (one PRMT and
//         one FSUB per weight, no int->float conversion, which runs at quarter rate)
//   int8  the same with the bytes xor 0x80 (q + 128) and 2^23 + 128 subtracted
//   fp8   cvt.rn.f16x2.e4m3x2 (sm_89+: exact, every e4m3 value is an fp16) then fp16 -> fp32
// The code-times-activation products of a chunk are summed (fp32) and the chunk's one scale
// multiplies that partial sum into the row's accumulator (a scale group holds whole chunks). The
// activation rows are read through L1 (every warp of the block reuses them) and converted once
// per 8 columns for the kRows rows of a warp. kRows = 4 (the bf16 GEMV has 2): the activation
// conversion is paid per weight row, and at 8 activation rows the FMA issue rate, not the
// bytes, would otherwise limit an 8-bit or 4-bit GEMV.
//
// General GEMV: a warp per row, a lane per column, each weight dequantised by dequant_elem (the
// CPU's single fp32 multiply of exact operands), T accumulators.
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/gemv_quant.h"
#include "backend/cuda/ops.h"

namespace ninfer::cuda {
namespace {

constexpr int kWarps = 8, kRows = 4, kUnroll = 2;

template <QFmt F>
constexpr int chunk_cols() {
  return F == QFmt::Int4 ? 32 : 16;
}
int chunk_cols(QFmt f) { return f == QFmt::Int4 ? 32 : 16; }

// e4m3 -> fp32, exact for every finite code: the 7 magnitude bits placed at fp32's exponent /
// mantissa boundary (exponent e, mantissa m << 20) make 2^(e - 127) (1 + m / 8), or for e = 0
// the fp32 subnormal m / 8 * 2^-126; times 2^120 that is e4m3's 2^(e - 7) (1 + m / 8) or
// m / 8 * 2^-6. (No flush-to-zero: the build does not use fast math.)
__device__ __forceinline__ float e4m3_to_f32_exact(uint32_t b) {
  return __uint_as_float(((b & 0x7Fu) << 20) | ((b & 0x80u) << 24)) * 0x1p120f;
}

// Two e4m3 codes (the low byte first) -> fp32.
__device__ __forceinline__ float2 e4m3x2_to_f32x2(uint32_t v16) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint32_t h;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(h) : "h"(uint16_t(v16)));
  __half2 hh;
  memcpy(&hh, &h, 4);
  return __half22float2(hh);
#else
  return make_float2(e4m3_to_f32_exact(v16 & 0xFF), e4m3_to_f32_exact((v16 >> 8) & 0xFF));
#endif
}

// 2^23 + byte i of v (i = 0..3) as fp32.
__device__ __forceinline__ float magic_byte(uint32_t v, int i) {
  return __uint_as_float(__byte_perm(v, 0x4B000000u, 0x7650u | uint32_t(i)));
}

// Columns 8j .. 8j + 7 of a chunk (wd: its 16 bytes as 4 words) as exact fp32 codes: int4
// q - z (mz = 2^23 + z), int8 q, fp8 e4m3(q) (the scale is applied to the chunk's sum).
template <QFmt F>
__device__ __forceinline__ void decode8(const uint32_t (&wd)[4], int j, float mz, float (&f)[8]) {
  if constexpr (F == QFmt::Int4) {
    const uint32_t w = wd[j];
    const uint32_t lo = w & 0x0F0F0F0Fu, hi = (w >> 4) & 0x0F0F0F0Fu;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      f[2 * i] = magic_byte(lo, i) - mz;
      f[2 * i + 1] = magic_byte(hi, i) - mz;
    }
  } else if constexpr (F == QFmt::Int8) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t w = wd[2 * j + h] ^ 0x80808080u;
#pragma unroll
      for (int i = 0; i < 4; ++i) f[4 * h + i] = magic_byte(w, i) - 8388736.0f;  // 2^23 + 128
    }
  } else {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t w = wd[2 * j + h];
      const float2 a = e4m3x2_to_f32x2(w & 0xFFFFu), b = e4m3x2_to_f32x2(w >> 16);
      f[4 * h] = a.x;
      f[4 * h + 1] = a.y;
      f[4 * h + 2] = b.x;
      f[4 * h + 3] = b.y;
    }
  }
}

__device__ __forceinline__ void bf16x8_to_f32(const uint4& v, float (&f)[8]) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(w[i] << 16);
    f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}

// The matrix of expert e (e = 0 for a dense launch).
__device__ __forceinline__ void select_expert(QuantWeights& w, int e) {
  w.codes += size_t(e) * w.expert_codes;
  w.scales += size_t(e) * w.expert_scales;
  if (w.zeros) w.zeros += size_t(e) * w.expert_scales;
  if (w.g_idx) w.g_idx += size_t(e) * w.expert_gidx;
}

// The stacked part (segment) row r belongs to.
__device__ __forceinline__ int segment_of(const QuantWeights& w, int r) {
  int seg = 0;
  while (seg < w.n_seg - 1 && r >= w.seg_end[seg]) ++seg;
  return seg;
}

// The matrix column that code column c of row r holds (col_perm: regrouped columns).
__device__ __forceinline__ int matrix_col(const QuantWeights& w, int r, int c) {
  return w.col_perm ? w.col_perm[size_t(segment_of(w, r)) * w.k + c] : c;
}

// Element (r, c) dequantised as the CPU does (weight_format.cpp): one fp32 multiply.
template <QFmt F>
__device__ __forceinline__ float dequant_elem(const QuantWeights& w, int r, int c) {
  int g;
  if (w.g_idx) {
    g = w.g_idx[size_t(segment_of(w, r)) * w.k + c];
  } else {
    g = c / w.block_cols;
  }
  const size_t si = size_t(r / w.block_rows) * w.n_groups + g;
  const uint8_t* row = w.codes + size_t(r) * w.row_bytes;
  const float s = w.scales[si];
  if constexpr (F == QFmt::Int4) {
    const int q = (row[c / 2] >> (4 * (c & 1))) & 0xF;
    return float(q - int(w.zeros[si])) * s;
  } else if constexpr (F == QFmt::Int8) {
    return float(int8_t(row[c])) * s;
  } else {
    return e4m3_to_f32_exact(row[c]) * s;
  }
}

// The fast GEMV (T activation rows; gathered: T == 1, row blockIdx.y uses expert experts[row]
// and activation row row / x_div).
template <QFmt F, int T>
__global__ void __launch_bounds__(kWarps * 32) qgemv_fast_kernel(QuantWeights w, const uint16_t* __restrict__ x,
                                                                float* __restrict__ y, bool accumulate, float alpha,
                                                                const int32_t* __restrict__ experts, int x_div, int S) {
  constexpr int E = chunk_cols<F>();
  pdl_launch_dependents();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int n = w.n, k = w.k;
  if (experts) {
    pdl_wait();  // the expert ids come from the previous kernel
    const int row = blockIdx.y;
    select_expert(w, experts[row]);
    x += size_t(row / x_div) * k;
    y += size_t(row) * n;
  }
  const int grp = warp / S, slice = warp % S;
  const int n0 = (blockIdx.x * (kWarps / S) + grp) * kRows;
  // col_perm: x is x_perm, one plane of kGemvMaxRows rows per segment (a row group lies in one:
  // quant_fast_path).
  if (w.col_perm && n0 < n) x += size_t(segment_of(w, n0)) * kGemvMaxRows * k;
  float acc[kRows][T];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int t = 0; t < T; ++t) acc[r][t] = 0.0f;
  if (n0 < n) {
    const int chunks = k / E, step = 32 * S;
    const uint4* wr[kRows];
    const float* sr[kRows];
    const uint8_t* zr[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int row = min(n0 + r, n - 1);
      wr[r] = reinterpret_cast<const uint4*>(w.codes + size_t(row) * w.row_bytes);
      sr[r] = w.scales + size_t(row / w.block_rows) * w.n_groups;
      zr[r] = F == QFmt::Int4 ? w.zeros + size_t(row / w.block_rows) * w.n_groups : nullptr;
    }
    const int chunks_per_group = w.block_cols / E;
    const uint4* xr = reinterpret_cast<const uint4*>(x);
    const int xrow = k / 8;  // uint4s per activation row
    int c0 = slice * 32 + lane;
    uint4 wv[kUnroll][kRows];
    auto load = [&]() {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          const int c = c0 + u * step;
          wv[u][r] = c < chunks ? __ldcs(wr[r] + c) : make_uint4(0, 0, 0, 0);
        }
    };
    load();
    if (!experts) pdl_wait();  // x is the predecessor's output
    for (;;) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int c = c0 + u * step;
        if (c >= chunks) break;
        const int g = c / chunks_per_group;
        float s[kRows], mz[kRows];
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          s[r] = __ldg(sr[r] + g);
          mz[r] = F == QFmt::Int4 ? 8388608.0f + float(__ldg(zr[r] + g)) : 0.0f;
        }
        float part[kRows][T];
#pragma unroll
        for (int r = 0; r < kRows; ++r)
#pragma unroll
          for (int t = 0; t < T; ++t) part[r][t] = 0.0f;
#pragma unroll
        for (int j = 0; j < E / 8; ++j) {
          // The kRows rows' 8 weights decoded once, then each activation row converted once.
          float f[kRows][8];
#pragma unroll
          for (int r = 0; r < kRows; ++r) {
            const uint32_t wd[4] = {wv[u][r].x, wv[u][r].y, wv[u][r].z, wv[u][r].w};
            decode8<F>(wd, j, mz[r], f[r]);
          }
#pragma unroll
          for (int t = 0; t < T; ++t) {
            float xf[8];
            bf16x8_to_f32(__ldg(xr + size_t(t) * xrow + size_t(c) * (E / 8) + j), xf);
#pragma unroll
            for (int r = 0; r < kRows; ++r)
#pragma unroll
              for (int i = 0; i < 8; ++i) part[r][t] = fmaf(f[r][i], xf[i], part[r][t]);
          }
        }
#pragma unroll
        for (int r = 0; r < kRows; ++r)
#pragma unroll
          for (int t = 0; t < T; ++t) acc[r][t] = fmaf(s[r], part[r][t], acc[r][t]);
      }
      c0 += step * kUnroll;
      if (c0 >= chunks) break;
      load();
    }
  } else if (!experts) {
    pdl_wait();  // every thread of a programmatic dependent waits before its grid may complete
  }
  reduce_warp_groups<kWarps, kRows, T, kWarps>(acc, S);  // S warps per row group, chosen at launch
  if (lane != 0 || slice != 0 || n0 >= n) return;
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int t = 0; t < T; ++t)
      if (n0 + r < n) {
        float* dst = y + size_t(t) * n + n0 + r;
        *dst = accumulate ? *dst + alpha * acc[r][t] : alpha * acc[r][t];
      }
}

// The general GEMV: warp `warp` of block b owns row b * kWarps + warp; n_rows <= kGemvMaxRows.
template <QFmt F>
__global__ void __launch_bounds__(kWarps * 32) qgemv_general_kernel(QuantWeights w, const uint16_t* __restrict__ x,
                                                                   float* __restrict__ y, int T, bool accumulate,
                                                                   float alpha, const int32_t* __restrict__ experts,
                                                                   int x_div) {
  pdl_launch_dependents();
  pdl_wait();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int n = w.n, k = w.k;
  if (experts) {
    const int row = blockIdx.y;
    select_expert(w, experts[row]);
    x += size_t(row / x_div) * k;
    y += size_t(row) * n;
  }
  const int r = blockIdx.x * kWarps + warp;
  if (r >= n) return;
  float acc[kGemvMaxRows] = {};
  for (int c = lane; c < k; c += 32) {
    const float v = dequant_elem<F>(w, r, c);
    const int xc = matrix_col(w, r, c);
#pragma unroll
    for (int t = 0; t < kGemvMaxRows; ++t)
      if (t < T) acc[t] = fmaf(v, bf16_bits_to_f32(x[size_t(t) * k + xc]), acc[t]);
  }
#pragma unroll
  for (int t = 0; t < kGemvMaxRows; ++t) {
    if (t >= T) break;
    const float v = warp_sum(acc[t]);
    if (lane == 0) {
      float* dst = y + size_t(t) * n + r;
      *dst = accumulate ? *dst + alpha * v : alpha * v;
    }
  }
}

template <QFmt F>
__global__ void dequant_bf16_kernel(QuantWeights w, int expert, int r0, uint16_t* __restrict__ out) {
  select_expert(w, expert);
  const int i = blockIdx.y, r = r0 + i;
  for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < w.k; c += gridDim.x * blockDim.x)
    out[size_t(i) * w.k + matrix_col(w, r, c)] = f32_to_bf16_bits(dequant_elem<F>(w, r, c));
}

// x_perm[s][t][j] = x[t][col_perm[s][j]]: the activations in each segment's code column order.
__global__ void permute_act_kernel(const uint16_t* __restrict__ x, const int32_t* __restrict__ perm, int k,
                                   uint16_t* __restrict__ xp) {
  const int s = blockIdx.x, t = blockIdx.y;
  const int32_t* p = perm + size_t(s) * k;
  uint16_t* o = xp + (size_t(s) * kGemvMaxRows + t) * k;
  for (int j = threadIdx.x; j < k; j += blockDim.x) o[j] = x[size_t(t) * k + p[j]];
}

constexpr int kActThreads = 256;

__global__ void __launch_bounds__(kActThreads) quantize_act_e4m3_kernel(const uint16_t* __restrict__ x, int k,
                                                                        int ld_q, uint8_t* __restrict__ q,
                                                                        float* __restrict__ s) {
  const int t = blockIdx.x;
  const uint16_t* xr = x + size_t(t) * k;
  float m = 0.0f;
  for (int c = threadIdx.x; c < k; c += kActThreads) m = fmaxf(m, fabsf(bf16_bits_to_f32(xr[c])));
  m = warp_max(m);
  __shared__ float part[kActThreads / 32];
  __shared__ float scale;
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    float a = 0.0f;
    for (int i = 0; i < kActThreads / 32; ++i) a = fmaxf(a, part[i]);
    // NOTE: amax / 448 maps the row's largest magnitude to e4m3's largest finite value; an
    // all-zero row keeps scale 1 (its codes are 0 either way).
    scale = a > 0.0f ? a / 448.0f : 1.0f;
    s[t] = scale;
  }
  __syncthreads();
  const float sc = scale;
  uint8_t* qr = q + size_t(t) * ld_q;
  for (int c = threadIdx.x; c < ld_q; c += kActThreads)
    qr[c] = c < k ? uint8_t(__nv_cvt_float_to_fp8(bf16_bits_to_f32(xr[c]) / sc, __NV_SATFINITE, __NV_E4M3)) : 0;
}

__global__ void fp8_scale_epilogue_kernel(const float* acc, const float* __restrict__ row_s,
                                          const float* __restrict__ col_s, const float* __restrict__ bias, float* dst,
                                          int n_rows, int n, bool accumulate, float alpha) {
  const size_t total = size_t(n_rows) * n;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x) {
    const int t = int(i / n), j = int(i % n);
    float v = alpha * (row_s[t] * col_s[j] * acc[i]);
    if (bias) v += bias[j];
    dst[i] = accumulate ? dst[i] + v : v;
  }
}

int num_sms() {
  static const int v = [] {
    int dev = 0, n = 0;
    NINFER_CUDA_CHECK(cudaGetDevice(&dev));
    NINFER_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    return n;
  }();
  return v;
}

template <typename... P, typename... A>
void launch(void (*kernel)(P...), dim3 grid, cudaStream_t s, A... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(kWarps * 32);
  cfg.stream = s;
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = pdl_launches() ? 1 : 0;
  NINFER_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, P(args)...));
}

int blocks_for(int n, int s) {
  const int per_block = kWarps / s * kRows;
  return (n + per_block - 1) / per_block;
}

// The warps per row group: the fewest (1, 2, 4, 8) whose grid reaches four blocks per SM, and
// no more than a row has 32-lane groups of chunks for (as the bf16 GEMV picks its split).
int pick_split(const QuantWeights& w, int gathered_rows) {
  const int chunks = w.k / chunk_cols(w.fmt);
  int s = 1;
  while (s < kWarps && blocks_for(w.n, s) * gathered_rows < 4 * num_sms() && chunks >= 32 * 2 * s) s *= 2;
  return s;
}

template <QFmt F, int T>
void launch_fast(const QuantWeights& w, const uint16_t* x, float* y, bool acc, float alpha, const int32_t* ex,
                 int x_div, int gathered_rows, cudaStream_t s) {
  const int split = pick_split(w, gathered_rows);
  launch(qgemv_fast_kernel<F, T>, dim3(blocks_for(w.n, split), gathered_rows), s, w, x, y, acc, alpha, ex, x_div,
         split);
}

template <QFmt F>
void launch_rows(const QuantWeights& w, const uint16_t* x, float* y, int n_rows, bool acc, float alpha,
                 const int32_t* ex, int x_div, int gathered_rows, cudaStream_t s) {
  if (!quant_fast_path(w)) {
    launch(qgemv_general_kernel<F>, dim3((w.n + kWarps - 1) / kWarps, gathered_rows), s, w, x, y, n_rows, acc, alpha,
           ex, x_div);
    return;
  }
  switch (n_rows) {
    case 1: launch_fast<F, 1>(w, x, y, acc, alpha, ex, x_div, gathered_rows, s); break;
    case 2: launch_fast<F, 2>(w, x, y, acc, alpha, ex, x_div, gathered_rows, s); break;
    case 3: launch_fast<F, 3>(w, x, y, acc, alpha, ex, x_div, gathered_rows, s); break;
    case 4: launch_fast<F, 4>(w, x, y, acc, alpha, ex, x_div, gathered_rows, s); break;
    case 5: launch_fast<F, 5>(w, x, y, acc, alpha, ex, x_div, gathered_rows, s); break;
    case 6: launch_fast<F, 6>(w, x, y, acc, alpha, ex, x_div, gathered_rows, s); break;
    case 7: launch_fast<F, 7>(w, x, y, acc, alpha, ex, x_div, gathered_rows, s); break;
    default: launch_fast<F, 8>(w, x, y, acc, alpha, ex, x_div, gathered_rows, s); break;
  }
}

void launch_any(const QuantWeights& w, const uint16_t* x, float* y, int n_rows, bool acc, float alpha,
                const int32_t* ex, int x_div, int gathered_rows, cudaStream_t s) {
  switch (w.fmt) {
    case QFmt::Fp8: launch_rows<QFmt::Fp8>(w, x, y, n_rows, acc, alpha, ex, x_div, gathered_rows, s); break;
    case QFmt::Int8: launch_rows<QFmt::Int8>(w, x, y, n_rows, acc, alpha, ex, x_div, gathered_rows, s); break;
    case QFmt::Int4: launch_rows<QFmt::Int4>(w, x, y, n_rows, acc, alpha, ex, x_div, gathered_rows, s); break;
  }
}

void check_weights(const QuantWeights& w, const char* who) {
  if (w.n < 1 || w.k < 1 || w.codes == nullptr || w.scales == nullptr || w.block_rows < 1 || w.block_cols < 1 ||
      w.n_groups < 1 || w.row_bytes % 16 != 0 || (w.fmt == QFmt::Int4 && w.zeros == nullptr) ||
      ((w.g_idx || w.col_perm) && (w.n_seg < 1 || w.n_seg > kQuantMaxSegments)) || (w.g_idx && w.col_perm) ||
      (w.col_perm && !w.x_perm))
    throw std::runtime_error(std::string(who) + ": malformed QuantWeights");
}

}  // namespace

bool quant_fast_path(const QuantWeights& w) {
  const int e = chunk_cols(w.fmt);
  if (w.col_perm)
    for (int i = 0; i + 1 < w.n_seg; ++i)
      if (w.seg_end[i] % kRows != 0) return false;  // a row group would straddle two x planes
  return w.g_idx == nullptr && w.k % e == 0 && (w.block_cols % e == 0 || w.block_cols >= w.k);
}

void launch_gemv_quant(const QuantWeights& w, const uint16_t* x, float* y, int n_rows, bool accumulate, float alpha,
                       cudaStream_t s) {
  check_weights(w, "launch_gemv_quant");
  if (n_rows < 1 || n_rows > kGemvMaxRows) throw std::runtime_error("launch_gemv_quant: 1 <= rows <= 8");
  QuantWeights v = w;
  // NOTE: a single group wider than the row (block_cols >= k) is one group of whole chunks.
  if (v.block_cols >= v.k && v.g_idx == nullptr) v.block_cols = (v.k + chunk_cols(v.fmt) - 1) / chunk_cols(v.fmt) * chunk_cols(v.fmt);
  if (v.col_perm && quant_fast_path(v)) {
    permute_act_kernel<<<dim3(v.n_seg, n_rows), 256, 0, s>>>(x, v.col_perm, v.k, v.x_perm);
    NINFER_CUDA_CHECK(cudaGetLastError());
    x = v.x_perm;
  }
  launch_any(v, x, y, n_rows, accumulate, alpha, nullptr, 1, 1, s);
}

void launch_gemv_gathered_quant(const QuantWeights& w, const int32_t* experts, const uint16_t* x, int x_div, float* y,
                                int n_rows, cudaStream_t s) {
  check_weights(w, "launch_gemv_gathered_quant");
  if (n_rows < 1 || x_div < 1) throw std::runtime_error("launch_gemv_gathered_quant: rows >= 1, x_div >= 1");
  if (w.col_perm) throw std::runtime_error("launch_gemv_gathered_quant: experts keep g_idx (no col_perm)");
  QuantWeights v = w;
  if (v.block_cols >= v.k && v.g_idx == nullptr) v.block_cols = (v.k + chunk_cols(v.fmt) - 1) / chunk_cols(v.fmt) * chunk_cols(v.fmt);
  launch_any(v, x, y, 1, false, 1.0f, experts, x_div, n_rows, s);
}

void launch_dequant_bf16(const QuantWeights& w, int expert, int r0, int n_rows, uint16_t* out, cudaStream_t s) {
  check_weights(w, "launch_dequant_bf16");
  if (n_rows < 1 || n_rows > 65535 || r0 < 0 || r0 + n_rows > w.n)
    throw std::runtime_error("launch_dequant_bf16: rows out of range (1..65535 per launch)");
  const dim3 grid((w.k + 255) / 256 < 8 ? (w.k + 255) / 256 : 8, n_rows);
  switch (w.fmt) {
    case QFmt::Fp8: dequant_bf16_kernel<QFmt::Fp8><<<grid, 256, 0, s>>>(w, expert, r0, out); break;
    case QFmt::Int8: dequant_bf16_kernel<QFmt::Int8><<<grid, 256, 0, s>>>(w, expert, r0, out); break;
    case QFmt::Int4: dequant_bf16_kernel<QFmt::Int4><<<grid, 256, 0, s>>>(w, expert, r0, out); break;
  }
  NINFER_CUDA_CHECK(cudaGetLastError());
}

void launch_quantize_act_e4m3(const uint16_t* x, int n_rows, int k, int ld_q, uint8_t* q, float* s, cudaStream_t st) {
  if (n_rows < 1 || k < 1 || ld_q < k) throw std::runtime_error("launch_quantize_act_e4m3: bad shape");
  quantize_act_e4m3_kernel<<<n_rows, kActThreads, 0, st>>>(x, k, ld_q, q, s);
  NINFER_CUDA_CHECK(cudaGetLastError());
}

void launch_fp8_scale_epilogue(const float* acc, const float* row_s, const float* col_s, const float* bias, float* dst,
                               int n_rows, int n, bool accumulate, float alpha, cudaStream_t s) {
  const size_t total = size_t(n_rows) * n;
  const int blocks = int(std::min<size_t>((total + 255) / 256, size_t(num_sms()) * 16));
  fp8_scale_epilogue_kernel<<<blocks, 256, 0, s>>>(acc, row_s, col_s, bias, dst, n_rows, n, accumulate, alpha);
  NINFER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ninfer::cuda
