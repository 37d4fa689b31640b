// generation_config.json / config.json reader (see generation_config.h).
#include "text/generation_config.h"

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <fstream>

#include "core/error.h"

namespace ninfer {
namespace {

using json = nlohmann::json;

std::optional<json> read_optional(const std::filesystem::path& path) {
  if (!std::filesystem::exists(path)) return std::nullopt;
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("{}: cannot open", path.string());
  try {
    json j = json::parse(f);
    if (!j.is_object()) fail("{}: top level must be a JSON object", path.string());
    return j;
  } catch (const json::exception& e) {
    fail("{}: invalid JSON: {}", path.string(), e.what());
  }
}

int32_t token_id(const json& v, const std::filesystem::path& path, const char* field) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
    fail("{}: \"{}\" must be a non-negative integer or a list of them, got {}", path.string(), field, v.dump());
  return v.get<int32_t>();
}

// Fills `out` from j[field] if the field is present and not null; returns whether it was.
bool read_ids(const json& j, const char* field, const std::filesystem::path& path, std::vector<int32_t>& out) {
  if (!j.contains(field) || j[field].is_null()) return false;
  const json& v = j[field];
  if (v.is_array()) {
    for (const json& e : v) {
      int32_t id = token_id(e, path, field);
      if (std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
    }
  } else {
    out.push_back(token_id(v, path, field));
  }
  return true;
}

// A number field of generation_config.json checked against [lo, hi] (lo excluded when
// lo_open); nullopt when absent or null.
std::optional<float> number(const json& j, const char* field, const std::filesystem::path& path, double lo,
                            bool lo_open, double hi, const char* range) {
  if (!j.contains(field) || j[field].is_null()) return std::nullopt;
  const json& v = j[field];
  if (!v.is_number()) fail("{}: \"{}\" must be a number, got {}", path.string(), field, v.dump());
  double x = v.get<double>();
  if (!(lo_open ? x > lo : x >= lo) || !(x <= hi))
    fail("{}: \"{}\" must be {}, got {}", path.string(), field, range, v.dump());
  return static_cast<float>(x);
}

SamplingDefaults read_sampling(const json& j, const std::filesystem::path& path) {
  SamplingDefaults d;
  d.file = path.string();
  d.temperature = number(j, "temperature", path, 0.0, false, 1e6, ">= 0");
  d.top_p = number(j, "top_p", path, 0.0, true, 1.0, "in (0, 1]");
  d.min_p = number(j, "min_p", path, 0.0, false, 1.0, "in [0, 1]");
  d.repetition_penalty = number(j, "repetition_penalty", path, 0.0, true, 1e6, "> 0");
  if (j.contains("top_k") && !j["top_k"].is_null()) {
    const json& v = j["top_k"];
    if (!v.is_number_integer()) fail("{}: \"top_k\" must be an integer, got {}", path.string(), v.dump());
    if (v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
      fail("{}: \"top_k\" must be >= 0 (0: off), got {}", path.string(), v.dump());
    d.top_k = v.get<int>();
  }
  if (j.contains("do_sample") && !j["do_sample"].is_null()) {
    if (!j["do_sample"].is_boolean())
      fail("{}: \"do_sample\" must be true or false, got {}", path.string(), j["do_sample"].dump());
    d.do_sample = j["do_sample"].get<bool>();
  }
  return d;
}

}  // namespace

std::vector<std::string> apply_sampling_defaults(const SamplingDefaults& d, const SamplingKnobs& k) {
  std::vector<std::string> taken;
  auto take = [&](bool set, const auto& from, auto* to, const char* name) {
    if (set || !from) return;
    *to = *from;
    taken.push_back(fmt::format("{}={}", name, *from));
  };
  if (!k.set_temperature) {
    if (d.do_sample && !*d.do_sample) {
      *k.temperature = 0.0f;
      taken.push_back("temperature=0 (do_sample=false: greedy)");
    } else if (d.temperature) {
      take(false, d.temperature, k.temperature, "temperature");
    } else if (d.do_sample && *d.do_sample && *k.temperature == 0.0f) {
      *k.temperature = 1.0f;
      taken.push_back("temperature=1 (do_sample=true)");
    }
  }
  take(k.set_top_p, d.top_p, k.top_p, "top_p");
  take(k.set_top_k, d.top_k, k.top_k, "top_k");
  take(k.set_min_p, d.min_p, k.min_p, "min_p");
  take(k.set_repetition_penalty, d.repetition_penalty, k.repetition_penalty, "repetition_penalty");
  return taken;
}

GenerationConfig load_generation_config(const std::filesystem::path& model_dir) {
  GenerationConfig gc;
  bool have_eos = false;
  bool have_bos = false;
  for (const char* name : {"generation_config.json", "config.json"}) {
    auto path = model_dir / name;
    auto j = read_optional(path);
    if (!j) continue;
    // NOTE: sampling defaults come from generation_config.json only: config.json's
    // temperature/top_p (old transformers wrote them there) are training-time leftovers.
    if (std::string_view(name) == "generation_config.json") gc.sampling = read_sampling(*j, path);
    if (!have_eos) have_eos = read_ids(*j, "eos_token_id", path, gc.eos_ids);
    if (!have_bos) {
      std::vector<int32_t> bos;
      have_bos = read_ids(*j, "bos_token_id", path, bos);
      if (have_bos && bos.size() != 1) fail("{}: \"bos_token_id\" must be one integer", path.string());
      if (have_bos) gc.bos_id = bos[0];
    }
  }
  return gc;
}

}  // namespace ninfer
