// A loaded model: its config, the memory-mapped tensors, and the per-layer weight table
// bound by name (the family's tensor names) with every tensor's dtype and shape validated
// against the config. Backends read weights from here (raw pointers into the mapped files)
// and convert them to whatever they compute in.
#pragma once
#include <array>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/family.h"
#include "model/safetensors.h"
#include "model/weight_format.h"

namespace ninfer {

// A weight tensor: a dense tensor of the checkpoint (`t`, BF16/F16/F32) or a quantised
// projection (`q`, model/weight_format.h); both null when the model has no such tensor (e.g.
// biases). Only projection parts are ever quantised.
struct WeightRef {
  const TensorInfo* t = nullptr;
  const QuantMatrix* q = nullptr;
  explicit operator bool() const { return t != nullptr || q != nullptr; }
};

// A projection [out, in], possibly stored as several tensors stacked along `out` (q|k|v,
// gate|up) or as rows [row0, row0 + rows) of one tensor (a fused 3-D expert tensor).
struct ProjWeights {
  struct Part {
    WeightRef w;          // [rows, in] (or the whole tensor, see row0)
    WeightRef bias;       // [rows] or null
    int64_t row0 = 0;     // first row of w used (experts stacked in one tensor)
    int64_t rows = 0;
  };
  std::vector<Part> parts;
  int64_t in = 0;
  explicit operator bool() const { return !parts.empty(); }
  int64_t out() const {
    int64_t n = 0;
    for (const Part& p : parts) n += p.rows;
    return n;
  }
  bool has_bias() const {
    for (const Part& p : parts)
      if (p.bias) return true;
    return false;
  }
};

struct ExpertWeights {
  ProjWeights gate_up;  // [2 moe_ffn, hidden]
  ProjWeights down;     // [hidden, moe_ffn]
};

struct LayerWeights {
  std::array<WeightRef, size_t(Vec::kCount)> vec{};
  std::array<ProjWeights, size_t(Proj::kCount)> proj{};
  std::vector<ExpertWeights> experts;  // [n_experts] (MoE layers)
  WeightRef& operator[](Vec v) { return vec[size_t(v)]; }
  const WeightRef& operator[](Vec v) const { return vec[size_t(v)]; }
  ProjWeights& operator[](Proj p) { return proj[size_t(p)]; }
  const ProjWeights& operator[](Proj p) const { return proj[size_t(p)]; }
};

// The multi-token-prediction head of Qwen3-Next / Qwen3.5 checkpoints (`mtp.*`): bound and
// checked so such checkpoints load; no backend runs it yet (speculative decoding).
struct MtpWeights {
  WeightRef norm_embedding, norm_hidden, norm;  // [hidden]
  ProjWeights fc;                               // [hidden, 2 hidden]: concat(embedding, hidden) -> hidden
  std::vector<LayerWeights> layers;             // full-attention layers of the model's kind
};

struct ModelWeights {
  WeightRef embed;       // [vocab, hidden]
  WeightRef final_norm;  // [hidden]
  WeightRef lm_head;     // [vocab, hidden]; the embedding when tied
  std::vector<LayerWeights> layers;
  MtpWeights mtp;        // empty unless ModelConfig::mtp_layers
  std::vector<std::unique_ptr<QuantMatrix>> quantised;  // what the q of the WeightRefs point at
};

// A tensor the binder asks for (list_weights, capacity estimates): projection parts are the
// ones a quantised checkpoint or --weights may hold quantised.
struct WeightShape {
  std::string name;
  std::vector<int64_t> shape;
  bool projection = false;
};

// Looks tensors up by name with their shapes checked; counts the bytes bound.
class WeightBinder {
 public:
  // quant: the checkpoint's quantization_config (projections load through its method);
  // at_load: --weights (dense projections quantised to it; nullptr: kept as stored);
  // quantised matrices go to `owned`.
  WeightBinder(const TensorStore& store, const QuantConfig* quant = nullptr, const WeightFormat* at_load = nullptr,
               std::vector<std::unique_ptr<QuantMatrix>>* owned = nullptr)
      : store_(&store), quant_(quant), at_load_(at_load), owned_(owned) {}
  // Records every tensor asked for instead of binding: list_weights().
  explicit WeightBinder(std::vector<WeightShape>* record) : record_(record) {}
  WeightRef get(const std::string& name, std::vector<int64_t> shape, bool required = true);
  bool has(const std::string& name) const { return store_ && store_->find(name) != nullptr; }
  // A projection from one tensor [out, in] (+ optional bias [out] named `bias_name`).
  ProjWeights proj(const std::string& name, int64_t out, int64_t in, const std::string& bias_name = "");
  // Appends tensor `name` [rows, in] (+ bias) as the next part of p.
  void append(ProjWeights& p, const std::string& name, int64_t rows, int64_t in, const std::string& bias_name = "");
  size_t bytes() const { return bytes_; }

 private:
  // A projection part [rows, cols] named `name` ("<module>.weight"): quantised through the
  // checkpoint's method or --weights, else the dense tensor.
  WeightRef matrix(const std::string& name, int64_t rows, int64_t cols);
  const TensorStore* store_ = nullptr;
  const QuantConfig* quant_ = nullptr;
  const WeightFormat* at_load_ = nullptr;
  std::vector<std::unique_ptr<QuantMatrix>>* owned_ = nullptr;
  std::vector<WeightShape>* record_ = nullptr;
  size_t bytes_ = 0;
};

struct Model {
  std::filesystem::path dir;
  ModelConfig config;
  std::unique_ptr<TensorStore> store;
  ModelWeights weights;
  size_t weight_bytes = 0;  // bytes of the bound tensors as held (quantised ones as QuantMatrix::bytes)
  const WeightFormat* weights_at_load = nullptr;  // --weights (nullptr: bf16, as stored)
};

// The first quantised tensor of the model ("" when none): backends without kernels for a
// format name it when they refuse.
std::string first_quantised_tensor(const Model& m, std::string* format = nullptr);

// Binds and validates every tensor the config implies; Errors name the file and tensor.
// Projections load quantised when cfg.quant says so, or are quantised to `at_load`.
ModelWeights bind_weights(const ModelConfig& cfg, const TensorStore& store, size_t* bytes = nullptr,
                          const WeightFormat* at_load = nullptr);
// Every tensor (name, shape) a checkpoint of this config holds (make-random-checkpoint).
std::vector<std::pair<std::string, std::vector<int64_t>>> list_weights(const ModelConfig& cfg);
// Bytes of the weights on a device from config.json alone: projections in the checkpoint's
// quantised format or `at_load`'s, everything else as bf16 (the embedding once when tied).
size_t weight_bytes_estimate(const ModelConfig& cfg, const WeightFormat* at_load = nullptr);
// config.json + safetensors + bind.
// Loads dir's config and weights; with random_weights_seed != 0 only config.json is read and
// the weights are random, made in memory (model/random_weights.h: speed runs of shapes whose
// files would not fit the disk).
// at_load (--weights): quantise the projections of a dense checkpoint at load; an Error when
// the checkpoint is already quantised.
std::unique_ptr<Model> load_model(const std::filesystem::path& dir, uint64_t random_weights_seed = 0,
                                  const WeightFormat* at_load = nullptr);

}  // namespace ninfer
