// The rope table: one entry per type (name, which config fields it needs, its inverse
// frequencies), following transformers' modeling_rope_utils. Frequencies are formed in fp32
// as torch does (base ** (arange(0, dim, 2) / dim) in float32); scalar set-up in double as
// Python does.
#include "model/rope.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "model/config_reader.h"

namespace ninfer {
namespace {

struct RopeTypeInfo {
  RopeType type;
  const char* name;
  const char* alias;  // older spelling, or nullptr
};

constexpr RopeTypeInfo kRopeTypes[] = {
    {RopeType::Default, "default", nullptr}, {RopeType::Linear, "linear", nullptr},
    {RopeType::Dynamic, "dynamic", nullptr}, {RopeType::Yarn, "yarn", nullptr},
    {RopeType::Llama3, "llama3", nullptr},   {RopeType::LongRope, "longrope", "su"},
};

std::string known_types() {
  std::string s;
  for (const auto& t : kRopeTypes) s += (s.empty() ? "" : ", ") + std::string(t.name);
  return s;
}

// base ** (2i / dim) in fp32, i < dim / 2.
std::vector<float> pos_freqs(double base, int dim) {
  std::vector<float> f(size_t(dim / 2));
  for (int i = 0; i < dim / 2; ++i) f[size_t(i)] = std::pow(float(base), float(2 * i) / float(dim));
  return f;
}

double yarn_mscale(double scale, double mscale) { return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

}  // namespace

const char* rope_type_name(RopeType t) {
  for (const auto& e : kRopeTypes)
    if (e.type == t) return e.name;
  return "?";
}

bool rope_depends_on_length(const RopeSpec& r) { return r.type == RopeType::Dynamic || r.type == RopeType::LongRope; }

RopeSpec parse_rope(const ConfigReader& top, int head_dim, const char* layer_type, const char* theta_field) {
  RopeSpec s;
  s.max_position = top.get_int_or("max_position_embeddings", 4096);
  double partial = top.get_num_or("partial_rotary_factor", 1.0);
  // The object holding the type and its parameters, and where the base lives.
  std::optional<ConfigReader> params;
  if (top.has("rope_parameters")) {
    ConfigReader all = top.sub("rope_parameters");
    if (layer_type && all.has(layer_type) && all.j[layer_type].is_object())
      params.emplace(all.sub(layer_type));
    else
      params.emplace(all);
    const ConfigReader& rp = *params;
    s.theta = rp.has("rope_theta") ? rp.get_num("rope_theta") : top.get_num_or("rope_theta", 10000.0);
    partial = rp.get_num_or("partial_rotary_factor", partial);
  } else {
    s.theta = top.get_num_or("rope_theta", 10000.0);
    if (top.has("rope_scaling")) params.emplace(top.sub("rope_scaling"));
  }
  if (theta_field) s.theta = top.get_num(theta_field);
  if (!(s.theta > 1.0)) top.bad(theta_field ? theta_field : "rope_theta", fmt::format("= {} must be > 1", s.theta));
  if (!(partial > 0 && partial <= 1)) top.bad("partial_rotary_factor", fmt::format("= {} must be in (0, 1]", partial));
  s.rotary_dim = int(head_dim * partial);
  if (s.rotary_dim < 2 || s.rotary_dim % 2 != 0)
    top.bad("partial_rotary_factor", fmt::format("gives {} rotary dims of head_dim {}; it must be even", s.rotary_dim, head_dim));
  s.original_max = top.get_int_or("original_max_position_embeddings", 0);
  if (!params) return s;
  const ConfigReader& p = *params;
  std::string name = p.get_str_or("rope_type", p.get_str_or("type", "default"));
  const RopeTypeInfo* info = nullptr;
  for (const auto& t : kRopeTypes)
    if (name == t.name || (t.alias && name == t.alias)) info = &t;
  if (!info) p.bad(p.has("rope_type") ? "rope_type" : "type", fmt::format("'{}' is not a supported rope type ({})", name, known_types()));
  s.type = info->type;
  // A top-level original_max_position_embeddings wins over the rope dict's (transformers'
  // standardize_rope_params; Phi-3).
  if (s.original_max == 0) s.original_max = p.get_int_or("original_max_position_embeddings", 0);
  switch (s.type) {
    case RopeType::Default:
      break;
    case RopeType::Linear:
    case RopeType::Dynamic:
      s.factor = p.get_num("factor");
      break;
    case RopeType::Llama3:
      s.factor = p.get_num("factor");
      s.low_freq_factor = p.get_num("low_freq_factor");
      s.high_freq_factor = p.get_num("high_freq_factor");
      if (s.original_max == 0) s.original_max = p.get_int("original_max_position_embeddings");
      if (!(s.high_freq_factor > s.low_freq_factor))
        p.bad("high_freq_factor", fmt::format("= {} must exceed low_freq_factor {}", s.high_freq_factor, s.low_freq_factor));
      break;
    case RopeType::Yarn:
      s.factor = p.get_num("factor");
      s.attention_factor = p.get_num_or("attention_factor", 0.0);
      s.beta_fast = p.has("beta_fast") ? p.get_num("beta_fast") : 32.0;
      s.beta_slow = p.has("beta_slow") ? p.get_num("beta_slow") : 1.0;
      s.mscale = p.get_num_or("mscale", 0.0);
      s.mscale_all_dim = p.get_num_or("mscale_all_dim", 0.0);
      s.truncate = p.get_bool_or("truncate", true);
      break;
    case RopeType::LongRope:
      s.short_factor = p.get_nums("short_factor");
      s.long_factor = p.get_nums("long_factor");
      s.factor = p.get_num_or("factor", 1.0);
      s.attention_factor = p.get_num_or("attention_factor", 0.0);
      for (const auto* v : {&s.short_factor, &s.long_factor})
        if (int(v->size()) != s.rotary_dim / 2)
          p.bad(v == &s.short_factor ? "short_factor" : "long_factor",
                fmt::format("has {} entries; rotary dims {} need {}", v->size(), s.rotary_dim, s.rotary_dim / 2));
      break;
  }
  if (s.factor <= 0) p.bad("factor", fmt::format("= {} must be positive", s.factor));
  return s;
}

RopeTable rope_table(const RopeSpec& r, int seq_len) {
  RopeTable t;
  const int dim = r.rotary_dim, half = dim / 2;
  t.inv_freq.resize(size_t(half));
  switch (r.type) {
    case RopeType::Default:
    case RopeType::Linear: {
      std::vector<float> pf = pos_freqs(r.theta, dim);
      for (int i = 0; i < half; ++i) t.inv_freq[size_t(i)] = 1.0f / pf[size_t(i)];
      if (r.type == RopeType::Linear)
        for (float& f : t.inv_freq) f /= float(r.factor);
      break;
    }
    case RopeType::Dynamic: {
      const double max_pos = r.max_position;
      const double len = seq_len > r.max_position ? seq_len : max_pos;
      const double base = r.theta * std::pow(r.factor * len / max_pos - (r.factor - 1), double(dim) / (dim - 2));
      std::vector<float> pf = pos_freqs(base, dim);
      for (int i = 0; i < half; ++i) t.inv_freq[size_t(i)] = 1.0f / pf[size_t(i)];
      break;
    }
    case RopeType::Llama3: {
      std::vector<float> pf = pos_freqs(r.theta, dim);
      const float factor = float(r.factor), lo = float(r.low_freq_factor), hi = float(r.high_freq_factor);
      const float old_ctx = float(r.original_max);
      const float low_wavelen = old_ctx / lo, high_wavelen = old_ctx / hi;
      for (int i = 0; i < half; ++i) {
        const float inv = 1.0f / pf[size_t(i)];
        const float wavelen = 2.0f * float(M_PI) / inv;
        float v = wavelen > low_wavelen ? inv / factor : inv;
        if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) {
          const float smooth = (old_ctx / wavelen - lo) / (hi - lo);
          v = (1 - smooth) * v / factor + smooth * v;
        }
        t.inv_freq[size_t(i)] = v;
      }
      break;
    }
    case RopeType::Yarn: {
      const double orig = r.original_max > 0 ? r.original_max : r.max_position;
      auto corr_dim = [&](double rot) { return dim * std::log(orig / (rot * 2 * M_PI)) / (2 * std::log(r.theta)); };
      double low = corr_dim(r.beta_fast), high = corr_dim(r.beta_slow);
      if (r.truncate) {
        low = std::floor(low);
        high = std::ceil(high);
      }
      low = std::max(low, 0.0);
      high = std::min(high, double(dim - 1));
      if (low == high) high += 0.001;  // as transformers: no singular ramp
      std::vector<float> pf = pos_freqs(r.theta, dim);
      for (int i = 0; i < half; ++i) {
        const float ramp = std::clamp((float(i) - float(low)) / float(high - low), 0.0f, 1.0f);
        const float extra = 1.0f - ramp;  // inv_freq_extrapolation_factor
        const float inv_ex = 1.0f / pf[size_t(i)], inv_in = 1.0f / (float(r.factor) * pf[size_t(i)]);
        t.inv_freq[size_t(i)] = inv_in * (1 - extra) + inv_ex * extra;
      }
      double af = r.attention_factor;
      if (af == 0) {
        af = (r.mscale != 0 && r.mscale_all_dim != 0)
                 ? yarn_mscale(r.factor, r.mscale) / yarn_mscale(r.factor, r.mscale_all_dim)
                 : yarn_mscale(r.factor, 1.0);
      }
      t.attention_factor = float(af);
      break;
    }
    case RopeType::LongRope: {
      const int orig = r.original_max > 0 ? r.original_max : r.max_position;
      const double factor = r.original_max > 0 ? double(r.max_position) / r.original_max : r.factor;
      const std::vector<double>& ext = seq_len > orig ? r.long_factor : r.short_factor;
      std::vector<float> pf = pos_freqs(r.theta, dim);
      for (int i = 0; i < half; ++i) t.inv_freq[size_t(i)] = 1.0f / (float(ext[size_t(i)]) * pf[size_t(i)]);
      double af = r.attention_factor;
      if (af == 0) af = factor <= 1 ? 1.0 : std::sqrt(1 + std::log(factor) / std::log(double(orig)));
      t.attention_factor = float(af);
      break;
    }
  }
  return t;
}

}  // namespace ninfer
