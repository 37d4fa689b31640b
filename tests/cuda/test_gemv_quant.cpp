// The quantised-weight kernels (backend/cuda/gemv_quant.h) against the CPU dequantisation
// (WeightFormat::dequant_rows, the oracle) and an fp64 dot product, on matrices packed by the
// backend's own packer (quant_upload.h pack_quant_parts).
//
// Tolerance of a GEMV output (derived, not tuned): the GPU sums the products w x of a row in
// fp32 with at most D = E + 2 + ceil(k / 32) + 8 roundings on any one term's path (E = 16 or 32
// products of a 16-byte load summed serially, the load's scale multiply, one add per load a lane
// walks, 5 warp and 3 cross-warp levels); the dequantised weights themselves are exact in the
// fast path (code, zero and scale are applied as a product of exact terms whose only rounding is
// counted in D) and bit-equal to the CPU's in the general path. So |got - ref| <= D u sum |w x|
// (u = 2^-24) plus u |y0| for an accumulated output. bf16 dequantisation compares bit for bit.
// Outputs are poisoned (NaN) before every launch; seeds are printed.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "backend/cuda/gemv_quant.h"
#include "backend/cuda/ops.h"
#include "backend/cuda/quant_upload.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/minifloat.h"
#include "cuda_test_util.h"
#include "model/weight_format.h"

namespace ninfer {
namespace {

using test::DevBuf;

// A device copy of packed matrices (E experts of one layout one after another).
struct DevQuant {
  DevBuf<uint8_t> codes, zeros;
  DevBuf<float> scales;
  DevBuf<int32_t> g_idx, col_perm;
  DevBuf<uint16_t> x_perm;
  cuda::QuantWeights w;
  explicit DevQuant(const std::vector<QuantHost>& hs) {
    const QuantHost& h0 = hs.front();
    std::vector<uint8_t> c, z;
    std::vector<float> s;
    std::vector<int32_t> g;
    for (const QuantHost& h : hs) {
      c.insert(c.end(), h.codes.begin(), h.codes.end());
      z.insert(z.end(), h.zeros.begin(), h.zeros.end());
      s.insert(s.end(), h.scales.begin(), h.scales.end());
      g.insert(g.end(), h.g_idx.begin(), h.g_idx.end());
    }
    codes.upload(c);
    scales.upload(s);
    if (!z.empty()) zeros.upload(z);
    if (!g.empty()) g_idx.upload(g);
    w = h0.w;
    w.codes = codes.get();
    w.scales = scales.get();
    w.zeros = z.empty() ? nullptr : zeros.get();
    w.g_idx = g.empty() ? nullptr : g_idx.get();
    if (!h0.col_perm.empty()) {
      col_perm.upload(h0.col_perm);
      x_perm.resize(size_t(h0.w.n_seg) * cuda::kGemvMaxRows * size_t(h0.w.k));
      x_perm.poison();
      w.col_perm = col_perm.get();
      w.x_perm = x_perm.get();
    }
    w.expert_codes = h0.codes.size();
    w.expert_scales = h0.scales.size();
    w.expert_gidx = h0.g_idx.size();
  }
};

// A matrix of format f on the scale grid block_rows x block_cols with random codes, scales in
// [0.5, 2) * 2^-6 (some 0 with zero_scales), random zero points (int4); g_idx: a random group
// per column (every group used at least once when cols allow).
QuantMatrix random_matrix(const WeightFormat& f, int64_t rows, int64_t cols, int64_t br, int64_t bc, uint32_t seed,
                          bool zero_scales = false, bool g_idx = false, bool g_idx_uneven = false) {
  std::mt19937 rng(seed);
  QuantMatrix m;
  m.name = "test.weight";
  init_quant_matrix(m, f, rows, cols, br, bc);
  for (uint8_t& c : m.codes) {
    c = uint8_t(rng());
    if (f.id == WeightFormatId::Fp8 && (c & 0x7F) == 0x7F) c ^= 0x01;  // NaN codes are refused at load
  }
  if (f.code_bits == 4 && cols % 2 == 1)  // the unused high nibble of a last odd column stays 0
    for (int64_t r = 0; r < rows; ++r) m.codes[size_t(r * m.row_bytes() + m.row_bytes() - 1)] &= 0x0F;
  std::uniform_real_distribution<float> u(0.5f, 2.0f);
  for (size_t i = 0; i < m.scales.size(); ++i) m.scales[i] = zero_scales && i % 3 == 1 ? 0.0f : u(rng) * 0x1p-6f;
  for (uint8_t& z : m.zeros) z = uint8_t(rng() % 16);
  if (g_idx) {
    m.g_idx.resize(size_t(cols));
    // act-order (every group the same size, GPTQ's desc_act) or uneven (group 0 twice as big)
    for (int64_t c = 0; c < cols; ++c) m.g_idx[size_t(c)] = int32_t(c % m.n_groups);
    if (g_idx_uneven) m.g_idx[1] = 0;
    std::shuffle(m.g_idx.begin(), m.g_idx.end(), rng);
  }
  m.validate();
  return m;
}

// Activations [rows][k] as bf16 with their float values (one huge outlier, a zero row).
std::vector<uint16_t> random_act(int rows, int k, uint32_t seed, std::vector<float>& vals) {
  vals = test::random_floats(size_t(rows) * k, seed, -2.0f, 2.0f);
  vals[size_t(k / 3)] = 300.0f;
  if (rows > 2) std::fill(vals.begin() + 2 * k, vals.begin() + 3 * k, 0.0f);
  std::vector<uint16_t> b(vals.size());
  for (size_t i = 0; i < vals.size(); ++i) vals[i] = test::bf16f(b[i] = f32_to_bf16(vals[i]));
  return b;
}

// The stacked parts dequantised by the CPU oracle: [sum rows][cols].
std::vector<float> dequant_all(const std::vector<const QuantMatrix*>& parts) {
  std::vector<float> all;
  for (const QuantMatrix* q : parts) {
    std::vector<float> d(size_t(q->rows * q->cols));
    q->format->dequant_rows(*q, 0, q->rows, d.data());
    all.insert(all.end(), d.begin(), d.end());
  }
  return all;
}

// y (got) against y0 + alpha * x w^T in fp64 with the bound of the header comment.
void expect_gemv(const std::vector<float>& got, const std::vector<float>& w, const std::vector<float>& x,
                 const std::vector<float>& y0, int rows, int n, int k, float alpha, int E) {
  const double u = std::ldexp(1.0, -24);
  const double D = E + 2 + (k + 31) / 32 + 8;
  int bad = 0;
  for (int t = 0; t < rows; ++t)
    for (int j = 0; j < n; ++j) {
      double ref = 0, mag = 0;
      for (int c = 0; c < k; ++c) {
        const double p = double(w[size_t(j) * k + c]) * x[size_t(t) * k + c];
        ref += p;
        mag += std::fabs(p);
      }
      const double base = y0.empty() ? 0.0 : y0[size_t(t) * n + j];
      ref = base + alpha * ref;
      const double tol = D * u * std::fabs(alpha) * mag + 2 * u * std::fabs(base) + 1e-30;
      const float g = got[size_t(t) * n + j];
      if (!(std::fabs(g - ref) <= tol) && bad++ < 5)
        ADD_FAILURE() << "row " << t << " out " << j << ": got " << g << " want " << ref << " tol " << tol;
    }
}

int chunk_cols(const WeightFormat& f) { return f.code_bits == 4 ? 32 : 16; }

struct Case {
  const char* fmt;
  int n, k, br, bc;  // bc 0: the whole row
  bool zero_scales = false, g_idx = false, uneven = false;
};

// Plain (one part) matrices through launch_gemv_quant for rows 1..8, fast and general paths.
TEST(CudaGemvQuant, MatchesCpuDequantAndFp64) {
  NINFER_REQUIRE_GPU();
  const std::vector<Case> cases = {
      {"fp8", 37, 4096, 1, 0},        {"fp8", 300, 384, 128, 128},  {"fp8", 64, 96, 64, 96},  // per tensor
      {"fp8", 33, 77, 1, 0},          {"fp8", 16, 16, 1, 0, true},  {"int8", 129, 1024, 1, 0},
      {"int8", 31, 100, 1, 0},        {"int8", 50, 512, 1, 0, true}, {"int4", 37, 4096, 1, 128},
      {"int4", 130, 512, 1, 64},      {"int4", 20, 200, 1, 64},     {"int4", 21, 77, 1, 32},  // odd columns
      {"int4", 40, 256, 1, 32, true}, {"int4", 72, 384, 1, 128, false, true},             // g_idx
      {"int4", 30, 256, 1, 64, false, true, true},  // g_idx with uneven groups: kept (general path)
      {"int4", 9, 1, 1, 1},
  };
  for (const Case& cs : cases) {
    const WeightFormat& f = *parse_weights_option(cs.fmt);
    const int bc = cs.bc ? cs.bc : cs.k;
    const uint32_t seed = uint32_t(cs.n * 7919 + cs.k * 31 + bc + int(f.id) * 100003);
    const QuantMatrix m = random_matrix(f, cs.n, cs.k, cs.br, bc, seed, cs.zero_scales, cs.g_idx, cs.uneven);
    const std::vector<float> wd = dequant_all({&m});
    for (bool regroup : {false, true}) {
    if (regroup && !cs.g_idx) continue;
    const QuantHost h = pack_quant_parts({&m}, regroup);
    DevQuant dq({h});
    EXPECT_EQ(!h.col_perm.empty(), regroup && !cs.uneven) << cs.fmt << " " << cs.n << "x" << cs.k;
    for (int rows : {1, 2, 3, 5, 8}) {
      SCOPED_TRACE(::testing::Message() << cs.fmt << " n " << cs.n << " k " << cs.k << " grid " << cs.br << "x" << bc
                                        << " rows " << rows << " seed " << seed << " fast "
                                        << cuda::quant_fast_path(dq.w) << " regrouped " << !h.col_perm.empty());
      std::vector<float> xv;
      DevBuf<uint16_t> dx;
      dx.upload(random_act(rows, cs.k, seed + uint32_t(rows), xv));
      DevBuf<float> dy(size_t(rows) * cs.n);
      dy.poison();
      cuda::launch_gemv_quant(dq.w, dx.get(), dy.get(), rows, false, 1.0f, nullptr);
      NINFER_CUDA_CHECK(cudaDeviceSynchronize());
      expect_gemv(dy.download(), wd, xv, {}, rows, cs.n, cs.k, 1.0f, chunk_cols(f));
      // accumulate with alpha: y = y0 + alpha x w^T
      const std::vector<float> y0 = test::random_floats(size_t(rows) * cs.n, seed + 5);
      dy.upload(y0);
      cuda::launch_gemv_quant(dq.w, dx.get(), dy.get(), rows, true, -0.75f, nullptr);
      expect_gemv(dy.download(), wd, xv, y0, rows, cs.n, cs.k, -0.75f, chunk_cols(f));
    }
    }
  }
}

// Adversarial codes: every extreme e4m3 code (+-448, the smallest subnormals, +-0), int8 -128
// and 127, int4 codes and zero points 0 and 15, all at once in one matrix.
TEST(CudaGemvQuant, ExtremeCodes) {
  NINFER_REQUIRE_GPU();
  for (const char* fmt : {"fp8", "int8", "int4"}) {
    const WeightFormat& f = *parse_weights_option(fmt);
    const int n = 24, k = 256;
    QuantMatrix m = random_matrix(f, n, k, 1, f.code_bits == 4 ? 128 : k, 99);
    const std::vector<uint8_t> extremes =
        f.id == WeightFormatId::Fp8 ? std::vector<uint8_t>{0x7E, 0xFE, 0x01, 0x81, 0x00, 0x80, 0x08, 0x77}
        : f.id == WeightFormatId::Int8 ? std::vector<uint8_t>{0x80, 0x7F, 0x81, 0x00, 0xFF, 0x01}
                                       : std::vector<uint8_t>{0x00, 0xFF, 0xF0, 0x0F};
    for (size_t i = 0; i < m.codes.size(); ++i)
      if (i % 3 != 2) m.codes[i] = extremes[(i / 3) % extremes.size()];
    for (size_t i = 0; i < m.zeros.size(); ++i) m.zeros[i] = i % 2 ? 15 : 0;
    m.scales[3] = 0.0f;
    m.scales[4] = 1e30f;  // a huge (finite) scale: products stay finite for |x| <= 300
    m.validate();
    const QuantHost h = pack_quant_parts({&m});
    DevQuant dq({h});
    const std::vector<float> wd = dequant_all({&m});
    for (int rows : {1, 8}) {
      SCOPED_TRACE(::testing::Message() << fmt << " rows " << rows);
      std::vector<float> xv;
      DevBuf<uint16_t> dx;
      dx.upload(random_act(rows, k, 7 + uint32_t(rows), xv));
      DevBuf<float> dy(size_t(rows) * n);
      dy.poison();
      cuda::launch_gemv_quant(dq.w, dx.get(), dy.get(), rows, false, 1.0f, nullptr);
      expect_gemv(dy.download(), wd, xv, {}, rows, n, k, 1.0f, chunk_cols(f));
    }
  }
}

// Stacked parts (q|k|v): scale grids that do not stack (128-row blocks over 64 + 16 + 16 rows:
// repeated per row) and that do (per-row groups), and g_idx with one permutation per part.
TEST(CudaGemvQuant, StackedParts) {
  NINFER_REQUIRE_GPU();
  struct S {
    const char* fmt;
    int br, bc;
    bool g_idx;
  };
  for (const S& s : {S{"fp8", 128, 128, false}, S{"int8", 1, 0, false}, S{"int4", 1, 64, false},
                     S{"int4", 1, 64, true}}) {
    const WeightFormat& f = *parse_weights_option(s.fmt);
    const int k = 256, bc = s.bc ? s.bc : k;
    const QuantMatrix q = random_matrix(f, 64, k, s.br, bc, 11, false, s.g_idx);
    const QuantMatrix kk = random_matrix(f, 16, k, s.br, bc, 12, false, s.g_idx);
    const QuantMatrix v = random_matrix(f, 16, k, s.br, bc, 13, false, s.g_idx);
    const std::vector<float> wd = dequant_all({&q, &kk, &v});
    for (bool regroup : {false, true}) {
    const QuantHost h = pack_quant_parts({&q, &kk, &v}, regroup);
    DevQuant dq({h});
    for (int rows : {1, 4}) {
      SCOPED_TRACE(::testing::Message() << s.fmt << " grid " << s.br << "x" << bc << " g_idx " << s.g_idx << " rows "
                                        << rows << " regrouped " << !h.col_perm.empty());
      std::vector<float> xv;
      DevBuf<uint16_t> dx;
      dx.upload(random_act(rows, k, 21, xv));
      DevBuf<float> dy(size_t(rows) * 96);
      dy.poison();
      cuda::launch_gemv_quant(dq.w, dx.get(), dy.get(), rows, false, 1.0f, nullptr);
      expect_gemv(dy.download(), wd, xv, {}, rows, 96, k, 1.0f, chunk_cols(f));
    }
    }
  }
}

// The MoE gathered GEMV: rows choose experts (repeats, the last expert), x rows shared by
// x_div consecutive rows.
TEST(CudaGemvQuant, GatheredExperts) {
  NINFER_REQUIRE_GPU();
  for (const char* fmt : {"fp8", "int8", "int4"}) {
    for (int k : {512, 80}) {  // fast and general paths
      const WeightFormat& f = *parse_weights_option(fmt);
      const int E = 5, n = 72, top_k = 2, tokens = 3, rows = tokens * top_k;
      const int bc = f.code_bits == 4 ? 32 : k;
      std::vector<QuantMatrix> ex;
      std::vector<QuantHost> hs;
      for (int e = 0; e < E; ++e) ex.push_back(random_matrix(f, n, k, 1, bc, uint32_t(100 + e)));
      for (const QuantMatrix& m : ex) hs.push_back(pack_quant_parts({&m}));
      DevQuant dq(hs);
      const std::vector<int32_t> ids = {4, 0, 2, 2, 0, 4};
      DevBuf<int32_t> did;
      did.upload(ids);
      std::vector<float> xv;
      DevBuf<uint16_t> dx;
      dx.upload(random_act(tokens, k, 31, xv));
      DevBuf<float> dy(size_t(rows) * n);
      dy.poison();
      cuda::launch_gemv_gathered_quant(dq.w, did.get(), dx.get(), top_k, dy.get(), rows, nullptr);
      const std::vector<float> got = dy.download();
      for (int r = 0; r < rows; ++r) {
        SCOPED_TRACE(::testing::Message() << fmt << " k " << k << " row " << r << " expert " << ids[size_t(r)]);
        const std::vector<float> wd = dequant_all({&ex[size_t(ids[size_t(r)])]});
        const std::vector<float> xr(xv.begin() + (r / top_k) * k, xv.begin() + (r / top_k + 1) * k);
        const std::vector<float> gr(got.begin() + r * n, got.begin() + (r + 1) * n);
        expect_gemv(gr, wd, xr, {}, 1, n, k, 1.0f, chunk_cols(f));
      }
    }
  }
}

// Dequantisation to bf16 tiles (prefill): bit for bit the CPU's dequantised value rounded to bf16.
TEST(CudaGemvQuant, DequantBf16TilesExact) {
  NINFER_REQUIRE_GPU();
  for (const Case& cs : {Case{"fp8", 300, 384, 128, 128}, Case{"fp8", 40, 77, 1, 0}, Case{"int8", 33, 100, 1, 0, true},
                         Case{"int4", 130, 512, 1, 64}, Case{"int4", 21, 77, 1, 32}, Case{"int4", 72, 384, 1, 128, false, true}}) {
    const WeightFormat& f = *parse_weights_option(cs.fmt);
    const int bc = cs.bc ? cs.bc : cs.k;
    const QuantMatrix m = random_matrix(f, cs.n, cs.k, cs.br, bc, 77, cs.zero_scales, cs.g_idx);
    const QuantHost h = pack_quant_parts({&m}, true);  // g_idx regrouped: tiles back in matrix order
    DevQuant dq({h});
    const std::vector<float> wd = dequant_all({&m});
    const int r0 = cs.n / 3, nr = cs.n - r0;
    DevBuf<uint16_t> out(size_t(nr) * cs.k);
    out.poison();
    cuda::launch_dequant_bf16(dq.w, 0, r0, nr, out.get(), nullptr);
    const std::vector<uint16_t> got = out.download();
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i)
      if (got[i] != f32_to_bf16(wd[size_t(r0) * cs.k + i]) && bad++ < 5)
        ADD_FAILURE() << cs.fmt << " element " << i << ": got 0x" << std::hex << got[i] << " want 0x"
                      << f32_to_bf16(wd[size_t(r0) * cs.k + i]) << std::dec;
  }
}

// Per-token e4m3 activations for the FP8 GEMM: scale amax / 448 (1 for a zero row), codes the
// CPU's round-to-nearest-even e4m3 of x / s (compared as values: -0 and +0 are one value), and
// the scale epilogue.
TEST(CudaGemvQuant, QuantizeActivationsE4m3AndEpilogue) {
  NINFER_REQUIRE_GPU();
  const int rows = 5, k = 200, ld = 208;
  std::vector<float> xv;
  DevBuf<uint16_t> dx;
  dx.upload(random_act(rows, k, 5, xv));
  DevBuf<uint8_t> q(size_t(rows) * ld);
  DevBuf<float> s(rows);
  q.poison();
  cuda::launch_quantize_act_e4m3(dx.get(), rows, k, ld, q.get(), s.get(), nullptr);
  const std::vector<uint8_t> qh = q.download();
  const std::vector<float> sh = s.download();
  for (int t = 0; t < rows; ++t) {
    float amax = 0;
    for (int c = 0; c < k; ++c) amax = std::max(amax, std::fabs(xv[size_t(t) * k + c]));
    const float want_s = amax > 0 ? amax / 448.0f : 1.0f;
    EXPECT_EQ(sh[size_t(t)], want_s) << "row " << t;
    for (int c = 0; c < ld; ++c) {
      const float want = c < k ? e4m3_to_f32(f32_to_e4m3(xv[size_t(t) * k + c] / want_s)) : 0.0f;
      EXPECT_EQ(e4m3_to_f32(qh[size_t(t) * ld + c]), want) << "row " << t << " col " << c;
    }
  }
  const int n = 48;
  const std::vector<float> acc = test::random_floats(size_t(rows) * n, 8), col = test::random_floats(n, 9),
                           bias = test::random_floats(n, 10), y0 = test::random_floats(size_t(rows) * n, 11);
  DevBuf<float> da, dc, db, dy;
  da.upload(acc);
  dc.upload(col);
  db.upload(bias);
  dy.upload(y0);
  cuda::launch_fp8_scale_epilogue(da.get(), s.get(), dc.get(), db.get(), dy.get(), rows, n, true, 0.5f, nullptr);
  const std::vector<float> got = dy.download();
  for (int t = 0; t < rows; ++t)
    for (int j = 0; j < n; ++j) {
      const size_t i = size_t(t) * n + j;
      // NOTE: a few fp32 roundings (the device may contract a multiply and an add into one FMA).
      const double want = y0[i] + (0.5 * (double(sh[size_t(t)]) * col[size_t(j)] * acc[i]) + bias[size_t(j)]);
      EXPECT_NEAR(got[i], want, 4e-7 * (std::fabs(y0[i]) + std::fabs(bias[size_t(j)]) + 1.0)) << t << "," << j;
    }
}

// The packer alone (host code: runs without a GPU): rows padded to 16 bytes with zeros, scale
// rows stacked or repeated per row as documented, g_idx segments, and refusals naming tensors.
TEST(CudaQuantPack, LayoutAndRefusals) {
  const WeightFormat& i4 = *parse_weights_option("int4");
  const WeightFormat& f8 = *parse_weights_option("fp8");
  const WeightFormat& i8 = *parse_weights_option("int8");
  {
    const QuantMatrix m = random_matrix(i4, 37, 77, 1, 32, 1);
    const QuantHost h = pack_quant_parts({&m});
    EXPECT_EQ(h.w.row_bytes, 48);
    EXPECT_EQ(h.w.n, 37);
    EXPECT_EQ(h.w.k, 77);
    EXPECT_EQ(h.w.block_rows, 1);
    EXPECT_EQ(h.w.n_groups, 3);
    ASSERT_EQ(h.codes.size(), size_t(37 * 48));
    for (int r = 0; r < 37; ++r)
      for (int b = 0; b < 48; ++b)
        EXPECT_EQ(h.codes[size_t(r * 48 + b)], b < 39 ? m.codes[size_t(r * 39 + b)] : 0) << r << "," << b;
    EXPECT_EQ(h.scales, m.scales);
    EXPECT_EQ(h.zeros, m.zeros);
    EXPECT_EQ(h.w.fmt, cuda::QFmt::Int4);
  }
  {  // per tensor: one scale repeated per row (the FP8 GEMM's per-column scales)
    const QuantMatrix m = random_matrix(f8, 64, 96, 64, 96, 2);
    const QuantHost h = pack_quant_parts({&m});
    EXPECT_EQ(h.w.block_rows, 1);
    EXPECT_EQ(h.scales, std::vector<float>(64, m.scales[0]));
    EXPECT_TRUE(h.zeros.empty());
  }
  {  // 128 x 128 blocks of one part stack; over parts of 64 + 16 + 16 rows they repeat per row
    const QuantMatrix m = random_matrix(f8, 300, 384, 128, 128, 3);
    const QuantHost h = pack_quant_parts({&m});
    EXPECT_EQ(h.w.block_rows, 128);
    EXPECT_EQ(h.scales, m.scales);
    const QuantMatrix q = random_matrix(f8, 64, 256, 128, 128, 4), k = random_matrix(f8, 16, 256, 128, 128, 5);
    const QuantHost s = pack_quant_parts({&q, &k, &k});
    EXPECT_EQ(s.w.block_rows, 1);
    EXPECT_EQ(s.w.n, 96);
    ASSERT_EQ(s.scales.size(), size_t(96 * 2));
    EXPECT_EQ(s.scales[size_t(63 * 2 + 1)], q.scales[1]);
    EXPECT_EQ(s.scales[size_t(64 * 2)], k.scales[0]);
    EXPECT_EQ(s.scales[size_t(95 * 2 + 1)], k.scales[1]);
  }
  {  // g_idx: one segment per part
    const QuantMatrix a = random_matrix(i4, 8, 64, 1, 32, 6, false, true), b = random_matrix(i4, 4, 64, 1, 32, 7, false, true);
    const QuantHost h = pack_quant_parts({&a, &b, &a});
    EXPECT_EQ(h.w.n_seg, 3);
    EXPECT_EQ(h.w.seg_end[0], 8);
    EXPECT_EQ(h.w.seg_end[1], 12);
    EXPECT_EQ(h.w.seg_end[2], 20);
    ASSERT_EQ(h.g_idx.size(), size_t(3 * 64));
    EXPECT_TRUE(std::equal(b.g_idx.begin(), b.g_idx.end(), h.g_idx.begin() + 64));
    cuda::QuantWeights w = h.w;  // the device view: g_idx set, the general path
    w.g_idx = h.g_idx.data();
    EXPECT_FALSE(cuda::quant_fast_path(w));
  }
  {  // act-order g_idx regrouped: code column j of each part holds matrix column col_perm[j],
     // sorted by group, so block_cols is the group size; uneven groups keep g_idx
    const QuantMatrix a = random_matrix(i4, 8, 128, 1, 32, 10, false, true),
                      b = random_matrix(i4, 4, 128, 1, 32, 11, false, true);
    const QuantHost h = pack_quant_parts({&a, &b}, true);
    EXPECT_TRUE(h.g_idx.empty());
    ASSERT_EQ(h.col_perm.size(), size_t(2 * 128));
    EXPECT_EQ(h.w.block_cols, 32);
    EXPECT_EQ(h.w.n_seg, 2);
    EXPECT_EQ(h.w.seg_end[0], 8);
    auto nib = [](const uint8_t* row, int64_t c) { return (row[c / 2] >> (4 * (c & 1))) & 0xF; };
    for (int r = 0; r < 12; ++r) {
      const QuantMatrix& q = r < 8 ? a : b;
      const int lr = r < 8 ? r : r - 8, seg = r < 8 ? 0 : 1;
      for (int j = 0; j < 128; ++j) {
        const int32_t c = h.col_perm[size_t(seg * 128 + j)];
        EXPECT_EQ(q.g_idx[size_t(c)], j / 32) << r << "," << j;
        EXPECT_EQ(nib(h.codes.data() + size_t(r) * h.w.row_bytes, j), nib(q.codes.data() + size_t(lr) * 64, c))
            << r << "," << j;
      }
    }
    const QuantMatrix u = random_matrix(i4, 8, 128, 1, 32, 12, false, true, true);
    const QuantHost hu = pack_quant_parts({&u}, true);
    EXPECT_TRUE(hu.col_perm.empty());
    EXPECT_EQ(hu.g_idx, u.g_idx);
  }
  {  // formats or grids that cannot share one projection are refused naming both tensors
    QuantMatrix a = random_matrix(i4, 8, 64, 1, 32, 8), b = random_matrix(i8, 8, 64, 1, 64, 9);
    a.name = "model.layers.0.self_attn.q_proj.weight";
    b.name = "model.layers.0.self_attn.k_proj.weight";
    try {
      pack_quant_parts({&a, &b});
      ADD_FAILURE() << "int4 and int8 parts were stacked";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("k_proj.weight"), std::string::npos) << what;
      EXPECT_NE(what.find("q_proj.weight"), std::string::npos) << what;
    }
  }
}

}  // namespace
}  // namespace ninfer
