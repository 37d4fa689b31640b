// config.json parsing: the supported architectures and both rope layouts, and clear errors.
#include <gtest/gtest.h>

#include "core/error.h"
#include "model/config.h"
#include "model/family.h"
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
  EXPECT_STREQ(c.family->name, "llama");
  EXPECT_EQ(c.head_dim, 64);  // hidden / heads
  EXPECT_DOUBLE_EQ(c.ropes.at(0).theta, 500000.0);
  EXPECT_EQ(c.ropes[0].rotary_dim, 64);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.tie_embeddings);
}

TEST(Config, Transformers5RopeParameters) {
  ModelConfig c = parse_model_config(
      base_config("Qwen3ForCausalLM", R"(, "head_dim": 128, "tie_word_embeddings": true,
        "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"})"),
      "config.json");
  EXPECT_EQ(c.architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_DOUBLE_EQ(c.ropes.at(0).theta, 1e6);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_TRUE(c.tie_embeddings);
}

TEST(Config, Qwen2HasQkvBiasMistralParses) {
  EXPECT_TRUE(parse_model_config(base_config("Qwen2ForCausalLM", ""), "config.json").qkv_bias);
  ModelConfig m = parse_model_config(base_config("MistralForCausalLM", R"(, "sliding_window": null)"), "config.json");
  EXPECT_EQ(m.max_window(), 0);
}

TEST(Config, Errors) {
  expect_error(base_config("GPT2LMHeadModel", ""), "unsupported architecture 'GPT2LMHeadModel'");
  expect_error("{\"architectures\": [\"LlamaForCausalLM\"], ", "invalid JSON");
  expect_error(base_config("LlamaForCausalLM", R"(, "rope_parameters": {"rope_theta": 1e4, "rope_type": "ntk-by-parts"})"),
               "rope_parameters.rope_type' 'ntk-by-parts' is not a supported rope type");
  expect_error(base_config("LlamaForCausalLM", R"(, "rope_scaling": {"rope_type": "llama3", "factor": 8.0})"),
               "missing field 'rope_scaling.low_freq_factor'");
  expect_error(base_config("LlamaForCausalLM", R"(, "rope_scaling": {"type": "linear", "factor": "4"})"),
               "field 'rope_scaling.factor' must be a number");
  expect_error(base_config("Qwen3MoeForCausalLM", R"(, "num_experts": 4, "num_experts_per_tok": 8, "moe_intermediate_size": 64)"),
               "num_experts_per_tok");
  expect_error(base_config("Gemma3ForCausalLM", R"(, "layer_types": ["sliding_attention", "linear_attention"], "sliding_window": 8)"),
               "layer_types' entry 1 is 'linear_attention'");
  expect_error(base_config("LlamaForCausalLM", R"(, "quantization_config": {"quant_method": "hqq", "bits": 4})"),
               "field 'quantization_config.quant_method' 'hqq' is not supported (supported: fp8, compressed-tensors, awq, gptq)");
  expect_error(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 512})", "num_hidden_layers");
  expect_error(base_config("LlamaForCausalLM", R"(, "num_key_value_heads": 3)"), "num_key_value_heads");
  expect_error(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": "big", "num_hidden_layers": 2})",
               "hidden_size");
  // Found by fuzz_model_config: a number past double range threw nlohmann's out_of_range, which
  // escaped the parser as a foreign exception.
  expect_error(base_config("LlamaForCausalLM", R"(, "initializer_range": 1e400)"), "invalid JSON");
  // Token ids past int32 would wrap in the conversion: refused naming the field.
  expect_error(base_config("LlamaForCausalLM", R"(, "eos_token_id": [2, 4294967298])"), "'eos_token_id' must hold token ids");
  expect_error(base_config("LlamaForCausalLM", R"(, "eos_token_id": -1)"), "'eos_token_id' must hold token ids");
  // Found by fuzz_model_config: query_pre_attn_scalar 0 gave an infinite score scale.
  expect_error(base_config("Gemma2ForCausalLM", R"(, "query_pre_attn_scalar": 0)"),
               "field 'query_pre_attn_scalar' must be a positive number, got 0");
  expect_error(base_config("Gemma2ForCausalLM", R"(, "query_pre_attn_scalar": -4)"), "query_pre_attn_scalar");
  // Shapes whose products overflow: q_dim() in int, the parameter count in int64.
  expect_error(base_config("LlamaForCausalLM", R"(, "head_dim": 1073741824)"), "num_attention_heads 8 x head_dim");
  expect_error(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 512, "num_hidden_layers": 1073741824,
    "num_attention_heads": 8, "intermediate_size": 1024, "vocab_size": 1000, "rms_norm_eps": 1e-6})",
               "num_hidden_layers' = 1073741824 is more than the 4096 layers");
  expect_error(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 1073741824, "num_hidden_layers": 4096,
    "num_attention_heads": 1, "head_dim": 1024, "intermediate_size": 1073741824, "vocab_size": 1073741824,
    "rms_norm_eps": 1e-6})",
               "parameters: out of range");
}

TEST(Config, RopeTypesAndWindows) {
  ModelConfig l3 = parse_model_config(
      base_config("LlamaForCausalLM", R"(, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}, "rope_theta": 500000.0)"),
      "config.json");
  EXPECT_EQ(l3.ropes[0].type, RopeType::Llama3);
  EXPECT_EQ(l3.ropes[0].original_max, 8192);
  ModelConfig q2 = parse_model_config(
      base_config("Qwen2ForCausalLM", R"(, "use_sliding_window": true, "sliding_window": 16, "max_window_layers": 1)"),
      "config.json");
  EXPECT_EQ(q2.layers[0].window, 0);
  EXPECT_EQ(q2.layers[1].window, 16);
  ModelConfig g2 = parse_model_config(base_config("Gemma2ForCausalLM", R"(, "sliding_window": 8, "head_dim": 64,
        "query_pre_attn_scalar": 256, "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0)"),
                                      "config.json");
  EXPECT_EQ(g2.layers[0].window, 8);  // even layers slide
  EXPECT_EQ(g2.layers[1].window, 0);
  EXPECT_FLOAT_EQ(g2.score_scale(), 1.0f / 16.0f);
  EXPECT_FLOAT_EQ(g2.attn_softcap, 50.0f);
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
