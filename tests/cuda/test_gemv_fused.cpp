// The fused decode GEMVs (ops.h GemvFuse, launch_gemv_gate_up_act, launch_gemv_down_combine)
// against fp64 / CPU references and against the separate kernels they replace.
//
// Two kinds of check per kernel:
// - bit-identical to the separate kernels (rmsnorm then GEMV, GEMV then routing, gathered
//   gate|up then SiLU-mul, gathered down then combine): the fused kernels call the same device
//   functions in the same order, so any difference is a bug, not rounding. Where the separate
//   path splits k differently (small shapes: pick_split), only the fp64 check applies.
// - fp64 references on the same bf16 values: fp32 accumulation in another order gives |err| <=
//   1e-5 * sum |w x| (as GemvMatchesCpuMatmul); bf16 outputs add one bf16 rounding, 2^-8 |ref|.
// Outputs are poisoned (NaN, ids 0xFFFFFFFF) before each launch; seeds are printed.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>

#include "backend/cpu/cpu_ops.h"
#include "backend/cuda/ops.h"
#include "core/dtype.h"
#include "cuda_test_util.h"

namespace ninfer {
namespace {

using test::DevBuf;

std::vector<uint16_t> to_bf16_rounding(std::vector<float>& v) {  // v becomes its bf16 values
  std::vector<uint16_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = test::bf16f(b[i] = f32_to_bf16(v[i]));
  return b;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

// Rows to normalise: random, one huge outlier, all equal, all zero (inv rms = 1/sqrt(eps)).
std::vector<float> norm_rows(int rows, int k, uint32_t seed) {
  std::vector<float> x = test::random_floats(size_t(rows) * k, seed, -3.0f, 3.0f);
  x[size_t(k / 2)] = 4000.0f;
  if (rows > 1) std::fill(x.begin() + k, x.begin() + 2 * k, 0.37f);
  if (rows > 2) std::fill(x.begin() + 2 * k, x.begin() + 3 * k, 0.0f);
  return x;
}

// RMSNorm in the GEMV prologue: equal bits to launch_rmsnorm_bf16 + launch_gemv_bf16 and within
// the fp64 bound of the CPU's rmsnorm (rounded to bf16) times w.
TEST(CudaMoeFused, NormGemvMatchesSeparateAndFp64) {
  NINFER_REQUIRE_GPU();
  for (int rows : {1, 3, 8}) {
    for (auto [n, k] : {std::pair{37, 64}, std::pair{203, 776}, std::pair{1000, 2048}, std::pair{128, 2048}}) {
      ASSERT_TRUE(cuda::gemv_norm_fits(rows, k));
      const uint32_t seed = uint32_t(rows * 7777 + n * 13 + k);
      SCOPED_TRACE(::testing::Message() << "rows " << rows << " n " << n << " k " << k << " seed " << seed);
      std::vector<float> x = norm_rows(rows, k, seed), nw = test::random_floats(size_t(k), seed + 1, 0.5f, 1.5f);
      std::vector<float> wf = test::random_floats(size_t(n) * k, seed + 2);
      const std::vector<uint16_t> wb = to_bf16_rounding(wf);
      std::vector<float> h(x.size());
      cpu::rmsnorm(x.data(), nw.data(), h.data(), rows, k, 1e-6f);
      for (float& v : h) v = test::bf16f(f32_to_bf16(v));
      DevBuf<float> dx, dnw;
      dx.upload(x);
      dnw.upload(nw);
      DevBuf<uint16_t> dw, dh(size_t(rows) * k);
      dw.upload(wb);
      const std::vector<float> y0 = test::random_floats(size_t(rows) * n, seed + 3);
      for (bool acc : {false, true}) {
        const float alpha = acc ? 0.75f : 1.0f;
        DevBuf<float> fused, sep;
        fused.upload(acc ? y0 : std::vector<float>(y0.size(), NAN));
        sep.upload(y0);
        cuda::GemvFuse f;
        f.norm_x = dx.get();
        f.norm_w = dnw.get();
        f.eps = 1e-6f;
        cuda::launch_gemv_fused(dw.get(), nullptr, fused.get(), rows, n, k, acc, alpha, f, nullptr);
        dh.poison();
        cuda::launch_rmsnorm_bf16(dx.get(), nullptr, dnw.get(), dh.get(), rows, k, 1e-6f, false, nullptr);
        cuda::launch_gemv_bf16(dw.get(), dh.get(), sep.get(), rows, n, k, acc, nullptr, alpha);
        const std::vector<float> got = fused.download(), want_bits = sep.download();
        for (int t = 0; t < rows; ++t)
          for (int j = 0; j < n; ++j) {
            const size_t idx = size_t(t) * n + j;
            ASSERT_TRUE(same_bits(got[idx], want_bits[idx]))
                << "row " << t << " col " << j << ": fused " << got[idx] << " separate " << want_bits[idx];
            double want = 0, mag = 0;
            for (int i = 0; i < k; ++i) {
              const double p = double(wf[size_t(j) * k + i]) * h[size_t(t) * k + i];
              want += p;
              mag += std::fabs(p);
            }
            want = alpha * want + (acc ? y0[idx] : 0.0);
            // h's bf16 rounding may differ by one ulp where the CPU's fp32 normalisation and the
            // GPU's differ by reassociation: 2^-8 relative on each product, summed: 4e-3 * mag.
            ASSERT_NEAR(got[idx], want, 4e-3 * mag + 1e-5 * std::fabs(want) + 1e-6) << "row " << t << " col " << j;
          }
      }
    }
  }
}


// Routing by the router GEMV's last block: the same ids and weights (bits) as the routing
// kernel on the same logits, the CPU's choice on them, and a counter left at 0 (each case
// launches twice on one counter; a counter not re-armed leaves the second launch unrouted).
// Adversarial: a zero router (every logit 0: all ties, lowest experts win), E not a multiple
// of 32, E = 256 (the limit), k = E, the norm fused in as well.
TEST(CudaMoeFused, RouteInRouterGemvMatchesSeparateAndCpu) {
  NINFER_REQUIRE_GPU();
  DevBuf<int> done(1);
  done.zero();
  for (auto [E, K, k, rows, norm, zero_w, fuse_norm] :
       {std::tuple{128, 8, 2048, 1, true, false, true}, std::tuple{128, 8, 2048, 8, true, false, false},
        std::tuple{60, 4, 776, 3, false, false, true}, std::tuple{256, 10, 512, 5, true, false, false},
        std::tuple{8, 2, 64, 2, true, true, true}, std::tuple{6, 6, 64, 1, false, false, false},
        std::tuple{128, 8, 2048, 2, true, true, false}}) {
    const uint32_t seed = uint32_t(E * 1009 + K * 31 + rows);
    SCOPED_TRACE(::testing::Message() << "E " << E << " k " << K << " hidden " << k << " rows " << rows << " seed "
                                      << seed << (zero_w ? " zero router" : "") << (fuse_norm ? " +norm" : ""));
    std::vector<float> wf = test::random_floats(size_t(E) * k, seed, -0.2f, 0.2f);
    if (zero_w) std::fill(wf.begin(), wf.end(), 0.0f);
    const std::vector<uint16_t> wb = to_bf16_rounding(wf);
    std::vector<float> xf = norm_rows(rows, k, seed + 1), nw = test::random_floats(size_t(k), seed + 2, 0.5f, 1.5f);
    std::vector<float> xr = xf;
    const std::vector<uint16_t> xb = to_bf16_rounding(xr);
    DevBuf<uint16_t> dw, dxb;
    dw.upload(wb);
    dxb.upload(xb);
    DevBuf<float> dx, dnw;
    dx.upload(xf);
    dnw.upload(nw);
    // The separate path: (rmsnorm,) GEMV, routing kernel.
    DevBuf<uint16_t> dh(size_t(rows) * k);
    const uint16_t* gemv_x = dxb.get();
    if (fuse_norm) {
      cuda::launch_rmsnorm_bf16(dx.get(), nullptr, dnw.get(), dh.get(), rows, k, 1e-6f, false, nullptr);
      gemv_x = dh.get();
    }
    DevBuf<float> lg_sep(size_t(rows) * E), w_sep(size_t(rows) * K);
    DevBuf<int32_t> ids_sep(size_t(rows) * K);
    cuda::launch_gemv_bf16(dw.get(), gemv_x, lg_sep.get(), rows, E, k, false, nullptr);
    cuda::launch_moe_route(lg_sep.get(), rows, E, K, norm, ids_sep.get(), w_sep.get(), nullptr);
    const std::vector<float> lg_want = lg_sep.download(), w_want = w_sep.download();
    const std::vector<int32_t> ids_want = ids_sep.download();
    for (int rep = 0; rep < 2; ++rep) {
      DevBuf<float> lg(size_t(rows) * E), w(size_t(rows) * K);
      DevBuf<int32_t> ids(size_t(rows) * K);
      lg.poison();
      w.poison();
      ids.poison();
      cuda::GemvFuse f;
      if (fuse_norm) {
        f.norm_x = dx.get();
        f.norm_w = dnw.get();
        f.eps = 1e-6f;
      }
      f.done = done.get();
      f.route_k = K;
      f.route_norm = norm;
      f.route_ids = ids.get();
      f.route_w = w.get();
      cuda::launch_gemv_fused(dw.get(), dxb.get(), lg.get(), rows, E, k, false, 1.0f, f, nullptr);
      const std::vector<float> got_lg = lg.download(), got_w = w.download();
      const std::vector<int32_t> got_ids = ids.download();
      ASSERT_EQ(done.download()[0], 0) << "launch " << rep << " left the counter armed";
      for (size_t i = 0; i < got_lg.size(); ++i)
        ASSERT_TRUE(same_bits(got_lg[i], lg_want[i])) << "logit " << i << " launch " << rep;
      for (int t = 0; t < rows; ++t) {
        std::vector<int32_t> cid(static_cast<size_t>(K));
        std::vector<float> cw(static_cast<size_t>(K));
        cpu::moe_route(got_lg.data() + size_t(t) * E, E, K, norm, cid.data(), cw.data());
        for (int j = 0; j < K; ++j) {
          const size_t i = size_t(t) * K + j;
          ASSERT_EQ(got_ids[i], ids_want[i]) << "token " << t << " choice " << j << " launch " << rep;
          ASSERT_TRUE(same_bits(got_w[i], w_want[i])) << "token " << t << " choice " << j << " launch " << rep;
          ASSERT_EQ(got_ids[i], cid[size_t(j)]) << "token " << t << " choice " << j << " (CPU)";
          // expf against std::exp: a few ulp on each probability and on their sum.
          ASSERT_NEAR(got_w[i], cw[size_t(j)], 4e-6f * cw[size_t(j)] + 1e-9f) << "token " << t << " choice " << j;
          if (zero_w) {
            ASSERT_EQ(got_ids[i], j) << "ties go to the lower expert";
          }
        }
      }
    }
  }
}

double silu64(double g) { return g / (1.0 + std::exp(-g)); }

// Gathered gate|up with the activation in its epilogue (and the norm in its prologue): equal
// bits to gathered GEMV + SiLU-mul (+ rmsnorm before), and the fp64 silu(g) u within the
// dot products' bound propagated through silu (|silu'| <= 1.1) and one bf16 rounding.
// Experts repeat across rows and the last expert is used; ffn not a multiple of the pairs a
// block owns; k = 2048 (Qwen3-30B-A3B's hidden).
TEST(CudaMoeFused, GateUpActMatchesSeparateAndFp64) {
  NINFER_REQUIRE_GPU();
  const int E = 9;
  for (auto [T, K, ffn, k] : {std::tuple{1, 8, 768, 2048}, std::tuple{3, 2, 77, 64}, std::tuple{2, 3, 203, 776},
                              std::tuple{8, 8, 768, 2048}}) {
    const uint32_t seed = uint32_t(T * 4243 + K * 17 + ffn + k);
    SCOPED_TRACE(::testing::Message() << "tokens " << T << " k " << K << " ffn " << ffn << " hidden " << k << " seed "
                                      << seed);
    const int TK = T * K;
    std::vector<float> wf = test::random_floats(size_t(E) * 2 * ffn * k, seed, -0.5f, 0.5f);
    const std::vector<uint16_t> wb = to_bf16_rounding(wf);
    std::vector<float> x = norm_rows(T, k, seed + 1), nw = test::random_floats(size_t(k), seed + 2, 0.5f, 1.5f);
    std::vector<int32_t> ids(static_cast<size_t>(TK));
    for (int i = 0; i < TK; ++i) ids[size_t(i)] = (i * 4 + E - 1) % E;  // E-1, 3, 7, 2, ...
    DevBuf<uint16_t> dw, dh(size_t(T) * k);
    dw.upload(wb);
    DevBuf<float> dx, dnw;
    dx.upload(x);
    dnw.upload(nw);
    DevBuf<int32_t> did;
    did.upload(ids);
    cuda::launch_rmsnorm_bf16(dx.get(), nullptr, dnw.get(), dh.get(), T, k, 1e-6f, false, nullptr);
    const std::vector<uint16_t> hb = dh.download();
    const size_t stride = size_t(2) * ffn * k;
    DevBuf<float> gu(size_t(TK) * 2 * ffn);
    DevBuf<uint16_t> act_sep(size_t(TK) * ffn);
    cuda::launch_gemv_gathered_bf16(dw.get(), stride, did.get(), dh.get(), K, gu.get(), TK, 2 * ffn, k, nullptr);
    cuda::launch_silu_mul_bf16(gu.get(), act_sep.get(), TK, ffn, false, nullptr);
    const std::vector<uint16_t> want_bits = act_sep.download();
    for (bool fuse_norm : {false, true}) {
      DevBuf<uint16_t> act(size_t(TK) * ffn);
      act.poison();
      cuda::GemvFuse f;
      if (fuse_norm) {
        f.norm_x = dx.get();
        f.norm_w = dnw.get();
        f.eps = 1e-6f;
      }
      cuda::launch_gemv_gate_up_act(dw.get(), stride, did.get(), dh.get(), K, f, act.get(), TK, ffn, k, nullptr);
      const std::vector<uint16_t> got = act.download();
      for (int r = 0; r < TK; ++r)
        for (int i = 0; i < ffn; ++i) {
          const size_t idx = size_t(r) * ffn + i;
          ASSERT_EQ(got[idx], want_bits[idx]) << "row " << r << " col " << i << (fuse_norm ? " (norm fused)" : "");
          const float* wg = wf.data() + size_t(ids[size_t(r)]) * stride + size_t(i) * k;
          const float* wu = wg + size_t(ffn) * k;
          const uint16_t* xr = hb.data() + size_t(r / K) * k;
          double g = 0, u = 0, mg = 0, mu = 0;
          for (int j = 0; j < k; ++j) {
            const double xv = test::bf16f(xr[j]);
            g += wg[j] * xv;
            u += wu[j] * xv;
            mg += std::fabs(wg[j] * xv);
            mu += std::fabs(wu[j] * xv);
          }
          const double want = silu64(g) * u;
          const double tol = 1.1 * std::fabs(u) * 1e-5 * mg + std::fabs(silu64(g)) * 1e-5 * mu +
                             3.9e-3 * std::fabs(want) + 1e-6;
          ASSERT_NEAR(test::bf16f(got[idx]), want, tol) << "row " << r << " col " << i;
        }
    }
  }
}

// Gathered down with the combine in its epilogue: x0 + alpha sum_j w_j (w_e act_j) against
// fp64, and equal bits to gathered GEMV + combine where the separate GEMV also walks k in one
// warp (Qwen3-30B-A3B's down: n 2048, k 768). top_k 1, 2, 3 (two idle warps), 8; n not a
// multiple of the rows a block owns; a choice weight of 0 and a negative one.
TEST(CudaMoeFused, DownCombineMatchesSeparateAndFp64) {
  NINFER_REQUIRE_GPU();
  const int E = 11;
  for (auto [T, K, n, k] : {std::tuple{1, 8, 2048, 768}, std::tuple{4, 8, 2048, 768}, std::tuple{2, 3, 203, 72},
                            std::tuple{3, 1, 40, 2048}, std::tuple{5, 2, 131, 776}}) {
    const uint32_t seed = uint32_t(T * 9176 + K * 7 + n + k);
    SCOPED_TRACE(::testing::Message() << "tokens " << T << " k " << K << " n " << n << " ffn " << k << " seed "
                                      << seed);
    const int TK = T * K;
    std::vector<float> wf = test::random_floats(size_t(E) * n * k, seed, -0.5f, 0.5f);
    const std::vector<uint16_t> wb = to_bf16_rounding(wf);
    std::vector<float> af = test::random_floats(size_t(TK) * k, seed + 1, -2.0f, 2.0f);
    const std::vector<uint16_t> ab = to_bf16_rounding(af);
    std::vector<float> cw = test::random_floats(size_t(TK), seed + 2, 0.0f, 1.0f);
    cw[0] = 0.0f;
    if (TK > 1) cw[size_t(TK - 1)] = -0.3f;
    std::vector<int32_t> ids(static_cast<size_t>(TK));
    for (int i = 0; i < TK; ++i) ids[size_t(i)] = (i * 3 + E - 1) % E;
    const std::vector<float> x0 = test::random_floats(size_t(T) * n, seed + 3, -4.0f, 4.0f);
    const float alpha = 0.8f;
    DevBuf<uint16_t> dw, da;
    dw.upload(wb);
    da.upload(ab);
    DevBuf<float> dcw;
    dcw.upload(cw);
    DevBuf<int32_t> did;
    did.upload(ids);
    DevBuf<float> x, xsep, y(size_t(TK) * n);
    x.upload(x0);
    xsep.upload(x0);
    cuda::launch_gemv_down_combine(dw.get(), size_t(n) * k, did.get(), dcw.get(), da.get(), T, K, n, k, alpha, x.get(),
                                   nullptr);
    cuda::launch_gemv_gathered_bf16(dw.get(), size_t(n) * k, did.get(), da.get(), 1, y.get(), TK, n, k, nullptr);
    cuda::launch_moe_combine(y.get(), dcw.get(), T, K, n, alpha, xsep.get(), nullptr);
    const std::vector<float> got = x.download(), sep = xsep.download();
    const bool same_split = n == 2048 && k == 768;
    for (int t = 0; t < T; ++t)
      for (int c = 0; c < n; ++c) {
        const size_t idx = size_t(t) * n + c;
        if (same_split) {
          ASSERT_TRUE(same_bits(got[idx], sep[idx])) << "token " << t << " col " << c;
        }
        double want = 0, mag = 0;
        for (int j = 0; j < K; ++j) {
          const int r = t * K + j;
          const float* wr = wf.data() + (size_t(ids[size_t(r)]) * n + c) * k;
          double d = 0, m = 0;
          for (int i = 0; i < k; ++i) {
            d += double(wr[i]) * af[size_t(r) * k + i];
            m += std::fabs(double(wr[i]) * af[size_t(r) * k + i]);
          }
          want += double(cw[size_t(r)]) * d;
          mag += std::fabs(double(cw[size_t(r)])) * m;
        }
        want = x0[idx] + alpha * want;
        ASSERT_NEAR(got[idx], want, 1e-5 * mag + 1e-6 * std::fabs(want) + 1e-6) << "token " << t << " col " << c;
      }
  }
}

}  // namespace
}  // namespace ninfer
