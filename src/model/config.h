// Model hyper-parameters read from a Hugging Face `config.json` (transformers 4 and 5
// layouts, flat or with the text model nested under `text_config`). Which architectures exist
// and what each reads is the family table (model/family.h); this struct is what they fill:
// the shapes, the per-layer attention (window, rope), the scalar multipliers and the MoE
// fields. Anything unsupported is an Error naming the file and field.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "model/quant_checkpoint.h"
#include "model/rope.h"

namespace ninfer {

struct Family;

enum class Activation { Silu, GeluTanh };

// A layer's token mixer: softmax attention over the paged KV cache, or Gated DeltaNet linear
// attention over a fixed-size recurrent state per sequence (Qwen3-Next, Qwen3.5).
enum class Mixer : uint8_t { Attention, DeltaNet };

// What one decoder layer does differently from the others.
struct LayerSpec {
  int window = 0;     // sliding window (a query at p sees keys k, p - window < k <= p); 0: all keys
  int rope = 0;       // index into ModelConfig::ropes
  bool moe = false;   // mixture-of-experts FFN (else dense)
  Mixer mixer = Mixer::Attention;
};

// Gated DeltaNet shapes (linear_* fields): nk key heads of dk (queries alike), nv value heads of
// dv (each key head serves nv / nk consecutive value heads), a causal depthwise conv of `conv`
// taps over q | k | v.
struct DeltaNetShape {
  int nk = 0, nv = 0, dk = 0, dv = 0, conv = 0;
  // Qwen3-Next packs in_proj_qkvz / in_proj_ba per key head ([q k v z] of each group, [b a] of
  // each group); Qwen3.5 has in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, each flat.
  bool grouped = false;
  int key_dim() const { return nk * dk; }
  int value_dim() const { return nv * dv; }
  int conv_dim() const { return 2 * key_dim() + value_dim(); }
  // One token's projection: q | k | v | z | b | a (flat) or the grouped layout, same width.
  int proj_dim() const { return conv_dim() + value_dim() + 2 * nv; }
  // fp32 state of one layer for one sequence: the conv's last conv - 1 inputs and S [nv][dk][dv].
  size_t state_floats() const { return size_t(conv - 1) * size_t(conv_dim()) + size_t(nv) * dk * dv; }
};

struct ModelConfig {
  std::string architecture;        // e.g. "Qwen3ForCausalLM"
  const Family* family = nullptr;  // the family table's entry for `architecture`
  std::string tensor_prefix = "model.";  // "model.language_model." for Gemma3ForConditionalGeneration
  int n_layers = 0;
  int hidden = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int ffn = 0;  // intermediate_size (dense layers)
  int vocab = 0;
  float rms_eps = 1e-6f;
  int max_position = 0;
  bool tie_embeddings = false;
  bool qk_norm = false;       // RMSNorm over each q/k head before rope (Qwen3, Gemma 3)
  bool qk_norm_full = false;  // RMSNorm over the whole q (k) projection before rope (OLMo-2)
  bool qkv_bias = false;      // Qwen2 (always) or attention_bias
  bool o_bias = false;        // attention_bias on Llama applies to o_proj too
  bool mlp_bias = false;
  bool fused_qkv = false;     // one qkv_proj tensor (Phi-3) instead of q/k/v_proj
  bool fused_gate_up = false; // one gate_up_proj tensor (Phi-3), gate rows first
  Activation act = Activation::Silu;
  // Score scale of attention (1/sqrt(head_dim) unless the config says otherwise:
  // query_pre_attn_scalar, attention_multiplier) and soft-capping (0: none).
  float attn_scale = 0.0f;
  float attn_softcap = 0.0f;
  float final_softcap = 0.0f;   // logits = c * tanh(logits / c)
  float embed_scale = 1.0f;     // x = embed * scale (Gemma: sqrt(hidden) in the weights' dtype)
  float residual_scale = 1.0f;  // x += scale * block output (Granite)
  float logit_scale = 1.0f;     // logits *= scale (Granite: 1 / logits_scaling)
  // Mixture of experts (layers with LayerSpec::moe).
  int n_experts = 0, top_k = 0, moe_ffn = 0;
  bool norm_topk = false;       // renormalise the top-k router probabilities to sum to 1
  int shared_ffn = 0;           // a shared expert beside the routed ones, sigmoid-gated (0: none)
  // Hybrids: attention output gated per element (q_proj gives query | gate for each head; ATT
  // *= sigmoid(gate)), the DeltaNet layers' shapes, and the MTP head's layer count (weights
  // bound, not used yet).
  bool attn_gate = false;
  DeltaNetShape dn;
  int mtp_layers = 0;
  std::vector<RopeSpec> ropes;  // [0]: global layers; Gemma 3's local layers use [1]
  std::vector<LayerSpec> layers;  // [n_layers]
  std::optional<int32_t> bos_id;
  std::vector<int32_t> eos_ids;
  std::string dtype;  // "bfloat16", "float32", ... (informational)
  QuantConfig quant;  // quantization_config (model/quant_checkpoint.h); empty: not quantised

  int q_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
  int n_attention_layers() const;  // layers with a KV cache
  int n_deltanet_layers() const;
  // Widest row of the QKV buffer over the layers: q | k | v (| gate) or a DeltaNet projection.
  int qkv_width() const;
  // Bytes of recurrent state one sequence holds over all DeltaNet layers (fp32); 0 for none.
  size_t state_bytes() const;
  float score_scale() const;     // attn_scale, or 1/sqrt(head_dim)
  int max_window() const;        // the largest window of any layer (0 when one layer has none)
  int64_t n_params() const;      // parameter count implied by the shapes
  int64_t n_active_params() const;  // per token (MoE: top_k of the experts)
};

// Parses config.json text; `source` names the file in errors.
ModelConfig parse_model_config(const std::string& json_text, const std::string& source);
// Reads <dir>/config.json.
ModelConfig load_model_config(const std::filesystem::path& dir);

std::string read_file(const std::filesystem::path& path);  // Error naming the path on failure

}  // namespace ninfer
