// The architecture families: one table (families.cpp) of Hugging Face class names -> Family,
// and the operations a family's decoder layer is written against (LayerOps), which every
// backend implements. Adding a family is one file in families/ (its config fields, its tensor
// names, its layer as a sequence of operations) plus one line in the table.
//
// Activations a layer works on (backend-owned, one row per token of the forward):
//   X    [T, hidden] fp32   the residual stream
//   H    [T, hidden]        the input of a projection (bf16 on the GPU)
//   QKV  [T, q_dim + 2 kv_dim] fp32   q heads, then k heads, then v heads (rows of
//        ModelConfig::qkv_width(): a gated q_proj's gates, a DeltaNet projection are wider)
//   ATT  [T, q_dim]         attention output (the input of o_proj); [T, value_dim] after delta_net
//   TMP  [T, hidden] fp32   a block output before its post-norm
//   GU   [T, 2 ffn] fp32    gate | up
//   FF   [T, ffn]           act(gate) * up (the input of down_proj)
// H (a norm's or copy's output) lives until X is next written: a layer reads H only before it
// changes X again (the CUDA backend defers a decode norm into the GEMVs that read it and fails
// on a read of H after X has changed).
#pragma once
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "model/config.h"

namespace ninfer {

struct ConfigReader;
struct LayerWeights;
class WeightBinder;

enum class Buf { X, H, QKV, ATT, TMP, GU, FF };
// Per-layer vectors ([hidden], or [head_dim] / [q_dim], [kv_dim] for the q/k norms), then the
// DeltaNet layers' parameters: the conv taps [conv_dim, 1, conv], A_log [nv], dt_bias [nv] and
// the gated norm's weight [dv]. Family::norm_offset_one applies to the norms only (vec_is_norm).
enum class Vec { AttnNorm, PostAttnNorm, FfnNorm, PostFfnNorm, QNorm, KNorm, DnConv, DnALog, DnDtBias, DnNorm, kCount };
inline bool vec_is_norm(Vec v) { return int(v) <= int(Vec::KNorm); }
// Per-layer projections (weights [out, in], optional bias [out]). A DeltaNet layer's input
// projection is Qkv and its out_proj O; the shared expert (ModelConfig::shared_ffn) is
// SharedGateUp, SharedDown and its gate SharedGate [1, hidden].
enum class Proj { Qkv, O, GateUp, Down, Router, SharedGateUp, SharedDown, SharedGate, kCount };

class LayerOps {
 public:
  virtual ~LayerOps() = default;
  // out = rmsnorm(in) * w   (out: H)
  virtual void norm(Buf in, Vec w, Buf out) = 0;
  // acc += rmsnorm(in) * w  (Gemma / OLMo-2 post-norms; acc: X)
  virtual void norm_add(Buf in, Vec w, Buf acc) = 0;
  // out = in (X -> H: a projection input without a norm)
  virtual void copy(Buf in, Buf out) = 0;
  // out (+)= alpha * (in W^T + bias)
  virtual void linear(Buf in, Proj p, Buf out, bool accumulate, float alpha) = 0;
  // On QKV: q/k norms (ModelConfig::qk_norm per head, qk_norm_full over the whole projection),
  // then the layer's rope on the q and k heads.
  virtual void qk_norm_rope() = 0;
  // The new tokens' K and V into their cache pages, then attention QKV -> ATT with the layer's
  // window, ModelConfig::score_scale() and attn_softcap.
  virtual void attention() = 0;
  // FF = act(GU[:, :ffn]) * GU[:, ffn:]
  virtual void gated_act(Activation a) = 0;
  // X += alpha * sum over the top-k experts e of p_e * down_e(act(gate_e(H)) * up_e(H)),
  // p = softmax(H W_router^T) restricted to the top k (renormalised when norm_topk); with a
  // shared expert also X += alpha * sigmoid(H w_sg) * down_s(silu(gate_s(H)) * up_s(H)).
  virtual void moe(float alpha) = 0;
  // Gated attention (ModelConfig::attn_gate): QKV rows as the projection wrote them, [query_h
  // | gate_h] for each head h then k and v, become q | k | v with the gates set aside.
  virtual void split_attn_gate() = 0;
  // ATT *= sigmoid(the gates split_attn_gate set aside).
  virtual void attn_gate() = 0;
  // Gated DeltaNet on the projection in QKV (DeltaNetShape's layout): causal conv + SiLU over
  // q | k | v continuing the sequence's conv state, q and k L2-normalised (q also scaled by
  // 1/sqrt(dk)), decay g = -exp(A_log) softplus(a + dt_bias), beta = sigmoid(b), and per value
  // head S = exp(g) S; S += k (beta (v - S^T k))^T; o = S^T q, on the sequence's state; then
  // ATT = rmsnorm(o) * w * silu(z) per value head.
  virtual void delta_net() = 0;
};

struct Family {
  const char* name;
  std::vector<std::string> architectures;  // Hugging Face class names
  // Reads the family's fields (after the common ones in config.cpp) and fills c.layers.
  void (*parse)(const ConfigReader& r, ModelConfig& c);
  // Binds layer l's tensors (prefix: "<tensor_prefix>layers.<l>.").
  void (*bind_layer)(const ModelConfig& c, WeightBinder& b, const std::string& prefix, LayerWeights& w);
  // One decoder layer.
  void (*layer)(const ModelConfig& c, int l, LayerOps& ops);
  // Norm weights are stored as w - 1 (Gemma: the norm multiplies by 1 + w).
  bool norm_offset_one = false;
  // The config class's defaults for fields a config.json may omit (a JSON object; transformers
  // fills them in from the class): nullptr or "{}" when none.
  const char* (*defaults)(const std::string& architecture) = nullptr;
  // Binds MTP layer i's tensors (prefix "mtp.layers.<i>."), for configs with mtp_layers.
  void (*bind_mtp_layer)(const ModelConfig& c, WeightBinder& b, const std::string& prefix, LayerWeights& w) = nullptr;
};

const Family* find_family(std::string_view architecture);
std::string supported_architectures();  // "A, B, ..." for errors

// Shared pieces of the families' config readers (families/common.cpp).
// The per-layer window from `sliding_window` and `layer_types` (or a pattern), and the
// standard pre-norm MLP fields.
void parse_layer_windows(const ConfigReader& r, ModelConfig& c, bool use_window, bool use_layer_types = true);
// config.json's `layer_types`: a list of num_hidden_layers entries, each one of `kinds` (in
// that order in errors); calls on_layer(layer, the entry's index in kinds). An error names the
// field and the entry. Callers check r.has("layer_types") first.
void read_layer_types(const ConfigReader& r, const ModelConfig& c, std::initializer_list<std::string_view> kinds,
                      const std::function<void(int layer, int kind)>& on_layer);
// Qwen-style MoE placement: layer l is sparse unless listed in `mlp_only_layers` or
// (l + 1) % decoder_sparse_step != 0 (Qwen3-MoE, Qwen3-Next).
void parse_sparse_layers(const ConfigReader& r, ModelConfig& c);
// The standard attention/MLP tensors of a Llama-style layer.
void bind_llama_attention(const ModelConfig& c, WeightBinder& b, const std::string& p, LayerWeights& w);
void bind_llama_mlp(const ModelConfig& c, WeightBinder& b, const std::string& p, const std::string& mlp,
                    LayerWeights& w);
// The pre-norm attention half of a Llama-style layer: X += residual_scale * o(attn(norm(X))).
void llama_attention_block(const ModelConfig& c, LayerOps& o);

}  // namespace ninfer
