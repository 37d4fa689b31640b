// OLMo-2: post-norm layers, x += norm(o(attn(x))); x += norm(mlp(x)), with RMSNorm over the
// whole q and k projections (not per head) before rope.
#include "model/config_reader.h"
#include "model/family.h"
#include "model/model.h"

namespace ninfer {
namespace {

void parse(const ConfigReader& r, ModelConfig& c) {
  const std::string act = r.get_str_or("hidden_act", "silu");
  if (act != "silu") r.bad("hidden_act", fmt::format("'{}' is not supported (only silu)", act));
  c.qkv_bias = c.o_bias = r.get_bool_or("attention_bias", false);
  c.qk_norm_full = true;
}

void bind_layer(const ModelConfig& c, WeightBinder& b, const std::string& p, LayerWeights& w) {
  w[Vec::PostAttnNorm] = b.get(p + "post_attention_layernorm.weight", {c.hidden});
  w[Vec::PostFfnNorm] = b.get(p + "post_feedforward_layernorm.weight", {c.hidden});
  bind_llama_attention(c, b, p, w);
  bind_llama_mlp(c, b, p, "mlp.", w);
}

void layer(const ModelConfig&, int, LayerOps& o) {
  o.copy(Buf::X, Buf::H);
  o.linear(Buf::H, Proj::Qkv, Buf::QKV, false, 1.0f);
  o.qk_norm_rope();
  o.attention();
  o.linear(Buf::ATT, Proj::O, Buf::TMP, false, 1.0f);
  o.norm_add(Buf::TMP, Vec::PostAttnNorm, Buf::X);
  o.copy(Buf::X, Buf::H);
  o.linear(Buf::H, Proj::GateUp, Buf::GU, false, 1.0f);
  o.gated_act(Activation::Silu);
  o.linear(Buf::FF, Proj::Down, Buf::TMP, false, 1.0f);
  o.norm_add(Buf::TMP, Vec::PostFfnNorm, Buf::X);
}

}  // namespace

extern const Family kOlmo2Family{"olmo2", {"Olmo2ForCausalLM"}, parse, bind_layer, layer};

}  // namespace ninfer
