// A JSON Schema validator for the keywords structured output supports, written over parsed
// JSON (independently of the matcher in src/server/json_schema.cpp), for the tests to check
// what the matcher let through.
#pragma once
#include <nlohmann/json.hpp>

#include <string>

namespace ninfer::test {

using json = nlohmann::json;

inline bool schema_valid(const json& v, const json& s, const json& root) {
  if (s.is_boolean()) return s.get<bool>();
  if (s.contains("$ref")) {
    const std::string ref = s["$ref"];
    if (ref == "#") return schema_valid(v, root, root);
    const std::string name = ref.substr(ref.rfind('/') + 1);
    return schema_valid(v, root.contains("$defs") ? root["$defs"][name] : root["definitions"][name], root);
  }
  if (s.contains("enum")) {
    for (const json& e : s["enum"])
      if (e == v) return true;
    return false;
  }
  if (s.contains("const")) return s["const"] == v;
  if (s.contains("anyOf")) {
    for (const json& a : s["anyOf"])
      if (schema_valid(v, a, root)) return true;
    return false;
  }
  if (s.contains("type") && s["type"].is_array()) {
    for (const json& t : s["type"]) {
      json one = s;
      one["type"] = t;
      if (schema_valid(v, one, root)) return true;
    }
    return false;
  }
  const std::string t = s.value("type", "");
  if (t == "string") {
    if (!v.is_string()) return false;
    size_t chars = 0;
    for (unsigned char c : v.get<std::string>()) chars += (c & 0xC0) != 0x80;
    return chars >= s.value("minLength", size_t(0)) && chars <= s.value("maxLength", size_t(-1));
  }
  if (t == "integer") return v.is_number_integer();
  if (t == "number") return v.is_number();
  if (t == "boolean") return v.is_boolean();
  if (t == "null") return v.is_null();
  if (t == "array") {
    if (!v.is_array()) return false;
    if (v.size() < s.value("minItems", size_t(0)) || v.size() > s.value("maxItems", size_t(-1))) return false;
    for (const json& x : v)
      if (s.contains("items") && !schema_valid(x, s["items"], root)) return false;
    return true;
  }
  if (t == "object" || s.contains("properties")) {
    if (!v.is_object()) return false;
    if (s.contains("required"))
      for (const json& r : s["required"])
        if (!v.contains(r.get<std::string>())) return false;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (s.contains("properties") && s["properties"].contains(it.key())) {
        if (!schema_valid(it.value(), s["properties"][it.key()], root)) return false;
      } else if (s.value("additionalProperties", true) == false) {
        return false;
      }
    }
    return true;
  }
  return true;
}

inline bool schema_valid(const json& v, const json& schema) { return schema_valid(v, schema, schema); }

}  // namespace ninfer::test
