// The Llama family: pre-norm decoder layers, x += o(attn(norm(x))); x += down(silu(gate) * up)
// of norm(x). Llama (every rope type), Mistral (sliding window), Qwen2 / Qwen3 (q/k bias,
// q/k norm, windows on layers >= max_window_layers), Granite (scalar multipliers) and Phi-3
// (fused qkv_proj and gate_up_proj, partial rotary, longrope).
#include "model/config_reader.h"
#include "model/family.h"
#include "model/model.h"

namespace ninfer {
namespace {

void require_silu(const ConfigReader& r) {
  const std::string act = r.get_str_or("hidden_act", "silu");
  if (act != "silu" && act != "swish") r.bad("hidden_act", fmt::format("'{}' is not supported here (only silu)", act));
}

void parse(const ConfigReader& r, ModelConfig& c) {
  require_silu(r);
  const std::string& a = c.architecture;
  const bool attn_bias = r.get_bool_or("attention_bias", false);
  c.qkv_bias = attn_bias || a == "Qwen2ForCausalLM";
  c.o_bias = attn_bias;
  c.qk_norm = a == "Qwen3ForCausalLM";
  if (a == "Qwen2ForCausalLM" || a == "Qwen3ForCausalLM") {
    const bool use = r.get_bool_or("use_sliding_window", false);
    parse_layer_windows(r, c, use);
    if (use && !r.has("layer_types")) {
      const int first = r.get_int_or("max_window_layers", c.n_layers);
      for (int l = 0; l < std::min(first, c.n_layers); ++l) c.layers[size_t(l)].window = 0;
    }
  } else {
    // Mistral and Phi-3 slide on every layer when sliding_window is set (layer_types unread).
    parse_layer_windows(r, c, a != "LlamaForCausalLM", /*use_layer_types=*/false);
  }
  if (a == "GraniteForCausalLM") {
    c.embed_scale = float(r.get_num("embedding_multiplier"));
    c.residual_scale = float(r.get_num("residual_multiplier"));
    c.attn_scale = float(r.get_num("attention_multiplier"));
    const double ls = r.get_num("logits_scaling");
    if (!(ls > 0)) r.bad("logits_scaling", "must be positive");
    c.logit_scale = float(1.0 / ls);
  }
  if (a == "Phi3ForCausalLM") {
    c.fused_qkv = true;
    c.fused_gate_up = true;
  }
}

void bind_layer(const ModelConfig& c, WeightBinder& b, const std::string& p, LayerWeights& w) {
  w[Vec::AttnNorm] = b.get(p + "input_layernorm.weight", {c.hidden});
  w[Vec::FfnNorm] = b.get(p + "post_attention_layernorm.weight", {c.hidden});
  bind_llama_attention(c, b, p, w);
  bind_llama_mlp(c, b, p, "mlp.", w);
}

void layer(const ModelConfig& c, int, LayerOps& o) {
  llama_attention_block(c, o);
  o.norm(Buf::X, Vec::FfnNorm, Buf::H);
  o.linear(Buf::H, Proj::GateUp, Buf::GU, false, 1.0f);
  o.gated_act(Activation::Silu);
  o.linear(Buf::FF, Proj::Down, Buf::X, true, c.residual_scale);
}

}  // namespace

extern const Family kLlamaFamily{
    "llama",
    {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "GraniteForCausalLM",
     "Phi3ForCausalLM"},
    parse,
    bind_layer,
    layer};

}  // namespace ninfer
