// generation_config.json / config.json reader (see generation_config.h).
#include "text/generation_config.h"

#include <nlohmann/json.hpp>

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

}  // namespace

GenerationConfig load_generation_config(const std::filesystem::path& model_dir) {
  GenerationConfig gc;
  bool have_eos = false;
  bool have_bos = false;
  for (const char* name : {"generation_config.json", "config.json"}) {
    auto path = model_dir / name;
    auto j = read_optional(path);
    if (!j) continue;
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
