// nlohmann::json -> jinja::Value (see jinja_json.h).
#include "text/jinja_json.h"

namespace ninfer::jinja {
namespace {

template <typename J>
Value convert(const J& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
    case nlohmann::json::value_t::discarded:
      return Value::none();
    case nlohmann::json::value_t::boolean:
      return Value(j.template get<bool>());
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
      return Value(j.template get<int64_t>());
    case nlohmann::json::value_t::number_float:
      return Value(j.template get<double>());
    case nlohmann::json::value_t::string:
      return Value(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      List l;
      for (const auto& e : j) l.push_back(convert(e));
      return Value(std::move(l));
    }
    case nlohmann::json::value_t::object: {
      Value d = Value::dict();
      for (auto it = j.begin(); it != j.end(); ++it) d.set(it.key(), convert(it.value()));
      return d;
    }
    case nlohmann::json::value_t::binary:
      break;
  }
  return Value();
}

}  // namespace

Value from_json(const nlohmann::json& j) { return convert(j); }
Value from_json(const nlohmann::ordered_json& j) { return convert(j); }

}  // namespace ninfer::jinja
