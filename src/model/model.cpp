#include "model/model.h"

#include "core/error.h"

namespace ninfer {
namespace {

struct Binder {
  const TensorStore& store;
  size_t bytes = 0;

  WeightRef get(const std::string& name, std::vector<int64_t> shape, bool required = true) {
    const TensorInfo* t = store.find(name);
    if (!t) {
      if (required) fail("tensor '{}' is missing from the checkpoint", name);
      return {};
    }
    if (t->dtype != DType::F32 && t->dtype != DType::F16 && t->dtype != DType::BF16)
      fail("{}: tensor '{}' has dtype {}; weights must be F32, F16 or BF16", t->file, name,
           dtype_name(t->dtype));
    if (t->shape != shape) {
      TensorInfo want;
      want.shape = shape;
      fail("{}: tensor '{}' has shape {} but the config implies {}", t->file, name, t->shape_str(),
           want.shape_str());
    }
    bytes += t->nbytes;
    return WeightRef{t};
  }
};

}  // namespace

ModelWeights bind_weights(const ModelConfig& c, const TensorStore& store, size_t* total) {
  Binder b{store};
  ModelWeights w;
  const int64_t h = c.hidden, q = c.q_dim(), kv = c.kv_dim(), f = c.ffn, d = c.head_dim;
  w.embed = b.get("model.embed_tokens.weight", {c.vocab, h});
  w.final_norm = b.get("model.norm.weight", {h});
  if (c.tie_embeddings) {
    w.lm_head = w.embed;
  } else {
    w.lm_head = b.get("lm_head.weight", {c.vocab, h});
  }
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    LayerWeights L;
    L.attn_norm = b.get(p + "input_layernorm.weight", {h});
    L.wq = b.get(p + "self_attn.q_proj.weight", {q, h});
    L.wk = b.get(p + "self_attn.k_proj.weight", {kv, h});
    L.wv = b.get(p + "self_attn.v_proj.weight", {kv, h});
    L.wo = b.get(p + "self_attn.o_proj.weight", {h, q});
    if (c.qkv_bias) {
      L.bq = b.get(p + "self_attn.q_proj.bias", {q});
      L.bk = b.get(p + "self_attn.k_proj.bias", {kv});
      L.bv = b.get(p + "self_attn.v_proj.bias", {kv});
    }
    if (c.o_bias) L.bo = b.get(p + "self_attn.o_proj.bias", {h});
    if (c.qk_norm) {
      L.q_norm = b.get(p + "self_attn.q_norm.weight", {d});
      L.k_norm = b.get(p + "self_attn.k_norm.weight", {d});
    }
    L.ffn_norm = b.get(p + "post_attention_layernorm.weight", {h});
    L.w_gate = b.get(p + "mlp.gate_proj.weight", {f, h});
    L.w_up = b.get(p + "mlp.up_proj.weight", {f, h});
    L.w_down = b.get(p + "mlp.down_proj.weight", {h, f});
    if (c.mlp_bias) {
      L.b_gate = b.get(p + "mlp.gate_proj.bias", {f});
      L.b_up = b.get(p + "mlp.up_proj.bias", {f});
      L.b_down = b.get(p + "mlp.down_proj.bias", {h});
    }
    w.layers.push_back(L);
  }
  if (total) *total = b.bytes;
  return w;
}

std::unique_ptr<Model> load_model(const std::filesystem::path& dir) {
  auto m = std::make_unique<Model>();
  m->dir = dir;
  m->config = load_model_config(dir);
  m->store = TensorStore::open(dir);
  m->weights = bind_weights(m->config, *m->store, &m->weight_bytes);
  return m;
}

}  // namespace ninfer
