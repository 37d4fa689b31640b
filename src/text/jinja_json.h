// Conversion between jinja::Value and nlohmann::json, for callers that hold template
// variables as JSON (tests, the server's tool definitions). Kept apart from jinja.h so the
// interpreter's header does not pull in nlohmann.
#pragma once
#include <nlohmann/json.hpp>

#include "text/jinja.h"

namespace ninfer::jinja {

// JSON null -> none; objects keep their key order only if `j` is an ordered_json.
Value from_json(const nlohmann::json& j);
Value from_json(const nlohmann::ordered_json& j);

}  // namespace ninfer::jinja
