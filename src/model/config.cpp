#include "model/config.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "model/config_reader.h"
#include "model/family.h"

namespace ninfer {
namespace {

using nlohmann::json;

std::vector<int32_t> ids_field(const json& v, const std::string& src, const char* k) {
  std::vector<int32_t> out;
  if (v.is_null()) return out;
  // Token ids: integers in [0, INT32_MAX] (a wider integer would wrap in the conversion).
  auto id = [&](const json& e) {
    if (!e.is_number_integer() || (e.is_number_unsigned() ? e.get<uint64_t>() > uint64_t(INT32_MAX)
                                                            : e.get<int64_t>() < 0 || e.get<int64_t>() > INT32_MAX))
      fail("{}: '{}' must hold token ids (integers from 0 to {}), got {}", src, k, INT32_MAX, e.dump());
    return int32_t(e.get<int64_t>());
  };
  if (v.is_number_integer()) {
    out.push_back(id(v));
  } else if (v.is_array()) {
    for (const json& e : v) out.push_back(id(e));
  } else {
    fail("{}: '{}' must be an integer or a list of integers, got {}", src, k, v.dump());
  }
  return out;
}

}  // namespace

float ModelConfig::score_scale() const { return attn_scale > 0 ? attn_scale : 1.0f / std::sqrt(float(head_dim)); }

int ModelConfig::n_attention_layers() const {
  int n = 0;
  for (const LayerSpec& l : layers) n += l.mixer == Mixer::Attention;
  return n;
}

int ModelConfig::n_deltanet_layers() const { return int(layers.size()) - n_attention_layers(); }

int ModelConfig::qkv_width() const {
  int w = n_attention_layers() > 0 ? q_dim() * (attn_gate ? 2 : 1) + 2 * kv_dim() : 0;
  if (n_deltanet_layers() > 0) w = std::max(w, dn.proj_dim());
  return w;
}

size_t ModelConfig::state_bytes() const { return size_t(n_deltanet_layers()) * dn.state_floats() * 4; }

int ModelConfig::max_window() const {
  int w = 0;
  for (const LayerSpec& l : layers) {
    if (l.mixer != Mixer::Attention) continue;
    if (l.window == 0) return 0;
    w = std::max(w, l.window);
  }
  return w;
}

namespace {

constexpr int kMaxLayers = 4096;

// NOTE: in 128-bit arithmetic, so that the parser can refuse a config whose shapes imply more
// parameters than an int64 holds (each field may be up to 2^30) instead of overflowing.
using wide = __int128;

wide params_wide(const ModelConfig& c) {
  const wide h = c.hidden, q = wide(c.n_heads) * c.head_dim, kv = wide(c.n_kv_heads) * c.head_dim;
  wide total = wide(c.vocab) * h + h;
  if (!c.tie_embeddings) total += wide(c.vocab) * h;
  for (int l = 0; l < c.n_layers; ++l) {
    const bool dn = size_t(l) < c.layers.size() && c.layers[size_t(l)].mixer == Mixer::DeltaNet;
    wide per = 2 * h;
    if (dn) {
      const DeltaNetShape& s = c.dn;
      per += h * s.proj_dim() + wide(s.value_dim()) * h + wide(s.conv_dim()) * s.conv + 2 * wide(s.nv) + s.dv;
    } else {
      per += h * q * (c.attn_gate ? 2 : 1) + 2 * h * kv + q * h;
      if (c.qk_norm) per += 2 * c.head_dim;
      if (c.qk_norm_full) per += q + kv;
      if (c.qkv_bias) per += q + 2 * kv;
    }
    if (size_t(l) < c.layers.size() && c.layers[size_t(l)].moe)
      per += wide(c.n_experts) * 3 * h * c.moe_ffn + wide(c.n_experts) * h;
    else
      per += 3 * h * c.ffn;
    if (size_t(l) < c.layers.size() && c.layers[size_t(l)].moe && c.shared_ffn > 0)
      per += 3 * h * wide(c.shared_ffn) + h;
    total += per;
  }
  return total;
}

}  // namespace

int64_t ModelConfig::n_params() const { return int64_t(params_wide(*this)); }

int64_t ModelConfig::n_active_params() const {
  if (n_experts == 0) return n_params();
  wide n = params_wide(*this);
  for (const LayerSpec& l : layers)
    if (l.moe) n -= wide(n_experts - top_k) * 3 * hidden * moe_ffn;
  return int64_t(n);
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
  } catch (const json::exception& e) {  // parse_error, or out_of_range: a number past double range
    fail("{}: invalid JSON: {}", src, e.what());
  }
  if (!j.is_object()) fail("{}: expected a JSON object", src);
  ConfigReader top{j, src};
  ModelConfig c;

  if (!top.has("architectures") || !j["architectures"].is_array() || j["architectures"].empty() ||
      !j["architectures"][0].is_string()) {
    fail("{}: missing field 'architectures' (a list naming the model class)", src);
  }
  c.architecture = j["architectures"][0].get<std::string>();
  c.family = find_family(c.architecture);
  if (!c.family)
    fail("{}: unsupported architecture '{}' (supported: {})", src, c.architecture, supported_architectures());
  if (top.has("quantization_config")) c.quant = parse_quant_config(top.sub("quantization_config"));

  // Multimodal wrappers nest the language model's fields under text_config. Fields the file
  // omits take the config class's defaults (Family::defaults).
  const bool nested = top.has("text_config");
  // NOTE: checked before the family defaults are merged in (json::operator[] on a non-object throws).
  if (nested && !j["text_config"].is_object()) fail("{}: field 'text_config' must be an object", src);
  json body = nested ? j["text_config"] : j;
  if (c.family->defaults) {
    const json d = json::parse(c.family->defaults(c.architecture));
    for (auto it = d.begin(); it != d.end(); ++it)
      if (!body.contains(it.key()) || body[it.key()].is_null()) body[it.key()] = it.value();
  }
  ConfigReader r{body, src, nested ? "text_config." : ""};
  c.n_layers = r.get_int("num_hidden_layers");
  // NOTE: 4096 is 30x the deepest open model (Llama 3.1 405B: 126); a config may otherwise ask
  // for 2^30 layers, and the engine allocates per-layer state before reading any weight.
  if (c.n_layers > kMaxLayers)
    fail("{}: field '{}num_hidden_layers' = {} is more than the {} layers ninfer supports", src,
         nested ? "text_config." : "", c.n_layers, kMaxLayers);
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
      fail("{}: hidden_size {} is not divisible by num_attention_heads {} and no head_dim is given", src, c.hidden,
           c.n_heads);
    c.head_dim = c.hidden / c.n_heads;
  }
  if (c.head_dim % 2 != 0) fail("{}: head_dim {} must be even for rotary embeddings", src, c.head_dim);
  if (int64_t(c.n_heads) * c.head_dim > (int64_t(1) << 30))
    fail("{}: num_attention_heads {} x head_dim {} is out of range", src, c.n_heads, c.head_dim);
  if (c.n_heads % c.n_kv_heads != 0)
    fail("{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", src, c.n_heads, c.n_kv_heads);
  c.rms_eps = float(r.has("rms_norm_eps") ? r.get_num("rms_norm_eps") : r.get_num("layer_norm_eps"));
  c.tie_embeddings = top.has("tie_word_embeddings") ? top.get_bool_or("tie_word_embeddings", false)
                                                    : r.get_bool_or("tie_word_embeddings", false);
  c.mlp_bias = r.get_bool_or("mlp_bias", false);
  c.ropes = {parse_rope(r, c.head_dim)};
  c.layers.assign(size_t(c.n_layers), LayerSpec{});
  c.family->parse(r, c);
  NINFER_CHECK(int(c.layers.size()) == c.n_layers, "{}: family {} left {} layer specs", src, c.family->name,
               c.layers.size());
  // NOTE: 2^50 (10^15) parameters is 500x the largest open model; beyond it the shape arithmetic
  // (weights, capacity) would overflow int64.
  if (params_wide(c) > (wide(1) << 50))
    fail("{}: the shapes (hidden_size, num_hidden_layers, intermediate_size, vocab_size, heads, experts) imply "
         "{:.3g} parameters: out of range",
         src, double(params_wide(c)));
  for (const ConfigReader* rr : {&top, &r}) {
    if (rr->has("bos_token_id") && !c.bos_id) {
      std::vector<int32_t> b = ids_field(rr->j["bos_token_id"], src, "bos_token_id");
      if (!b.empty()) c.bos_id = b[0];
    }
    if (rr->has("eos_token_id") && c.eos_ids.empty()) c.eos_ids = ids_field(rr->j["eos_token_id"], src, "eos_token_id");
  }
  for (const ConfigReader* rr : {&r, &top}) {
    for (const char* k : {"dtype", "torch_dtype"}) {
      if (c.dtype.empty() && rr->has(k) && rr->j[k].is_string()) c.dtype = rr->j[k].get<std::string>();
    }
  }
  return c;
}

ModelConfig load_model_config(const std::filesystem::path& dir) {
  std::filesystem::path p = dir / "config.json";
  if (!std::filesystem::exists(dir)) fail("model directory {} does not exist", dir.string());
  if (!std::filesystem::exists(p))
    fail("{}: not found (is {} a Hugging Face model directory?)", p.string(), dir.string());
  return parse_model_config(read_file(p), p.string());
}

}  // namespace ninfer
