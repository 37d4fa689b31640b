// A loaded model: its config, the memory-mapped tensors, and the per-layer weight table
// bound by name with every tensor's dtype and shape validated against the config.
// Backends read weights from here (raw pointers into the mapped files) and convert them to
// whatever they compute in.
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/safetensors.h"

namespace ninfer {

// A weight tensor: null `t` when the model has no such tensor (e.g. biases).
struct WeightRef {
  const TensorInfo* t = nullptr;
  explicit operator bool() const { return t != nullptr; }
};

struct LayerWeights {
  WeightRef attn_norm;                // [hidden]
  WeightRef wq, wk, wv, wo;           // [q_dim, hidden], [kv_dim, hidden] x2, [hidden, q_dim]
  WeightRef bq, bk, bv, bo;           // optional biases
  WeightRef q_norm, k_norm;           // [head_dim] (Qwen3)
  WeightRef ffn_norm;                 // [hidden]
  WeightRef w_gate, w_up, w_down;     // [ffn, hidden] x2, [hidden, ffn]
  WeightRef b_gate, b_up, b_down;     // optional (mlp_bias)
};

struct ModelWeights {
  WeightRef embed;     // [vocab, hidden]
  WeightRef final_norm;  // [hidden]
  WeightRef lm_head;   // [vocab, hidden]; the embedding when tied
  std::vector<LayerWeights> layers;
};

struct Model {
  std::filesystem::path dir;
  ModelConfig config;
  std::unique_ptr<TensorStore> store;
  ModelWeights weights;
  size_t weight_bytes = 0;  // bytes of the bound tensors as stored
};

// Binds and validates every tensor the config implies; Errors name the file and tensor.
ModelWeights bind_weights(const ModelConfig& cfg, const TensorStore& store, size_t* bytes = nullptr);
// config.json + safetensors + bind.
std::unique_ptr<Model> load_model(const std::filesystem::path& dir);

}  // namespace ninfer
