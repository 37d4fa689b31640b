// Quantised weights on the GPU, end to end (issue 27): tiny checkpoints quantised at load
// (--weights fp8|int8|int4) run on the CUDA backend against the CPU backend holding the very
// same quantised weights (the oracle: WeightFormat::dequant_rows), teacher-forced over the
// golden prompts of tests/data/tiny/<name> plus their greedy continuations: one prefill chunk
// with all logits (the prefill paths: FP8 GEMM or dequantised bf16 tiles, the MoE experts'
// tiles), then the continuation as decode steps (the quantised GEMVs and gathered expert GEMVs,
// CUDA graphs). Models: a dense Llama, Qwen2 (biases, sliding window), Qwen3-MoE (quantised
// router and experts), Qwen3-Next (DeltaNet projections, shared expert).
//
// Criteria, as tests/cuda/test_cuda_tiny.cpp's for the bf16 cache (and why): with split GEMM
// activations and the bf16-tile prefill the GPU computes the CPU's dequantised weights times
// activations to ~fp32, so the mean NLL is within 2 % and the argmax agrees on every row whose
// top-1 beats its top-2 by 10 % of the row's max |logit|. With the FP8 GEMM (activations
// rounded to e4m3 per token: 2^-4 relative per element) only the NLL is held, to 5 % (the
// compressed caches' bound there).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/quant_upload.h"
#include "core/error.h"
#include "cuda_test_util.h"
#include "kv/format.h"
#include "kv/page_table.h"
#include "model/model.h"
#include "runtime/backend_factory.h"
#include "test_paths.h"

namespace ninfer {
namespace {

using nlohmann::json;

std::vector<float> run(Backend& be, const KvFormat& fmt, int vocab, const std::vector<int32_t>& ids,
                       const std::vector<int32_t>& cont) {
  PageTable pt(64, 11);
  be.init_kv(fmt, pt.n_pages());
  be.init_state(1);
  const int32_t seq = pt.create_sequence();
  EXPECT_TRUE(pt.reserve(seq, int64_t(ids.size() + cont.size()) + 1));
  const auto& bt = pt.block_table(seq);
  std::vector<float> all, step;
  SeqChunk ch{ids.data(), int(ids.size()), 0, bt.data(), int(bt.size()), true, 0};
  be.forward({&ch, 1}, all);
  int pos = int(ids.size());
  for (int32_t tok : cont) {
    SeqChunk d{&tok, 1, pos++, bt.data(), int(bt.size()), false, 0};
    be.forward({&d, 1}, step);
    all.insert(all.end(), step.begin(), step.begin() + vocab);
  }
  return all;
}

double nll(const float* row, int vocab, int32_t target) {
  double mx = row[0];
  for (int i = 1; i < vocab; ++i) mx = std::max(mx, double(row[i]));
  double sum = 0;
  for (int i = 0; i < vocab; ++i) sum += std::exp(double(row[i]) - mx);
  return mx + std::log(sum) - row[target];
}

std::string read_text(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void check_quant_model(const std::string& name, const char* weights, bool fp8_gemm) {
  const auto dir = test::test_data_dir() / "tiny" / name;
  auto m = load_model(dir, 0, parse_weights_option(weights));
  ASSERT_FALSE(m->weights.quantised.empty()) << name << " " << weights;
  const json g = json::parse(read_text(dir / "golden.json"));
  CudaBackendOptions opt;
  opt.gemm_mode = fp8_gemm ? CudaGemmMode::Bf16 : CudaGemmMode::Split;
  opt.gemm_mode_from_env = false;
  opt.fp8_gemm = fp8_gemm;
  auto gpu = make_cuda_backend(*m, opt);
  auto cpu = make_cpu_backend(*m, {});
  // The GPU's weight bytes are the quantised ones (codes, scales, zeros as held on the device):
  // well under the bf16 size of the same model.
  EXPECT_LT(gpu->memory().weights, weight_bytes_estimate(m->config, nullptr)) << name << " " << weights;
  const int vocab = m->config.vocab;
  const KvFormat& fmt = find_kv_format("bf16");
  for (const json& p : g["prompts"]) {
    const std::vector<int32_t> ids = p["ids"].get<std::vector<int32_t>>();
    const std::vector<int32_t> cont = p["greedy_ids"].get<std::vector<int32_t>>();
    std::vector<int32_t> seq = ids;
    seq.insert(seq.end(), cont.begin(), cont.end());
    const std::vector<float> want = run(*cpu, fmt, vocab, ids, cont);
    const std::vector<float> got = run(*gpu, fmt, vocab, ids, cont);
    ASSERT_EQ(got.size(), want.size());
    const size_t rows = want.size() / size_t(vocab);
    double worst = 0, nll_cpu = 0, nll_gpu = 0;
    int disagree = 0, confident = 0;
    for (size_t t = 0; t < rows; ++t) {
      const float* gw = got.data() + t * vocab;
      const float* cw = want.data() + t * vocab;
      worst = std::max(worst, test::max_rel_err(gw, cw, vocab));
      if (t + 1 < seq.size()) {
        nll_cpu += nll(cw, vocab, seq[t + 1]);
        nll_gpu += nll(gw, vocab, seq[t + 1]);
      }
      std::vector<float> sorted(cw, cw + vocab);
      std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
      float amax = 0;
      for (int i = 0; i < vocab; ++i) amax = std::max(amax, std::fabs(cw[i]));
      if (sorted[0] - sorted[1] > 0.1f * amax) {
        ++confident;
        if (std::max_element(gw, gw + vocab) - gw != std::max_element(cw, cw + vocab) - cw) ++disagree;
      }
    }
    const double rel_nll = std::fabs(nll_gpu - nll_cpu) / nll_cpu;
    std::printf("quant %-18s %-4s %s prompt %4zu: max-abs/max %.4f, NLL cpu %.4f gpu %.4f (%.2f%%), argmax %d/%d differ\n",
                name.c_str(), weights, fp8_gemm ? "fp8-gemm" : "split   ", ids.size(), worst,
                nll_cpu / double(seq.size() - 1), nll_gpu / double(seq.size() - 1), 100 * rel_nll, disagree, confident);
    EXPECT_LT(rel_nll, fp8_gemm ? 0.05 : 0.02) << name << " " << weights << " prompt of " << ids.size();
    if (!fp8_gemm) {
      EXPECT_EQ(disagree, 0) << name << " " << weights << " prompt of " << ids.size();
    }
  }
}

class CudaQuantTiny : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(CudaQuantTiny, GpuMatchesCpuSameQuantisedWeights) {
  NINFER_REQUIRE_GPU();
  const auto& [name, weights] = GetParam();
  check_quant_model(name, weights.c_str(), false);
  if (weights == "fp8") check_quant_model(name, weights.c_str(), true);
}

INSTANTIATE_TEST_SUITE_P(Models, CudaQuantTiny,
                         ::testing::Combine(::testing::Values("llama-rope-default", "qwen2-sliding", "qwen3-moe",
                                                              "qwen3-next"),
                                            ::testing::Values("fp8", "int8", "int4")),
                         [](const auto& info) {
                           std::string s = std::get<0>(info.param) + "_" + std::get<1>(info.param);
                           for (char& c : s)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return s;
                         });

// Host only (runs without a GPU): every projection and expert of these models quantised at load
// packs for the device (no part refused), with the real bytes below the bf16 ones.
TEST(CudaQuantPack, TinyModelsPack) {
  for (const char* name : {"llama-rope-default", "qwen2-sliding", "qwen3-moe", "qwen3-next"})
    for (const char* weights : {"fp8", "int8", "int4"}) {
      SCOPED_TRACE(::testing::Message() << name << " " << weights);
      auto m = load_model(test::test_data_dir() / "tiny" / name, 0, parse_weights_option(weights));
      size_t packed = 0, dense = 0;
      auto pack = [&](const ProjWeights& p) {
        if (!p) return;
        std::vector<const QuantMatrix*> parts;
        for (const ProjWeights::Part& part : p.parts) {
          ASSERT_NE(part.w.q, nullptr);
          parts.push_back(part.w.q);
        }
        const QuantHost h = pack_quant_parts(parts);
        EXPECT_EQ(h.w.n, p.out());
        EXPECT_EQ(h.w.k, p.in);
        packed += h.codes.size() + h.scales.size() * 4 + h.zeros.size() + h.g_idx.size() * 4;
        dense += size_t(p.out() * p.in) * 2;
      };
      for (const LayerWeights& L : m->weights.layers) {
        for (const ProjWeights& p : L.proj) pack(p);
        for (const ExpertWeights& e : L.experts) {
          pack(e.gate_up);
          pack(e.down);
        }
      }
      EXPECT_GT(packed, 0u);
      EXPECT_LT(packed, dense);
    }
}

// --device cuda and auto take quantised weights now (they were refused before issue 27's kernels).
TEST(CudaQuant, DeviceCudaAcceptsQuantisedWeights) {
  NINFER_REQUIRE_GPU();
  auto m = load_model(test::test_data_dir() / "tiny" / "llama-rope-default", 0, parse_weights_option("int4"));
  EXPECT_EQ(make_backend(*m, "cuda", "bf16", 0, true)->name(), "cuda");
  EXPECT_EQ(make_backend(*m, "auto", "bf16", 0, true)->name(), "cuda");
}

}  // namespace
}  // namespace ninfer
