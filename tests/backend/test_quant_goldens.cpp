// The quantised tiny checkpoints of tests/data/tiny-quant (scripts/make_quant_checkpoints.py:
// the published fp8 / compressed-tensors / AWQ / GPTQ layouts written with torch, goldens from
// transformers' fp32 forward on the dequantised weights) against the CPU backend: logits at
// every stored position to 1e-3 relative (max abs error / max abs logit; both sides multiply the
// same exact fp32 dequantised weights, so only summation order differs, ~1e-6), and the 8-token
// greedy continuation (top-2 gap >= 0.05 at every step). Skipped until the script has been run
// on the GPU machine and its output committed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "kv/format.h"
#include "kv/page_table.h"
#include "model/config.h"
#include "model/model.h"
#include "test_paths.h"

namespace ninfer {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<fs::path> quant_dirs() {
  std::vector<fs::path> out;
  const fs::path root = test::test_data_dir() / "tiny-quant";
  if (!fs::exists(root)) return out;
  for (const auto& e : fs::directory_iterator(root))
    if (fs::exists(e.path() / "golden.json")) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(QuantGoldens, CpuMatchesTransformersOnDequantisedWeights) {
  const std::vector<fs::path> dirs = quant_dirs();
  if (dirs.empty())
    GTEST_SKIP() << "tests/data/tiny-quant has no checkpoints yet (run scripts/make_quant_checkpoints.py on a "
                    "machine with torch + transformers)";
  for (const fs::path& d : dirs) {
    SCOPED_TRACE(d.filename().string());
    auto m = load_model(d);
    EXPECT_FALSE(m->weights.quantised.empty());
    const json g = json::parse(read_file(d / "golden.json"));
    auto be = make_cpu_backend(*m);
    const int vocab = m->config.vocab;
    for (const json& p : g["prompts"]) {
      const std::vector<int32_t> ids = p["ids"].get<std::vector<int32_t>>();
      const std::vector<int32_t> want_greedy = p["greedy_ids"].get<std::vector<int32_t>>();
      PageTable pt(16);
      be->init_kv(find_kv_format("f32"), pt.n_pages());
      const int32_t seq = pt.create_sequence();
      ASSERT_TRUE(pt.reserve(seq, int64_t(ids.size()) + int64_t(want_greedy.size())));
      const auto& bt = pt.block_table(seq);
      std::vector<float> all;
      SeqChunk ch{ids.data(), int(ids.size()), 0, bt.data(), int(bt.size()), true};
      be->forward({&ch, 1}, all);
      const auto& pos = p["positions"];
      for (size_t i = 0; i < pos.size(); ++i) {
        const int t = pos[i].get<int>();
        double mx = 0, amax = 0;
        for (int v = 0; v < vocab; ++v) {
          const double w = p["logits"][i][size_t(v)].get<double>();
          mx = std::max(mx, std::fabs(double(all[size_t(t) * vocab + size_t(v)]) - w));
          amax = std::max(amax, std::fabs(w));
        }
        EXPECT_LT(mx / amax, 1e-3) << "position " << t;
      }
      std::vector<float> last(all.end() - vocab, all.end());
      std::vector<int32_t> greedy;
      int at = int(ids.size());
      for (size_t i = 0; i < want_greedy.size(); ++i) {
        const int32_t best = int32_t(std::max_element(last.begin(), last.end()) - last.begin());
        greedy.push_back(best);
        SeqChunk dc{&best, 1, at++, bt.data(), int(bt.size()), false};
        be->forward({&dc, 1}, last);
      }
      EXPECT_EQ(greedy, want_greedy);
    }
  }
}

}  // namespace
}  // namespace ninfer
