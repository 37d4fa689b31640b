// Typed access to one config.json object with errors that name the file and the field
// (private to src/model: config.cpp, rope.cpp and the family files).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"

namespace ninfer {

struct ConfigReader {
  const nlohmann::json& j;
  const std::string& src;
  std::string where = "";  // prefix of field names in errors, e.g. "text_config."

  bool has(const char* k) const { return j.contains(k) && !j[k].is_null(); }
  ConfigReader sub(const char* k) const {
    if (!has(k) || !j[k].is_object()) fail("{}: field '{}{}' must be an object", src, where, k);
    return ConfigReader{j[k], src, where + k + "."};
  }
  int get_int(const char* k) const {
    if (!has(k)) fail("{}: missing field '{}{}'", src, where, k);
    if (!j[k].is_number_integer()) fail("{}: field '{}{}' must be an integer, got {}", src, where, k, j[k].dump());
    int64_t v = j[k].get<int64_t>();
    if (v <= 0 || v > (int64_t(1) << 30)) fail("{}: field '{}{}' = {} is out of range", src, where, k, v);
    return int(v);
  }
  int get_int_or(const char* k, int def) const { return has(k) ? get_int(k) : def; }
  double get_num(const char* k) const {
    if (!has(k)) fail("{}: missing field '{}{}'", src, where, k);
    if (!j[k].is_number()) fail("{}: field '{}{}' must be a number, got {}", src, where, k, j[k].dump());
    return j[k].get<double>();
  }
  double get_num_or(const char* k, double def) const { return has(k) ? get_num(k) : def; }
  bool get_bool_or(const char* k, bool def) const {
    if (!has(k)) return def;
    if (!j[k].is_boolean()) fail("{}: field '{}{}' must be true or false, got {}", src, where, k, j[k].dump());
    return j[k].get<bool>();
  }
  std::string get_str_or(const char* k, const std::string& def) const {
    if (!has(k)) return def;
    if (!j[k].is_string()) fail("{}: field '{}{}' must be a string, got {}", src, where, k, j[k].dump());
    return j[k].get<std::string>();
  }
  std::vector<double> get_nums(const char* k) const {
    if (!has(k) || !j[k].is_array()) fail("{}: field '{}{}' must be a list of numbers", src, where, k);
    std::vector<double> out;
    for (const auto& e : j[k]) {
      if (!e.is_number()) fail("{}: field '{}{}' must hold numbers, got {}", src, where, k, e.dump());
      out.push_back(e.get<double>());
    }
    return out;
  }
  [[noreturn]] void bad(const char* k, const std::string& why) const {
    fail("{}: field '{}{}' {}", src, where, k, why);
  }
};

struct RopeSpec;
// Reads the rope settings: `rope_parameters` (transformers 5; may be keyed by layer type, e.g.
// {"full_attention": {...}, "sliding_attention": {...}}, in which case `layer_type` picks one)
// or `rope_theta` + `rope_scaling` (transformers 4). head_dim and partial_rotary_factor give
// the rotary dims; `theta_field` overrides the base's field name (Gemma 3's local layers:
// rope_local_base_freq).
RopeSpec parse_rope(const ConfigReader& r, int head_dim, const char* layer_type = nullptr,
                    const char* theta_field = nullptr);

}  // namespace ninfer
