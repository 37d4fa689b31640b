#include "model/model.h"

#include "core/error.h"
#include "model/random_weights.h"

namespace ninfer {

WeightRef WeightBinder::get(const std::string& name, std::vector<int64_t> shape, bool required) {
  if (record_) {
    record_->push_back({name, shape});
    return {};
  }
  const TensorInfo* t = store_->find(name);
  if (!t) {
    if (required) fail("tensor '{}' is missing from the checkpoint", name);
    return {};
  }
  if (t->dtype != DType::F32 && t->dtype != DType::F16 && t->dtype != DType::BF16)
    fail("{}: tensor '{}' has dtype {}; weights must be F32, F16 or BF16", t->file, name, dtype_name(t->dtype));
  if (t->shape != shape) {
    TensorInfo want;
    want.shape = shape;
    fail("{}: tensor '{}' has shape {} but the config implies {}", t->file, name, t->shape_str(), want.shape_str());
  }
  bytes_ += t->nbytes;
  return WeightRef{t};
}

void WeightBinder::append(ProjWeights& p, const std::string& name, int64_t rows, int64_t in,
                          const std::string& bias_name) {
  ProjWeights::Part part;
  part.w = get(name, {rows, in});
  if (!bias_name.empty()) part.bias = get(bias_name, {rows});
  part.rows = rows;
  p.in = in;
  p.parts.push_back(part);
}

ProjWeights WeightBinder::proj(const std::string& name, int64_t out, int64_t in, const std::string& bias_name) {
  ProjWeights p;
  append(p, name, out, in, bias_name);
  return p;
}

namespace {

ModelWeights bind_with(const ModelConfig& c, WeightBinder& b) {
  ModelWeights w;
  std::string pre = c.tensor_prefix;
  if (pre == "language_model.model." && !b.has(pre + "embed_tokens.weight") && b.has("model.language_model.embed_tokens.weight"))
    pre = "model.language_model.";
  w.embed = b.get(pre + "embed_tokens.weight", {c.vocab, c.hidden});
  w.final_norm = b.get(pre + "norm.weight", {c.hidden});
  if (c.tie_embeddings) {
    w.lm_head = w.embed;
  } else {
    w.lm_head = b.get("lm_head.weight", {c.vocab, c.hidden});
  }
  for (int l = 0; l < c.n_layers; ++l) {
    LayerWeights L;
    c.family->bind_layer(c, b, pre + "layers." + std::to_string(l) + ".", L);
    w.layers.push_back(std::move(L));
  }
  return w;
}

}  // namespace

ModelWeights bind_weights(const ModelConfig& c, const TensorStore& store, size_t* total) {
  NINFER_CHECK(c.family != nullptr, "config without a family");
  WeightBinder b(store);
  ModelWeights w = bind_with(c, b);
  if (total) *total = b.bytes();
  return w;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> list_weights(const ModelConfig& c) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  WeightBinder b(&out);
  bind_with(c, b);
  return out;
}

std::unique_ptr<Model> load_model(const std::filesystem::path& dir, uint64_t random_weights_seed) {
  auto m = std::make_unique<Model>();
  m->dir = dir;
  m->config = load_model_config(dir);
  m->store = random_weights_seed ? random_tensor_store(m->config, random_weights_seed) : TensorStore::open(dir);
  m->weights = bind_weights(m->config, *m->store, &m->weight_bytes);
  return m;
}

}  // namespace ninfer
