// Pieces shared by the family files: sliding-window layouts, the Llama-style tensor names
// and the pre-norm attention half of a layer.
#include <algorithm>
#include <vector>

#include <fmt/ranges.h>

#include "core/error.h"
#include "model/config_reader.h"
#include "model/family.h"
#include "model/model.h"

namespace ninfer {

void read_layer_types(const ConfigReader& r, const ModelConfig& c, std::initializer_list<std::string_view> kinds,
                      const std::function<void(int layer, int kind)>& on_layer) {
  const auto& lt = r.j["layer_types"];
  if (!lt.is_array() || int(lt.size()) != c.n_layers)
    r.bad("layer_types", fmt::format("must be a list of {} layer types (num_hidden_layers)", c.n_layers));
  for (int l = 0; l < c.n_layers; ++l) {
    const auto& t = lt[size_t(l)];
    const std::string s = t.is_string() ? t.get<std::string>() : t.dump();
    const auto it = std::find(kinds.begin(), kinds.end(), s);
    if (it == kinds.end())
      r.bad("layer_types", fmt::format("entry {} is '{}'; supported: {}", l, s, fmt::join(kinds, ", ")));
    on_layer(l, int(it - kinds.begin()));
  }
}

void parse_layer_windows(const ConfigReader& r, ModelConfig& c, bool use_window, bool use_layer_types) {
  const int sw = use_window && r.has("sliding_window") ? r.get_int("sliding_window") : 0;
  if (use_layer_types && r.has("layer_types")) {
    // A sliding layer of a config without a window attends to all keys.
    read_layer_types(r, c, {"sliding_attention", "full_attention"}, [&](int l, int kind) {
      if (kind == 0) c.layers[size_t(l)].window = sw;
    });
    return;
  }
  for (LayerSpec& l : c.layers) l.window = sw;
}

void parse_sparse_layers(const ConfigReader& r, ModelConfig& c) {
  const int step = r.get_int_or("decoder_sparse_step", 1);
  std::vector<int> dense;
  if (r.has("mlp_only_layers")) {
    if (!r.j["mlp_only_layers"].is_array()) r.bad("mlp_only_layers", "must be a list of layer indices");
    for (const auto& e : r.j["mlp_only_layers"]) {
      if (!e.is_number_integer() || e.get<int>() < 0 || e.get<int>() >= c.n_layers)
        r.bad("mlp_only_layers", fmt::format("holds {}, not a layer index below {}", e.dump(), c.n_layers));
      dense.push_back(e.get<int>());
    }
  }
  for (int l = 0; l < c.n_layers; ++l)
    c.layers[size_t(l)].moe = std::find(dense.begin(), dense.end(), l) == dense.end() && (l + 1) % step == 0;
}

void bind_llama_attention(const ModelConfig& c, WeightBinder& b, const std::string& p, LayerWeights& w) {
  const int64_t h = c.hidden, q = c.q_dim(), kv = c.kv_dim(), d = c.head_dim;
  auto bias = [&](const char* name) { return c.qkv_bias ? p + "self_attn." + name + ".bias" : std::string(); };
  if (c.fused_qkv) {
    w[Proj::Qkv] = b.proj(p + "self_attn.qkv_proj.weight", q + 2 * kv, h, c.qkv_bias ? p + "self_attn.qkv_proj.bias" : "");
  } else {
    b.append(w[Proj::Qkv], p + "self_attn.q_proj.weight", q, h, bias("q_proj"));
    b.append(w[Proj::Qkv], p + "self_attn.k_proj.weight", kv, h, bias("k_proj"));
    b.append(w[Proj::Qkv], p + "self_attn.v_proj.weight", kv, h, bias("v_proj"));
  }
  w[Proj::O] = b.proj(p + "self_attn.o_proj.weight", h, q, c.o_bias ? p + "self_attn.o_proj.bias" : "");
  if (c.qk_norm) {
    w[Vec::QNorm] = b.get(p + "self_attn.q_norm.weight", {d});
    w[Vec::KNorm] = b.get(p + "self_attn.k_norm.weight", {d});
  }
  if (c.qk_norm_full) {
    w[Vec::QNorm] = b.get(p + "self_attn.q_norm.weight", {q});
    w[Vec::KNorm] = b.get(p + "self_attn.k_norm.weight", {kv});
  }
}

void bind_llama_mlp(const ModelConfig& c, WeightBinder& b, const std::string& p, const std::string& mlp,
                    LayerWeights& w) {
  const int64_t h = c.hidden, f = c.ffn;
  auto bias = [&](const char* name) { return c.mlp_bias ? p + mlp + name + ".bias" : std::string(); };
  if (c.fused_gate_up) {
    w[Proj::GateUp] = b.proj(p + mlp + "gate_up_proj.weight", 2 * f, h, bias("gate_up_proj"));
  } else {
    b.append(w[Proj::GateUp], p + mlp + "gate_proj.weight", f, h, bias("gate_proj"));
    b.append(w[Proj::GateUp], p + mlp + "up_proj.weight", f, h, bias("up_proj"));
  }
  w[Proj::Down] = b.proj(p + mlp + "down_proj.weight", h, f, bias("down_proj"));
}

void llama_attention_block(const ModelConfig& c, LayerOps& o) {
  o.norm(Buf::X, Vec::AttnNorm, Buf::H);
  o.linear(Buf::H, Proj::Qkv, Buf::QKV, false, 1.0f);
  o.qk_norm_rope();
  o.attention();
  o.linear(Buf::ATT, Proj::O, Buf::X, true, c.residual_scale);
}

}  // namespace ninfer
