#include "backend/cpu/cpu_ops.h"

#include <algorithm>
#include <cmath>

namespace ninfer::cpu {
namespace {

// NOTE: GCC vector extension: 8 floats, one AVX2 register when built for x86-64-v3, two SSE
// registers otherwise. Sums along k are kept in 8 lanes and reduced at the end, so results
// differ from a sequential sum by normal fp32 reassociation error (~1e-6 relative).
typedef float v8 __attribute__((vector_size(32), aligned(4)));

inline float hsum(v8 v) {
  float s = 0;
  for (int i = 0; i < 8; ++i) s += v[i];
  return s;
}

inline v8 load8(const float* p) {
  v8 v;
  __builtin_memcpy(&v, p, sizeof(v));
  return v;
}

// Tile of MR rows of x by NR rows of w.
template <int MR, int NR>
void tile(const float* x, const float* w, float* y, int ldy, int k, const float* bias) {
  v8 acc[MR][NR] = {};
  int kk = 0;
  for (; kk + 8 <= k; kk += 8) {
    v8 xv[MR], wv[NR];
    for (int i = 0; i < MR; ++i) xv[i] = load8(x + size_t(i) * k + kk);
    for (int j = 0; j < NR; ++j) wv[j] = load8(w + size_t(j) * k + kk);
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) acc[i][j] += xv[i] * wv[j];
  }
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) {
      float s = hsum(acc[i][j]);
      for (int t = kk; t < k; ++t) s += x[size_t(i) * k + t] * w[size_t(j) * k + t];
      y[size_t(i) * ldy + j] = s + (bias ? bias[j] : 0.0f);
    }
  }
}

template <int MR>
void row_block(const float* x, const float* w, const float* bias, float* y, int n, int k, int n0, int n1) {
  int j = n0;
  for (; j + 4 <= n1; j += 4) tile<MR, 4>(x, w + size_t(j) * k, y + j, n, k, bias ? bias + j : nullptr);
  for (; j < n1; ++j) tile<MR, 1>(x, w + size_t(j) * k, y + j, n, k, bias ? bias + j : nullptr);
}

}  // namespace

void matmul_wt(const float* x, const float* w, const float* bias, float* y, int m, int n, int k) {
  // NOTE: work is split over (row block, column block) pairs; column blocks of 64 rows of w
  // (64 * k * 4 bytes, 128 KiB at k = 512) stay in L2 while 4 rows of x stream past them.
  constexpr int NB = 64;
  const int mb = (m + 3) / 4, nb = (n + NB - 1) / NB;
#pragma omp parallel for schedule(dynamic, 1) collapse(2) if (int64_t(m) * n * k > 100000)
  for (int jb = 0; jb < nb; ++jb) {
    for (int ib = 0; ib < mb; ++ib) {
      const int i = ib * 4, rows = std::min(4, m - i);
      const int n0 = jb * NB, n1 = std::min(n, n0 + NB);
      const float* xi = x + size_t(i) * k;
      float* yi = y + size_t(i) * n;
      switch (rows) {
        case 4: row_block<4>(xi, w, bias, yi, n, k, n0, n1); break;
        case 3: row_block<3>(xi, w, bias, yi, n, k, n0, n1); break;
        case 2: row_block<2>(xi, w, bias, yi, n, k, n0, n1); break;
        default: row_block<1>(xi, w, bias, yi, n, k, n0, n1); break;
      }
    }
  }
}

void rmsnorm(const float* x, const float* weight, float* out, int n_rows, int dim, float eps) {
  for (int r = 0; r < n_rows; ++r) {
    const float* xr = x + size_t(r) * dim;
    float* o = out + size_t(r) * dim;
    double ss = 0;
    for (int i = 0; i < dim; ++i) ss += double(xr[i]) * xr[i];
    const float inv = 1.0f / std::sqrt(float(ss / dim) + eps);
    for (int i = 0; i < dim; ++i) o[i] = weight[i] * (xr[i] * inv);
  }
}

void rope_inplace(float* x, int n_heads, int head_dim, int pos, const float* inv_freq) {
  const int half = head_dim / 2;
  for (int i = 0; i < half; ++i) {
    // NOTE: the angle is formed in fp32 as transformers does (inv_freq * pos in fp32), then
    // cos/sin are taken of that fp32 value.
    const float ang = float(pos) * inv_freq[i];
    const float c = float(std::cos(double(ang))), s = float(std::sin(double(ang)));
    for (int h = 0; h < n_heads; ++h) {
      float* xh = x + size_t(h) * head_dim;
      const float a = xh[i], b = xh[i + half];
      xh[i] = a * c - b * s;
      xh[i + half] = b * c + a * s;
    }
  }
}

void silu_mul(const float* gate, const float* up, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

}  // namespace ninfer::cpu
