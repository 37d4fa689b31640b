// Forward-pass kernels (ops.h) against the CPU reference kernels (backend/cpu/cpu_ops.h).
// Tolerances: bf16 outputs may differ from bf16(cpu value) by one bf16 rounding of an fp32
// value that itself differs by fp32 reassociation (~1e-6 relative): |gpu - cpu| <= 2^-8 |cpu|
// + 1e-6. Split outputs (hi + lo) carry ~16 significant bits: <= 2^-15 |cpu| + 1e-6. fp32
// outputs (q/k norm + rope) differ by reassociation and FMA contraction only: <= 1e-5 * max|x|.
#include <cmath>
#include <tuple>

#include "backend/cpu/cpu_ops.h"
#include "backend/cuda/ops.h"
#include "core/dtype.h"
#include "cuda_test_util.h"

namespace ninfer {
namespace {

using test::DevBuf;

TEST(CudaOps, RmsNormMatchesCpu) {
  NINFER_REQUIRE_GPU();
  for (int dim : {64, 513, 4096}) {
    const int rows = 7;
    const uint32_t seed = 11u + uint32_t(dim);
    SCOPED_TRACE(::testing::Message() << "dim " << dim << " seed " << seed);
    std::vector<float> x = test::random_floats(size_t(rows) * dim, seed, -4.0f, 4.0f);
    x[3] = 300.0f;  // outlier
    std::vector<float> w = test::random_floats(size_t(dim), seed + 1, 0.5f, 1.5f);
    std::vector<float> ref(x.size());
    cpu::rmsnorm(x.data(), w.data(), ref.data(), rows, dim, 1e-6f);
    DevBuf<float> dx, dw;
    dx.upload(x);
    dw.upload(w);
    for (bool split : {false, true}) {
      DevBuf<uint16_t> out(size_t(rows) * dim * (split ? 2 : 1));
      out.poison();
      cuda::launch_rmsnorm_bf16(dx.get(), nullptr, dw.get(), out.get(), rows, dim, 1e-6f, split, nullptr);
      std::vector<uint16_t> o = out.download();
      for (size_t i = 0; i < ref.size(); ++i) {
        float got = test::bf16f(o[i]);
        if (split) got += test::bf16f(o[ref.size() + i]);
        const float tol = (split ? 3.1e-5f : 3.9e-3f) * std::fabs(ref[i]) + 1e-6f;
        ASSERT_NEAR(got, ref[i], tol) << "element " << i << (split ? " (split)" : "");
      }
    }
  }
}

TEST(CudaOps, RmsNormGathersRows) {
  NINFER_REQUIRE_GPU();
  const int dim = 128, rows = 5;
  std::vector<float> x = test::random_floats(size_t(rows) * dim, 5);
  std::vector<float> w(size_t(dim), 1.0f);
  std::vector<int32_t> pick = {4, 1};
  DevBuf<float> dx, dw;
  dx.upload(x);
  dw.upload(w);
  DevBuf<int32_t> dr;
  dr.upload(pick);
  DevBuf<uint16_t> out(size_t(2) * dim);
  out.poison();
  cuda::launch_rmsnorm_bf16(dx.get(), dr.get(), dw.get(), out.get(), 2, dim, 1e-5f, false, nullptr);
  std::vector<uint16_t> o = out.download();
  for (int r = 0; r < 2; ++r) {
    std::vector<float> ref(static_cast<size_t>(dim));
    cpu::rmsnorm(x.data() + size_t(pick[size_t(r)]) * dim, w.data(), ref.data(), 1, dim, 1e-5f);
    for (int i = 0; i < dim; ++i)
      ASSERT_NEAR(test::bf16f(o[size_t(r) * dim + i]), ref[size_t(i)], 3.9e-3f * std::fabs(ref[size_t(i)]) + 1e-6f);
  }
}

// Per-head q/k norm, then rope from per-token tables (two tables: an attention factor and
// another base per table, tokens alternating), full and partial rotary, and a q multiplier.
TEST(CudaOps, QkNormRopeMatchesCpu) {
  NINFER_REQUIRE_GPU();
  for (int d : {64, 128, 256}) {
    for (int variant = 0; variant < 3; ++variant) {
      const bool qk_norm = variant != 0;
      const int rd = variant == 2 ? d / 2 : d;  // rotary dims
      const float q_mult = variant == 2 ? 0.7f : 1.0f;
      const int nh = 6, nkv = 2, T = 9, ld = (nh + 2 * nkv) * d + 3;
      const uint32_t seed = 21u + uint32_t(d);
      SCOPED_TRACE(::testing::Message() << "head_dim " << d << " variant " << variant << " seed " << seed);
      std::vector<float> qkv = test::random_floats(size_t(T) * ld, seed, -2.0f, 2.0f);
      std::vector<int32_t> pos = {0, 1, 2, 63, 64, 1000, 4095, 32767, 131071};
      std::vector<int32_t> tok_tab = {0, 1, 0, 1, 0, 1, 0, 1, 1};
      std::vector<float> qn = test::random_floats(size_t(d), seed + 1, 0.5f, 1.5f);
      std::vector<float> kn = test::random_floats(size_t(d), seed + 2, 0.5f, 1.5f);
      const double theta[2] = {1e6, 1e4};
      const float af[2] = {1.0f, 1.2f};
      std::vector<float> inv_freq[2], tables;
      for (int k = 0; k < 2; ++k) {
        tables.push_back(af[k]);
        for (int i = 0; i < rd / 2; ++i) {
          inv_freq[k].push_back(1.0f / std::pow(float(theta[k]), float(2 * i) / float(rd)));
          tables.push_back(inv_freq[k].back());
        }
      }
      std::vector<float> ref = qkv;
      for (int t = 0; t < T; ++t) {
        float* row = ref.data() + size_t(t) * ld;
        if (qk_norm) {
          cpu::rmsnorm(row, qn.data(), row, nh, d, 1e-6f);
          cpu::rmsnorm(row + nh * d, kn.data(), row + nh * d, nkv, d, 1e-6f);
        }
        const int k = tok_tab[size_t(t)];
        cpu::rope_inplace(row, nh, d, pos[size_t(t)], inv_freq[k].data(), rd, af[k]);
        cpu::rope_inplace(row + nh * d, nkv, d, pos[size_t(t)], inv_freq[k].data(), rd, af[k]);
        for (int i = 0; i < nh * d; ++i) row[i] *= q_mult;
      }
      DevBuf<float> dq, dqn, dkn, dtab;
      DevBuf<int32_t> dp, dtt;
      dq.upload(qkv);
      dqn.upload(qn);
      dkn.upload(kn);
      dtab.upload(tables);
      dp.upload(pos);
      dtt.upload(tok_tab);
      cuda::RopeParams rp;
      rp.pos = dp.get();
      rp.tok_table = dtt.get();
      rp.tables = dtab.get();
      rp.rotary_dim = rd;
      rp.q_mult = q_mult;
      cuda::launch_qk_norm_rope(dq.get(), ld, T, nh, nkv, d, qk_norm ? dqn.get() : nullptr,
                                qk_norm ? dkn.get() : nullptr, 1e-6f, rp, nullptr);
      std::vector<float> got = dq.download();
      float mx = 0;
      for (float v : ref) mx = std::max(mx, std::fabs(v));
      for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(got[i], ref[i], 1e-5f * mx) << "element " << i;
    }
  }
}

TEST(CudaOps, SiluMulMatchesCpu) {
  NINFER_REQUIRE_GPU();
  const int T = 5, F = 1000;
  std::vector<float> gu = test::random_floats(size_t(T) * 2 * F, 31, -8.0f, 8.0f);
  std::vector<float> ref(size_t(T) * F);
  for (int t = 0; t < T; ++t)
    cpu::silu_mul(gu.data() + size_t(t) * 2 * F, gu.data() + size_t(t) * 2 * F + F, ref.data() + size_t(t) * F, size_t(F));
  DevBuf<float> dg;
  dg.upload(gu);
  for (bool split : {false, true}) {
    DevBuf<uint16_t> out(ref.size() * (split ? 2 : 1));
    out.poison();
    cuda::launch_silu_mul_bf16(dg.get(), out.get(), T, F, split, nullptr);
    std::vector<uint16_t> o = out.download();
    for (size_t i = 0; i < ref.size(); ++i) {
      float got = test::bf16f(o[i]);
      if (split) got += test::bf16f(o[ref.size() + i]);
      ASSERT_NEAR(got, ref[i], (split ? 3.1e-5f : 3.9e-3f) * std::fabs(ref[i]) + 1e-6f) << "element " << i;
    }
  }
}

TEST(CudaOps, GemmEpilogueAddsHalvesAndBias) {
  NINFER_REQUIRE_GPU();
  const int rows = 3, n = 50;
  std::vector<float> tmp = test::random_floats(size_t(2) * rows * n, 41);
  std::vector<float> bias = test::random_floats(size_t(n), 42);
  std::vector<float> dst = test::random_floats(size_t(rows) * n, 43);
  DevBuf<float> dt, db, dd;
  dt.upload(tmp);
  db.upload(bias);
  dd.upload(dst);
  cuda::launch_gemm_epilogue(dt.get(), 2, dd.get(), db.get(), rows, n, true, nullptr);
  std::vector<float> got = dd.download();
  for (size_t i = 0; i < dst.size(); ++i) {
    const float want = dst[i] + (tmp[i] + tmp[dst.size() + i] + bias[i % size_t(n)]);
    ASSERT_FLOAT_EQ(got[i], want);
  }
}

}  // namespace
}  // namespace ninfer

namespace ninfer {
namespace {

// GEMV (decode-sized GEMMs) against the CPU matmul on the same bf16 values: fp32 accumulation
// in a different order, so |err| <= 1e-5 * sum_k |w x| (reassociation bound for k <= 16384).
TEST(CudaOps, GemvMatchesCpuMatmul) {
  NINFER_REQUIRE_GPU();
  for (int rows : {1, 3, 8}) {
    for (auto [n, k] : {std::pair{37, 64}, std::pair{203, 768}, std::pair{1000, 4096}, std::pair{129, 14336}}) {
      const uint32_t seed = uint32_t(rows * 100003 + n * 31 + k);
      SCOPED_TRACE(::testing::Message() << "rows " << rows << " n " << n << " k " << k << " seed " << seed);
      std::vector<float> wf = test::random_floats(size_t(n) * k, seed), xf = test::random_floats(size_t(rows) * k, seed + 1);
      std::vector<uint16_t> wb(wf.size()), xb(xf.size());
      for (size_t i = 0; i < wf.size(); ++i) {
        wb[i] = f32_to_bf16(wf[i]);
        wf[i] = test::bf16f(wb[i]);
      }
      for (size_t i = 0; i < xf.size(); ++i) {
        xb[i] = f32_to_bf16(xf[i]);
        xf[i] = test::bf16f(xb[i]);
      }
      std::vector<float> ref(size_t(rows) * n), y0 = test::random_floats(size_t(rows) * n, seed + 2);
      cpu::matmul_wt(xf.data(), wf.data(), nullptr, ref.data(), rows, n, k);
      DevBuf<uint16_t> dw, dx;
      dw.upload(wb);
      dx.upload(xb);
      for (bool acc : {false, true}) {
        DevBuf<float> dy;
        dy.upload(y0);
        cuda::launch_gemv_bf16(dw.get(), dx.get(), dy.get(), rows, n, k, acc, nullptr);
        std::vector<float> got = dy.download();
        for (int t = 0; t < rows; ++t)
          for (int j = 0; j < n; ++j) {
            double mag = 0;
            for (int i = 0; i < k; ++i) mag += std::fabs(double(wf[size_t(j) * k + i]) * xf[size_t(t) * k + i]);
            const size_t idx = size_t(t) * n + j;
            const float want = ref[idx] + (acc ? y0[idx] : 0.0f);
            ASSERT_NEAR(got[idx], want, 1e-5 * mag + 1e-6) << "row " << t << " col " << j << (acc ? " (accumulate)" : "");
          }
      }
    }
  }
}

// The decode MoE path: gathered gate/up rows (x row r / K), then gathered down rows (x row r),
// against fp64 sums over the same bf16 values. Experts repeat across tokens and the last
// expert is chosen, so a wrong expert stride or token offset shows; n is not a multiple of the
// rows a block owns, and k = 768 (Qwen3-MoE's expert width) splits k across warps.
TEST(CudaOps, GatheredGemvMatchesFp64) {
  NINFER_REQUIRE_GPU();
  const int E = 6, K = 3;
  for (auto [T, n, k] : {std::tuple{1, 136, 72}, std::tuple{2, 203, 768}, std::tuple{5, 40, 2048}}) {
    const uint32_t seed = uint32_t(7919 * T + n);
    SCOPED_TRACE(::testing::Message() << "tokens " << T << " n " << n << " k " << k << " seed " << seed);
    std::vector<float> w = test::random_floats(size_t(E) * n * k, seed), x = test::random_floats(size_t(T) * K * k, seed + 1);
    std::vector<uint16_t> wb(w.size()), xb(x.size());
    for (size_t i = 0; i < w.size(); ++i) w[i] = test::bf16f(wb[i] = f32_to_bf16(w[i]));
    for (size_t i = 0; i < x.size(); ++i) x[i] = test::bf16f(xb[i] = f32_to_bf16(x[i]));
    std::vector<int32_t> ids(size_t(T) * K);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t((i * 5 + 1) % E);  // 1, 0, 5, 4, ...
    DevBuf<uint16_t> dw, dx;
    DevBuf<int32_t> dids;
    dw.upload(wb);
    dx.upload(xb);
    dids.upload(ids);
    for (int x_div : {K, 1}) {
      DevBuf<float> dy;
      dy.upload(std::vector<float>(size_t(T) * K * n, NAN));
      cuda::launch_gemv_gathered_bf16(dw.get(), size_t(n) * k, dids.get(), dx.get(), x_div, dy.get(), T * K, n, k,
                                      nullptr);
      const std::vector<float> got = dy.download();
      for (int r = 0; r < T * K; ++r)
        for (int j = 0; j < n; ++j) {
          double want = 0, mag = 0;
          for (int i = 0; i < k; ++i) {
            const double p = double(w[(size_t(ids[size_t(r)]) * n + j) * k + i]) * x[size_t(r / x_div) * k + i];
            want += p;
            mag += std::fabs(p);
          }
          ASSERT_NEAR(got[size_t(r) * n + j], want, 1e-5 * mag + 1e-6) << "x_div " << x_div << " row " << r << " col " << j;
        }
    }
  }
}

}  // namespace
}  // namespace ninfer
