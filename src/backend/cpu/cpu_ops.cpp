#include "backend/cpu/cpu_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/hot_loop.h"

namespace ninfer::cpu {
namespace {

// NOTE: the micro-kernel keeps MR x NR accumulators of 8 lanes in registers, written with
// GCC vector types: one AVX register each in rows_times' x86-64-v3 version (where acc + x * w
// becomes an FMA), two SSE registers in the baseline one. Sums along k run in 8 lanes and are
// reduced at the end in a fixed order, so results differ from a sequential sum by ordinary
// fp32 reassociation error (~1e-6 relative).
typedef float F8 __attribute__((vector_size(32)));

template <int MR, int NR>
inline void tile(const float* x, const float* w, float* y, int ldy, int k, const float* bias) {
  F8 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = F8{};
  int kk = 0;
  for (; kk + 8 <= k; kk += 8) {
    F8 wv[NR];
    for (int j = 0; j < NR; ++j) std::memcpy(&wv[j], w + size_t(j) * k + kk, sizeof(F8));
    for (int i = 0; i < MR; ++i) {
      F8 xv;
      std::memcpy(&xv, x + size_t(i) * k + kk, sizeof(F8));
      for (int j = 0; j < NR; ++j) acc[i][j] += xv * wv[j];
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) {
      const F8& a = acc[i][j];  // lanes 0..3 + 4..7, then (0 + 2) + (1 + 3)
      float s = ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
      for (int t = kk; t < k; ++t) s += x[size_t(i) * k + t] * w[size_t(j) * k + t];
      y[size_t(i) * ldy + j] = s + (bias ? bias[j] : 0.0f);
    }
  }
}

// Output columns [0, count) of rows x[0, MR): w holds those columns' rows of W, y points at
// the first of them (row stride ldy).
template <int MR>
void row_block(const float* x, const float* w, const float* bias, float* y, int ldy, int k, int count) {
  int j = 0;
  for (; j + 4 <= count; j += 4) tile<MR, 4>(x, w + size_t(j) * k, y + j, ldy, k, bias ? bias + j : nullptr);
  for (; j < count; ++j) tile<MR, 1>(x, w + size_t(j) * k, y + j, ldy, k, bias ? bias + j : nullptr);
}

// Every row of x against `count` rows of w (columns of y), 4 rows of x at a time. flatten:
// the tiles are compiled into each version of this function.
NINFER_HOT_LOOP __attribute__((flatten)) void rows_times(const float* x, const float* w, const float* bias, float* y, int m, int ldy, int k, int count) {
  for (int i = 0; i < m; i += 4) {
    const float* xi = x + size_t(i) * k;
    float* yi = y + size_t(i) * ldy;
    switch (std::min(4, m - i)) {
      case 4: row_block<4>(xi, w, bias, yi, ldy, k, count); break;
      case 3: row_block<3>(xi, w, bias, yi, ldy, k, count); break;
      case 2: row_block<2>(xi, w, bias, yi, ldy, k, count); break;
      default: row_block<1>(xi, w, bias, yi, ldy, k, count); break;
    }
  }
}

}  // namespace

void matmul_wt(const float* x, const float* w, const float* bias, float* y, int m, int n, int k) {
  matmul_wt_ld(x, w, bias, y, m, n, k, n);
}

void matmul_wt_ld(const float* x, const float* w, const float* bias, float* y, int m, int n, int k, int ldy) {
  // NOTE: work is split over (row block, column block) pairs; column blocks of 64 rows of w
  // (64 * k * 4 bytes, 128 KiB at k = 512) stay in L2 while 4 rows of x stream past them.
  constexpr int NB = 64;
  const int mb = (m + 3) / 4, nb = (n + NB - 1) / NB;
#pragma omp parallel for schedule(dynamic, 1) collapse(2) if (int64_t(m) * n * k > 100000)
  for (int jb = 0; jb < nb; ++jb) {
    for (int ib = 0; ib < mb; ++ib) {
      const int i = ib * 4, rows = std::min(4, m - i);
      const int n0 = jb * NB, n1 = std::min(n, n0 + NB);
      rows_times(x + size_t(i) * k, w + size_t(n0) * k, bias ? bias + n0 : nullptr, y + size_t(i) * ldy + n0, rows,
                 ldy, k, n1 - n0);
    }
  }
}

void matmul_wt_quant(const float* x, const QuantMatrix& w, const float* bias, float* y, int m, int ldy) {
  // NOTE: blocks of 64 rows of W are dequantised (the format's dequant_rows, the reference)
  // into a per-thread fp32 buffer and multiplied as matmul_wt multiplies its column blocks, so
  // every output equals matmul_wt's on the dequantised matrix bit for bit. Decode dequantises
  // the whole matrix per step: correct, not fast.
  constexpr int NB = 64;
  const int n = int(w.rows), k = int(w.cols), nb = (n + NB - 1) / NB;
#pragma omp parallel if (int64_t(m) * n * k > 100000 || int64_t(n) * k > 1000000)
  {
    std::vector<float> buf(size_t(NB) * size_t(k));
#pragma omp for schedule(dynamic, 1)
    for (int jb = 0; jb < nb; ++jb) {
      const int n0 = jb * NB, rows = std::min(NB, n - n0);
      w.format->dequant_rows(w, n0, rows, buf.data());
      rows_times(x, buf.data(), bias ? bias + n0 : nullptr, y + n0, m, ldy, k, rows);
    }
  }
}

NINFER_HOT_LOOP void rmsnorm(const float* x, const float* weight, float* out, int n_rows, int dim, float eps) {
  for (int r = 0; r < n_rows; ++r) {
    const float* xr = x + size_t(r) * dim;
    float* o = out + size_t(r) * dim;
    double ss = 0;
    for (int i = 0; i < dim; ++i) ss += double(xr[i]) * xr[i];
    const float inv = 1.0f / std::sqrt(float(ss / dim) + eps);
    for (int i = 0; i < dim; ++i) o[i] = weight[i] * (xr[i] * inv);
  }
}

NINFER_HOT_LOOP void rope_inplace(float* x, int n_heads, int head_dim, int pos, const float* inv_freq, int rotary_dim,
                  float attention_factor) {
  const int half = rotary_dim / 2;
  for (int i = 0; i < half; ++i) {
    // NOTE: the angle is formed in fp32 as transformers does (inv_freq * pos in fp32), then
    // cos/sin are taken of that fp32 value.
    const float ang = float(pos) * inv_freq[i];
    const float c = float(std::cos(double(ang))) * attention_factor;
    const float s = float(std::sin(double(ang))) * attention_factor;
    for (int h = 0; h < n_heads; ++h) {
      float* xh = x + size_t(h) * head_dim;
      const float a = xh[i], b = xh[i + half];
      xh[i] = a * c - b * s;
      xh[i + half] = b * c + a * s;
    }
  }
}

NINFER_HOT_LOOP void silu_mul(const float* gate, const float* up, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

NINFER_HOT_LOOP void gelu_tanh_mul(const float* gate, const float* up, float* out, size_t n) {
  const float k = 0.7978845608028654f;  // sqrt(2 / pi)
  for (size_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = 0.5f * g * (1.0f + std::tanh(k * (g + 0.044715f * g * g * g))) * up[i];
  }
}

void moe_route(const float* lg, int E, int k, bool norm, int32_t* ids, float* w) {
  const float mx = *std::max_element(lg, lg + E);
  std::vector<float> p(static_cast<size_t>(E));
  double sum = 0;
  for (int e = 0; e < E; ++e) sum += (p[size_t(e)] = std::exp(lg[e] - mx));
  for (float& v : p) v = float(v / sum);
  std::vector<int> idx(static_cast<size_t>(E));
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return p[size_t(a)] > p[size_t(b)]; });
  float top = 0;
  for (int j = 0; j < k; ++j) top += p[size_t(idx[size_t(j)])];
  for (int j = 0; j < k; ++j) {
    ids[j] = idx[size_t(j)];
    w[j] = norm ? p[size_t(idx[size_t(j)])] / top : p[size_t(idx[size_t(j)])];
  }
}

}  // namespace ninfer::cpu
