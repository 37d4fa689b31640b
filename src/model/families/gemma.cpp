// The Gemma 2 / Gemma 3 family: sandwich norms (a norm before and after each of attention and
// MLP, the block output normed before it joins the residual), every norm multiplying by
// (1 + w), the embedding scaled by sqrt(hidden), GeGLU (tanh-approximated GELU), scores scaled
// by query_pre_attn_scalar^-1/2, sliding-window layers alternating with global ones.
// Gemma 2: attention and final logit soft-capping. Gemma 3: q/k norms per head, local layers
// with their own rope base (rope_local_base_freq), the global rope possibly scaled; the text
// part of Gemma3ForConditionalGeneration (fields under text_config).
#include <cmath>

#include "model/config_reader.h"
#include "model/family.h"
#include "model/model.h"

namespace ninfer {
namespace {

void parse(const ConfigReader& r, ModelConfig& c) {
  const bool gemma3 = c.architecture != "Gemma2ForCausalLM";
  const std::string act = r.get_str_or("hidden_activation", r.get_str_or("hidden_act", "gelu_pytorch_tanh"));
  if (act != "gelu_pytorch_tanh" && act != "gelu_tanh")
    r.bad("hidden_activation", fmt::format("'{}' is not supported (only gelu_pytorch_tanh)", act));
  c.act = Activation::GeluTanh;
  c.embed_scale = std::sqrt(float(c.hidden));
  const double qpas = r.get_num_or("query_pre_attn_scalar", c.head_dim);
  if (!(qpas > 0) || !std::isfinite(qpas))  // its inverse square root scales the scores (found by fuzz_model_config)
    r.bad("query_pre_attn_scalar", fmt::format("must be a positive number, got {}", qpas));
  c.attn_scale = float(1.0 / std::sqrt(qpas));
  // NOTE: transformers 5.17's Gemma 3 attention ignores attn_logit_softcapping, and
  // Gemma3ForConditionalGeneration applies no final soft-cap (tests/data/tiny/SEMANTICS.md).
  c.attn_softcap = gemma3 ? 0.0f : float(r.get_num_or("attn_logit_softcapping", 0.0));
  c.final_softcap = c.architecture == "Gemma3ForConditionalGeneration"
                        ? 0.0f
                        : float(r.get_num_or("final_logit_softcapping", 0.0));
  c.qkv_bias = c.o_bias = r.get_bool_or("attention_bias", false);
  c.qk_norm = gemma3;
  parse_layer_windows(r, c, true);
  if (!r.has("layer_types")) {
    const int pattern = gemma3 ? r.get_int_or("sliding_window_pattern", 6) : 2;
    for (int l = 0; l < c.n_layers; ++l)
      if ((l + 1) % pattern == 0) c.layers[size_t(l)].window = 0;
  }
  if (gemma3) {
    // Global layers: the model's rope (possibly scaled); local layers: their own base.
    const bool keyed = r.has("rope_parameters") && r.j["rope_parameters"].contains("sliding_attention");
    c.ropes = {parse_rope(r, c.head_dim, "full_attention")};
    RopeSpec local;
    if (keyed) {
      local = parse_rope(r, c.head_dim, "sliding_attention");
    } else {
      local.theta = r.get_num_or("rope_local_base_freq", 10000.0);  // Gemma3TextConfig's default
      local.rotary_dim = c.head_dim;
      local.max_position = c.max_position;
    }
    c.ropes.push_back(local);
    for (LayerSpec& l : c.layers) l.rope = l.window > 0 ? 1 : 0;
    // Checkpoints name the text model language_model.model.* (transformers 5's in-memory
    // layout, model.language_model.*, is accepted too: model.cpp).
    if (c.architecture == "Gemma3ForConditionalGeneration") c.tensor_prefix = "language_model.model.";
  }
}

void bind_layer(const ModelConfig& c, WeightBinder& b, const std::string& p, LayerWeights& w) {
  w[Vec::AttnNorm] = b.get(p + "input_layernorm.weight", {c.hidden});
  w[Vec::PostAttnNorm] = b.get(p + "post_attention_layernorm.weight", {c.hidden});
  w[Vec::FfnNorm] = b.get(p + "pre_feedforward_layernorm.weight", {c.hidden});
  w[Vec::PostFfnNorm] = b.get(p + "post_feedforward_layernorm.weight", {c.hidden});
  bind_llama_attention(c, b, p, w);
  bind_llama_mlp(c, b, p, "mlp.", w);
}

void layer(const ModelConfig&, int, LayerOps& o) {
  o.norm(Buf::X, Vec::AttnNorm, Buf::H);
  o.linear(Buf::H, Proj::Qkv, Buf::QKV, false, 1.0f);
  o.qk_norm_rope();
  o.attention();
  o.linear(Buf::ATT, Proj::O, Buf::TMP, false, 1.0f);
  o.norm_add(Buf::TMP, Vec::PostAttnNorm, Buf::X);
  o.norm(Buf::X, Vec::FfnNorm, Buf::H);
  o.linear(Buf::H, Proj::GateUp, Buf::GU, false, 1.0f);
  o.gated_act(Activation::GeluTanh);
  o.linear(Buf::FF, Proj::Down, Buf::TMP, false, 1.0f);
  o.norm_add(Buf::TMP, Vec::PostFfnNorm, Buf::X);
}

// Gemma2Config / Gemma3TextConfig defaults (transformers 5.17), for configs that omit them
// (Gemma3ForConditionalGeneration's text_config usually does).
const char* defaults(const std::string& arch) {
  if (arch == "Gemma2ForCausalLM")
    return R"({"head_dim": 256, "rms_norm_eps": 1e-6, "query_pre_attn_scalar": 256, "sliding_window": 4096,
               "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0, "rope_theta": 10000.0,
               "max_position_embeddings": 8192, "num_key_value_heads": 16})";
  return R"({"head_dim": 256, "rms_norm_eps": 1e-6, "query_pre_attn_scalar": 256, "sliding_window": 4096,
             "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "max_position_embeddings": 131072,
             "sliding_window_pattern": 6, "num_key_value_heads": 4})";
}

}  // namespace

extern const Family kGemmaFamily{"gemma",
                                 {"Gemma2ForCausalLM", "Gemma3ForCausalLM", "Gemma3ForConditionalGeneration"},
                                 parse,
                                 bind_layer,
                                 layer,
                                 /*norm_offset_one=*/true,
                                 defaults};

}  // namespace ninfer
