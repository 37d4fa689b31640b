#include "backend/cpu/delta_net.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/hot_loop.h"

namespace ninfer::cpu {
namespace {

float silu(float x) { return x / (1.0f + std::exp(-x)); }
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// torch.nn.functional.softplus (beta 1, threshold 20)
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

NINFER_HOT_LOOP void l2normalize(float* x, int n, float scale) {
  float ss = 0;
  for (int i = 0; i < n; ++i) ss += x[i] * x[i];
  const float inv = scale / std::sqrt(ss + 1e-6f);
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace

void delta_net_forward(const DeltaNetParams& p, const ParallelFor& par) {
  const int T = p.n_tokens, kd = p.nk * p.dk, vd = p.nv * p.dv, cd = 2 * kd + vd, K = p.conv;
  const int r = p.nv / p.nk;
  // 1. The projection rows unpacked: x = q | k | v (the conv's input), z, b, a.
  std::vector<float> x(size_t(T) * cd), z(size_t(T) * vd), b(size_t(T) * p.nv), a(size_t(T) * p.nv);
  for (int t = 0; t < T; ++t) {
    const float* row = p.proj + size_t(t) * p.ld_proj;
    float* xt = x.data() + size_t(t) * cd;
    float* zt = z.data() + size_t(t) * vd;
    float* bt = b.data() + size_t(t) * p.nv;
    float* at = a.data() + size_t(t) * p.nv;
    if (!p.grouped) {
      std::memcpy(xt, row, size_t(cd) * 4);
      std::memcpy(zt, row + cd, size_t(vd) * 4);
      std::memcpy(bt, row + cd + vd, size_t(p.nv) * 4);
      std::memcpy(at, row + cd + vd + p.nv, size_t(p.nv) * 4);
      continue;
    }
    // Per key head g: [q_g (dk) | k_g (dk) | v (r dv) | z (r dv)], then per g: [b (r) | a (r)].
    const int gw = 2 * p.dk + 2 * r * p.dv;
    for (int g = 0; g < p.nk; ++g) {
      const float* s = row + size_t(g) * gw;
      std::memcpy(xt + size_t(g) * p.dk, s, size_t(p.dk) * 4);
      std::memcpy(xt + kd + size_t(g) * p.dk, s + p.dk, size_t(p.dk) * 4);
      std::memcpy(xt + 2 * kd + size_t(g) * r * p.dv, s + 2 * p.dk, size_t(r) * p.dv * 4);
      std::memcpy(zt + size_t(g) * r * p.dv, s + 2 * p.dk + r * p.dv, size_t(r) * p.dv * 4);
      const float* ba = row + size_t(p.nk) * gw + size_t(g) * 2 * r;
      std::memcpy(bt + size_t(g) * r, ba, size_t(r) * 4);
      std::memcpy(at + size_t(g) * r, ba + r, size_t(r) * 4);
    }
  }
  // 2. The causal conv + SiLU per channel, continuing conv_state.
  std::vector<float> y(size_t(T) * cd);
  constexpr int kBlock = 64;
  par((cd + kBlock - 1) / kBlock, [&](int blk) NINFER_HOT_LOOP {
    std::vector<float> hist(size_t(K - 1 + T));
    for (int c = blk * kBlock; c < std::min(cd, (blk + 1) * kBlock); ++c) {
      for (int j = 0; j < K - 1; ++j) hist[size_t(j)] = p.conv_state[size_t(j) * cd + c];
      for (int t = 0; t < T; ++t) hist[size_t(K - 1 + t)] = x[size_t(t) * cd + c];
      const float* w = p.conv_w + size_t(c) * K;
      for (int t = 0; t < T; ++t) {
        float acc = 0;
        for (int j = 0; j < K; ++j) acc += w[j] * hist[size_t(t + j)];
        y[size_t(t) * cd + c] = silu(acc);
      }
      for (int j = 0; j < K - 1; ++j) p.conv_state[size_t(j) * cd + c] = hist[size_t(T + j)];
    }
  });
  // 3. The delta rule per value head, token after token (or chunk after chunk), then the gated norm.
  const float qscale = 1.0f / std::sqrt(float(p.dk));
  auto gated_norm = [&](int t, int h, const float* o) {
    float ss = 0;
    for (int j = 0; j < p.dv; ++j) ss += o[j] * o[j];
    const float inv = 1.0f / std::sqrt(ss / float(p.dv) + p.eps);
    const float* zt = z.data() + size_t(t) * vd + size_t(h) * p.dv;
    float* out = p.out + size_t(t) * p.ld_out + size_t(h) * p.dv;
    for (int j = 0; j < p.dv; ++j) out[j] = o[j] * inv * p.norm_w[j] * silu(zt[j]);
  };
  if (p.chunk > 0) {
    par(p.nv, [&](int h) NINFER_HOT_LOOP {
      const int hk = h / r, dk = p.dk, dv = p.dv, C = p.chunk;
      float* S = p.state + size_t(h) * dk * dv;
      const float A = std::exp(p.a_log[h]);
      std::vector<float> q(size_t(C) * dk), k(size_t(C) * dk), W(size_t(C) * dk), U(size_t(C) * dv),
          L(size_t(C) * C), G(static_cast<size_t>(C)), beta(static_cast<size_t>(C)), o(static_cast<size_t>(dv));
      for (int c0 = 0; c0 < T; c0 += C) {
        const int n = std::min(C, T - c0);
        float gsum = 0;
        for (int i = 0; i < n; ++i) {
          const int t = c0 + i;
          const float* yt = y.data() + size_t(t) * cd;
          float* qi = q.data() + size_t(i) * dk;
          float* ki = k.data() + size_t(i) * dk;
          std::memcpy(qi, yt + size_t(hk) * dk, size_t(dk) * 4);
          std::memcpy(ki, yt + kd + size_t(hk) * dk, size_t(dk) * 4);
          l2normalize(qi, dk, qscale);
          l2normalize(ki, dk, 1.0f);
          gsum += -A * softplus(a[size_t(t) * p.nv + h] + p.dt_bias[h]);
          G[size_t(i)] = gsum;
          beta[size_t(i)] = sigmoid(b[size_t(t) * p.nv + h]);
        }
        // L, then U and W by forward substitution on (I + L).
        for (int i = 0; i < n; ++i)
          for (int j = 0; j < i; ++j) {
            float d = 0;
            for (int e = 0; e < dk; ++e) d += k[size_t(i) * dk + e] * k[size_t(j) * dk + e];
            L[size_t(i) * C + j] = beta[size_t(i)] * d * std::exp(G[size_t(i)] - G[size_t(j)]);
          }
        for (int i = 0; i < n; ++i) {
          const float* v = y.data() + size_t(c0 + i) * cd + 2 * kd + size_t(h) * dv;
          float* Ui = U.data() + size_t(i) * dv;
          float* Wi = W.data() + size_t(i) * dk;
          const float eg = std::exp(G[size_t(i)]);
          for (int e = 0; e < dv; ++e) Ui[e] = beta[size_t(i)] * v[e];
          for (int e = 0; e < dk; ++e) Wi[e] = beta[size_t(i)] * k[size_t(i) * dk + e] * eg;
          for (int j = 0; j < i; ++j) {
            const float l = L[size_t(i) * C + j];
            for (int e = 0; e < dv; ++e) Ui[e] -= l * U[size_t(j) * dv + e];
            for (int e = 0; e < dk; ++e) Wi[e] -= l * W[size_t(j) * dk + e];
          }
        }
        // v' = U - W S (in U), then the outputs from the old state and within the chunk.
        for (int i = 0; i < n; ++i) {
          float* Ui = U.data() + size_t(i) * dv;
          for (int e = 0; e < dk; ++e) {
            const float w = W[size_t(i) * dk + e];
            const float* Se = S + size_t(e) * dv;
            for (int j = 0; j < dv; ++j) Ui[j] -= w * Se[j];
          }
        }
        for (int i = 0; i < n; ++i) {
          const float* qi = q.data() + size_t(i) * dk;
          const float eg = std::exp(G[size_t(i)]);
          std::fill(o.begin(), o.end(), 0.0f);
          for (int e = 0; e < dk; ++e) {
            const float qe = qi[e] * eg;
            const float* Se = S + size_t(e) * dv;
            for (int j = 0; j < dv; ++j) o[size_t(j)] += qe * Se[j];
          }
          for (int m = 0; m <= i; ++m) {
            float d = 0;
            for (int e = 0; e < dk; ++e) d += qi[e] * k[size_t(m) * dk + e];
            const float a_im = d * std::exp(G[size_t(i)] - G[size_t(m)]);
            const float* Um = U.data() + size_t(m) * dv;
            for (int j = 0; j < dv; ++j) o[size_t(j)] += a_im * Um[j];
          }
          gated_norm(c0 + i, h, o.data());
        }
        // S = exp(G_last) S + sum_m exp(G_last - G_m) k_m v'_m^T
        const float gl = G[size_t(n - 1)], el = std::exp(gl);
        for (int e = 0; e < dk; ++e) {
          float* Se = S + size_t(e) * dv;
          for (int j = 0; j < dv; ++j) Se[j] *= el;
          for (int m = 0; m < n; ++m) {
            const float km = k[size_t(m) * dk + e] * std::exp(gl - G[size_t(m)]);
            const float* Um = U.data() + size_t(m) * dv;
            for (int j = 0; j < dv; ++j) Se[j] += km * Um[j];
          }
        }
      }
    });
    return;
  }
  par(p.nv, [&](int h) NINFER_HOT_LOOP {
    const int hk = h / r, dk = p.dk, dv = p.dv;
    float* S = p.state + size_t(h) * dk * dv;
    std::vector<float> q(static_cast<size_t>(dk)), k(static_cast<size_t>(dk)), kv(static_cast<size_t>(dv)),
        o(static_cast<size_t>(dv));
    const float A = std::exp(p.a_log[h]);
    for (int t = 0; t < T; ++t) {
      const float* yt = y.data() + size_t(t) * cd;
      std::memcpy(q.data(), yt + size_t(hk) * dk, size_t(dk) * 4);
      std::memcpy(k.data(), yt + kd + size_t(hk) * dk, size_t(dk) * 4);
      const float* v = yt + 2 * kd + size_t(h) * dv;
      l2normalize(q.data(), dk, qscale);
      l2normalize(k.data(), dk, 1.0f);
      const float g = -A * softplus(a[size_t(t) * p.nv + h] + p.dt_bias[h]);
      const float decay = std::exp(g), beta = sigmoid(b[size_t(t) * p.nv + h]);
      std::fill(kv.begin(), kv.end(), 0.0f);
      for (int i = 0; i < dk; ++i) {
        float* Si = S + size_t(i) * dv;
        for (int j = 0; j < dv; ++j) {
          Si[j] *= decay;
          kv[size_t(j)] += Si[j] * k[size_t(i)];
        }
      }
      for (int j = 0; j < dv; ++j) kv[size_t(j)] = (v[j] - kv[size_t(j)]) * beta;  // delta
      std::fill(o.begin(), o.end(), 0.0f);
      for (int i = 0; i < dk; ++i) {
        float* Si = S + size_t(i) * dv;
        for (int j = 0; j < dv; ++j) {
          Si[j] += k[size_t(i)] * kv[size_t(j)];
          o[size_t(j)] += Si[j] * q[size_t(i)];
        }
      }
      gated_norm(t, h, o.data());
    }
  });
}

}  // namespace ninfer::cpu
