// Mixture-of-experts Llama-style layers: the attention half as Llama's, the MLP replaced by a
// router (softmax over the experts, the top k kept, renormalised to sum 1 when the model says
// so) and a weighted sum of the chosen experts' SwiGLU MLPs. Mixtral (always renormalised,
// `block_sparse_moe.*` tensors) and Qwen3-MoE (norm_topk_prob; dense layers by
// mlp_only_layers / decoder_sparse_step).
#include <algorithm>

#include "model/config_reader.h"
#include "model/family.h"
#include "model/model.h"

namespace ninfer {
namespace {

bool is_mixtral(const ModelConfig& c) { return c.architecture == "MixtralForCausalLM"; }

void parse(const ConfigReader& r, ModelConfig& c) {
  const std::string act = r.get_str_or("hidden_act", "silu");
  if (act != "silu") r.bad("hidden_act", fmt::format("'{}' is not supported (only silu)", act));
  c.top_k = r.get_int("num_experts_per_tok");
  if (is_mixtral(c)) {
    c.n_experts = r.get_int("num_local_experts");
    c.moe_ffn = c.ffn;
    c.norm_topk = true;
    parse_layer_windows(r, c, true, /*use_layer_types=*/false);
    for (LayerSpec& l : c.layers) l.moe = true;
  } else {
    c.n_experts = r.has("num_experts") ? r.get_int("num_experts") : r.get_int("num_local_experts");
    c.moe_ffn = r.get_int("moe_intermediate_size");
    c.norm_topk = r.get_bool_or("norm_topk_prob", false);
    c.qk_norm = true;
    c.qkv_bias = c.o_bias = r.get_bool_or("attention_bias", false);
    const bool use = r.get_bool_or("use_sliding_window", false);
    parse_layer_windows(r, c, use);
    parse_sparse_layers(r, c);
  }
  if (c.top_k > c.n_experts)
    r.bad("num_experts_per_tok", fmt::format("= {} exceeds the {} experts", c.top_k, c.n_experts));
}

void bind_layer(const ModelConfig& c, WeightBinder& b, const std::string& p, LayerWeights& w) {
  w[Vec::AttnNorm] = b.get(p + "input_layernorm.weight", {c.hidden});
  w[Vec::FfnNorm] = b.get(p + "post_attention_layernorm.weight", {c.hidden});
  bind_llama_attention(c, b, p, w);
  const int l = std::stoi(p.substr(p.rfind("layers.") + 7));
  if (!c.layers[size_t(l)].moe) {
    bind_llama_mlp(c, b, p, "mlp.", w);
    return;
  }
  const int64_t h = c.hidden, f = c.moe_ffn;
  const std::string moe = p + (is_mixtral(c) ? "block_sparse_moe." : "mlp.");
  w[Proj::Router] = b.proj(moe + "gate.weight", c.n_experts, h);
  for (int e = 0; e < c.n_experts; ++e) {
    const std::string x = moe + "experts." + std::to_string(e) + ".";
    ExpertWeights ex;
    if (is_mixtral(c)) {
      b.append(ex.gate_up, x + "w1.weight", f, h);
      b.append(ex.gate_up, x + "w3.weight", f, h);
      ex.down = b.proj(x + "w2.weight", h, f);
    } else {
      b.append(ex.gate_up, x + "gate_proj.weight", f, h);
      b.append(ex.gate_up, x + "up_proj.weight", f, h);
      ex.down = b.proj(x + "down_proj.weight", h, f);
    }
    w.experts.push_back(std::move(ex));
  }
  // The expert count must match the checkpoint: one more expert than the config says is an error too.
  if (b.has(moe + "experts." + std::to_string(c.n_experts) + (is_mixtral(c) ? ".w1.weight" : ".gate_proj.weight")))
    fail("the checkpoint has more experts than config.json's {} = {} (tensor {}experts.{}.*)",
         is_mixtral(c) ? "num_local_experts" : "num_experts", c.n_experts, moe, c.n_experts);
}

void layer(const ModelConfig& c, int l, LayerOps& o) {
  llama_attention_block(c, o);
  o.norm(Buf::X, Vec::FfnNorm, Buf::H);
  if (c.layers[size_t(l)].moe) {
    o.moe(c.residual_scale);
    return;
  }
  o.linear(Buf::H, Proj::GateUp, Buf::GU, false, 1.0f);
  o.gated_act(Activation::Silu);
  o.linear(Buf::FF, Proj::Down, Buf::X, true, c.residual_scale);
}

}  // namespace

extern const Family kMoeFamily{"moe", {"MixtralForCausalLM", "Qwen3MoeForCausalLM"}, parse, bind_layer, layer};

}  // namespace ninfer
