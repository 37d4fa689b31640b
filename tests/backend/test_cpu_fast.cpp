// The CPU fast path (backend/cpu/cpu_fast.h) against independent references: every kernel of
// every instruction set this CPU runs against fp64 brute force on random and adversarial
// inputs, the thread pool, and whole models (reference models and the tiny checkpoints of
// every family) against the fp32 reference backend in every KV format.
#include <gtest/gtest.h>

#include <dirent.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "backend/backend.h"
#include "backend/cpu/cpu_fast.h"
#include "backend/cpu/cpu_fast_attention.h"
#include "backend/cpu/thread_pool.h"
#include "core/dtype.h"
#include "core/error.h"
#include "kv/format.h"
#include "kv/page_table.h"
#include "model/model.h"
#include "test_paths.h"

namespace ninfer {
namespace {

using cpu::ThreadPool;
using namespace cpu::fast;

std::vector<Isa> isas() {
  std::vector<Isa> v;
  for (Isa i : {Isa::Portable, Isa::Avx2, Isa::Avx512})
    if (isa_available(i)) v.push_back(i);
  return v;
}

// Random values of mixed magnitudes (kind 0: gaussian; 1: spread over 2^-20..2^20 with
// zeros and sign flips; 2: all equal), rounded to bf16 when `bf16`.
std::vector<float> values(size_t n, int kind, std::mt19937& rng, bool bf16) {
  std::normal_distribution<float> g;
  std::uniform_int_distribution<int> e(-20, 20), z(0, 9);
  std::vector<float> v(n);
  for (float& x : v) {
    x = kind == 0 ? g(rng) : kind == 1 ? (z(rng) == 0 ? 0.0f : std::ldexp(g(rng), e(rng))) : 0.75f;
    if (bf16) x = bf16_to_f32(f32_to_bf16(x));
  }
  return v;
}

TEST(CpuFastGemm, MatchesFp64OnEveryIsa) {
  ThreadPool pool(2);
  std::mt19937 rng(3);
  const int shapes[][3] = {{1, 1, 1},   {1, 17, 7},   {3, 16, 64},  {4, 33, 255}, {5, 100, 64},
                           {8, 15, 2},  {17, 64, 96}, {130, 40, 33}, {2, 300, 512}};
  for (Isa isa : isas()) {
    for (const auto& s : shapes) {
      for (int kind = 0; kind < 3; ++kind) {
        const int m = s[0], n = s[1], k = s[2];
        const std::vector<float> x = values(size_t(m) * k, kind, rng, false);
        const std::vector<float> w = values(size_t(n) * k, kind, rng, true);
        const std::vector<float> bias = values(size_t(n), 0, rng, false);
        const PackedBf16 pw = PackedBf16::from_f32(w.data(), n, k, size_t(k));
        PackedF32 pf;
        pf.resize(n, k);
        for (int j = 0; j < n; ++j) pf.set_row(j, w.data() + size_t(j) * k);
        std::vector<float> y(size_t(m) * (n + 3), -7.0f), y2(size_t(m) * n);
        gemm(isa, pool, x.data(), m, pw, bias.data(), y.data(), n + 3);
        gemm(isa, pool, x.data(), m, pf, y2.data(), n);
        for (int i = 0; i < m; ++i) {
          for (int j = 0; j < n; ++j) {
            double ref = 0, mag = 0;
            for (int c = 0; c < k; ++c) {
              ref += double(x[size_t(i) * k + c]) * w[size_t(j) * k + c];
              mag += std::fabs(double(x[size_t(i) * k + c]) * w[size_t(j) * k + c]);
            }
            // fp32 sums of exact products: k * 2^-24 relative to the magnitude sum; the
            // bf16 hi/lo split of x adds 2^-17.
            const double tol = (k * 6e-8 + 2e-5) * mag + 1e-37;
            ASSERT_NEAR(y[size_t(i) * (n + 3) + j], ref + bias[size_t(j)], tol + 1e-6 * std::fabs(bias[size_t(j)]))
                << isa_name(isa) << " m=" << m << " n=" << n << " k=" << k << " kind " << kind;
            ASSERT_NEAR(y2[size_t(i) * n + j], ref, tol) << isa_name(isa) << " f32 W m=" << m << " n=" << n;
          }
          for (int j = n; j < n + 3; ++j) ASSERT_EQ(y[size_t(i) * (n + 3) + j], -7.0f) << "wrote past n";
        }
      }
    }
  }
}

// The causal limits: columns past row_cols[i] need not be computed; x past row_k[i] is zero.
TEST(CpuFastGemm, CausalLimits) {
  ThreadPool pool(2);
  std::mt19937 rng(5);
  const int m = 40, n = 70, k = 70;
  for (Isa isa : isas()) {
    std::vector<float> x = values(size_t(m) * k, 0, rng, false);
    const std::vector<float> w = values(size_t(n) * k, 0, rng, false);
    std::vector<int> cols(static_cast<size_t>(m)), kend(static_cast<size_t>(m));
    for (int i = 0; i < m; ++i) {
      cols[size_t(i)] = kend[size_t(i)] = 1 + (i * 7) % k;
      for (int c = kend[size_t(i)]; c < k; ++c) x[size_t(i) * k + c] = 0;
    }
    PackedF32 pf;
    pf.resize(n, k);
    for (int j = 0; j < n; ++j) pf.set_row(j, w.data() + size_t(j) * k);
    std::vector<float> a(size_t(m) * n), b(size_t(m) * n);
    gemm(isa, pool, x.data(), m, pf, a.data(), n, {cols.data(), nullptr});
    gemm(isa, pool, x.data(), m, pf, b.data(), n, {nullptr, kend.data()});
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        double ref = 0;
        for (int c = 0; c < k; ++c) ref += double(x[size_t(i) * k + c]) * w[size_t(j) * k + c];
        if (j < cols[size_t(i)]) {
          ASSERT_NEAR(a[size_t(i) * n + j], ref, 1e-4) << isa_name(isa);
        }
        ASSERT_NEAR(b[size_t(i) * n + j], ref, 1e-4) << isa_name(isa);
      }
  }
}

TEST(CpuFastKernels, ExpDotsAndPvMatchFp64) {
  std::mt19937 rng(9);
  for (Isa isa : isas()) {
    const Kernels& K = kernels(isa);
    for (int n : {1, 7, 16, 33, 200}) {
      std::vector<float> x(static_cast<size_t>(n));
      std::uniform_real_distribution<float> u(-100.0f, 5.0f);
      for (float& v : x) v = u(rng);
      x[0] = 5.0f;  // the max
      std::vector<float> e = x;
      const float s = K.exp_sum(e.data(), n, 5.0f);
      double sref = 0;
      for (int i = 0; i < n; ++i) {
        const double r = std::exp(double(x[size_t(i)]) - 5.0);
        sref += r;
        // x - max is rounded to fp32 first: 2^-24 of it in the exponent.
        const double tol = (1e-6 + 6e-8 * std::fabs(double(x[size_t(i)]) - 5.0)) * r + 2e-38;  // 0 below 2^-126
        ASSERT_NEAR(e[size_t(i)], r, tol) << isa_name(isa) << " x=" << x[size_t(i)];
      }
      ASSERT_NEAR(s, sref, 1e-6 * sref);
    }
    for (int d : {8, 24, 64, 256}) {
      const int rows = 6, nk = 21;
      const std::vector<float> q = values(size_t(rows) * d, 0, rng, false), kr = values(size_t(nk) * d, 1, rng, false);
      const std::vector<float> p = values(size_t(rows) * nk, 0, rng, false), scale = values(size_t(rows), 0, rng, false);
      std::vector<float> s(size_t(rows) * 32), o = values(size_t(rows) * d, 0, rng, false), o0 = o;
      K.dots(q.data(), rows, d, kr.data(), nk, d, s.data(), 32);
      K.pv(p.data(), rows, nk, kr.data(), nk, d, scale.data(), o.data(), d);
      // The bf16 variants on the same keys / values rounded to bf16 must give what the fp32
      // kernels give on the widened values (widening is exact), to rounding.
      std::vector<uint16_t> kb(kr.size());
      std::vector<float> kw(kr.size());
      for (size_t i = 0; i < kr.size(); ++i) kw[i] = bf16_to_f32(kb[i] = f32_to_bf16(kr[i]));
      std::vector<float> sb(size_t(rows) * 32), sw(size_t(rows) * 32), ob = o0, ow = o0;
      K.dots_bf16(q.data(), rows, d, kb.data(), nk, d, sb.data(), 32);
      K.dots(q.data(), rows, d, kw.data(), nk, d, sw.data(), 32);
      K.pv_bf16(p.data(), rows, nk, kb.data(), nk, d, scale.data(), ob.data(), d);
      K.pv(p.data(), rows, nk, kw.data(), nk, d, scale.data(), ow.data(), d);
      for (int r = 0; r < rows; ++r) {
        for (int j = 0; j < nk; ++j) {
          double mag = 0;
          for (int i = 0; i < d; ++i) mag += std::fabs(double(q[size_t(r) * d + i]) * kw[size_t(j) * d + i]);
          ASSERT_NEAR(sb[size_t(r) * 32 + j], sw[size_t(r) * 32 + j], 2e-6 * mag + 1e-37) << isa_name(isa) << " d=" << d;
        }
        for (int i = 0; i < d; ++i) {
          double mag = std::fabs(double(o0[size_t(r) * d + i]) * scale[size_t(r)]);
          for (int j = 0; j < nk; ++j) mag += std::fabs(double(p[size_t(r) * nk + j]) * kw[size_t(j) * d + i]);
          ASSERT_NEAR(ob[size_t(r) * d + i], ow[size_t(r) * d + i], 2e-6 * mag + 1e-37) << isa_name(isa) << " d=" << d;
        }
      }
      for (int r = 0; r < rows; ++r) {
        for (int j = 0; j < nk; ++j) {
          double ref = 0, mag = 0;
          for (int i = 0; i < d; ++i) {
            ref += double(q[size_t(r) * d + i]) * kr[size_t(j) * d + i];
            mag += std::fabs(double(q[size_t(r) * d + i]) * kr[size_t(j) * d + i]);
          }
          ASSERT_NEAR(s[size_t(r) * 32 + j], ref, 1e-6 * mag + 1e-37) << isa_name(isa) << " d=" << d;
        }
        for (int i = 0; i < d; ++i) {
          double ref = double(o0[size_t(r) * d + i]) * scale[size_t(r)], mag = std::fabs(ref);
          for (int j = 0; j < nk; ++j) {
            ref += double(p[size_t(r) * nk + j]) * kr[size_t(j) * d + i];
            mag += std::fabs(double(p[size_t(r) * nk + j]) * kr[size_t(j) * d + i]);
          }
          ASSERT_NEAR(o[size_t(r) * d + i], ref, 1e-6 * mag + 1e-37) << isa_name(isa) << " d=" << d;
        }
      }
    }
  }
}

TEST(CpuThreadPool, RunsEveryTaskOnceAndRepeats) {
  ThreadPool pool(3);
  EXPECT_EQ(pool.size(), 3);
  for (int n : {0, 1, 2, 5, 1000}) {
    for (int rep = 0; rep < 200; ++rep) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int> bad_thread{0};
      pool.parallel_for(n, [&](int t, int th) {
        hits[size_t(t)].fetch_add(1);
        if (th < 0 || th >= 3) bad_thread.fetch_add(1);
      });
      for (int t = 0; t < n; ++t) ASSERT_EQ(hits[size_t(t)].load(), 1) << "task " << t << " of " << n;
      ASSERT_EQ(bad_thread.load(), 0);
    }
  }
}

// CPU seconds used by this process's threads other than the calling one.
double other_threads_cpu_seconds() {
  const long tick = sysconf(_SC_CLK_TCK);
  const std::string self = std::to_string(gettid());
  double total = 0;
  DIR* dir = opendir("/proc/self/task");
  if (!dir) return -1;
  while (dirent* e = readdir(dir)) {
    const std::string tid = e->d_name;
    if (tid == "." || tid == ".." || tid == self) continue;
    std::ifstream f("/proc/self/task/" + tid + "/stat");
    std::string line;
    std::getline(f, line);
    std::istringstream rest(line.substr(line.rfind(')') + 2));
    std::string field;
    unsigned long long utime = 0, stime = 0;
    for (int i = 3; i <= 15 && rest >> field; ++i) {
      if (i == 14) utime = std::stoull(field);
      if (i == 15) stime = std::stoull(field);
    }
    total += double(utime + stime) / double(tick);
  }
  closedir(dir);
  return total;
}

// Idle workers sleep: after a job, 400 ms of idleness costs the two workers far less than
// the 800 ms that spinning would.
TEST(CpuThreadPool, IdleWorkersSleep) {
  ThreadPool pool(3);
  std::atomic<long> sink{0};
  pool.parallel_for(64, [&](int t, int) { sink.fetch_add(t); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // past the spin window
  const double before = other_threads_cpu_seconds();
  ASSERT_GE(before, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  const double used = other_threads_cpu_seconds() - before;
  EXPECT_LT(used, 0.1) << "idle workers used " << used << " CPU seconds in 0.4 s";
}

// ---- whole models: fast path == reference backend ----

std::vector<int32_t> run_ids(const Model& m, int total) {
  std::vector<int32_t> ids;
  for (int i = 0; i < total; ++i) ids.push_back(int32_t(3 + (i * 131 + i * i) % (m.config.vocab - 3)));
  return ids;
}

struct Run {
  std::vector<float> logits;  // every row, in order
  int vocab = 0;
};

// A prompt (prefill path) in two chunks, then single-token decode steps and a 5-token chunk
// (the decode path), on shuffled pages; every logits row kept.
Run run(Backend& be, const Model& m, const KvFormat& fmt, int n_prompt) {
  Run r;
  r.vocab = m.config.vocab;
  PageTable pt(64, 11);
  be.init_kv(fmt, pt.n_pages());
  be.init_state(1);  // the hybrids' DeltaNet state
  const int32_t seq = pt.create_sequence();
  const int total = n_prompt + 3 + 5;
  EXPECT_TRUE(pt.reserve(seq, total));
  const auto& bt = pt.block_table(seq);
  const std::vector<int32_t> ids = run_ids(m, total);
  std::vector<float> part;
  auto step = [&](int p, int n) {
    SeqChunk ch{ids.data() + p, n, p, bt.data(), int(bt.size()), true, 0};
    be.forward({&ch, 1}, part);
    r.logits.insert(r.logits.end(), part.begin(), part.end());
  };
  const int first = n_prompt * 2 / 3;
  step(0, first);
  step(first, n_prompt - first);
  for (int i = 0; i < 3; ++i) step(n_prompt + i, 1);
  step(n_prompt + 3, 5);
  return r;
}

// Worst over rows of max |fast - ref| / max |ref|.
double worst_rel(const Run& a, const Run& b) {
  double worst = 0;
  for (size_t r = 0; r * size_t(a.vocab) < a.logits.size(); ++r) {
    double mx = 0, amax = 0;
    for (int i = 0; i < a.vocab; ++i) {
      const double x = a.logits[r * a.vocab + i], y = b.logits[r * a.vocab + i];
      mx = std::max(mx, std::fabs(x - y));
      amax = std::max(amax, std::fabs(y));
    }
    worst = std::max(worst, mx / amax);
  }
  return worst;
}

// Mean NLL of each next token of the run's rows (row r predicts token r + 1).
double mean_nll(const Run& a, const std::vector<int32_t>& ids) {
  double sum = 0;
  const size_t rows = a.logits.size() / size_t(a.vocab);
  for (size_t r = 0; r + 1 < rows; ++r) {
    const float* row = a.logits.data() + r * a.vocab;
    double mx = *std::max_element(row, row + a.vocab), z = 0;
    for (int i = 0; i < a.vocab; ++i) z += std::exp(double(row[i]) - mx);
    sum += -(row[ids[r + 1]] - mx - std::log(z));
  }
  return sum / double(rows - 1);
}

// With the exact cache (f32) the fast path's logits are the reference's to 1e-3 relative.
// A format that rounds K/V cannot be held to that: both paths compute K and V to ~1e-6, but
// any difference flips some codes (a whole quantisation step) and peaky attention passes
// that on; the decoding of identical pages is checked to 1e-5 in CpuFastAttention below.
// Here a rounding format must give the same prompt NLL as the reference path to 1%.
void compare_formats(const Model& m, int n_prompt, const std::string& what, bool all_formats) {
  CpuBackendOptions ref_opt, fast_opt;
  ref_opt.kernels = CpuKernels::Reference;
  auto ref = make_cpu_backend(m, ref_opt);
  auto fast = make_cpu_backend(m, fast_opt);
  const std::vector<int32_t> ids = run_ids(m, n_prompt + 8);
  for (const KvFormat* f : kv_formats()) {
    if (m.config.head_dim % f->head_dim_multiple != 0) continue;
    if (!all_formats && f->name != "f32") continue;
    const Run a = run(*fast, m, *f, n_prompt), b = run(*ref, m, *f, n_prompt);
    ASSERT_EQ(a.logits.size(), b.logits.size());
    const std::string label = what + " --kv-dtype " + std::string(f->name) + " (" + std::string(isa_name(select_isa())) + ")";
    if (f->name == "f32") {
      EXPECT_LT(worst_rel(a, b), 1e-3) << label;
    } else {
      const double na = mean_nll(a, ids), nb = mean_nll(b, ids);
      EXPECT_LT(std::fabs(na - nb), 0.01 * nb) << label << ": NLL " << na << " vs " << nb;
    }
  }
}

class FastVsReference : public ::testing::TestWithParam<std::string> {};

TEST_P(FastVsReference, RefModelsEveryFormat) {
  NINFER_REQUIRE_MODEL(GetParam());
  auto m = load_model(test::model_dir(GetParam()));
  compare_formats(*m, 150, GetParam(), true);
}

INSTANTIATE_TEST_SUITE_P(RefModels, FastVsReference,
                         ::testing::Values("ref-qwen3-d256", "ref-llama-d128", "stories260k"));

// Every family (sliding windows, soft-capping, MoE, partial rotary...) on every ISA.
TEST(FastVsReferenceTiny, EveryFamilyEveryIsa) {
  const char* names[] = {"llama-rope-yarn", "llama-rope-partial", "mistral-sliding", "gemma2", "gemma3",
                         "phi3", "granite", "olmo2", "mixtral", "qwen3-moe", "qwen3-next", "qwen3.5-moe"};
  for (Isa isa : isas()) {
    ASSERT_EQ(setenv("NINFER_CPU_ISA", std::string(isa_name(isa)).c_str(), 1), 0);
    for (const char* name : names) {
      auto m = load_model(test::test_data_dir() / "tiny" / name);
      compare_formats(*m, 80, std::string(name) + " on " + std::string(isa_name(isa)), false);
    }
  }
  unsetenv("NINFER_CPU_ISA");
}

// fast::attend against fp64 attention over the same encoded pages, every format: the
// decode path (1..8 query tokens, split over pages) and the prefill path (GEMMs), GQA,
// shuffled pages, a sliding window and soft-capping.
TEST(CpuFastAttention, MatchesFp64OnTheSamePages) {
  ThreadPool pool(2);
  std::mt19937 rng(21);
  std::normal_distribution<float> g;
  struct Case {
    int start, n, window;
    float cap;
  };
  const Case cases[] = {{0, 1, 0, 0}, {130, 1, 0, 0}, {200, 3, 0, 0}, {63, 8, 0, 30}, {0, 9, 0, 0},
                        {70, 70, 0, 0}, {150, 20, 37, 0}, {300, 1, 64, 0}, {190, 5, 100, 50}};
  for (Isa isa : isas()) {
    for (const KvFormat* f : kv_formats()) {
      for (int d : {64, 128}) {
        if (d % f->head_dim_multiple != 0) continue;
        const int nkv = 2, nh = 6, grp = nh / nkv, n_pages = 8;
        const size_t kr = f->k_bytes(d), vr = f->v_bytes(d);
        std::vector<uint8_t> kpool(size_t(n_pages) * nkv * kPageSize * kr), vpool(size_t(n_pages) * nkv * kPageSize * vr);
        std::vector<int32_t> bt = {5, 2, 7, 0, 3, 6, 1, 4};
        // Every slot holds an encoded row (keys with an outlier now and then).
        std::vector<float> row(static_cast<size_t>(d));
        for (size_t slot = 0; slot < size_t(n_pages) * nkv * kPageSize; ++slot) {
          for (float& x : row) x = g(rng) * (rng() % 17 == 0 ? 20.0f : 1.0f);
          f->k.encode(row.data(), d, kpool.data() + slot * kr);
          for (float& x : row) x = g(rng);
          f->v.encode(row.data(), d, vpool.data() + slot * vr);
        }
        auto decoded = [&](bool k, int h, int pos) {
          std::vector<float> out(static_cast<size_t>(d));
          const size_t slot = (size_t(bt[size_t(pos / kPageSize)]) * nkv + size_t(h)) * kPageSize + size_t(pos % kPageSize);
          (k ? f->k : f->v).decode((k ? kpool.data() + slot * kr : vpool.data() + slot * vr), d, out.data());
          return out;
        };
        for (const Case& c : cases) {
          const int ldq = nh * d + 16;
          std::vector<float> q(size_t(c.n) * ldq), out(size_t(c.n) * nh * d, -1.0f);
          for (float& x : q) x = g(rng) * 0.7f;
          AttnParams p;
          p.fmt = f;
          p.k_pool = kpool.data();
          p.v_pool = vpool.data();
          p.k_row = kr;
          p.v_row = vr;
          p.block_table = bt.data();
          p.start_pos = c.start;
          p.n_tokens = c.n;
          p.n_heads = nh;
          p.n_kv_heads = nkv;
          p.head_dim = d;
          p.window = c.window;
          p.scale = 1.0f / std::sqrt(float(d));
          p.softcap = c.cap;
          p.q = q.data();
          p.ldq = ldq;
          p.out = out.data();
          attend(p, isa, pool);
          double worst = 0;
          for (int t = 0; t < c.n; ++t) {
            const int qpos = c.start + t, lo = c.window > 0 ? std::max(0, qpos - c.window + 1) : 0;
            for (int hq = 0; hq < nh; ++hq) {
              const int h = hq / grp;
              std::vector<float> qr(static_cast<size_t>(d));
              for (int i = 0; i < d; ++i) qr[size_t(i)] = q[size_t(t) * ldq + size_t(hq) * d + i] * p.scale;
              rotate_kv(f->k.rotation, qr.data(), d);
              std::vector<double> sc;
              double mx = -1e300;
              for (int j = lo; j <= qpos; ++j) {
                const std::vector<float> kd = decoded(true, h, j);
                double s = 0;
                for (int i = 0; i < d; ++i) s += double(qr[size_t(i)]) * kd[size_t(i)];
                if (c.cap > 0) s = c.cap * std::tanh(s / c.cap);
                sc.push_back(s);
                mx = std::max(mx, s);
              }
              double z = 0;
              for (double& s : sc) z += (s = std::exp(s - mx));
              std::vector<double> o(static_cast<size_t>(d), 0.0);
              for (int j = lo; j <= qpos; ++j) {
                const std::vector<float> vd = decoded(false, h, j);
                for (int i = 0; i < d; ++i) o[size_t(i)] += sc[size_t(j - lo)] / z * vd[size_t(i)];
              }
              std::vector<float> of(o.begin(), o.end());
              rotate_kv(f->v.rotation, of.data(), d);
              for (int i = 0; i < d; ++i)
                worst = std::max(worst, std::fabs(double(out[size_t(t) * nh * d + size_t(hq) * d + i]) - of[size_t(i)]));
            }
          }
          // NOTE: fp32 sums of up to 140 products of O(1) values plus the split merge: a few ulps
          // times sqrt(n) is ~1e-5; whether the compiler fuses a*b+c (an x86-64-v3 build does,
          // the baseline one does not) moves the worst case across 1e-5 (1.05e-5 seen, fp8).
          EXPECT_LT(worst, 2e-5) << f->name << " d=" << d << " " << isa_name(isa) << " start " << c.start << " n "
                                 << c.n << " window " << c.window << " cap " << c.cap;
        }
      }
    }
  }
}

TEST(CpuFastIsa, EnvironmentChoiceIsChecked) {
  ASSERT_EQ(setenv("NINFER_CPU_ISA", "sse9", 1), 0);
  try {
    select_isa();
    ADD_FAILURE() << "no error for NINFER_CPU_ISA=sse9";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("NINFER_CPU_ISA"), std::string::npos) << e.what();
  }
  ASSERT_EQ(setenv("NINFER_CPU_ISA", "portable", 1), 0);
  EXPECT_EQ(select_isa(), Isa::Portable);
  unsetenv("NINFER_CPU_ISA");
  ASSERT_EQ(setenv("NINFER_CPU_KERNELS", "fastest", 1), 0);
  EXPECT_THROW(cpu_kernels_from_env(), Error);
  unsetenv("NINFER_CPU_KERNELS");
}

}  // namespace
}  // namespace ninfer
