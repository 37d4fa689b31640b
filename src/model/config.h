// Model hyper-parameters read from a Hugging Face `config.json` (transformers 4 and 5
// layouts). Only decoder-only Llama-family architectures are supported; anything else is
// an Error naming the file and field.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ninfer {

enum class Arch { Llama, Mistral, Qwen2, Qwen3 };

struct ModelConfig {
  std::string architecture;  // e.g. "Qwen3ForCausalLM"
  Arch arch = Arch::Llama;
  int n_layers = 0;
  int hidden = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int ffn = 0;  // intermediate_size
  int vocab = 0;
  float rms_eps = 1e-6f;
  double rope_theta = 10000.0;
  int max_position = 0;
  bool tie_embeddings = false;
  bool qk_norm = false;    // Qwen3: RMSNorm over each q/k head before rope
  bool qkv_bias = false;   // Qwen2 (always) or attention_bias
  bool o_bias = false;     // attention_bias on Llama applies to o_proj too
  bool mlp_bias = false;
  std::optional<int32_t> bos_id;
  std::vector<int32_t> eos_ids;
  std::string dtype;  // "bfloat16", "float32", ... (informational)

  int q_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
  int64_t n_params() const;  // parameter count implied by the shapes
};

// Parses config.json text; `source` names the file in errors.
ModelConfig parse_model_config(const std::string& json_text, const std::string& source);
// Reads <dir>/config.json.
ModelConfig load_model_config(const std::filesystem::path& dir);

std::string read_file(const std::filesystem::path& path);  // Error naming the path on failure

}  // namespace ninfer
