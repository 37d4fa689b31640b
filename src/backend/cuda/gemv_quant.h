// Quantised weights on the GPU (issue 27): the device layout of a QuantMatrix
// (model/weight_format.h) and the kernels that read it: decode GEMVs (1..8 rows, and the MoE
// gathered rows) that dequantise in registers, a dequantiser to bf16 tiles (prefill of int8 /
// int4 / block-scaled fp8 through the bf16 GEMM), and the two small kernels around the FP8
// tensor-core GEMM of prefill (activations quantised to e4m3 per token, the scale epilogue).
// Host launchers; device code in gemv_quant.cu. bf16 values are uint16_t bit patterns.
//
// Device layout (made at upload by the CUDA backend from the QuantMatrix parts of a projection,
// stacked along the output rows as the bf16 matrices are):
//   codes  [n][row_bytes] u8: the QuantMatrix code bytes of each row unchanged (fp8 e4m3 bytes,
//          int8 two's complement, int4 two per byte with column 2j in the low nibble), each row
//          padded with zero bytes to row_bytes = a multiple of 16, so that every row starts
//          16-byte aligned and a lane's 16-byte load holds 16 (8-bit) or 32 (int4) columns.
//   scales [scale_rows][n_groups] fp32, row r of the matrix using scale row r / block_rows
//          (block_rows is the checkpoint's when every stacked part is a whole number of scale
//          blocks, else 1 with the scales repeated per row); column c uses group
//          g_idx ? g_idx[seg(r)][c] : c / block_cols.
//   zeros  [scale_rows][n_groups] u8 (int4 only), beside the scales.
//   g_idx  [n_seg][k] int32 or null (GPTQ desc_act): one column-to-group map per stacked part
//          (q, k and v each have their own), part i covering rows [seg_end[i-1], seg_end[i]).
//   col_perm [n_seg][k] int32 or null: instead of g_idx when every group of a part's g_idx has
//          the same number of columns (GPTQ's act-order: g_idx[c] = position / group): the
//          part's code columns are stored sorted by group (stable), column j of the codes
//          holding matrix column col_perm[seg][j], so that groups are contiguous again
//          (block_cols = the group size) and the fast path runs on the activations permuted
//          alike (x_perm: [n_seg][8][k] bf16 scratch, written by the launcher per launch).
// Element (r, c) is dequantised exactly as the CPU does (weight_format.h): fp8 e4m3(q) * s,
// int8 q * s, int4 (q - z) * s.
//
// Two GEMV paths: the fast one when k is a multiple of the columns of one 16-byte load (16 for
// 8-bit codes, 32 for int4), a scale group holds whole loads (block_cols a multiple of them)
// and there is no g_idx: a lane dequantises a 16-byte load in registers with one scale (and
// zero) for all of it, sums code x activation products per load and applies the scale to that
// partial sum. Otherwise a general path (any k, any grid, g_idx): a lane per column, each
// weight dequantised as the CPU does it. Both accumulate in fp32.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace ninfer::cuda {

enum class QFmt : int { Fp8 = 0, Int8 = 1, Int4 = 2 };

constexpr int kQuantMaxSegments = 4;  // stacked parts with their own g_idx (q|k|v, gate|up)

struct QuantWeights {
  QFmt fmt = QFmt::Fp8;
  int n = 0, k = 0;                  // rows (outputs), columns (inputs)
  int row_bytes = 0;                 // bytes per row of codes (a multiple of 16)
  int block_rows = 1, block_cols = 0, n_groups = 1;
  const uint8_t* codes = nullptr;    // [n][row_bytes]
  const float* scales = nullptr;     // [ceil(n / block_rows)][n_groups]
  const uint8_t* zeros = nullptr;    // like scales (int4), else null
  const int32_t* g_idx = nullptr;    // [n_seg][k] or null
  const int32_t* col_perm = nullptr; // [n_seg][k] or null (then g_idx is null)
  uint16_t* x_perm = nullptr;        // [n_seg][8][k] scratch, with col_perm
  int n_seg = 1;
  int seg_end[kQuantMaxSegments] = {};  // row where part i ends (g_idx / col_perm only)
  // Gathered (MoE) launches: expert e's codes / scales / zeros / g_idx at e times these.
  size_t expert_codes = 0, expert_scales = 0, expert_gidx = 0;
};

// Whether the fast GEMV path takes w (see above); the general path runs otherwise.
bool quant_fast_path(const QuantWeights& w);

// y[t, :] = (accumulate ? y[t, :] : 0) + alpha * (x[t, :] . dequant(w)^T) for n_rows <= 8
// (kGemvMaxRows). x: [n_rows, k] bf16; y: [n_rows, n] fp32.
void launch_gemv_quant(const QuantWeights& w, const uint16_t* x, float* y, int n_rows, bool accumulate, float alpha,
                       cudaStream_t s);
// (col_perm: first the activations permuted into x_perm, then the fast path.)
// MoE decode (no col_perm): y[r, :] = x[r / x_div, :] . dequant(w_e)^T with e = experts[r] (device) and w_e
// the expert's matrix (QuantWeights::expert_*). x: [n_rows / x_div, k] bf16; y: [n_rows, n]
void launch_gemv_gathered_quant(const QuantWeights& w, const int32_t* experts, const uint16_t* x, int x_div, float* y,
                                int n_rows, cudaStream_t s);

// out[i, :] = bf16(dequant(w) row r0 + i) for i < n_rows: expert `expert`'s matrix (columns in
// the matrix's order also with col_perm).
// out: [n_rows, k] bf16 (the prefill's bf16 tile of int8 / int4 / block-scaled fp8 weights).
void launch_dequant_bf16(const QuantWeights& w, int expert, int r0, int n_rows, uint16_t* out, cudaStream_t s);

// FP8 prefill: per row t of x, s[t] = max|x[t]| / 448 (1 for an all-zero row) and
// q[t, c] = e4m3(x[t, c] / s[t]) rounded to nearest even (saturating). x: [n_rows, k] bf16;
// q: [n_rows, ld_q] e4m3 (columns k..ld_q zeroed); s: [n_rows] fp32.
void launch_quantize_act_e4m3(const uint16_t* x, int n_rows, int k, int ld_q, uint8_t* q, float* s, cudaStream_t st);
// The FP8 GEMM's epilogue: dst[t, j] = (accumulate ? dst[t, j] : 0) + alpha * row_s[t] *
// col_s[j] * acc[t, j] + (bias ? bias[j] : 0). acc may alias dst when !accumulate.
// acc, dst: [n_rows, n] fp32; row_s: [n_rows]; col_s: [n]
void launch_fp8_scale_epilogue(const float* acc, const float* row_s, const float* col_s, const float* bias, float* dst,
                               int n_rows, int n, bool accumulate, float alpha, cudaStream_t s);

}  // namespace ninfer::cuda
