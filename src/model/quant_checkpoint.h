// Quantised checkpoints: config.json's `quantization_config` and the published tensor layouts
// of each method, repacked at load into QuantMatrix (model/weight_format.h). One table
// (quant_checkpoint.cpp, kMethods): quant_method -> config parser + tensor loader.
//
//   fp8                 (Qwen3-*-FP8, DeepSeek-V3 style) `<m>.weight` F8_E4M3 [out, in] and
//                       `<m>.weight_scale_inv` [ceil(out / br), ceil(in / bc)] for
//                       weight_block_size [br, bc]; without weight_block_size a `<m>.weight_scale`
//                       of one element (per tensor) or [out] / [out, 1] (per channel).
//                       w = e4m3 * scale (the "_inv" scale multiplies).
//   compressed-tensors  format "float-quantized", config_groups.*.weights {num_bits 8, type float,
//                       strategy tensor | channel | block (block_structure)}: `<m>.weight` F8_E4M3
//                       and `<m>.weight_scale` ([1], [out, 1] or the block grid). w = e4m3 * scale.
//   awq                 version "gemm", bits 4, zero_point true: `<m>.qweight` I32 [in, out / 8]
//                       (8 output columns per word, column 8j + order[i] in bits 4i..4i+3, order
//                       = 0 2 4 6 1 3 5 7), `<m>.qzeros` I32 [in / g, out / 8] packed alike,
//                       `<m>.scales` [in / g, out]. w[o][k] = (q - z) * s of group k / g.
//   gptq                bits 4: `<m>.qweight` I32 [in / 8, out] (input rows 8j + i in bits 4i..),
//                       `<m>.qzeros` I32 [n_groups, out / 8] (output column 8j + i in bits 4i..),
//                       `<m>.scales` [n_groups, out], `<m>.g_idx` I32 [in] (the group of each
//                       input row; required with desc_act true). checkpoint_format "gptq" (v1)
//                       stores zero - 1: z = (stored + 1) mod 16 (AutoGPTQ's rule); "gptq_v2"
//                       stores z. sym checkpoints store z = 8 like any other zero point.
// A module the checkpoint keeps dense (`<m>.weight` in BF16/F16/F32: lm_head, routers,
// modules_to_not_convert / ignore) loads as usual. Activation quantisation (input_scale,
// activation_scheme, input_activations) is not applied: activations stay fp32 on the CPU.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "model/weight_format.h"

namespace ninfer {

class TensorStore;
struct ConfigReader;
struct QuantMethod;

struct QuantConfig {
  const QuantMethod* method = nullptr;  // nullptr: the checkpoint is not quantised
  std::string name;                     // quant_method as written
  std::string source;                   // config.json path, for errors
  WeightFormatId format = WeightFormatId::Fp8;
  // fp8: scale blocks (0: per tensor or per channel, from the scale tensor's shape).
  int64_t block_rows = 0, block_cols = 0;
  const char* scale_name = "weight_scale";
  // awq / gptq
  int bits = 4;
  int64_t group = 128;     // input columns per group; 0: the whole row (GPTQ group_size -1)
  bool desc_act = false;   // gptq: groups from g_idx
  int zero_offset = 0;     // gptq v1: 1

  explicit operator bool() const { return method != nullptr; }
};

struct QuantMethod {
  const char* name;  // quantization_config.quant_method
  void (*parse)(const ConfigReader& r, QuantConfig& q);
  // Module `base` (e.g. "model.layers.0.self_attn.q_proj") as a rows x cols matrix, repacked;
  // nullptr when the checkpoint holds it dense (`base.weight` of a float dtype).
  std::unique_ptr<QuantMatrix> (*load)(const QuantConfig& q, const TensorStore& s, const std::string& base,
                                       int64_t rows, int64_t cols);
};

// Reads quantization_config (r: that object); Error naming the method or field for anything
// unsupported.
QuantConfig parse_quant_config(const ConfigReader& r);
std::string quant_method_names();  // "fp8, compressed-tensors, awq, gptq"

// Bytes of a rows x cols projection of this checkpoint (capacity planning from config.json).
size_t quant_checkpoint_matrix_bytes(const QuantConfig& q, int64_t rows, int64_t cols);

}  // namespace ninfer
