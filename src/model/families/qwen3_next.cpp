// The hybrids of Qwen3-Next and Qwen3.5 (dense and MoE, text model; the vision tower of the
// *ForConditionalGeneration checkpoints is not loaded): layers of Gated DeltaNet linear
// attention (a conv + delta-rule state per sequence, LayerOps::delta_net) and, every
// full_attention_interval-th layer, gated softmax attention over the KV cache (q_proj gives a
// query and a sigmoid gate per head, per-head q/k norms, partial rotary). All RMSNorms but the
// DeltaNet's gated one are zero-centred (weights stored as w - 1). The MLP is dense SwiGLU
// (Qwen3.5) or a mixture of experts with a sigmoid-gated shared expert (Qwen3-Next: norm_topk_prob,
// mlp_only_layers, decoder_sparse_step; Qwen3.5-MoE: every layer, always renormalised).
#include <algorithm>
#include <string>

#include "core/error.h"
#include "model/config_reader.h"
#include "model/family.h"
#include "model/model.h"

namespace ninfer {
namespace {

bool is_next(const ModelConfig& c) { return c.architecture == "Qwen3NextForCausalLM"; }
bool is_moe(const ModelConfig& c) { return is_next(c) || c.architecture.rfind("Qwen3_5Moe", 0) == 0; }
bool is_conditional(const ModelConfig& c) {
  return c.architecture.find("ForConditionalGeneration") != std::string::npos;
}

// transformers' config classes: the fields a config.json may leave out. Qwen3.5-MoE has no
// dense MLP and no intermediate_size (1 here, never used: every layer is MoE).
const char* defaults(const std::string& arch) {
  if (arch == "Qwen3NextForCausalLM")
    return R"({"intermediate_size": 5632, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
               "linear_value_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
               "partial_rotary_factor": 0.25, "norm_topk_prob": true, "head_dim": 256})";
  if (arch.rfind("Qwen3_5Moe", 0) == 0)
    return R"({"intermediate_size": 1, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
               "linear_value_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
               "partial_rotary_factor": 0.25, "head_dim": 256})";
  return R"({"intermediate_size": 12288, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
             "linear_num_key_heads": 16, "linear_num_value_heads": 32, "partial_rotary_factor": 0.25,
             "head_dim": 256})";
}

void parse_layer_types(const ConfigReader& r, ModelConfig& c) {
  if (r.has("layer_types")) {
    read_layer_types(r, c, {"linear_attention", "full_attention"}, [&](int l, int kind) {
      if (kind == 0) c.layers[size_t(l)].mixer = Mixer::DeltaNet;
    });
  } else {
    const int every = r.get_int_or("full_attention_interval", 4);
    for (int l = 0; l < c.n_layers; ++l)
      if ((l + 1) % every != 0) c.layers[size_t(l)].mixer = Mixer::DeltaNet;
  }
}

void parse(const ConfigReader& r, ModelConfig& c) {
  const std::string act = r.get_str_or("hidden_act", "silu");
  if (act != "silu") r.bad("hidden_act", fmt::format("'{}' is not supported (only silu)", act));
  if (is_conditional(c)) c.tensor_prefix = "model.language_model.";
  c.qk_norm = true;
  c.attn_gate = true;
  // NOTE: transformers gates every full-attention layer of these classes; a config saying
  // otherwise describes tensors of another shape.
  if (!r.get_bool_or("attn_output_gate", true))
    r.bad("attn_output_gate", "= false is not supported (these models gate every attention layer)");
  c.qkv_bias = c.o_bias = r.get_bool_or("attention_bias", false);
  DeltaNetShape& d = c.dn;
  d.nk = r.get_int("linear_num_key_heads");
  d.nv = r.get_int("linear_num_value_heads");
  d.dk = r.get_int("linear_key_head_dim");
  d.dv = r.get_int("linear_value_head_dim");
  d.conv = r.get_int("linear_conv_kernel_dim");
  d.grouped = is_next(c);
  if (d.nv % d.nk != 0)
    r.bad("linear_num_value_heads", fmt::format("= {} is not a multiple of linear_num_key_heads {}", d.nv, d.nk));
  // NOTE: bounds far above real models (key / value widths 2,048-6,144, conv 4) so that the
  // shapes' int arithmetic (DeltaNetShape) cannot overflow.
  constexpr int64_t kMaxWidth = int64_t(1) << 20;
  if (int64_t(d.nk) * d.dk > kMaxWidth)
    r.bad("linear_num_key_heads", fmt::format("x linear_key_head_dim = {} is more than {}", int64_t(d.nk) * d.dk, kMaxWidth));
  if (int64_t(d.nv) * d.dv > kMaxWidth)
    r.bad("linear_num_value_heads",
          fmt::format("x linear_value_head_dim = {} is more than {}", int64_t(d.nv) * d.dv, kMaxWidth));
  if (int64_t(d.dk) * d.dv > (int64_t(1) << 22))
    r.bad("linear_key_head_dim", fmt::format("x linear_value_head_dim = {} (one head's state) is more than {}",
                                             int64_t(d.dk) * d.dv, int64_t(1) << 22));
  if (d.conv < 2 || d.conv > 64) r.bad("linear_conv_kernel_dim", fmt::format("= {} must be in 2..64", d.conv));
  parse_layer_types(r, c);
  if (c.n_attention_layers() == 0) r.bad("layer_types", "has no full_attention layer");
  const bool no_mtp = !r.has("mtp_num_hidden_layers") ||
                      (r.j["mtp_num_hidden_layers"].is_number_integer() && r.j["mtp_num_hidden_layers"] == 0);
  c.mtp_layers = no_mtp ? 0 : r.get_int("mtp_num_hidden_layers");
  if (c.mtp_layers > 16) r.bad("mtp_num_hidden_layers", fmt::format("= {} is more than 16", c.mtp_layers));
  if (!is_moe(c)) return;
  c.n_experts = r.get_int("num_experts");
  c.top_k = r.get_int("num_experts_per_tok");
  c.moe_ffn = r.get_int("moe_intermediate_size");
  c.shared_ffn = r.get_int("shared_expert_intermediate_size");
  if (c.top_k > c.n_experts)
    r.bad("num_experts_per_tok", fmt::format("= {} exceeds the {} experts", c.top_k, c.n_experts));
  if (!is_next(c)) {
    c.norm_topk = true;  // Qwen3.5-MoE's router always renormalises, and every layer is MoE
    for (LayerSpec& l : c.layers) l.moe = true;
    return;
  }
  c.norm_topk = r.get_bool_or("norm_topk_prob", true);
  parse_sparse_layers(r, c);
}

void bind_deltanet(const ModelConfig& c, WeightBinder& b, const std::string& p, LayerWeights& w) {
  const DeltaNetShape& d = c.dn;
  const int64_t h = c.hidden;
  const std::string a = p + "linear_attn.";
  if (d.grouped) {
    b.append(w[Proj::Qkv], a + "in_proj_qkvz.weight", 2 * d.key_dim() + 2 * d.value_dim(), h);
    b.append(w[Proj::Qkv], a + "in_proj_ba.weight", 2 * d.nv, h);
  } else {
    b.append(w[Proj::Qkv], a + "in_proj_qkv.weight", d.conv_dim(), h);
    b.append(w[Proj::Qkv], a + "in_proj_z.weight", d.value_dim(), h);
    b.append(w[Proj::Qkv], a + "in_proj_b.weight", d.nv, h);
    b.append(w[Proj::Qkv], a + "in_proj_a.weight", d.nv, h);
  }
  w[Vec::DnConv] = b.get(a + "conv1d.weight", {d.conv_dim(), 1, d.conv});
  w[Vec::DnALog] = b.get(a + "A_log", {d.nv});
  w[Vec::DnDtBias] = b.get(a + "dt_bias", {d.nv});
  w[Vec::DnNorm] = b.get(a + "norm.weight", {d.dv});
  w[Proj::O] = b.proj(a + "out_proj.weight", h, d.value_dim());
}

void bind_attention(const ModelConfig& c, WeightBinder& b, const std::string& p, LayerWeights& w) {
  const int64_t h = c.hidden, q = c.q_dim(), kv = c.kv_dim(), d = c.head_dim;
  auto bias = [&](const char* name) { return c.qkv_bias ? p + "self_attn." + name + ".bias" : std::string(); };
  b.append(w[Proj::Qkv], p + "self_attn.q_proj.weight", 2 * q, h, bias("q_proj"));
  b.append(w[Proj::Qkv], p + "self_attn.k_proj.weight", kv, h, bias("k_proj"));
  b.append(w[Proj::Qkv], p + "self_attn.v_proj.weight", kv, h, bias("v_proj"));
  w[Proj::O] = b.proj(p + "self_attn.o_proj.weight", h, q, c.o_bias ? p + "self_attn.o_proj.bias" : "");
  w[Vec::QNorm] = b.get(p + "self_attn.q_norm.weight", {d});
  w[Vec::KNorm] = b.get(p + "self_attn.k_norm.weight", {d});
}

void bind_moe(const ModelConfig& c, WeightBinder& b, const std::string& p, LayerWeights& w) {
  const int64_t h = c.hidden, f = c.moe_ffn, s = c.shared_ffn;
  const std::string m = p + "mlp.";
  if (b.has(m + "experts.gate_up_proj"))
    fail("tensor '{}experts.gate_up_proj': experts fused in one 3-D tensor are not supported; ninfer reads one "
         "tensor per expert (experts.<e>.gate_proj.weight, as transformers saves them)", m);
  w[Proj::Router] = b.proj(m + "gate.weight", c.n_experts, h);
  for (int e = 0; e < c.n_experts; ++e) {
    const std::string x = m + "experts." + std::to_string(e) + ".";
    ExpertWeights ex;
    b.append(ex.gate_up, x + "gate_proj.weight", f, h);
    b.append(ex.gate_up, x + "up_proj.weight", f, h);
    ex.down = b.proj(x + "down_proj.weight", h, f);
    w.experts.push_back(std::move(ex));
  }
  if (b.has(m + "experts." + std::to_string(c.n_experts) + ".gate_proj.weight"))
    fail("the checkpoint has more experts than config.json's num_experts = {} (tensor {}experts.{}.*)", c.n_experts, m,
         c.n_experts);
  b.append(w[Proj::SharedGateUp], m + "shared_expert.gate_proj.weight", s, h);
  b.append(w[Proj::SharedGateUp], m + "shared_expert.up_proj.weight", s, h);
  w[Proj::SharedDown] = b.proj(m + "shared_expert.down_proj.weight", h, s);
  w[Proj::SharedGate] = b.proj(m + "shared_expert_gate.weight", 1, h);
}

void bind_layer(const ModelConfig& c, WeightBinder& b, const std::string& p, LayerWeights& w) {
  const int l = std::stoi(p.substr(p.rfind("layers.") + 7));
  w[Vec::AttnNorm] = b.get(p + "input_layernorm.weight", {c.hidden});
  w[Vec::FfnNorm] = b.get(p + "post_attention_layernorm.weight", {c.hidden});
  if (c.layers[size_t(l)].mixer == Mixer::DeltaNet)
    bind_deltanet(c, b, p, w);
  else
    bind_attention(c, b, p, w);
  if (c.layers[size_t(l)].moe)
    bind_moe(c, b, p, w);
  else
    bind_llama_mlp(c, b, p, "mlp.", w);
}

// An MTP layer: gated full attention and the model's MLP (MoE for the MoE models).
void bind_mtp_layer(const ModelConfig& c, WeightBinder& b, const std::string& p, LayerWeights& w) {
  w[Vec::AttnNorm] = b.get(p + "input_layernorm.weight", {c.hidden});
  w[Vec::FfnNorm] = b.get(p + "post_attention_layernorm.weight", {c.hidden});
  bind_attention(c, b, p, w);
  if (is_moe(c))
    bind_moe(c, b, p, w);
  else
    bind_llama_mlp(c, b, p, "mlp.", w);
}

void layer(const ModelConfig& c, int l, LayerOps& o) {
  const LayerSpec& s = c.layers[size_t(l)];
  o.norm(Buf::X, Vec::AttnNorm, Buf::H);
  o.linear(Buf::H, Proj::Qkv, Buf::QKV, false, 1.0f);
  if (s.mixer == Mixer::DeltaNet) {
    o.delta_net();
  } else {
    o.split_attn_gate();
    o.qk_norm_rope();
    o.attention();
    o.attn_gate();
  }
  o.linear(Buf::ATT, Proj::O, Buf::X, true, 1.0f);
  o.norm(Buf::X, Vec::FfnNorm, Buf::H);
  if (s.moe) {
    o.moe(1.0f);
    return;
  }
  o.linear(Buf::H, Proj::GateUp, Buf::GU, false, 1.0f);
  o.gated_act(Activation::Silu);
  o.linear(Buf::FF, Proj::Down, Buf::X, true, 1.0f);
}

}  // namespace

extern const Family kQwen3NextFamily{"qwen3_next",
                                     {"Qwen3NextForCausalLM", "Qwen3_5ForCausalLM", "Qwen3_5ForConditionalGeneration",
                                      "Qwen3_5MoeForCausalLM", "Qwen3_5MoeForConditionalGeneration"},
                                     parse,
                                     bind_layer,
                                     layer,
                                     /*norm_offset_one=*/true,
                                     defaults,
                                     bind_mtp_layer};

}  // namespace ninfer
