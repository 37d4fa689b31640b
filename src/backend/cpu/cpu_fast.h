// The CPU backend's fast kernels (the default path; cpu_ops.h is the fp32 reference they are
// tested against). Weights are kept in bf16, packed in panels of 16 output rows, and
// multiplied with fp32 accumulation:
//   - on a CPU with AVX512-BF16: x split once into bf16 hi + lo parts (x - hi rounded
//     again), both multiplied with vdpbf16ps: ~16 bits of x survive (x in bf16 alone, as
//     llama.cpp does, puts logits 3e-3 off fp32), at the fp32 FMA rate without widening W;
//   - elsewhere (AVX2, portable): x stays fp32, each bf16 weight widened to fp32 exactly.
// The same kernel serves every number of rows, so a row's result does not depend on its batch.
// Attention's K and V are packed in fp32 (PackedF32): decoded rows are not bf16-exact.
// The instruction set is chosen at run time (Isa), so one binary runs on any x86-64 CPU.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "backend/cpu/thread_pool.h"

namespace ninfer::cpu::fast {

enum class Isa : uint8_t {
  Portable,  // plain C++
  Avx2,      // x86-64-v3: AVX2 + FMA (fp32 FMA on widened bf16)
  Avx512,    // x86-64-v4 + AVX512-BF16 (vdpbf16ps for many rows)
};

// The best instruction set this CPU runs, or the one NINFER_CPU_ISA names (portable, avx2,
// avx512; an unknown name, or one this CPU cannot run, is an Error naming the variable).
Isa select_isa();
std::string_view isa_name(Isa isa);
bool isa_available(Isa isa);  // this CPU and this build can run it

// W [n, k] in bf16 packed in panels of 16 rows: element (j, c) lives at
//   ((j / 16) * (kp / 2) + c / 2) * 32 + (j % 16) * 2 + c % 2,   kp = k rounded up to even,
// so one 64-byte load holds two consecutive columns of 16 rows (the operand of vdpbf16ps).
// Rows past n and the pad column are zero.
struct PackedBf16 {
  int n = 0, k = 0;
  std::vector<uint16_t> data;

  int kp() const { return (k + 1) & ~1; }
  int panels() const { return (n + 15) / 16; }
  size_t bytes() const { return data.size() * 2; }
  explicit operator bool() const { return n > 0; }
  // From rows of bf16 bits (row stride ldw elements) or of fp32 (rounded to bf16, RNE).
  static PackedBf16 from_bf16(const uint16_t* w, int n, int k, size_t ldw);
  static PackedBf16 from_f32(const float* w, int n, int k, size_t ldw);
};

// W [n, k] in fp32 packed in panels of 16 rows: element (j, c) at ((j / 16) * k + c) * 16 + j % 16.
struct PackedF32 {
  int n = 0, k = 0;
  std::vector<float> data;

  int panels() const { return (n + 15) / 16; }
  void resize(int rows, int cols);  // zero-filled
  void set_row(int j, const float* row);
  void set_col(int c, const float* col);
};

// y[i * ldy + j] = sum_c x[i * k + c] * W[j, c] (+ bias[j]) for i < m, j < n.
// Optional causal limits for attention: row_cols[i] (when given) says row i needs only
// columns j < row_cols[i] (others are left unspecified); row_k[i] (when given) says x[i, c]
// is zero for c >= row_k[i].
struct GemmLimits {
  const int* row_cols = nullptr;
  const int* row_k = nullptr;
};
void gemm(Isa isa, ThreadPool& pool, const float* x, int m, const PackedBf16& w, const float* bias, float* y,
          int ldy, const GemmLimits& lim = {});
void gemm(Isa isa, ThreadPool& pool, const float* x, int m, const PackedF32& w, float* y, int ldy,
          const GemmLimits& lim = {});
// Several W of one width against the same x in one parallel region (a projection's q|k|v or
// gate|up parts): part i writes y_i[r * ldy + j] (+ bias_i[j]). At most 8 parts.
struct GemmPart {
  const PackedBf16* w;
  const float* bias;  // or null
  float* y;
};
void gemm_parts(Isa isa, ThreadPool& pool, const float* x, int m, std::span<const GemmPart> parts, int ldy,
                const GemmLimits& lim = {});

// The kernels behind gemm, one set per instruction set (cpu_fast_<isa>.cpp). Each computes
// whole panels [p0, p1) of W for rows [0, m) of x; x is fp32 [m, k] (xb, xlo: the same
// split into bf16 hi and lo pairs, [m, kp / 2] each, only for gemm_bf16x).
struct Kernels {
  void (*gemm_f32x)(const float* x, int m, int k, const PackedBf16& w, int p0, int p1, const float* bias, float* y,
                    int ldy, const GemmLimits& lim);
  void (*gemm_bf16x)(const uint32_t* xb, const uint32_t* xlo, int m, const PackedBf16& w, int p0, int p1, const float* bias, float* y,
                     int ldy, const GemmLimits& lim);  // null: not on this ISA
  void (*to_bf16_pairs)(const float* x, int m, int k, uint32_t* hi, uint32_t* lo);
  void (*gemm_f32w)(const float* x, int m, int k, const PackedF32& w, int p0, int p1, float* y, int ldy,
                    const GemmLimits& lim);
  // x[i] = exp(x[i] - mx) for i < n, returns the sum (fp32 lanes, then summed).
  float (*exp_sum)(float* x, int n, float mx);
  // s[r * lds + j] = dot(q[r * ldq ...], kr[j * d ...]) for r < rows, j < nk.
  void (*dots)(const float* q, int rows, int ldq, const float* kr, int nk, int d, float* s, int lds);
  // o[r * ldo + i] = o[r * ldo + i] * scale[r] + sum_j p[r * ldp + j] * v[j * d + i].
  void (*pv)(const float* p, int rows, int ldp, const float* v, int nk, int d, const float* scale, float* o, int ldo);
  // dots and pv on keys / values stored as bf16 (a bf16 cache's pages, read in place).
  void (*dots_bf16)(const float* q, int rows, int ldq, const uint16_t* kr, int nk, int d, float* s, int lds);
  void (*pv_bf16)(const float* p, int rows, int ldp, const uint16_t* v, int nk, int d, const float* scale, float* o,
                  int ldo);
};
const Kernels& kernels(Isa isa);

namespace detail {
const Kernels& portable_kernels();
const Kernels& avx2_kernels();    // null members where the build cannot target it
const Kernels& avx512_kernels();
}  // namespace detail

}  // namespace ninfer::cpu::fast

