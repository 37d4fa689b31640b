// The fast kernels for x86-64-v3 CPUs (AVX2 + FMA): fp32 FMA on exactly widened bf16 weights
// for any number of rows. Compiled for that target function by function (the pragma below).
#include "backend/cpu/cpu_fast.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace ninfer::cpu::fast::detail {
namespace {

inline float hsum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

// Rows [0, MR) of fp32 x against one panel of 16 rows (two halves of 8 lanes).
template <int MR>
void tile(const float* x, int ldx, int kend, const uint16_t* pa, float* y, int ldy, int j0, int n, const float* bias) {
  __m256 acc[MR][2];
  for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  const __m256i hi = _mm256_set1_epi32(int(0xFFFF0000u));
  const int pairs = kend / 2;
  for (int q = 0; q < pairs; ++q) {
    const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pa + size_t(q) * 32));
    const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pa + size_t(q) * 32 + 16));
    const __m256 e0 = _mm256_castsi256_ps(_mm256_slli_epi32(w0, 16)), o0 = _mm256_castsi256_ps(_mm256_and_si256(w0, hi));
    const __m256 e1 = _mm256_castsi256_ps(_mm256_slli_epi32(w1, 16)), o1 = _mm256_castsi256_ps(_mm256_and_si256(w1, hi));
    for (int i = 0; i < MR; ++i) {
      const __m256 xe = _mm256_broadcast_ss(x + size_t(i) * ldx + 2 * q);
      const __m256 xo = _mm256_broadcast_ss(x + size_t(i) * ldx + 2 * q + 1);
      acc[i][0] = _mm256_fmadd_ps(xo, o0, _mm256_fmadd_ps(xe, e0, acc[i][0]));
      acc[i][1] = _mm256_fmadd_ps(xo, o1, _mm256_fmadd_ps(xe, e1, acc[i][1]));
    }
  }
  if (kend & 1) {
    const int q = pairs;
    const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pa + size_t(q) * 32));
    const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pa + size_t(q) * 32 + 16));
    const __m256 e0 = _mm256_castsi256_ps(_mm256_slli_epi32(w0, 16)), e1 = _mm256_castsi256_ps(_mm256_slli_epi32(w1, 16));
    for (int i = 0; i < MR; ++i) {
      const __m256 xe = _mm256_broadcast_ss(x + size_t(i) * ldx + 2 * q);
      acc[i][0] = _mm256_fmadd_ps(xe, e0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(xe, e1, acc[i][1]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    alignas(32) float out[16];
    _mm256_store_ps(out, acc[i][0]);
    _mm256_store_ps(out + 8, acc[i][1]);
    for (int l = 0; l < 16 && j0 + l < n; ++l) y[size_t(i) * ldy + j0 + l] = out[l] + (bias ? bias[j0 + l] : 0.0f);
  }
}

void gemm_f32x(const float* x, int m, int k, const PackedBf16& w, int p0, int p1, const float* bias, float* y, int ldy,
               const GemmLimits& lim) {
  const size_t panel = 16 * size_t(w.kp());
  for (int p = p0; p < p1; ++p) {
    const uint16_t* pa = w.data.data() + size_t(p) * panel;
    for (int i = 0; i < m; i += 4) {
      const int mr = std::min(4, m - i);
      int cols = 1 << 30, kend = k;
      if (lim.row_cols) {
        cols = 0;
        for (int r = 0; r < mr; ++r) cols = std::max(cols, lim.row_cols[i + r]);
      }
      if (cols <= 16 * p) continue;
      if (lim.row_k) {
        kend = 0;
        for (int r = 0; r < mr; ++r) kend = std::max(kend, lim.row_k[i + r]);
        kend = std::min(kend, k);
      }
      const float* xi = x + size_t(i) * k;
      float* yi = y + size_t(i) * ldy;
      switch (mr) {
        case 4: tile<4>(xi, k, kend, pa, yi, ldy, 16 * p, w.n, bias); break;
        case 3: tile<3>(xi, k, kend, pa, yi, ldy, 16 * p, w.n, bias); break;
        case 2: tile<2>(xi, k, kend, pa, yi, ldy, 16 * p, w.n, bias); break;
        default: tile<1>(xi, k, kend, pa, yi, ldy, 16 * p, w.n, bias); break;
      }
    }
  }
}

void to_bf16_pairs(const float*, int, int, uint32_t*, uint32_t*) {}  // not used: no bf16 products here

// fp32 W: rows [0, MR) x one panel (two halves).
template <int MR>
void f32w_tile(const float* x, int ldx, int kend, const float* pa, float* y, int ldy, int j0, int n) {
  __m256 acc[MR][2];
  for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int c = 0; c < kend; ++c) {
    const __m256 w0 = _mm256_loadu_ps(pa + size_t(c) * 16), w1 = _mm256_loadu_ps(pa + size_t(c) * 16 + 8);
    for (int i = 0; i < MR; ++i) {
      const __m256 xv = _mm256_broadcast_ss(x + size_t(i) * ldx + c);
      acc[i][0] = _mm256_fmadd_ps(xv, w0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(xv, w1, acc[i][1]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    alignas(32) float out[16];
    _mm256_store_ps(out, acc[i][0]);
    _mm256_store_ps(out + 8, acc[i][1]);
    for (int l = 0; l < 16 && j0 + l < n; ++l) y[size_t(i) * ldy + j0 + l] = out[l];
  }
}

void gemm_f32w(const float* x, int m, int k, const PackedF32& w, int p0, int p1, float* y, int ldy,
               const GemmLimits& lim) {
  for (int p = p0; p < p1; ++p) {
    const float* pa = w.data.data() + size_t(p) * 16 * size_t(k);
    for (int i = 0; i < m; i += 6) {
      const int mr = std::min(6, m - i);
      int cols = 1 << 30, kend = k;
      if (lim.row_cols) {
        cols = 0;
        for (int r = 0; r < mr; ++r) cols = std::max(cols, lim.row_cols[i + r]);
      }
      if (cols <= 16 * p) continue;
      if (lim.row_k) {
        kend = 0;
        for (int r = 0; r < mr; ++r) kend = std::max(kend, lim.row_k[i + r]);
        kend = std::min(kend, k);
      }
      const float* xi = x + size_t(i) * k;
      float* yi = y + size_t(i) * ldy;
      switch (mr) {
        case 6: f32w_tile<6>(xi, k, kend, pa, yi, ldy, 16 * p, w.n); break;
        case 5: f32w_tile<5>(xi, k, kend, pa, yi, ldy, 16 * p, w.n); break;
        case 4: f32w_tile<4>(xi, k, kend, pa, yi, ldy, 16 * p, w.n); break;
        case 3: f32w_tile<3>(xi, k, kend, pa, yi, ldy, 16 * p, w.n); break;
        case 2: f32w_tile<2>(xi, k, kend, pa, yi, ldy, 16 * p, w.n); break;
        default: f32w_tile<1>(xi, k, kend, pa, yi, ldy, 16 * p, w.n); break;
      }
    }
  }
}

// exp as in cpu_fast_avx512.cpp, with 2^n built in the exponent bits.
inline __m256 exp_ps(__m256 x) {
  const __m256 live = _mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_GE_OQ);
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_and_ps(live, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

float exp_sum(float* x, int n, float mx) {
  __m256 s = _mm256_setzero_ps();
  const __m256 m = _mm256_set1_ps(mx);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
    _mm256_storeu_ps(x + i, e);
    s = _mm256_add_ps(s, e);
  }
  float t = hsum(s);
  for (; i < n; ++i) t += (x[i] = std::exp(x[i] - mx));
  return t;
}

// 8 elements as fp32: loaded, or widened from bf16; scalar tails alike.
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p) {
  return _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
}
inline float elem(const float* p, int i) { return p[i]; }
inline float elem(const uint16_t* p, int i) { return std::bit_cast<float>(uint32_t(p[i]) << 16); }

template <class T>
void dots_t(const float* q, int rows, int ldq, const T* kr, int nk, int d, float* s, int lds) {
  const int d8 = d & ~7;
  for (int j = 0; j < nk; ++j) {
    const T* kj = kr + size_t(j) * d;
    for (int r = 0; r < rows; ++r) {
      const float* qr = q + size_t(r) * ldq;
      __m256 a = _mm256_setzero_ps(), b = _mm256_setzero_ps();
      int c = 0;
      for (; c + 16 <= d8; c += 16) {
        a = _mm256_fmadd_ps(_mm256_loadu_ps(qr + c), load8(kj + c), a);
        b = _mm256_fmadd_ps(_mm256_loadu_ps(qr + c + 8), load8(kj + c + 8), b);
      }
      for (; c < d8; c += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(qr + c), load8(kj + c), a);
      float t = hsum(_mm256_add_ps(a, b));
      for (; c < d; ++c) t += qr[c] * elem(kj, c);
      s[size_t(r) * lds + j] = t;
    }
  }
}

template <class T>
void pv_t(const float* p, int rows, int ldp, const T* v, int nk, int d, const float* scale, float* o, int ldo) {
  const int d8 = d & ~7;
  for (int r = 0; r < rows; ++r) {
    float* orow = o + size_t(r) * ldo;
    const float* prow = p + size_t(r) * ldp;
    for (int c0 = 0; c0 < d8; c0 += 32) {
      const int nv = std::min(4, (d8 - c0) / 8);
      __m256 a[4];
      for (int u = 0; u < nv; ++u) a[u] = _mm256_mul_ps(_mm256_loadu_ps(orow + c0 + 8 * u), _mm256_set1_ps(scale[r]));
      for (int j = 0; j < nk; ++j) {
        const __m256 pj = _mm256_set1_ps(prow[j]);
        const T* vj = v + size_t(j) * d + c0;
        for (int u = 0; u < nv; ++u) a[u] = _mm256_fmadd_ps(pj, load8(vj + 8 * u), a[u]);
      }
      for (int u = 0; u < nv; ++u) _mm256_storeu_ps(orow + c0 + 8 * u, a[u]);
    }
    for (int c = d8; c < d; ++c) {
      float t = orow[c] * scale[r];
      for (int j = 0; j < nk; ++j) t += prow[j] * elem(v + size_t(j) * d, c);
      orow[c] = t;
    }
  }
}

void dots(const float* q, int rows, int ldq, const float* kr, int nk, int d, float* s, int lds) {
  dots_t(q, rows, ldq, kr, nk, d, s, lds);
}
void pv(const float* p, int rows, int ldp, const float* v, int nk, int d, const float* scale, float* o, int ldo) {
  pv_t(p, rows, ldp, v, nk, d, scale, o, ldo);
}
void dots_bf16(const float* q, int rows, int ldq, const uint16_t* kr, int nk, int d, float* s, int lds) {
  dots_t(q, rows, ldq, kr, nk, d, s, lds);
}
void pv_bf16(const float* p, int rows, int ldp, const uint16_t* v, int nk, int d, const float* scale, float* o,
             int ldo) {
  pv_t(p, rows, ldp, v, nk, d, scale, o, ldo);
}

}  // namespace

const Kernels& avx2_kernels() {
  static const Kernels k{gemm_f32x, nullptr, to_bf16_pairs, gemm_f32w, exp_sum, dots, pv, dots_bf16, pv_bf16};
  return k;
}

}  // namespace ninfer::cpu::fast::detail

#pragma GCC pop_options

#else
namespace ninfer::cpu::fast::detail {
const Kernels& avx2_kernels() {
  static const Kernels k{};
  return k;
}
}  // namespace ninfer::cpu::fast::detail
#endif
