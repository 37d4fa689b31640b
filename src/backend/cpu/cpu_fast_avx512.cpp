// The fast kernels for x86-64-v4 CPUs with AVX512-BF16 (Zen 4, Sapphire Rapids and later).
// Compiled for that target function by function (the pragma below), so the rest of the
// binary runs on any x86-64; cpu_fast.cpp calls these only when the CPU has the features.
#include "backend/cpu/cpu_fast.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>

#include <algorithm>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma,f16c")
// NOTE: GCC 12 warns inside its own AVX-512 headers (the _mm512_undefined_* idiom).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace ninfer::cpu::fast::detail {
namespace {

inline __mmask16 tail_mask(int left) { return left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1); }

inline int block_cols_max(const GemmLimits& lim, int i0, int mr) {
  if (!lim.row_cols) return 1 << 30;
  int mx = 0;
  for (int i = 0; i < mr; ++i) mx = std::max(mx, lim.row_cols[i0 + i]);
  return mx;
}
inline int block_k_max(const GemmLimits& lim, int i0, int mr, int k) {
  if (!lim.row_k) return k;
  int mx = 0;
  for (int i = 0; i < mr; ++i) mx = std::max(mx, lim.row_k[i0 + i]);
  return std::min(k, mx);
}

inline void store_panel(float* y, int ldy, int i, int j0, int n, __m512 v, const float* bias) {
  const __mmask16 mk = tail_mask(n - j0);
  if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mk, bias + j0));
  _mm512_mask_storeu_ps(y + size_t(i) * ldy + j0, mk, v);
}

// Rows [0, MR) of fp32 x against two panels (pb may equal pa when there is one): every bf16
// weight widened exactly (low half: shift, high half: mask), separate even/odd accumulators.
template <int MR>
void f32x_tile(const float* x, int ldx, int kend, const uint16_t* pa, const uint16_t* pb, bool two, float* y, int ldy,
               int j0, int n, const float* bias) {
  __m512 ae[MR][2], ao[MR][2];
  for (int i = 0; i < MR; ++i)
    for (int h = 0; h < 2; ++h) ae[i][h] = ao[i][h] = _mm512_setzero_ps();
  const __m512i hi = _mm512_set1_epi32(int(0xFFFF0000u));
  const int pairs = kend / 2;
  for (int q = 0; q < pairs; ++q) {
    const __m512i wa = _mm512_loadu_si512(pa + size_t(q) * 32);
    const __m512i wb = _mm512_loadu_si512(pb + size_t(q) * 32);
    const __m512 we[2] = {_mm512_castsi512_ps(_mm512_slli_epi32(wa, 16)),
                          _mm512_castsi512_ps(_mm512_slli_epi32(wb, 16))};
    const __m512 wo[2] = {_mm512_castsi512_ps(_mm512_and_si512(wa, hi)),
                          _mm512_castsi512_ps(_mm512_and_si512(wb, hi))};
    for (int i = 0; i < MR; ++i) {
      const __m512 xe = _mm512_set1_ps(x[size_t(i) * ldx + 2 * q]);
      const __m512 xo = _mm512_set1_ps(x[size_t(i) * ldx + 2 * q + 1]);
      for (int h = 0; h < 2; ++h) {
        ae[i][h] = _mm512_fmadd_ps(xe, we[h], ae[i][h]);
        ao[i][h] = _mm512_fmadd_ps(xo, wo[h], ao[i][h]);
      }
    }
  }
  if (kend & 1) {
    const int q = pairs;
    const __m512 we[2] = {_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_loadu_si512(pa + size_t(q) * 32), 16)),
                          _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_loadu_si512(pb + size_t(q) * 32), 16))};
    for (int i = 0; i < MR; ++i) {
      const __m512 xe = _mm512_set1_ps(x[size_t(i) * ldx + 2 * q]);
      for (int h = 0; h < 2; ++h) ae[i][h] = _mm512_fmadd_ps(xe, we[h], ae[i][h]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    store_panel(y, ldy, i, j0, n, _mm512_add_ps(ae[i][0], ao[i][0]), bias);
    if (two) store_panel(y, ldy, i, j0 + 16, n, _mm512_add_ps(ae[i][1], ao[i][1]), bias);
  }
}

void gemm_f32x(const float* x, int m, int k, const PackedBf16& w, int p0, int p1, const float* bias, float* y, int ldy,
               const GemmLimits& lim) {
  const size_t panel = 16 * size_t(w.kp());
  for (int p = p0; p < p1; p += 2) {
    const bool two = p + 1 < p1;
    const uint16_t* pa = w.data.data() + size_t(p) * panel;
    const uint16_t* pb = two ? pa + panel : pa;
    for (int i = 0; i < m; i += 4) {
      const int mr = std::min(4, m - i);
      if (block_cols_max(lim, i, mr) <= 16 * p) continue;
      const int kend = block_k_max(lim, i, mr, k);
      const float* xi = x + size_t(i) * k;
      float* yi = y + size_t(i) * ldy;
      switch (mr) {
        case 4: f32x_tile<4>(xi, k, kend, pa, pb, two, yi, ldy, 16 * p, w.n, bias); break;
        case 3: f32x_tile<3>(xi, k, kend, pa, pb, two, yi, ldy, 16 * p, w.n, bias); break;
        case 2: f32x_tile<2>(xi, k, kend, pa, pb, two, yi, ldy, 16 * p, w.n, bias); break;
        default: f32x_tile<1>(xi, k, kend, pa, pb, two, yi, ldy, 16 * p, w.n, bias); break;
      }
    }
  }
}

// Rows [0, MR) of x (bf16 hi and lo pairs) against two panels with vdpbf16ps: the hi and the
// lo products in separate accumulators (4 * MR), so even one row keeps four independent
// chains in flight and decode is bound by memory, not by the dot product's latency.
template <int MR>
void bf16x_tile(const uint32_t* xb, const uint32_t* xl, int ldx, int qend, const uint16_t* pa, const uint16_t* pb,
                bool two, float* y, int ldy, int j0, int n, const float* bias) {
  __m512 ah[MR][2], al[MR][2];
  for (int i = 0; i < MR; ++i) ah[i][0] = ah[i][1] = al[i][0] = al[i][1] = _mm512_setzero_ps();
  for (int q = 0; q < qend; ++q) {
    const __m512bh wa = (__m512bh)_mm512_loadu_si512(pa + size_t(q) * 32);
    const __m512bh wb = (__m512bh)_mm512_loadu_si512(pb + size_t(q) * 32);
    for (int i = 0; i < MR; ++i) {
      const __m512bh xh = (__m512bh)_mm512_set1_epi32(int(xb[size_t(i) * ldx + q]));
      const __m512bh xo = (__m512bh)_mm512_set1_epi32(int(xl[size_t(i) * ldx + q]));
      ah[i][0] = _mm512_dpbf16_ps(ah[i][0], xh, wa);
      ah[i][1] = _mm512_dpbf16_ps(ah[i][1], xh, wb);
      al[i][0] = _mm512_dpbf16_ps(al[i][0], xo, wa);
      al[i][1] = _mm512_dpbf16_ps(al[i][1], xo, wb);
    }
  }
  __m512 acc[MR][2];
  for (int i = 0; i < MR; ++i)
    for (int h = 0; h < 2; ++h) acc[i][h] = _mm512_add_ps(ah[i][h], al[i][h]);
  for (int i = 0; i < MR; ++i) {
    store_panel(y, ldy, i, j0, n, acc[i][0], bias);
    if (two) store_panel(y, ldy, i, j0 + 16, n, acc[i][1], bias);
  }
}

void gemm_bf16x(const uint32_t* xb, const uint32_t* xl, int m, const PackedBf16& w, int p0, int p1, const float* bias, float* y, int ldy,
                const GemmLimits& lim) {
  const size_t panel = 16 * size_t(w.kp());
  const int ldx = w.kp() / 2;
  for (int p = p0; p < p1; p += 2) {
    const bool two = p + 1 < p1;
    const uint16_t* pa = w.data.data() + size_t(p) * panel;
    const uint16_t* pb = two ? pa + panel : pa;
    for (int i = 0; i < m; i += 6) {
      const int mr = std::min(6, m - i);
      if (block_cols_max(lim, i, mr) <= 16 * p) continue;
      const int qend = (block_k_max(lim, i, mr, w.k) + 1) / 2;
      const uint32_t* xi = xb + size_t(i) * ldx;
      const uint32_t* xli = xl + size_t(i) * ldx;
      float* yi = y + size_t(i) * ldy;
      switch (mr) {
        case 6: bf16x_tile<6>(xi, xli, ldx, qend, pa, pb, two, yi, ldy, 16 * p, w.n, bias); break;
        case 5: bf16x_tile<5>(xi, xli, ldx, qend, pa, pb, two, yi, ldy, 16 * p, w.n, bias); break;
        case 4: bf16x_tile<4>(xi, xli, ldx, qend, pa, pb, two, yi, ldy, 16 * p, w.n, bias); break;
        case 3: bf16x_tile<3>(xi, xli, ldx, qend, pa, pb, two, yi, ldy, 16 * p, w.n, bias); break;
        case 2: bf16x_tile<2>(xi, xli, ldx, qend, pa, pb, two, yi, ldy, 16 * p, w.n, bias); break;
        default: bf16x_tile<1>(xi, xli, ldx, qend, pa, pb, two, yi, ldy, 16 * p, w.n, bias); break;
      }
    }
  }
}

// hi = bf16(x), lo = bf16(x - hi), both RNE, 16 values at a time (a masked tail).
void to_bf16_pairs(const float* x, int m, int k, uint32_t* hi, uint32_t* lo) {
  const int kp2 = (k + 1) / 2;
  for (int i = 0; i < m; ++i) {
    const float* xi = x + size_t(i) * k;
    uint16_t* hh = reinterpret_cast<uint16_t*>(hi + size_t(i) * kp2);
    uint16_t* ll = reinterpret_cast<uint16_t*>(lo + size_t(i) * kp2);
    for (int c = 0; c < 2 * kp2; c += 16) {
      const __mmask16 mk = tail_mask(k - c), mk2 = tail_mask(2 * kp2 - c);
      const __m512 v = _mm512_maskz_loadu_ps(mk, xi + c);
      const __m256bh h = _mm512_cvtneps_pbh(v);
      const __m512 hv = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)h), 16));
      const __m256bh l = _mm512_cvtneps_pbh(_mm512_sub_ps(v, hv));
      _mm256_mask_storeu_epi16(hh + c, mk2, (__m256i)h);
      _mm256_mask_storeu_epi16(ll + c, mk2, (__m256i)l);
    }
  }
}

// fp32 W: rows [0, MR) x two panels, one FMA per element pair.
template <int MR>
void f32w_tile(const float* x, int ldx, int kend, const float* pa, const float* pb, bool two, float* y, int ldy,
               int j0, int n) {
  __m512 acc[MR][2];
  for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int c = 0; c < kend; ++c) {
    const __m512 wa = _mm512_loadu_ps(pa + size_t(c) * 16), wb = _mm512_loadu_ps(pb + size_t(c) * 16);
    for (int i = 0; i < MR; ++i) {
      const __m512 xv = _mm512_set1_ps(x[size_t(i) * ldx + c]);
      acc[i][0] = _mm512_fmadd_ps(xv, wa, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(xv, wb, acc[i][1]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    store_panel(y, ldy, i, j0, n, acc[i][0], nullptr);
    if (two) store_panel(y, ldy, i, j0 + 16, n, acc[i][1], nullptr);
  }
}

void gemm_f32w(const float* x, int m, int k, const PackedF32& w, int p0, int p1, float* y, int ldy,
               const GemmLimits& lim) {
  const size_t panel = 16 * size_t(k);
  for (int p = p0; p < p1; p += 2) {
    const bool two = p + 1 < p1;
    const float* pa = w.data.data() + size_t(p) * panel;
    const float* pb = two ? pa + panel : pa;
    for (int i = 0; i < m; i += 8) {
      const int mr = std::min(8, m - i);
      if (block_cols_max(lim, i, mr) <= 16 * p) continue;
      const int kend = block_k_max(lim, i, mr, k);
      const float* xi = x + size_t(i) * k;
      float* yi = y + size_t(i) * ldy;
      switch (mr) {
        case 8: f32w_tile<8>(xi, k, kend, pa, pb, two, yi, ldy, 16 * p, w.n); break;
        case 7: f32w_tile<7>(xi, k, kend, pa, pb, two, yi, ldy, 16 * p, w.n); break;
        case 6: f32w_tile<6>(xi, k, kend, pa, pb, two, yi, ldy, 16 * p, w.n); break;
        case 5: f32w_tile<5>(xi, k, kend, pa, pb, two, yi, ldy, 16 * p, w.n); break;
        case 4: f32w_tile<4>(xi, k, kend, pa, pb, two, yi, ldy, 16 * p, w.n); break;
        case 3: f32w_tile<3>(xi, k, kend, pa, pb, two, yi, ldy, 16 * p, w.n); break;
        case 2: f32w_tile<2>(xi, k, kend, pa, pb, two, yi, ldy, 16 * p, w.n); break;
        default: f32w_tile<1>(xi, k, kend, pa, pb, two, yi, ldy, 16 * p, w.n); break;
      }
    }
  }
}

// exp on [-87.3, 88.3] as 2^n * p(r), r = x - n ln2 in [-ln2/2, ln2/2], p the degree-6
// Taylor polynomial (relative error ~2e-7).
// Below -87.3 (results under 2^-126) the value is 0.
inline __m512 exp_ps(__m512 x) {
  const __mmask16 live = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3f), _CMP_GE_OQ);
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.3f)), _mm512_set1_ps(88.3f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_maskz_mov_ps(live, _mm512_scalef_ps(p, n));
}

float exp_sum(float* x, int n, float mx) {
  __m512 s = _mm512_setzero_ps();
  const __m512 m = _mm512_set1_ps(mx);
  for (int i = 0; i < n; i += 16) {
    const __mmask16 mk = tail_mask(n - i);
    const __m512 e = exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, x + i), m));
    _mm512_mask_storeu_ps(x + i, mk, e);
    s = _mm512_add_ps(s, _mm512_maskz_mov_ps(mk, e));
  }
  return _mm512_reduce_add_ps(s);
}

// 16 keys' or values' elements as fp32: loaded, or widened from bf16 (the high half of a float).
inline __m512 load16(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
inline __m512 load16(const uint16_t* p, __mmask16 m) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
}

template <class T>
void dots_t(const float* q, int rows, int ldq, const T* kr, int nk, int d, float* s, int lds) {
  for (int j = 0; j < nk; ++j) {
    const T* kj = kr + size_t(j) * d;
    int r = 0;
    for (; r + 4 <= rows; r += 4) {
      __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
      for (int c = 0; c < d; c += 16) {
        const __mmask16 mk = tail_mask(d - c);
        const __m512 kv = load16(kj + c, mk);
        for (int u = 0; u < 4; ++u)
          a[u] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mk, q + size_t(r + u) * ldq + c), kv, a[u]);
      }
      for (int u = 0; u < 4; ++u) s[size_t(r + u) * lds + j] = _mm512_reduce_add_ps(a[u]);
    }
    for (; r < rows; ++r) {
      __m512 a = _mm512_setzero_ps();
      for (int c = 0; c < d; c += 16) {
        const __mmask16 mk = tail_mask(d - c);
        a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mk, q + size_t(r) * ldq + c), load16(kj + c, mk), a);
      }
      s[size_t(r) * lds + j] = _mm512_reduce_add_ps(a);
    }
  }
}

// Four rows at once on 64 columns: each value vector is loaded (and widened) once for the four
// rows; the 16 accumulators are named so that they stay in registers.
template <class T>
void pv4_64(const float* p, int ldp, const T* v, int nk, int d, const float* scale, float* o, int ldo, int c0) {
  float* o0 = o + c0;
  float* o1 = o0 + ldo;
  float* o2 = o1 + ldo;
  float* o3 = o2 + ldo;
  const __m512 s0 = _mm512_set1_ps(scale[0]), s1 = _mm512_set1_ps(scale[1]), s2 = _mm512_set1_ps(scale[2]),
               s3 = _mm512_set1_ps(scale[3]);
#define NINFER_PV_ROW(R)                                                                                 \
  __m512 a##R##0 = _mm512_mul_ps(_mm512_loadu_ps(o##R), s##R), a##R##1 = _mm512_mul_ps(_mm512_loadu_ps(o##R + 16), s##R), \
         a##R##2 = _mm512_mul_ps(_mm512_loadu_ps(o##R + 32), s##R), a##R##3 = _mm512_mul_ps(_mm512_loadu_ps(o##R + 48), s##R);
  NINFER_PV_ROW(0) NINFER_PV_ROW(1) NINFER_PV_ROW(2) NINFER_PV_ROW(3)
#undef NINFER_PV_ROW
  const __mmask16 all = 0xFFFF;
  for (int j = 0; j < nk; ++j) {
    const T* vj = v + size_t(j) * d + c0;
    const __m512 v0 = load16(vj, all), v1 = load16(vj + 16, all), v2 = load16(vj + 32, all), v3 = load16(vj + 48, all);
#define NINFER_PV_FMA(R)                                        \
  {                                                             \
    const __m512 pj = _mm512_set1_ps(p[size_t(R) * ldp + j]);   \
    a##R##0 = _mm512_fmadd_ps(pj, v0, a##R##0);                 \
    a##R##1 = _mm512_fmadd_ps(pj, v1, a##R##1);                 \
    a##R##2 = _mm512_fmadd_ps(pj, v2, a##R##2);                 \
    a##R##3 = _mm512_fmadd_ps(pj, v3, a##R##3);                 \
  }
    NINFER_PV_FMA(0) NINFER_PV_FMA(1) NINFER_PV_FMA(2) NINFER_PV_FMA(3)
#undef NINFER_PV_FMA
  }
#define NINFER_PV_STORE(R)                                                                          \
  _mm512_storeu_ps(o##R, a##R##0), _mm512_storeu_ps(o##R + 16, a##R##1), _mm512_storeu_ps(o##R + 32, a##R##2), \
      _mm512_storeu_ps(o##R + 48, a##R##3);
  NINFER_PV_STORE(0) NINFER_PV_STORE(1) NINFER_PV_STORE(2) NINFER_PV_STORE(3)
#undef NINFER_PV_STORE
}

template <class T>
void pv_t(const float* p, int rows, int ldp, const T* v, int nk, int d, const float* scale, float* o, int ldo) {
  int r0 = 0;
  if (d % 64 == 0)
    for (; r0 + 4 <= rows; r0 += 4)
      for (int c0 = 0; c0 < d; c0 += 64)
        pv4_64(p + size_t(r0) * ldp, ldp, v, nk, d, scale + r0, o + size_t(r0) * ldo, ldo, c0);
  for (int r = r0; r < rows; ++r) {
    float* orow = o + size_t(r) * ldo;
    const float* prow = p + size_t(r) * ldp;
    const __m512 sc = _mm512_set1_ps(scale[r]);
    for (int c0 = 0; c0 < d; c0 += 64) {
      __m512 a[4];
      __mmask16 mk[4];
      for (int u = 0; u < 4; ++u) {
        const int left = d - c0 - 16 * u;
        mk[u] = left > 0 ? tail_mask(left) : __mmask16(0);
        a[u] = _mm512_mul_ps(_mm512_maskz_loadu_ps(mk[u], orow + c0 + 16 * u), sc);
      }
      for (int j = 0; j < nk; ++j) {
        const __m512 pj = _mm512_set1_ps(prow[j]);
        const T* vj = v + size_t(j) * d + c0;
        for (int u = 0; u < 4; ++u) a[u] = _mm512_fmadd_ps(pj, load16(vj + 16 * u, mk[u]), a[u]);
      }
      for (int u = 0; u < 4; ++u) _mm512_mask_storeu_ps(orow + c0 + 16 * u, mk[u], a[u]);
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

const Kernels& avx512_kernels() {
  static const Kernels k{gemm_f32x, gemm_bf16x, to_bf16_pairs, gemm_f32w, exp_sum, dots, pv, dots_bf16, pv_bf16};
  return k;
}

}  // namespace ninfer::cpu::fast::detail

#pragma GCC diagnostic pop
#pragma GCC pop_options

#else
namespace ninfer::cpu::fast::detail {
const Kernels& avx512_kernels() {
  static const Kernels k{};
  return k;
}
}  // namespace ninfer::cpu::fast::detail
#endif
