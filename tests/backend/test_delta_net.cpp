// Gated DeltaNet on the CPU (backend/cpu/delta_net.h) against an fp64 evaluation written
// independently from transformers' definition: the conv over one history array holding the
// carried inputs, and the delta rule in its closed form S_t = (I - beta k k^T) exp(g) S_{t-1}
// + beta k v^T. Random and adversarial inputs (decay to zero, beta saturated, zero q/k rows),
// both projection layouts (Qwen3.5 flat, Qwen3-Next grouped), and a sequence split into calls
// of any size giving the one-call result.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/delta_net.h"

namespace ninfer {
namespace {

struct Shape {
  int nk, nv, dk, dv, conv;
  int kd() const { return nk * dk; }
  int vd() const { return nv * dv; }
  int cd() const { return 2 * kd() + vd(); }
  int width() const { return cd() + vd() + 2 * nv; }
};

// Inputs of one layer for T tokens: flat projection rows (q | k | v | z | b | a), parameters
// and the state carried in.
struct Case {
  Shape s;
  int T;
  std::vector<float> proj, conv_w, a_log, dt_bias, norm_w, conv_state, state;
};

Case random_case(Shape s, int T, uint32_t seed, bool adversarial = false) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  Case c{s, T, {}, {}, {}, {}, {}, {}, {}};
  c.proj.resize(size_t(T) * s.width());
  for (float& v : c.proj) v = n(rng);
  c.conv_w.resize(size_t(s.cd()) * s.conv);
  for (float& v : c.conv_w) v = 0.5f * n(rng);
  for (int h = 0; h < s.nv; ++h) {
    c.a_log.push_back(std::log(0.02f) + u(rng) * (0.0f - std::log(0.02f)));
    c.dt_bias.push_back(0.3f * n(rng));
  }
  for (int j = 0; j < s.dv; ++j) c.norm_w.push_back(1.0f + 0.2f * n(rng));
  c.conv_state.resize(size_t(s.conv - 1) * s.cd());
  for (float& v : c.conv_state) v = n(rng);
  c.state.resize(size_t(s.nv) * s.dk * s.dv);
  for (float& v : c.state) v = 0.3f * n(rng);
  if (adversarial) {
    for (int t = 0; t < T; ++t) {
      float* row = c.proj.data() + size_t(t) * s.width();
      float* b = row + s.cd() + s.vd();
      float* a = b + s.nv;
      if (t % 5 == 1) a[0] = 40.0f;  // softplus past its threshold: exp(g) underflows to 0 for big A
      if (t % 7 == 2) b[1 % s.nv] = 30.0f, b[0] = -30.0f;  // beta 1 and 0
      if (t % 6 == 3)  // q and k of key head 0 come out of the conv as zeros: l2norm's eps keeps them finite
        for (int i = 0; i < s.dk; ++i) row[i] = row[s.kd() + i] = 0.0f;
    }
    c.a_log[0] = std::log(16.0f);
    // zero taps on key head 0's q and k channels, so that the zero inputs give zero conv outputs
    for (int i = 0; i < s.dk; ++i)
      for (int j = 0; j < s.conv; ++j) c.conv_w[size_t(i) * s.conv + j] = c.conv_w[size_t(s.kd() + i) * s.conv + j] = 0.0f;
    for (int j = 0; j < s.conv - 1; ++j)
      for (int i = 0; i < s.dk; ++i) c.conv_state[size_t(j) * s.cd() + i] = c.conv_state[size_t(j) * s.cd() + s.kd() + i] = 0;
  }
  return c;
}

// The flat rows rearranged into Qwen3-Next's grouped layout: per key head [q k v z], then per
// key head [b a].
std::vector<float> to_grouped(const Case& c) {
  const Shape& s = c.s;
  const int r = s.nv / s.nk;
  std::vector<float> g(c.proj.size());
  for (int t = 0; t < c.T; ++t) {
    const float* f = c.proj.data() + size_t(t) * s.width();
    float* o = g.data() + size_t(t) * s.width();
    for (int h = 0; h < s.nk; ++h) {
      float* grp = o + size_t(h) * (2 * s.dk + 2 * r * s.dv);
      for (int i = 0; i < s.dk; ++i) grp[i] = f[h * s.dk + i], grp[s.dk + i] = f[s.kd() + h * s.dk + i];
      for (int i = 0; i < r * s.dv; ++i) {
        grp[2 * s.dk + i] = f[2 * s.kd() + h * r * s.dv + i];
        grp[2 * s.dk + r * s.dv + i] = f[s.cd() + h * r * s.dv + i];
      }
      float* ba = o + size_t(s.nk) * (2 * s.dk + 2 * r * s.dv) + size_t(h) * 2 * r;
      for (int i = 0; i < r; ++i) ba[i] = f[s.cd() + s.vd() + h * r + i], ba[r + i] = f[s.cd() + s.vd() + s.nv + h * r + i];
    }
  }
  return g;
}

struct Result {
  std::vector<double> out, conv_state, state;
};

Result fp64(const Case& c) {
  const Shape& s = c.s;
  const int T = c.T, K = s.conv, cd = s.cd(), r = s.nv / s.nk;
  Result res;
  res.out.assign(size_t(T) * s.vd(), 0.0);
  // history[j]: the K - 1 carried inputs, then the T new ones
  std::vector<std::vector<double>> hist;
  for (int j = 0; j < K - 1; ++j) hist.emplace_back(c.conv_state.begin() + ptrdiff_t(j) * cd, c.conv_state.begin() + ptrdiff_t(j + 1) * cd);
  for (int t = 0; t < T; ++t) hist.emplace_back(c.proj.begin() + ptrdiff_t(t) * s.width(), c.proj.begin() + ptrdiff_t(t) * s.width() + cd);
  std::vector<double> S(c.state.begin(), c.state.end());
  for (int t = 0; t < T; ++t) {
    std::vector<double> y(static_cast<size_t>(cd));
    for (int ch = 0; ch < cd; ++ch) {
      double acc = 0;
      for (int j = 0; j < K; ++j) acc += double(c.conv_w[size_t(ch) * K + j]) * hist[size_t(t + j)][size_t(ch)];
      y[size_t(ch)] = acc / (1.0 + std::exp(-acc));
    }
    const float* row = c.proj.data() + size_t(t) * s.width();
    for (int h = 0; h < s.nv; ++h) {
      const int hk = h / r;
      std::vector<double> q(y.begin() + hk * s.dk, y.begin() + (hk + 1) * s.dk);
      std::vector<double> k(y.begin() + s.kd() + hk * s.dk, y.begin() + s.kd() + (hk + 1) * s.dk);
      double nq = 0, nk = 0;
      for (int i = 0; i < s.dk; ++i) nq += q[size_t(i)] * q[size_t(i)], nk += k[size_t(i)] * k[size_t(i)];
      for (int i = 0; i < s.dk; ++i) {
        q[size_t(i)] /= std::sqrt(nq + 1e-6) * std::sqrt(double(s.dk));
        k[size_t(i)] /= std::sqrt(nk + 1e-6);
      }
      const double a = row[s.cd() + s.vd() + s.nv + h] + double(c.dt_bias[size_t(h)]);
      const double sp = a > 20 ? a : std::log1p(std::exp(a));
      const double decay = std::exp(-std::exp(double(c.a_log[size_t(h)])) * sp);
      const double beta = 1.0 / (1.0 + std::exp(-double(row[s.cd() + s.vd() + h])));
      double* Sh = S.data() + size_t(h) * s.dk * s.dv;
      // S = (I - beta k k^T) decay S + beta k v^T
      std::vector<double> kS(static_cast<size_t>(s.dv), 0.0);  // k^T S
      for (int i = 0; i < s.dk; ++i)
        for (int j = 0; j < s.dv; ++j) kS[size_t(j)] += k[size_t(i)] * Sh[size_t(i) * s.dv + j];
      for (int i = 0; i < s.dk; ++i)
        for (int j = 0; j < s.dv; ++j) {
          const double v = y[size_t(2 * s.kd() + h * s.dv + j)];
          Sh[size_t(i) * s.dv + j] = decay * Sh[size_t(i) * s.dv + j] - beta * k[size_t(i)] * decay * kS[size_t(j)] +
                                     beta * k[size_t(i)] * v;
        }
      std::vector<double> o(static_cast<size_t>(s.dv), 0.0);
      for (int i = 0; i < s.dk; ++i)
        for (int j = 0; j < s.dv; ++j) o[size_t(j)] += Sh[size_t(i) * s.dv + j] * q[size_t(i)];
      double ms = 0;
      for (double v : o) ms += v * v;
      ms /= s.dv;
      for (int j = 0; j < s.dv; ++j) {
        const double z = row[s.cd() + h * s.dv + j];
        res.out[size_t(t) * s.vd() + size_t(h) * s.dv + j] =
            o[size_t(j)] / std::sqrt(ms + 1e-6) * c.norm_w[size_t(j)] * z / (1.0 + std::exp(-z));
      }
    }
  }
  for (int j = 0; j < K - 1; ++j) res.conv_state.insert(res.conv_state.end(), hist[size_t(T + j)].begin(), hist[size_t(T + j)].end());
  res.state = S;
  return res;
}

cpu::ParallelFor serial = [](int n, const std::function<void(int)>& fn) {
  for (int i = 0; i < n; ++i) fn(i);
};

// Runs tokens [t0, t0 + n) of c on the state in conv_state / state.
void run(const Case& c, const std::vector<float>& proj, bool grouped, int t0, int n, std::vector<float>& conv_state,
         std::vector<float>& state, std::vector<float>& out, int chunk = 0) {
  const Shape& s = c.s;
  cpu::DeltaNetParams p;
  p.nk = s.nk, p.nv = s.nv, p.dk = s.dk, p.dv = s.dv, p.conv = s.conv, p.grouped = grouped;
  p.n_tokens = n;
  p.proj = proj.data() + size_t(t0) * s.width();
  p.ld_proj = s.width();
  p.conv_w = c.conv_w.data();
  p.a_log = c.a_log.data();
  p.dt_bias = c.dt_bias.data();
  p.norm_w = c.norm_w.data();
  p.eps = 1e-6f;
  p.conv_state = conv_state.data();
  p.state = state.data();
  out.resize(size_t(c.T) * s.vd());
  p.out = out.data() + size_t(t0) * s.vd();
  p.ld_out = s.vd();
  p.chunk = chunk;
  cpu::delta_net_forward(p, serial);
}

double rel(const std::vector<float>& got, const std::vector<double>& want) {
  double mx = 0, amax = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_TRUE(std::isfinite(got[i])) << "element " << i;
    mx = std::max(mx, std::abs(double(got[i]) - want[i]));
    amax = std::max(amax, std::abs(want[i]));
  }
  return mx / std::max(amax, 1e-30);
}

TEST(DeltaNet, MatchesFp64OnRandomAndAdversarialInputs) {
  const Shape shapes[] = {{2, 4, 16, 8, 4}, {1, 1, 32, 32, 2}, {3, 6, 8, 16, 3}};
  for (const Shape& s : shapes) {
    for (bool adv : {false, true}) {
      SCOPED_TRACE(testing::Message() << "nk " << s.nk << " nv " << s.nv << " dk " << s.dk << " dv " << s.dv
                                      << " conv " << s.conv << (adv ? " adversarial" : " random"));
      const Case c = random_case(s, 41, 7 + uint32_t(s.dk), adv);
      const Result want = fp64(c);
      for (bool grouped : {false, true}) {
        std::vector<float> cs = c.conv_state, st = c.state, out;
        run(c, grouped ? to_grouped(c) : c.proj, grouped, 0, c.T, cs, st, out);
        EXPECT_LT(rel(out, want.out), 2e-5) << (grouped ? "grouped" : "flat");
        EXPECT_LT(rel(st, want.state), 2e-5);
        EXPECT_LT(rel(cs, want.conv_state), 1e-7) << "the conv keeps the last inputs as they were";
      }
      // The chunked form: chunks of 64 (transformers'), 16 and 7 (41 tokens: a partial last chunk).
      for (int chunk : {64, 16, 7}) {
        std::vector<float> cs = c.conv_state, st = c.state, out;
        run(c, c.proj, false, 0, c.T, cs, st, out, chunk);
        EXPECT_LT(rel(out, want.out), 1e-4) << "chunk " << chunk;
        EXPECT_LT(rel(st, want.state), 1e-4) << "chunk " << chunk;
      }
    }
  }
}

TEST(DeltaNet, SplitCallsContinueTheState) {
  const Shape s{2, 4, 16, 8, 4};
  const Case c = random_case(s, 60, 99);
  std::vector<float> cs1 = c.conv_state, st1 = c.state, one;
  run(c, c.proj, false, 0, c.T, cs1, st1, one);
  // Calls of 1 (decode), 2 (shorter than the conv's history) and uneven lengths.
  for (const std::vector<int>& sizes : {std::vector<int>(60, 1), std::vector<int>{2, 1, 13, 7, 37}}) {
    std::vector<float> cs = c.conv_state, st = c.state, out;
    int t = 0;
    for (int n : sizes) {
      run(c, c.proj, false, t, n, cs, st, out);
      t += n;
    }
    ASSERT_EQ(t, c.T);
    for (size_t i = 0; i < one.size(); ++i) ASSERT_NEAR(out[i], one[i], 1e-6f * (1.0f + std::abs(one[i]))) << i;
    for (size_t i = 0; i < st1.size(); ++i) ASSERT_NEAR(st[i], st1[i], 1e-6f * (1.0f + std::abs(st1[i]))) << i;
    EXPECT_EQ(cs, cs1);
  }
}

}  // namespace
}  // namespace ninfer
