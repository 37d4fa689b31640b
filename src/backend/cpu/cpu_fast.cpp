#include "backend/cpu/cpu_fast.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>

#include "core/dtype.h"
#include "core/error.h"

namespace ninfer::cpu::fast {

bool isa_available(Isa isa) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)  // the kernels are GCC-only
  switch (isa) {
    case Isa::Portable: return true;
    case Isa::Avx2: return detail::avx2_kernels().gemm_f32x && __builtin_cpu_supports("avx2") &&
                           __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    case Isa::Avx512:
      return detail::avx512_kernels().gemm_f32x && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512bf16");
  }
  return false;
#else
  return isa == Isa::Portable;
#endif
}

namespace {

// Rows of x per task when many rows are multiplied (tasks are panel pairs x row blocks).
constexpr int kRowBlock = 128;

}  // namespace

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::Portable: return "portable";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
  }
  return "?";
}

Isa select_isa() {
  const char* env = std::getenv("NINFER_CPU_ISA");
  if (env && *env) {
    const std::string v = env;
    for (Isa isa : {Isa::Portable, Isa::Avx2, Isa::Avx512}) {
      if (v != isa_name(isa)) continue;
      if (!isa_available(isa)) fail("NINFER_CPU_ISA={}: this CPU (or this build) cannot run it", v);
      return isa;
    }
    fail("NINFER_CPU_ISA must be portable, avx2 or avx512, got '{}'", v);
  }
  if (isa_available(Isa::Avx512)) return Isa::Avx512;
  if (isa_available(Isa::Avx2)) return Isa::Avx2;
  return Isa::Portable;
}

const Kernels& kernels(Isa isa) {
  switch (isa) {
    case Isa::Avx2: return detail::avx2_kernels();
    case Isa::Avx512: return detail::avx512_kernels();
    case Isa::Portable: break;
  }
  return detail::portable_kernels();
}

PackedBf16 PackedBf16::from_bf16(const uint16_t* w, int n, int k, size_t ldw) {
  PackedBf16 p;
  p.n = n;
  p.k = k;
  const int kp = p.kp();
  p.data.assign(size_t(p.panels()) * 16 * size_t(kp), 0);
  for (int j = 0; j < n; ++j) {
    uint16_t* dst = p.data.data() + size_t(j / 16) * 16 * size_t(kp) + size_t(j % 16) * 2;
    const uint16_t* src = w + size_t(j) * ldw;
    for (int c = 0; c < k; ++c) dst[size_t(c / 2) * 32 + (c & 1)] = src[c];
  }
  return p;
}

PackedBf16 PackedBf16::from_f32(const float* w, int n, int k, size_t ldw) {
  std::vector<uint16_t> b(size_t(n) * size_t(k));
  for (int j = 0; j < n; ++j)
    for (int c = 0; c < k; ++c) b[size_t(j) * k + c] = f32_to_bf16(w[size_t(j) * ldw + c]);
  return from_bf16(b.data(), n, k, size_t(k));
}

void gemm(Isa isa, ThreadPool& pool, const float* x, int m, const PackedBf16& w, const float* bias, float* y, int ldy,
          const GemmLimits& lim) {
  const GemmPart part{&w, bias, y};
  gemm_parts(isa, pool, x, m, {&part, 1}, ldy, lim);
}

void gemm_parts(Isa isa, ThreadPool& pool, const float* x, int m, std::span<const GemmPart> parts, int ldy,
                const GemmLimits& lim) {
  const Kernels& K = kernels(isa);
  const int k = parts[0].w->k, kp2 = parts[0].w->kp() / 2;
  // Tasks: (part, panel pair, row block), numbered part by part.
  int first[8], n_tasks = 0;
  NINFER_CHECK(parts.size() <= std::size(first), "gemm_parts: {} parts", parts.size());
  const int mb = (m + kRowBlock - 1) / kRowBlock;
  for (size_t i = 0; i < parts.size(); ++i) {
    NINFER_CHECK(parts[i].w->k == k, "gemm_parts: parts of different widths");
    first[i] = n_tasks;
    n_tasks += (parts[i].w->panels() + 1) / 2 * mb;
  }
  // NOTE: one kernel per ISA for every m, so a row's result does not depend on what it is
  // batched with (the server's n > 1 and batched requests must equal single ones).
  const bool bf16x = K.gemm_bf16x != nullptr;
  // NOTE: a thread-local scratch: parallel_for is not reentrant, so one per thread suffices.
  // (The workers see their own thread_local, so the lambda takes the pointer.)
  thread_local std::vector<uint32_t> xb_scratch;
  const uint32_t *xb = nullptr, *xlo = nullptr;
  const size_t xn = size_t(m) * size_t(kp2);
  if (bf16x) {
    xb_scratch.resize(2 * xn);
    K.to_bf16_pairs(x, m, k, xb_scratch.data(), xb_scratch.data() + xn);
    xb = xb_scratch.data();
    xlo = xb + xn;
  }
  pool.parallel_for(n_tasks, [&](int t, int) {
    size_t pi = parts.size() - 1;
    while (first[pi] > t) --pi;
    const GemmPart& part = parts[pi];
    const int local = t - first[pi], pp = local / mb, b = local % mb, P = part.w->panels();
    const int i0 = b * kRowBlock, rows = std::min(kRowBlock, m - i0);
    const int p0 = 2 * pp, p1 = std::min(P, p0 + 2);
    GemmLimits l;
    if (lim.row_cols) l.row_cols = lim.row_cols + i0;
    if (lim.row_k) l.row_k = lim.row_k + i0;
    float* y = part.y + size_t(i0) * ldy;
    if (bf16x)
      K.gemm_bf16x(xb + size_t(i0) * kp2, xlo + size_t(i0) * kp2, rows, *part.w, p0, p1, part.bias, y, ldy, l);
    else
      K.gemm_f32x(x + size_t(i0) * k, rows, k, *part.w, p0, p1, part.bias, y, ldy, l);
  });
}

void gemm(Isa isa, ThreadPool& pool, const float* x, int m, const PackedF32& w, float* y, int ldy,
          const GemmLimits& lim) {
  const Kernels& K = kernels(isa);
  const int P = w.panels(), pairs = (P + 1) / 2, mb = (m + kRowBlock - 1) / kRowBlock;
  pool.parallel_for(pairs * mb, [&](int t, int) {
    const int pp = t / mb, b = t % mb, i0 = b * kRowBlock, rows = std::min(kRowBlock, m - i0);
    GemmLimits l;
    if (lim.row_cols) l.row_cols = lim.row_cols + i0;
    if (lim.row_k) l.row_k = lim.row_k + i0;
    K.gemm_f32w(x + size_t(i0) * w.k, rows, w.k, w, 2 * pp, std::min(P, 2 * pp + 2), y + size_t(i0) * ldy, ldy, l);
  });
}

void PackedF32::resize(int rows, int cols) {
  n = rows;
  k = cols;
  data.assign(size_t(panels()) * 16 * size_t(k), 0.0f);
}
void PackedF32::set_row(int j, const float* row) {
  float* dst = data.data() + size_t(j / 16) * 16 * size_t(k) + size_t(j % 16);
  for (int c = 0; c < k; ++c) dst[size_t(c) * 16] = row[c];
}
void PackedF32::set_col(int c, const float* col) {
  float* base = data.data() + size_t(c) * 16;
  for (int j = 0; j < n; ++j) base[size_t(j / 16) * 16 * size_t(k) + size_t(j % 16)] = col[j];
}

namespace detail {
namespace {

float widen(uint16_t b) { return bf16_to_f32(b); }

void p_gemm_f32x(const float* x, int m, int k, const PackedBf16& w, int p0, int p1, const float* bias, float* y,
                 int ldy, const GemmLimits& lim) {
  const int kp = w.kp();
  for (int p = p0; p < p1; ++p) {
    const uint16_t* panel = w.data.data() + size_t(p) * 16 * size_t(kp);
    for (int i = 0; i < m; ++i) {
      if (lim.row_cols && lim.row_cols[i] <= 16 * p) continue;
      const int kend = lim.row_k ? std::min(k, lim.row_k[i]) : k;
      float acc[16] = {};
      const float* xi = x + size_t(i) * k;
      for (int c = 0; c < kend; ++c) {
        const uint16_t* col = panel + size_t(c / 2) * 32 + (c & 1);
        for (int l = 0; l < 16; ++l) acc[l] += xi[c] * widen(col[2 * l]);
      }
      for (int l = 0; l < 16 && 16 * p + l < w.n; ++l) {
        const int j = 16 * p + l;
        y[size_t(i) * ldy + j] = acc[l] + (bias ? bias[j] : 0.0f);
      }
    }
  }
}

void p_to_bf16_pairs(const float* x, int m, int k, uint32_t* hi, uint32_t* lo) {
  const int kp2 = (k + 1) / 2;
  for (int i = 0; i < m; ++i)
    for (int q = 0; q < kp2; ++q) {
      uint32_t h = 0, l = 0;
      for (int s = 0; s < 2 && 2 * q + s < k; ++s) {
        const float v = x[size_t(i) * k + 2 * q + s];
        const uint16_t b = f32_to_bf16(v);
        h |= uint32_t(b) << (16 * s);
        l |= uint32_t(f32_to_bf16(v - bf16_to_f32(b))) << (16 * s);
      }
      hi[size_t(i) * kp2 + q] = h;
      lo[size_t(i) * kp2 + q] = l;
    }
}

void p_gemm_f32w(const float* x, int m, int k, const PackedF32& w, int p0, int p1, float* y, int ldy,
                 const GemmLimits& lim) {
  for (int p = p0; p < p1; ++p) {
    const float* panel = w.data.data() + size_t(p) * 16 * size_t(k);
    for (int i = 0; i < m; ++i) {
      if (lim.row_cols && lim.row_cols[i] <= 16 * p) continue;
      const int kend = lim.row_k ? std::min(k, lim.row_k[i]) : k;
      float acc[16] = {};
      const float* xi = x + size_t(i) * k;
      for (int c = 0; c < kend; ++c)
        for (int l = 0; l < 16; ++l) acc[l] += xi[c] * panel[size_t(c) * 16 + l];
      for (int l = 0; l < 16 && 16 * p + l < w.n; ++l) y[size_t(i) * ldy + 16 * p + l] = acc[l];
    }
  }
}

float p_exp_sum(float* x, int n, float mx) {
  float s = 0;
  for (int i = 0; i < n; ++i) s += (x[i] = std::exp(x[i] - mx));
  return s;
}

inline float p_elem(const float* p, size_t i) { return p[i]; }
inline float p_elem(const uint16_t* p, size_t i) { return std::bit_cast<float>(uint32_t(p[i]) << 16); }

template <class T>
void p_dots_t(const float* q, int rows, int ldq, const T* kr, int nk, int d, float* s, int lds) {
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < nk; ++j) {
      float a = 0;
      for (int i = 0; i < d; ++i) a += q[size_t(r) * ldq + i] * p_elem(kr, size_t(j) * d + i);
      s[size_t(r) * lds + j] = a;
    }
}

template <class T>
void p_pv_t(const float* p, int rows, int ldp, const T* v, int nk, int d, const float* scale, float* o, int ldo) {
  for (int r = 0; r < rows; ++r) {
    float* orow = o + size_t(r) * ldo;
    for (int i = 0; i < d; ++i) orow[i] *= scale[r];
    for (int j = 0; j < nk; ++j) {
      const float pj = p[size_t(r) * ldp + j];
      for (int i = 0; i < d; ++i) orow[i] += pj * p_elem(v, size_t(j) * d + i);
    }
  }
}

void p_dots(const float* q, int rows, int ldq, const float* kr, int nk, int d, float* s, int lds) {
  p_dots_t(q, rows, ldq, kr, nk, d, s, lds);
}
void p_pv(const float* p, int rows, int ldp, const float* v, int nk, int d, const float* scale, float* o, int ldo) {
  p_pv_t(p, rows, ldp, v, nk, d, scale, o, ldo);
}
void p_dots_bf16(const float* q, int rows, int ldq, const uint16_t* kr, int nk, int d, float* s, int lds) {
  p_dots_t(q, rows, ldq, kr, nk, d, s, lds);
}
void p_pv_bf16(const float* p, int rows, int ldp, const uint16_t* v, int nk, int d, const float* scale, float* o,
               int ldo) {
  p_pv_t(p, rows, ldp, v, nk, d, scale, o, ldo);
}

}  // namespace

const Kernels& portable_kernels() {
  static const Kernels k{p_gemm_f32x, nullptr, p_to_bf16_pairs, p_gemm_f32w, p_exp_sum, p_dots, p_pv, p_dots_bf16, p_pv_bf16};
  return k;
}

}  // namespace detail
}  // namespace ninfer::cpu::fast

