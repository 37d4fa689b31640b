// Quantised checkpoints end to end on the CPU backend: a tiny Llama / Qwen3 written in each
// published layout (tests/common/quant_test_util.h) gives the logits of its fp32 dequantised
// twin (the transformers-with-dequantised-weights oracle, built here without torch) to 1e-4 of
// the logit range; `--weights fp8|int8|int4` on a dense checkpoint stays close to it (KL and
// max |diff| printed, bounds derived below).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "kv/format.h"
#include "kv/page_table.h"
#include "model/config.h"
#include "model/model.h"
#include "quant_test_util.h"
#include "test_paths.h"

namespace ninfer {
namespace {

namespace fs = std::filesystem;

// All logits [n, vocab] of one prompt in one chunk, f32 cache.
std::vector<float> prompt_logits(const Model& m, const std::vector<int32_t>& ids) {
  auto be = make_cpu_backend(m);
  PageTable pt(8);
  be->init_kv(find_kv_format("f32"), pt.n_pages());
  const int32_t seq = pt.create_sequence();
  EXPECT_TRUE(pt.reserve(seq, int64_t(ids.size())));
  SeqChunk ch{ids.data(), int(ids.size()), 0, pt.block_table(seq).data(), int(pt.block_table(seq).size()), true};
  std::vector<float> logits;
  be->forward({&ch, 1}, logits);
  return logits;
}

std::vector<int32_t> prompt(int vocab, int n) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(int32_t((i * 37 + 11) % vocab));
  return ids;
}

struct Compare {
  double max_diff = 0, max_ref = 0, kl = 0;  // kl: mean over rows of KL(ref || got)
};

Compare compare(const std::vector<float>& ref, const std::vector<float>& got, int vocab) {
  Compare c;
  const size_t rows = ref.size() / size_t(vocab);
  for (size_t r = 0; r < rows; ++r) {
    const float* a = ref.data() + r * size_t(vocab);
    const float* b = got.data() + r * size_t(vocab);
    double ma = -INFINITY, mb = -INFINITY;
    for (int i = 0; i < vocab; ++i) {
      ma = std::max(ma, double(a[i]));
      mb = std::max(mb, double(b[i]));
      c.max_diff = std::max(c.max_diff, std::fabs(double(a[i]) - b[i]));
      c.max_ref = std::max(c.max_ref, std::fabs(double(a[i])));
    }
    double za = 0, zb = 0;
    for (int i = 0; i < vocab; ++i) {
      za += std::exp(a[i] - ma);
      zb += std::exp(b[i] - mb);
    }
    double kl = 0;
    for (int i = 0; i < vocab; ++i) {
      const double la = a[i] - ma - std::log(za), lb = b[i] - mb - std::log(zb);
      kl += std::exp(la) * (la - lb);
    }
    c.kl += kl / double(rows);
  }
  return c;
}

struct Case {
  const char* name;
  std::string arch;
  std::string quant_json;
  std::function<test::QuantOut(const std::string&, const test::Mat&)> quantise;
};

std::vector<Case> cases() {
  using test::Mat;
  const std::string ct = R"({"quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"],
    "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "symmetric": true,
    "strategy": "channel"}}}})";
  auto gptq = [](int g, bool sym, bool act, bool v1) {
    return std::string(R"({"quant_method": "gptq", "bits": 4, "group_size": )") + std::to_string(g) +
           R"(, "sym": )" + (sym ? "true" : "false") + R"(, "desc_act": )" + (act ? "true" : "false") +
           R"(, "checkpoint_format": ")" + (v1 ? "gptq" : "gptq_v2") + "\"}";
  };
  return {
      {"fp8_block_qwen3", "Qwen3ForCausalLM",
       R"({"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]})",
       [](const std::string& b, const Mat& m) { return test::quant_fp8(b, m, 128, 128, false, "weight_scale_inv", "BF16"); }},
      {"fp8_tensor_llama", "LlamaForCausalLM", R"({"quant_method": "fp8", "activation_scheme": "static"})",
       [](const std::string& b, const Mat& m) { return test::quant_fp8(b, m, 0, 0, false, "weight_scale"); }},
      {"ct_fp8_channel_llama", "LlamaForCausalLM", ct,
       [](const std::string& b, const Mat& m) { return test::quant_fp8(b, m, 0, 0, true, "weight_scale"); }},
      {"awq_gemm_llama", "LlamaForCausalLM",
       R"({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": true, "version": "gemm"})",
       [](const std::string& b, const Mat& m) { return test::quant_awq(b, m, 128); }},
      {"gptq_sym_qwen3", "Qwen3ForCausalLM", gptq(128, true, false, true),
       [](const std::string& b, const Mat& m) { return test::quant_gptq(b, m, 128, true, false, true); }},
      {"gptq_asym_g32_llama", "LlamaForCausalLM", gptq(32, false, false, true),
       [](const std::string& b, const Mat& m) { return test::quant_gptq(b, m, 32, false, false, true); }},
      {"gptq_asym_desc_act_g64_qwen3", "Qwen3ForCausalLM", gptq(64, false, true, true),
       [](const std::string& b, const Mat& m) { return test::quant_gptq(b, m, 64, false, true, true); }},
      {"gptq_v2_desc_act_llama", "LlamaForCausalLM", gptq(128, false, true, false),
       [](const std::string& b, const Mat& m) { return test::quant_gptq(b, m, 128, false, true, false); }},
  };
}

class QuantLogits : public ::testing::TestWithParam<size_t> {};

TEST_P(QuantLogits, MatchDequantisedFp32Twin) {
  const Case c = cases()[GetParam()];
  SCOPED_TRACE(c.name);
  const fs::path root = test::fresh_dir(std::string("qlogits_") + c.name);
  test::TinySpec spec;
  spec.arch = c.arch;
  test::write_tiny_pair(spec, c.quant_json, c.quantise, root / "q", root / "d");
  auto q = load_model(root / "q");
  auto d = load_model(root / "d");
  EXPECT_EQ(q->weights.quantised.size(), size_t(spec.layers) * 7);
  const std::vector<int32_t> ids = prompt(spec.vocab, 40);
  const std::vector<float> lq = prompt_logits(*q, ids), ld = prompt_logits(*d, ids);
  ASSERT_EQ(lq.size(), ld.size());
  for (float v : lq) ASSERT_TRUE(std::isfinite(v));
  const Compare cmp = compare(ld, lq, spec.vocab);
  std::printf("[ quant ] %-30s max |diff| %.3g (logit range %.3g), KL %.3g\n", c.name, cmp.max_diff, cmp.max_ref, cmp.kl);
  // NOTE: both runs multiply the same fp32 weights (the dequantised values are exact fp32
  // products) with the same kernel, so they agree bit for bit; 1e-4 of the range is the
  // issue's bar and leaves room for a future change of summation order.
  EXPECT_LE(cmp.max_diff, 1e-4 * cmp.max_ref);
  EXPECT_GT(cmp.max_ref, 2.0);  // logits far from uniform
  fs::remove_all(root);
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantLogits, ::testing::Range<size_t>(0, 8),
                         [](const ::testing::TestParamInfo<size_t>& i) { return std::string(cases()[i.param].name); });

// --weights on dense checkpoints: the tiny random model above (bounded) and the tiny models of
// tests/data (printed; their random weights make peaky, fragile logits, docs/NOTES.md, so only
// the ordering int8 < fp8 < int4 is required there). Bounds on the tiny model, ~3x the
// measured KL (fp8 0.0082, int8 0.00015, int4 0.055): fp8 per channel moves each weight by up
// to 2^-4 relative, int8 by amax / 254, int4 by range / 30. A wrong scale or a swapped nibble
// order gives KL ~1.
TEST(QuantLogits, WeightsAtLoadCloseToDense) {
  std::vector<fs::path> dirs;
  const fs::path root = test::fresh_dir("qlogits_at_load");
  test::write_tiny_pair(test::TinySpec{}, "", [](const std::string&, const test::Mat&) { return test::QuantOut{}; },
                        root / "unused", root / "tiny");
  dirs.push_back(root / "tiny");
  for (const char* t : {"llama-rope-default", "qwen2-sliding", "gemma3", "mixtral"})
    if (fs::exists(test::test_data_dir() / "tiny" / t / "config.json")) dirs.push_back(test::test_data_dir() / "tiny" / t);
  const double kl_bound[3] = {0.03, 0.0005, 0.2};  // fp8, int8, int4 (weight_formats() order)
  for (const fs::path& dir : dirs) {
    auto dense = load_model(dir);
    const std::vector<int32_t> ids = prompt(dense->config.vocab, 32);
    const std::vector<float> ref = prompt_logits(*dense, ids);
    std::map<WeightFormatId, double> kl;
    for (const WeightFormat* f : weight_formats()) {
      auto q = load_model(dir, 0, f);
      EXPECT_FALSE(q->weights.quantised.empty());
      EXPECT_LT(q->weight_bytes, dense->weight_bytes);
      const Compare c = compare(ref, prompt_logits(*q, ids), dense->config.vocab);
      std::printf("[ --weights ] %-20s %-6s KL %.3g, max |diff| %.3g of logit range %.3g\n",
                  dir.filename().string().c_str(), f->option, c.kl, c.max_diff, c.max_ref);
      ASSERT_TRUE(std::isfinite(c.kl));
      kl[f->id] = c.kl;
      if (dir == root / "tiny") EXPECT_LT(c.kl, kl_bound[size_t(f->id)]) << f->option;
    }
    EXPECT_LT(kl[WeightFormatId::Int8], kl[WeightFormatId::Fp8]) << dir;
    EXPECT_LT(kl[WeightFormatId::Fp8], kl[WeightFormatId::Int4]) << dir;
  }
  fs::remove_all(root);
}

// The reference model (../shared): --weights fp8 / int8 / int4 against its bf16 weights on
// golden.json's prompts (all positions), KL and max |diff| printed. Bounds ~3x the KL measured
// on 16 windows of sotu_dev (perplexity --kl-ref-weights bf16: fp8 0.0062, int8 0.00054, int4
// 0.089; README).
TEST(QuantLogits, ReferenceModelWeightsAtLoad) {
  NINFER_REQUIRE_MODEL("ref-qwen3-d256");
  const fs::path dir = test::model_dir("ref-qwen3-d256");
  const nlohmann::json g = nlohmann::json::parse(read_file(dir / "golden.json"));
  auto dense = load_model(dir);
  const double kl_bound[3] = {0.02, 0.002, 0.3};
  for (const WeightFormat* f : weight_formats()) {
    auto q = load_model(dir, 0, f);
    Compare all;
    size_t n = 0;
    for (const auto& p : g["prompts"]) {
      const std::vector<int32_t> ids = p["ids"].get<std::vector<int32_t>>();
      const Compare c = compare(prompt_logits(*dense, ids), prompt_logits(*q, ids), dense->config.vocab);
      all.max_diff = std::max(all.max_diff, c.max_diff);
      all.max_ref = std::max(all.max_ref, c.max_ref);
      all.kl += c.kl * double(ids.size());
      n += ids.size();
    }
    all.kl /= double(n);
    std::printf("[ --weights ] ref-qwen3-d256 %-5s KL %.4g, max |diff| %.3g of logit range %.3g, weights %.2f MiB (bf16 %.2f)\n",
                f->option, all.kl, all.max_diff, all.max_ref, double(q->weight_bytes) / 1048576.0,
                double(dense->weight_bytes) / 1048576.0);
    EXPECT_LT(all.kl, kl_bound[size_t(f->id)]) << f->option;
  }
}

}  // namespace
}  // namespace ninfer
