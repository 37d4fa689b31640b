#include "model/model.h"

#include <algorithm>
#include <thread>

#include "core/error.h"
#include "model/random_weights.h"

namespace ninfer {

WeightRef WeightBinder::get(const std::string& name, std::vector<int64_t> shape, bool required) {
  if (record_) {
    record_->push_back({name, shape, false});
    return {};
  }
  const TensorInfo* t = store_->find(name);
  if (!t) {
    if (required) fail("tensor '{}' is missing from the checkpoint", name);
    return {};
  }
  if (t->dtype != DType::F32 && t->dtype != DType::F16 && t->dtype != DType::BF16)
    fail("{}: tensor '{}' has dtype {}; weights must be F32, F16 or BF16 (quantised weights need config.json's "
         "quantization_config: {})",
         t->file, name, dtype_name(t->dtype), quant_method_names());
  if (t->shape != shape) {
    TensorInfo want;
    want.shape = shape;
    fail("{}: tensor '{}' has shape {} but the config implies {}", t->file, name, t->shape_str(), want.shape_str());
  }
  bytes_ += t->nbytes;
  return WeightRef{t};
}

namespace {

// --weights: w [rows][cols] quantised to f in row slices on every hardware thread. NOTE: every
// load grid is per row (one scale row per row), so slices quantise independently and their
// codes / scales / zeros concatenate to exactly f.quantize of the whole matrix; one thread
// quantised an 8B model's fp8 projections in ~2 minutes (18 ns per weight).
void quantize_rows_parallel(const WeightFormat& f, const float* w, int64_t rows, int64_t cols, QuantMatrix& m) {
  const int64_t n_threads =
      std::min<int64_t>(std::max(1u, std::thread::hardware_concurrency()), std::max<int64_t>(1, rows / 64));
  if (n_threads <= 1) {
    f.quantize(w, rows, cols, m);
    return;
  }
  const int64_t per = (rows + n_threads - 1) / n_threads;
  std::vector<QuantMatrix> part(size_t((rows + per - 1) / per));
  std::vector<std::thread> pool;
  for (size_t i = 0; i < part.size(); ++i) {
    const int64_t r0 = int64_t(i) * per, n = std::min(per, rows - r0);
    pool.emplace_back([&, i, r0, n] { f.quantize(w + size_t(r0 * cols), n, cols, part[i]); });
  }
  for (std::thread& t : pool) t.join();
  const std::string name = m.name;
  m = std::move(part[0]);
  m.name = name;
  NINFER_CHECK(m.block_rows == 1 && m.g_idx.empty(), "--weights {}: a load grid that is not per row", f.option);
  for (size_t i = 1; i < part.size(); ++i) {
    m.codes.insert(m.codes.end(), part[i].codes.begin(), part[i].codes.end());
    m.scales.insert(m.scales.end(), part[i].scales.begin(), part[i].scales.end());
    m.zeros.insert(m.zeros.end(), part[i].zeros.begin(), part[i].zeros.end());
  }
  m.rows = rows;
}

}  // namespace

WeightRef WeightBinder::matrix(const std::string& name, int64_t rows, int64_t cols) {
  if (record_) {
    record_->push_back({name, {rows, cols}, true});
    return {};
  }
  auto keep = [&](std::unique_ptr<QuantMatrix> q) {
    q->validate();
    bytes_ += q->bytes();
    NINFER_CHECK(owned_ != nullptr, "quantised tensor '{}' without an owner", q->name);
    owned_->push_back(std::move(q));
    return WeightRef{nullptr, owned_->back().get()};
  };
  if (quant_ && *quant_) {
    const std::string suffix = ".weight";
    NINFER_CHECK(name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0,
                 "projection tensor '{}' does not end in .weight", name);
    std::unique_ptr<QuantMatrix> q = quant_->method->load(*quant_, *store_, name.substr(0, name.size() - suffix.size()),
                                                          rows, cols);
    if (q) return keep(std::move(q));
  }
  WeightRef w = get(name, {rows, cols});
  if (!at_load_) return w;
  // --weights: the dense tensor quantised now (fp32 in between, then dropped).
  std::vector<float> f(size_t(rows * cols));
  convert_to_f32(w.t->dtype, w.t->data, f.data(), f.size());
  auto q = std::make_unique<QuantMatrix>();
  q->name = name;
  quantize_rows_parallel(*at_load_, f.data(), rows, cols, *q);
  bytes_ -= w.t->nbytes;
  return keep(std::move(q));
}

void WeightBinder::append(ProjWeights& p, const std::string& name, int64_t rows, int64_t in,
                          const std::string& bias_name) {
  ProjWeights::Part part;
  part.w = matrix(name, rows, in);
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

// with_mtp: also the MTP head (what a checkpoint holds; no backend loads it onto a device).
ModelWeights bind_with(const ModelConfig& c, WeightBinder& b, bool with_mtp = true) {
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
  if (with_mtp && c.mtp_layers > 0) {
    NINFER_CHECK(c.family->bind_mtp_layer != nullptr, "{}: mtp_num_hidden_layers without an MTP binder", c.architecture);
    const int64_t h = c.hidden;
    w.mtp.norm_embedding = b.get("mtp.pre_fc_norm_embedding.weight", {h});
    w.mtp.norm_hidden = b.get("mtp.pre_fc_norm_hidden.weight", {h});
    w.mtp.norm = b.get("mtp.norm.weight", {h});
    w.mtp.fc = b.proj("mtp.fc.weight", h, 2 * h);
    for (int i = 0; i < c.mtp_layers; ++i) {
      LayerWeights L;
      c.family->bind_mtp_layer(c, b, "mtp.layers." + std::to_string(i) + ".", L);
      w.mtp.layers.push_back(std::move(L));
    }
  }
  return w;
}

}  // namespace

ModelWeights bind_weights(const ModelConfig& c, const TensorStore& store, size_t* total, const WeightFormat* at_load) {
  NINFER_CHECK(c.family != nullptr, "config without a family");
  std::vector<std::unique_ptr<QuantMatrix>> owned;
  WeightBinder b(store, &c.quant, at_load, &owned);
  ModelWeights w = bind_with(c, b);
  w.quantised = std::move(owned);
  if (total) *total = b.bytes();
  return w;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> list_weights(const ModelConfig& c) {
  std::vector<WeightShape> rec;
  WeightBinder b(&rec);
  bind_with(c, b);
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  for (WeightShape& r : rec) out.emplace_back(std::move(r.name), std::move(r.shape));
  return out;
}

size_t weight_bytes_estimate(const ModelConfig& c, const WeightFormat* at_load) {
  std::vector<WeightShape> rec;
  WeightBinder b(&rec);
  bind_with(c, b, /*with_mtp=*/false);
  size_t n = 0;
  for (const WeightShape& r : rec) {
    int64_t numel = 1;
    for (int64_t d : r.shape) numel *= d;
    if (!r.projection) {
      n += size_t(numel) * 2;
    } else if (c.quant) {
      n += quant_checkpoint_matrix_bytes(c.quant, r.shape[0], r.shape[1]);
    } else if (at_load) {
      n += quant_matrix_bytes(*at_load, r.shape[0], r.shape[1], 1, at_load->load_group);
    } else {
      n += size_t(numel) * 2;
    }
  }
  return n;
}

std::string first_quantised_tensor(const Model& m, std::string* format) {
  if (m.weights.quantised.empty()) return "";
  const QuantMatrix& q = *m.weights.quantised.front();
  if (format) *format = q.format->name;
  return q.name;
}

std::unique_ptr<Model> load_model(const std::filesystem::path& dir, uint64_t random_weights_seed,
                                  const WeightFormat* at_load) {
  auto m = std::make_unique<Model>();
  m->dir = dir;
  m->config = load_model_config(dir);
  if (at_load && m->config.quant)
    fail("--weights {}: {}/config.json says the checkpoint is already quantised (quantization_config '{}'); "
         "--weights quantises bf16/fp16/fp32 checkpoints",
         at_load->option, dir.string(), m->config.quant.name);
  m->store = random_weights_seed ? random_tensor_store(m->config, random_weights_seed) : TensorStore::open(dir);
  m->weights = bind_weights(m->config, *m->store, &m->weight_bytes, at_load);
  m->weights_at_load = at_load;
  return m;
}

}  // namespace ninfer
