// The exact KV window (kv/kv_window.h) in the CPU backend: fast::attend against fp64 brute
// force (exact keys at their bf16-rounded values, the others at the codec's decoded values),
// page transitions, a sink across pages, poisoned window entries that must not be read; and
// whole models: a chunked prefill against token-by-token decoding, the reference path against
// the fast one, and a backend without the window refusing it by name.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

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

using namespace cpu::fast;

// The rule of kv/kv_window.h written independently: key j is exact for the query at qpos iff
// j < sink, or (recent > 0 and) its page is not yet complete and older than the recent window.
bool exact_rule(int sink, int recent, int j, int qpos) {
  if (j < sink) return true;
  return recent > 0 && (j / kPageSize + 1) * kPageSize > qpos + 1 - recent;
}

float bf16r(float x) { return bf16_to_f32(f32_to_bf16(x)); }

TEST(CpuExactWindow, FastAttentionMatchesFp64) {
  cpu::ThreadPool pool(2);
  const unsigned seed = 31;
  std::mt19937 rng(seed);
  std::normal_distribution<float> g;
  struct Win {
    int sink, recent;
  };
  const Win wins[] = {{4, 0}, {0, 64}, {70, 100}, {16, 128}, {1, 1}};
  struct Case {
    int start, n;
  };
  // Decode (1..8 tokens) and prefill chunks; 190/191: page 0 leaves a 128-token window at n = 192.
  const Case cases[] = {{0, 1},  {190, 1}, {191, 1},  {130, 1},   {200, 3}, {63, 8},
                        {0, 9},  {70, 70}, {100, 200}, {0, 300}, {250, 50}, {187, 6}};
  const int nkv = 2, nh = 6, grp = nh / nkv, n_pages = 8, d = 128;
  for (const char* fname : {"bf16", "int8", "rk4v4-e8", "rk2v4-e8"}) {
    const KvFormat& f = find_kv_format(fname);
    const size_t kr = f.k_bytes(d), vr = f.v_bytes(d);
    const int n_pos = n_pages * kPageSize;
    // Raw rows of every position; the pool holds the codes of their bf16-rounded values.
    std::vector<float> kraw(size_t(n_pos) * nkv * d), vraw(size_t(n_pos) * nkv * d);
    for (float& x : kraw) x = g(rng) * (rng() % 17 == 0 ? 20.0f : 1.0f);
    for (float& x : vraw) x = g(rng);
    std::vector<int32_t> bt = {5, 2, 7, 0, 3, 6, 1, 4};
    std::vector<uint8_t> kpool(size_t(n_pages) * nkv * kPageSize * kr), vpool(size_t(n_pages) * nkv * kPageSize * vr);
    std::vector<float> row(static_cast<size_t>(d));
    for (int pos = 0; pos < n_pos; ++pos)
      for (int h = 0; h < nkv; ++h) {
        const size_t slot = (size_t(bt[size_t(pos / kPageSize)]) * nkv + size_t(h)) * kPageSize + size_t(pos % kPageSize);
        for (int i = 0; i < d; ++i) row[size_t(i)] = bf16r(kraw[(size_t(pos) * nkv + h) * d + i]);
        f.k.encode(row.data(), d, kpool.data() + slot * kr);
        for (int i = 0; i < d; ++i) row[size_t(i)] = bf16r(vraw[(size_t(pos) * nkv + h) * d + i]);
        f.v.encode(row.data(), d, vpool.data() + slot * vr);
      }
    auto decoded = [&](bool k, int h, int pos) {
      std::vector<float> out(static_cast<size_t>(d));
      const size_t slot = (size_t(bt[size_t(pos / kPageSize)]) * nkv + size_t(h)) * kPageSize + size_t(pos % kPageSize);
      (k ? f.k : f.v).decode((k ? kpool.data() + slot * kr : vpool.data() + slot * vr), d, out.data());
      return out;
    };
    for (const Win& w : wins) {
      // The window slot as the layout of kv/kv_window.h puts it, for a sequence of `start`
      // tokens: every entry poisoned (NaN) except the ones it must hold.
      const int sink_pages = (w.sink + kPageSize - 1) / kPageSize;
      const int ring_pages = w.recent > 0 ? (w.recent + kPageSize - 1) / kPageSize + 1 : 0;
      const int e_pages = sink_pages + ring_pages;
      for (const Case& c : cases) {
        std::vector<uint16_t> wk(size_t(e_pages) * nkv * kPageSize * d, 0x7FC0), wv(wk.size(), 0x7FC0);
        const int bnd = w.recent > 0 ? std::max(0, c.start - w.recent) / kPageSize * kPageSize : c.start;
        for (int pos = 0; pos < c.start; ++pos) {
          if (!(pos < w.sink || (w.recent > 0 && pos >= bnd))) continue;
          const int page = pos < w.sink ? pos / kPageSize : sink_pages + (pos / kPageSize) % ring_pages;
          for (int h = 0; h < nkv; ++h)
            for (int i = 0; i < d; ++i) {
              const size_t at = ((size_t(page) * nkv + h) * kPageSize + size_t(pos % kPageSize)) * d + i;
              wk[at] = f32_to_bf16(kraw[(size_t(pos) * nkv + h) * d + i]);
              wv[at] = f32_to_bf16(vraw[(size_t(pos) * nkv + h) * d + i]);
            }
        }
        // The chunk's own rows, [n][ld_new] raw fp32, as the backend's QKV buffer holds them.
        const int ld_new = nkv * d + 8;
        std::vector<float> knew(size_t(c.n) * ld_new), vnew(size_t(c.n) * ld_new);
        for (int t = 0; t < c.n; ++t)
          for (int i = 0; i < nkv * d; ++i) {
            knew[size_t(t) * ld_new + i] = kraw[size_t(c.start + t) * nkv * d + i];
            vnew[size_t(t) * ld_new + i] = vraw[size_t(c.start + t) * nkv * d + i];
          }
        const int ldq = nh * d + 16;
        std::vector<float> q(size_t(c.n) * ldq), out(size_t(c.n) * nh * d, -1.0f);
        for (float& x : q) x = g(rng) * 0.7f;
        AttnParams p;
        p.fmt = &f;
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
        p.scale = 1.0f / std::sqrt(float(d));
        p.q = q.data();
        p.ldq = ldq;
        p.out = out.data();
        p.exact.w = KvWindow{w.sink, w.recent};
        p.exact.k = wk.data();
        p.exact.v = wv.data();
        p.exact.k_new = knew.data();
        p.exact.v_new = vnew.data();
        p.exact.ld_new = ld_new;
        p.exact.new_start = c.start;
        attend(p, select_isa(), pool);
        double worst = 0;
        int n_exact = 0;
        for (int t = 0; t < c.n; ++t) {
          const int qpos = c.start + t;
          for (int hq = 0; hq < nh; ++hq) {
            const int h = hq / grp;
            // Compressed keys meet the query rotated into their basis; exact keys the raw query.
            std::vector<float> qr(static_cast<size_t>(d)), qraw(static_cast<size_t>(d));
            for (int i = 0; i < d; ++i) qraw[size_t(i)] = qr[size_t(i)] = q[size_t(t) * ldq + size_t(hq) * d + i] * p.scale;
            rotate_kv(f.k.rotation, qr.data(), d);
            std::vector<double> sc;
            double mx = -1e300;
            for (int j = 0; j <= qpos; ++j) {
              double s = 0;
              if (exact_rule(w.sink, w.recent, j, qpos)) {
                for (int i = 0; i < d; ++i) s += double(qraw[size_t(i)]) * bf16r(kraw[(size_t(j) * nkv + h) * d + i]);
              } else {
                const std::vector<float> kd = decoded(true, h, j);
                for (int i = 0; i < d; ++i) s += double(qr[size_t(i)]) * kd[size_t(i)];
              }
              sc.push_back(s);
              mx = std::max(mx, s);
            }
            double z = 0;
            for (double& s : sc) z += (s = std::exp(s - mx));
            std::vector<double> o(static_cast<size_t>(d), 0.0);
            for (int j = 0; j <= qpos; ++j) {
              std::vector<float> vv(static_cast<size_t>(d));
              if (exact_rule(w.sink, w.recent, j, qpos)) {
                ++n_exact;
                for (int i = 0; i < d; ++i) vv[size_t(i)] = bf16r(vraw[(size_t(j) * nkv + h) * d + i]);
              } else {
                vv = decoded(false, h, j);
                rotate_kv(f.v.rotation, vv.data(), d);  // back to the raw basis
              }
              for (int i = 0; i < d; ++i) o[size_t(i)] += sc[size_t(j)] / z * vv[size_t(i)];
            }
            for (int i = 0; i < d; ++i) {
              const double got = out[size_t(t) * nh * d + size_t(hq) * d + i];
              worst = std::isnan(got) ? 1e30 : std::max(worst, std::fabs(got - o[size_t(i)]));
            }
          }
        }
        EXPECT_GT(n_exact, 0);
        // NOTE: fp32 scores and sums over <= 300 keys of O(1) values, and rotations in fp32: 1e-5
        // as the window-less test (CpuFastAttention in test_cpu_fast.cpp).
        EXPECT_LT(worst, 2e-5) << fname << " sink " << w.sink << " recent " << w.recent << " start " << c.start
                               << " n " << c.n << " seed " << seed;
      }
    }
  }
}

// ---- whole models ----

std::vector<int32_t> ids_for(const Model& m, int n) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(int32_t(3 + (i * 131 + i * i) % (m.config.vocab - 3)));
  return ids;
}

// Every logits row of `ids` fed in chunks of `chunk` tokens (1: token by token).
std::vector<float> run_chunks(Backend& be, const KvFormat& f, const KvWindow& w,
                              const std::vector<int32_t>& ids, int chunk) {
  PageTable pt(16, 7);
  be.init_kv(f, pt.n_pages());
  be.init_kv_window(w, 2);
  const int32_t seq = pt.create_sequence();
  EXPECT_TRUE(pt.reserve(seq, int64_t(ids.size())));
  const auto& bt = pt.block_table(seq);
  std::vector<float> all, part;
  for (int p = 0; p < int(ids.size()); p += chunk) {
    const int n = std::min(chunk, int(ids.size()) - p);
    SeqChunk ch{ids.data() + p, n, p, bt.data(), int(bt.size()), true, -1, 1};
    be.forward({&ch, 1}, part);
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

double mean_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += std::fabs(double(a[i]) - b[i]);
  return s / double(a.size());
}

// A chunked prefill attends as token-by-token decoding does (the window's rule depends on the
// query's position only), on the fast and the reference path. Both sides compute K/V in other
// batch shapes (fp32 sums in another order), which can flip a bf16 rounding and so a code; the
// test asks the difference to be a small fraction of what the window changes.
TEST(CpuExactWindow, ChunkedPrefillEqualsTokenByToken) {
  NINFER_REQUIRE_MODEL("ref-qwen3-d256");
  auto m = load_model(test::model_dir("ref-qwen3-d256"));
  const KvFormat& f = find_kv_format("rk2v4-e8");
  const KvWindow w{4, 64};
  const std::vector<int32_t> ids = ids_for(*m, 300);
  CpuBackendOptions fast_opt, ref_opt;
  ref_opt.kernels = CpuKernels::Reference;
  auto fast = make_cpu_backend(*m, fast_opt);
  auto ref = make_cpu_backend(*m, ref_opt);
  const std::vector<float> whole = run_chunks(*fast, f, w, ids, 300);
  const std::vector<float> tokens = run_chunks(*fast, f, w, ids, 1);
  const std::vector<float> chunks = run_chunks(*fast, f, w, ids, 37);
  const std::vector<float> ref_whole = run_chunks(*ref, f, w, ids, 300);
  const std::vector<float> ref_tokens = run_chunks(*ref, f, w, ids, 5);
  const std::vector<float> no_window = run_chunks(*fast, f, KvWindow{}, ids, 300);
  const double effect = mean_abs_diff(whole, no_window);
  EXPECT_GT(effect, 1e-3);
  EXPECT_LT(mean_abs_diff(whole, tokens), 0.05 * effect);
  EXPECT_LT(mean_abs_diff(whole, chunks), 0.05 * effect);
  EXPECT_LT(mean_abs_diff(whole, ref_whole), 0.05 * effect);
  EXPECT_LT(mean_abs_diff(ref_whole, ref_tokens), 0.05 * effect);
  // The lossless format reads the same values either way: the window changes nothing.
  const KvFormat& bf = find_kv_format("bf16");
  EXPECT_LT(mean_abs_diff(run_chunks(*fast, bf, w, ids, 300), run_chunks(*fast, bf, KvWindow{}, ids, 300)),
            1e-4);
}

// A backend that does not implement the window refuses one that is on, naming the flags.
TEST(CpuExactWindow, BackendWithoutWindowRefuses) {
  struct Plain : Backend {
    std::string name() const override { return "plain"; }
    void init_kv(const KvFormat&, int) override {}
    const KvFormat& kv_format() const override { return find_kv_format("bf16"); }
    void forward(std::span<const SeqChunk>, std::vector<float>&) override {}
    MemoryInfo memory() const override { return {}; }
    size_t page_bytes(const KvFormat&) const override { return 0; }
    void copy_kv_pages(std::span<const int32_t>, std::span<const int32_t>) override {}
  } plain;
  EXPECT_NO_THROW(plain.init_kv_window(KvWindow{}, 4));
  try {
    plain.init_kv_window(KvWindow{0, 128}, 4);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("--kv-sink"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--kv-recent 128"), std::string::npos) << msg;
    EXPECT_NE(msg.find("plain backend"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace ninfer
