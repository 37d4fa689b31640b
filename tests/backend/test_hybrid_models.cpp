// The hybrids (Qwen3-Next, Qwen3.5 dense and MoE) on the CPU backend, with random weights of
// small configs of each architecture: the recurrent state carried across calls (a prompt in
// one forward, in chunks, or prefilled then decoded token by token gives the same logits),
// sequences in one batch independent of each other (their own state slots), the fast path
// against the fp32 reference, every KV format, the capacity arithmetic (KV for the attention
// layers only, state per sequence), and bad configs and checkpoints named in the error.
// Agreement with transformers is tests/backend/test_tiny_goldens.cpp's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <unistd.h>

#include "backend/backend.h"
#include "core/error.h"
#include "kv/capacity.h"
#include "kv/format.h"
#include "kv/page_table.h"
#include "model/config.h"
#include "model/model.h"
#include "model/random_weights.h"
#include "test_paths.h"

namespace ninfer {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json text_fields() {
  return {{"vocab_size", 256},
          {"hidden_size", 128},
          {"num_hidden_layers", 4},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"head_dim", 64},
          {"rms_norm_eps", 1e-6},
          {"max_position_embeddings", 1024},
          {"linear_conv_kernel_dim", 4},
          {"linear_key_head_dim", 32},
          {"linear_value_head_dim", 32},
          {"linear_num_key_heads", 2},
          {"linear_num_value_heads", 4},
          {"layer_types", {"linear_attention", "linear_attention", "full_attention", "linear_attention"}},
          {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 1e7}, {"partial_rotary_factor", 0.25}}}};
}

json config_for(const std::string& arch) {
  json t = text_fields();
  if (arch == "Qwen3NextForCausalLM" || arch == "Qwen3_5MoeForConditionalGeneration") {
    t["num_experts"] = 4;
    t["num_experts_per_tok"] = 2;
    t["moe_intermediate_size"] = 32;
    t["shared_expert_intermediate_size"] = 48;
  }
  if (arch == "Qwen3NextForCausalLM") t["intermediate_size"] = 64;
  if (arch == "Qwen3_5ForConditionalGeneration") t["intermediate_size"] = 96;
  if (arch.find("ForConditionalGeneration") != std::string::npos)
    return {{"architectures", {arch}}, {"text_config", t}, {"tie_word_embeddings", false}};
  t["architectures"] = {arch};
  return t;
}

fs::path write_config(const std::string& tag, const json& c) {
  const fs::path d = fs::temp_directory_path() / ("ninfer_hybrid_" + tag + "_" + std::to_string(::getpid()));
  fs::create_directories(d);
  std::ofstream(d / "config.json") << c.dump(2);
  return d;
}

const std::vector<std::string> kArchs = {"Qwen3NextForCausalLM", "Qwen3_5ForConditionalGeneration",
                              "Qwen3_5MoeForConditionalGeneration"};

struct Fixture {
  std::unique_ptr<Model> model;
  std::unique_ptr<Backend> be;
  PageTable pages{64, 3};
};

Fixture make(const std::string& arch, CpuKernels k = CpuKernels::Fast, const char* kv = "f32") {
  Fixture f;
  f.model = load_model(write_config(arch, config_for(arch)), /*random_weights_seed=*/11);
  CpuBackendOptions o;
  o.kernels = k;
  f.be = make_cpu_backend(*f.model, o);
  f.be->init_kv(find_kv_format(kv), f.pages.n_pages());
  f.be->init_state(4);
  return f;
}

std::vector<int32_t> prompt(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(int32_t(rng() % 250) + 3);
  return ids;
}

// Feeds ids to sequence `seq` (state slot `slot`) in calls of the given sizes; all logits.
std::vector<float> feed(Fixture& f, int32_t seq, int slot, const std::vector<int32_t>& ids, const std::vector<int>& sizes) {
  EXPECT_TRUE(f.pages.reserve(seq, int64_t(ids.size())));
  const auto& bt = f.pages.block_table(seq);
  std::vector<float> all, part;
  int p = 0;
  for (int n : sizes) {
    SeqChunk ch{ids.data() + p, n, p, bt.data(), int(bt.size()), true, slot};
    f.be->forward({&ch, 1}, part);
    all.insert(all.end(), part.begin(), part.end());
    p += n;
  }
  EXPECT_EQ(p, int(ids.size()));
  return all;
}

double rel_err(const float* a, const float* b, size_t n) {
  double mx = 0, amax = 0;
  for (size_t i = 0; i < n; ++i) {
    EXPECT_TRUE(std::isfinite(a[i]));
    mx = std::max(mx, double(std::abs(a[i] - b[i])));
    amax = std::max(amax, double(std::abs(b[i])));
  }
  return mx / amax;
}

class Hybrid : public ::testing::TestWithParam<std::string> {};

TEST_P(Hybrid, StateCarriesAcrossCalls) {
  Fixture f = make(GetParam());
  const std::vector<int32_t> ids = prompt(150, 5);
  const size_t V = size_t(f.model->config.vocab);
  const std::vector<float> one = feed(f, f.pages.create_sequence(), 0, ids, {150});
  const std::vector<float> chunked = feed(f, f.pages.create_sequence(), 1, ids, {37, 37, 37, 37, 2});
  std::vector<int> decode{100};
  decode.insert(decode.end(), 50, 1);
  const std::vector<float> decoded = feed(f, f.pages.create_sequence(), 2, ids, decode);
  ASSERT_EQ(one.size(), 150 * V);
  for (size_t t : {size_t(0), size_t(36), size_t(37), size_t(99), size_t(100), size_t(149)}) {
    EXPECT_LT(rel_err(chunked.data() + t * V, one.data() + t * V, V), 1e-4) << "chunked, token " << t;
    EXPECT_LT(rel_err(decoded.data() + t * V, one.data() + t * V, V), 1e-4) << "decoded, token " << t;
  }
  // A reused slot starts over: a chunk at position 0 ignores whatever the slot held.
  const std::vector<float> again = feed(f, f.pages.create_sequence(), 1, ids, {150});
  EXPECT_LT(rel_err(again.data() + 149 * V, one.data() + 149 * V, V), 1e-6);
}

TEST_P(Hybrid, SequencesInOneBatchKeepTheirOwnState) {
  Fixture f = make(GetParam());
  const size_t V = size_t(f.model->config.vocab);
  const std::vector<int32_t> a = prompt(50, 1), b = prompt(30, 2);
  const std::vector<float> alone_a = feed(f, f.pages.create_sequence(), 0, a, {50});
  const std::vector<float> alone_b = feed(f, f.pages.create_sequence(), 1, b, {30});
  const int32_t sa = f.pages.create_sequence(), sb = f.pages.create_sequence();
  ASSERT_TRUE(f.pages.reserve(sa, 50) && f.pages.reserve(sb, 30));
  const auto &ta = f.pages.block_table(sa), &tb = f.pages.block_table(sb);
  SeqChunk ch[2] = {{a.data(), 50, 0, ta.data(), int(ta.size()), false, 2},
                    {b.data(), 30, 0, tb.data(), int(tb.size()), false, 3}};
  std::vector<float> both;
  f.be->forward(ch, both);
  ASSERT_EQ(both.size(), 2 * V);
  EXPECT_LT(rel_err(both.data(), alone_a.data() + 49 * V, V), 1e-5);
  EXPECT_LT(rel_err(both.data() + V, alone_b.data() + 29 * V, V), 1e-5);
}

TEST_P(Hybrid, FastPathMatchesReferenceAndEveryKvFormatRuns) {
  const std::vector<int32_t> ids = prompt(90, 9);
  Fixture ref = make(GetParam(), CpuKernels::Reference);
  const size_t V = size_t(ref.model->config.vocab);
  const std::vector<float> want = feed(ref, ref.pages.create_sequence(), 0, ids, {90});
  Fixture fast = make(GetParam());
  const std::vector<float> got = feed(fast, fast.pages.create_sequence(), 0, ids, {40, 50});
  for (size_t t : {size_t(0), size_t(45), size_t(89)})
    EXPECT_LT(rel_err(got.data() + t * V, want.data() + t * V, V), 1e-3) << "token " << t;
  for (const KvFormat* fmt : kv_formats()) {
    if (ref.model->config.head_dim % fmt->head_dim_multiple != 0) continue;
    Fixture q = make(GetParam(), CpuKernels::Fast, std::string(fmt->name).c_str());
    const std::vector<float> lg = feed(q, q.pages.create_sequence(), 0, ids, {60, 30});
    // Rounded K/V move the logits a little; the state layers are exact in every format.
    EXPECT_LT(rel_err(lg.data() + 89 * V, want.data() + 89 * V, V), 0.25) << fmt->name;
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, Hybrid, ::testing::ValuesIn(kArchs), [](const auto& info) { return info.param; });

TEST(HybridConfig, CapacityCountsAttentionLayersAndState) {
  NINFER_REQUIRE_SHARED();
  const fs::path p = test::shared_dir() / "real-configs" / "Qwen3.5-35B-A3B" / "config.json";
  if (!fs::exists(p)) GTEST_SKIP() << p << " not found";
  const ModelConfig c = load_model_config(p.parent_path());
  EXPECT_EQ(c.n_layers, 40);
  EXPECT_EQ(c.n_attention_layers(), 10);
  EXPECT_EQ(c.n_deltanet_layers(), 30);
  EXPECT_TRUE(c.attn_gate);
  EXPECT_EQ(c.ropes[0].rotary_dim, 64) << "partial_rotary_factor 0.25 of head_dim 256";
  // KV: 10 layers x 2 kv heads x 256 dims x (K + V) x 2 bytes per token in bf16.
  EXPECT_EQ(kv_bytes_per_token(c, find_kv_format("bf16")), size_t(10) * 2 * 256 * 2 * 2);
  // State: 30 layers x (3 conv rows x 8192 channels + 32 heads x 128 x 128) fp32.
  EXPECT_EQ(c.state_bytes(), size_t(30) * (3 * 8192 + 32 * 128 * 128) * 4);
  // 256 experts of 3 x 2048 x 512 and a shared expert alike on 40 layers: ~35B in all. Active per
  // token: 40 x (8 + 1) experts x 3.1M + routers 0.5M = 1.15B, 10 gated attention layers x 27.3M +
  // 30 DeltaNet layers x 33.7M = 1.28B, embedding and lm_head 2 x 248320 x 2048 = 1.02B.
  EXPECT_NEAR(double(c.n_params()) / 1e9, 34.7, 0.6);
  EXPECT_NEAR(double(c.n_active_params()) / 1e9, 1.15 + 1.28 + 1.02, 0.03);
  CapacityInputs in;
  in.memory = size_t(24) << 30;
  in.weights = size_t(10) << 30;
  in.page_bytes = kv_page_bytes(c, find_kv_format("bf16"));
  in.max_context = 4096;
  in.state_slots = 4;
  in.state_slot_bytes = c.state_bytes();
  const CapacityPlan plan = plan_capacity(in);
  const size_t avail = in.memory - in.weights - capacity_headroom(in.memory) - 4 * c.state_bytes();
  EXPECT_EQ(plan.pages, int64_t(avail / in.page_bytes));
  EXPECT_NE(capacity_line(plan, find_kv_format("bf16")).find("| state 4 x 62.8 MiB |"), std::string::npos)
      << capacity_line(plan, find_kv_format("bf16"));
}

std::string config_error(const json& c) {
  try {
    parse_model_config(c.dump(), "x/config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(HybridConfig, BadConfigsNameTheField) {
  json c = config_for("Qwen3NextForCausalLM");
  c["layer_types"] = {"linear_attention", "full_attention"};
  std::string e = config_error(c);
  EXPECT_NE(e.find("x/config.json: field 'layer_types' must be a list of 4 layer types"), std::string::npos) << e;
  c = config_for("Qwen3_5ForConditionalGeneration");
  c["text_config"]["layer_types"][1] = "mamba";
  e = config_error(c);
  EXPECT_NE(e.find("field 'text_config.layer_types' entry 1 is 'mamba'"), std::string::npos) << e;
  c = config_for("Qwen3_5ForConditionalGeneration");
  c["text_config"]["linear_num_value_heads"] = 5;
  e = config_error(c);
  EXPECT_NE(e.find("'text_config.linear_num_value_heads' = 5 is not a multiple of linear_num_key_heads 2"),
            std::string::npos) << e;
  c = config_for("Qwen3_5ForConditionalGeneration");
  c["text_config"]["attn_output_gate"] = false;
  e = config_error(c);
  EXPECT_NE(e.find("'text_config.attn_output_gate' = false is not supported"), std::string::npos) << e;
  c = config_for("Qwen3_5ForConditionalGeneration");
  c["text_config"]["linear_value_head_dim"] = 1 << 29;  // a width whose products would overflow
  e = config_error(c);
  EXPECT_NE(e.find("'text_config.linear_num_value_heads' x linear_value_head_dim = "), std::string::npos) << e;
  c = config_for("Qwen3_5ForConditionalGeneration");
  c["text_config"]["mtp_num_hidden_layers"] = 100000;
  e = config_error(c);
  EXPECT_NE(e.find("'text_config.mtp_num_hidden_layers' = 100000 is more than 16"), std::string::npos) << e;
  // Found by the model_config fuzzer: a text_config that is not an object met the family defaults.
  c = config_for("Qwen3_5ForConditionalGeneration");
  c["text_config"] = json::array({1, 2});
  e = config_error(c);
  EXPECT_NE(e.find("x/config.json: field 'text_config' must be an object"), std::string::npos) << e;
  c = config_for("Qwen3_5MoeForConditionalGeneration");
  c["text_config"].erase("shared_expert_intermediate_size");
  e = config_error(c);
  EXPECT_NE(e.find("missing field 'text_config.shared_expert_intermediate_size'"), std::string::npos) << e;
}

TEST(HybridConfig, MissingDeltaNetOrMtpTensorIsNamed) {
  json cj = config_for("Qwen3_5ForConditionalGeneration");
  cj["text_config"]["mtp_num_hidden_layers"] = 1;
  const ModelConfig c = parse_model_config(cj.dump(), "x/config.json");
  std::unique_ptr<TensorStore> full = random_tensor_store(c, 3);
  const ModelWeights w = bind_weights(c, *full);
  ASSERT_EQ(w.mtp.layers.size(), 1u);
  EXPECT_EQ(w.mtp.fc.out(), 128);
  EXPECT_EQ(w.mtp.fc.in, 256) << "the MTP head's fc takes concat(embedding, hidden)";
  EXPECT_TRUE(bool(w.mtp.layers[0][Proj::Qkv])) << "an MTP layer is a full-attention layer";
  for (const char* gone : {"model.language_model.layers.1.linear_attn.A_log",
                           "model.language_model.layers.0.linear_attn.in_proj_qkv.weight",
                           "model.language_model.layers.3.linear_attn.conv1d.weight", "mtp.fc.weight",
                           "mtp.layers.0.self_attn.q_proj.weight", "mtp.pre_fc_norm_hidden.weight"}) {
    TensorStore store;
    for (auto& [name, shape] : list_weights(c)) {
      if (name == gone) continue;
      const TensorInfo* t = full->find(name);
      ASSERT_NE(t, nullptr) << name;
      std::unique_ptr<uint8_t[]> data(new uint8_t[t->nbytes]);
      std::memcpy(data.get(), t->data, t->nbytes);
      store.add_owned(*t, std::move(data));
    }
    try {
      bind_weights(c, store);
      ADD_FAILURE() << "no error without " << gone;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("tensor '") + gone + "' is missing"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace ninfer
