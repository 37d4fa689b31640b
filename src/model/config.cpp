#include "model/config.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"

namespace ninfer {
namespace {

using nlohmann::json;

struct Reader {
  const json& j;
  const std::string& src;

  bool has(const char* k) const { return j.contains(k) && !j[k].is_null(); }

  int get_int(const char* k) const {
    if (!has(k)) fail("{}: missing field '{}'", src, k);
    if (!j[k].is_number_integer()) fail("{}: field '{}' must be an integer, got {}", src, k, j[k].dump());
    int64_t v = j[k].get<int64_t>();
    if (v <= 0 || v > (int64_t(1) << 30)) fail("{}: field '{}' = {} is out of range", src, k, v);
    return int(v);
  }
  int get_int_or(const char* k, int def) const { return has(k) ? get_int(k) : def; }
  double get_num(const json& obj, const char* k, const std::string& where) const {
    if (!obj.contains(k) || obj[k].is_null()) fail("{}: missing field '{}{}'", src, where, k);
    if (!obj[k].is_number()) fail("{}: field '{}{}' must be a number, got {}", src, where, k, obj[k].dump());
    return obj[k].get<double>();
  }
  bool get_bool_or(const char* k, bool def) const {
    if (!has(k)) return def;
    if (!j[k].is_boolean()) fail("{}: field '{}' must be true or false, got {}", src, k, j[k].dump());
    return j[k].get<bool>();
  }
};

std::vector<int32_t> ids_field(const json& v, const std::string& src, const char* k) {
  std::vector<int32_t> out;
  if (v.is_null()) return out;
  if (v.is_number_integer()) {
    out.push_back(v.get<int32_t>());
  } else if (v.is_array()) {
    for (const json& e : v) {
      if (!e.is_number_integer()) fail("{}: '{}' must hold integers, got {}", src, k, e.dump());
      out.push_back(e.get<int32_t>());
    }
  } else {
    fail("{}: '{}' must be an integer or a list of integers, got {}", src, k, v.dump());
  }
  return out;
}

}  // namespace

int64_t ModelConfig::n_params() const {
  int64_t h = hidden;
  int64_t per_layer = h * q_dim() + 2 * h * kv_dim() + int64_t(q_dim()) * h + 3 * h * ffn + 2 * h;
  if (qk_norm) per_layer += 2 * head_dim;
  if (qkv_bias) per_layer += q_dim() + 2 * kv_dim();
  int64_t total = per_layer * n_layers + int64_t(vocab) * h + h;
  if (!tie_embeddings) total += int64_t(vocab) * h;
  return total;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot open {}", path.string());
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

ModelConfig parse_model_config(const std::string& text, const std::string& src) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    fail("{}: invalid JSON: {}", src, e.what());
  }
  if (!j.is_object()) fail("{}: expected a JSON object", src);
  Reader r{j, src};
  ModelConfig c;

  if (!r.has("architectures") || !j["architectures"].is_array() || j["architectures"].empty() ||
      !j["architectures"][0].is_string()) {
    fail("{}: missing field 'architectures' (a list naming the model class)", src);
  }
  c.architecture = j["architectures"][0].get<std::string>();
  if (c.architecture == "LlamaForCausalLM") {
    c.arch = Arch::Llama;
  } else if (c.architecture == "MistralForCausalLM") {
    c.arch = Arch::Mistral;
  } else if (c.architecture == "Qwen2ForCausalLM") {
    c.arch = Arch::Qwen2;
  } else if (c.architecture == "Qwen3ForCausalLM") {
    c.arch = Arch::Qwen3;
  } else {
    fail("{}: unsupported architecture '{}' (supported: LlamaForCausalLM, MistralForCausalLM, "
         "Qwen2ForCausalLM, Qwen3ForCausalLM)",
         src, c.architecture);
  }

  // transformers 5 may nest the text model's fields under "text_config"; we accept the flat
  // layout only, which every supported architecture uses.
  c.n_layers = r.get_int("num_hidden_layers");
  c.hidden = r.get_int("hidden_size");
  c.n_heads = r.get_int("num_attention_heads");
  c.n_kv_heads = r.get_int_or("num_key_value_heads", c.n_heads);
  c.ffn = r.get_int("intermediate_size");
  c.vocab = r.get_int("vocab_size");
  c.max_position = r.get_int_or("max_position_embeddings", 4096);
  if (r.has("head_dim")) {
    c.head_dim = r.get_int("head_dim");
  } else {
    if (c.hidden % c.n_heads != 0)
      fail("{}: hidden_size {} is not divisible by num_attention_heads {} and no head_dim is given",
           src, c.hidden, c.n_heads);
    c.head_dim = c.hidden / c.n_heads;
  }
  if (c.head_dim % 2 != 0) fail("{}: head_dim {} must be even for rotary embeddings", src, c.head_dim);
  if (c.n_heads % c.n_kv_heads != 0)
    fail("{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", src, c.n_heads,
         c.n_kv_heads);

  if (r.has("hidden_act")) {
    if (!j["hidden_act"].is_string() || (j["hidden_act"] != "silu" && j["hidden_act"] != "swish"))
      fail("{}: unsupported hidden_act {} (only silu)", src, j["hidden_act"].dump());
  }
  c.rms_eps = float(r.get_num(j, "rms_norm_eps", ""));

  // Rope: transformers 5 puts it under rope_parameters; transformers 4 uses rope_theta and an
  // optional rope_scaling. Only the default (unscaled) rope is implemented.
  if (r.has("rope_parameters")) {
    const json& rp = j["rope_parameters"];
    if (!rp.is_object()) fail("{}: 'rope_parameters' must be an object", src);
    c.rope_theta = r.get_num(rp, "rope_theta", "rope_parameters.");
    std::string type = rp.value("rope_type", std::string("default"));
    if (type != "default")
      fail("{}: unsupported rope_parameters.rope_type '{}' (only 'default')", src, type);
  } else {
    c.rope_theta = r.has("rope_theta") ? r.get_num(j, "rope_theta", "") : 10000.0;
    if (r.has("rope_scaling")) {
      const json& rs = j["rope_scaling"];
      std::string type = rs.is_object() ? rs.value("rope_type", rs.value("type", std::string("?")))
                                        : std::string("?");
      if (type != "default")
        fail("{}: unsupported rope_scaling type '{}' (only unscaled rope)", src, type);
    }
  }
  if (!(c.rope_theta > 0)) fail("{}: rope_theta must be positive", src);

  if (r.has("sliding_window") && r.get_bool_or("use_sliding_window", c.arch == Arch::Mistral)) {
    int sw = r.get_int("sliding_window");
    if (sw < c.max_position)
      fail("{}: sliding_window {} attention is not supported", src, sw);
  }

  c.tie_embeddings = r.get_bool_or("tie_word_embeddings", false);
  bool attn_bias = r.get_bool_or("attention_bias", false);
  c.qk_norm = c.arch == Arch::Qwen3;
  c.qkv_bias = c.arch == Arch::Qwen2 || attn_bias;
  c.o_bias = attn_bias && c.arch != Arch::Qwen2;
  c.mlp_bias = r.get_bool_or("mlp_bias", false);
  if (r.has("bos_token_id")) c.bos_id = ids_field(j["bos_token_id"], src, "bos_token_id").at(0);
  if (r.has("eos_token_id")) c.eos_ids = ids_field(j["eos_token_id"], src, "eos_token_id");
  for (const char* k : {"dtype", "torch_dtype"}) {
    if (r.has(k) && j[k].is_string()) {
      c.dtype = j[k].get<std::string>();
      break;
    }
  }
  return c;
}

ModelConfig load_model_config(const std::filesystem::path& dir) {
  std::filesystem::path p = dir / "config.json";
  if (!std::filesystem::exists(dir)) fail("model directory {} does not exist", dir.string());
  if (!std::filesystem::exists(p)) fail("{}: not found (is {} a Hugging Face model directory?)", p.string(), dir.string());
  return parse_model_config(read_file(p), p.string());
}

}  // namespace ninfer
