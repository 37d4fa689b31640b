// config.json parsing: the supported architectures and both rope layouts, and clear errors.
#include <gtest/gtest.h>

#include "core/error.h"
#include "model/config.h"
#include "test_paths.h"

namespace ninfer {
namespace {

std::string base_config(const std::string& arch, const std::string& extra) {
  return R"({"architectures": [")" + arch + R"("], "hidden_size": 512, "num_hidden_layers": 2,
    "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 1024,
    "vocab_size": 1000, "rms_norm_eps": 1e-6, "max_position_embeddings": 2048)" + extra + "}";
}

void expect_error(const std::string& json, const std::string& needle) {
  try {
    parse_model_config(json, "config.json");
    FAIL() << "expected an error mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos) << e.what();
  }
}

TEST(Config, Transformers4RopeThetaAndDefaults) {
  ModelConfig c = parse_model_config(base_config("LlamaForCausalLM", R"(, "rope_theta": 500000.0)"), "config.json");
  EXPECT_EQ(c.arch, Arch::Llama);
  EXPECT_EQ(c.head_dim, 64);  // hidden / heads
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.tie_embeddings);
}

TEST(Config, Transformers5RopeParameters) {
  ModelConfig c = parse_model_config(
      base_config("Qwen3ForCausalLM", R"(, "head_dim": 128, "tie_word_embeddings": true,
        "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"})"),
      "config.json");
  EXPECT_EQ(c.arch, Arch::Qwen3);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_TRUE(c.tie_embeddings);
}

TEST(Config, Qwen2HasQkvBiasMistralParses) {
  EXPECT_TRUE(parse_model_config(base_config("Qwen2ForCausalLM", ""), "config.json").qkv_bias);
  ModelConfig m = parse_model_config(base_config("MistralForCausalLM", R"(, "sliding_window": null)"), "config.json");
  EXPECT_EQ(m.arch, Arch::Mistral);
}

TEST(Config, Errors) {
  expect_error(base_config("GPT2LMHeadModel", ""), "unsupported architecture 'GPT2LMHeadModel'");
  expect_error("{\"architectures\": [\"LlamaForCausalLM\"], ", "invalid JSON");
  expect_error(base_config("LlamaForCausalLM", R"(, "rope_parameters": {"rope_theta": 1e4, "rope_type": "yarn"})"),
               "rope_type 'yarn'");
  expect_error(base_config("LlamaForCausalLM", R"(, "rope_scaling": {"rope_type": "llama3", "factor": 8.0})"),
               "rope_scaling type 'llama3'");
  expect_error(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 512})", "num_hidden_layers");
  expect_error(base_config("LlamaForCausalLM", R"(, "num_key_value_heads": 3)"), "num_key_value_heads");
  expect_error(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": "big", "num_hidden_layers": 2})",
               "hidden_size");
}

TEST(Config, ReferenceModels) {
  NINFER_REQUIRE_SHARED();
  ModelConfig q = load_model_config(test::model_dir("ref-qwen3-d256"));
  EXPECT_EQ(q.head_dim, 256);
  EXPECT_EQ(q.n_kv_heads, 2);
  EXPECT_TRUE(q.qk_norm);
  EXPECT_EQ(q.n_params(), 29369856);  // golden.json "params"
  ModelConfig l = load_model_config(test::model_dir("ref-llama-d128"));
  EXPECT_EQ(l.head_dim, 128);
  EXPECT_EQ(l.n_params(), 26221056);
  ModelConfig s = load_model_config(test::model_dir("stories260k"));
  EXPECT_EQ(s.head_dim, 8);
  EXPECT_EQ(s.bos_id, 1);
}

}  // namespace
}  // namespace ninfer
