// Fuzz target: a JSON schema [NUL bytes] through compile_json_schema (the structured-output
// grammar compiler, src/server/json_schema.h) and then its JsonMatcher over the bytes (or over
// a few fixed JSON texts). A schema outside the supported subset must be an ApiError naming
// the keyword; the matcher must accept byte by byte exactly what feed() accepts, and whatever
// it accepts as complete must parse as JSON (the grammar promises valid JSON).
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "fuzz_util.h"
#include "server/json_schema.h"
#include "server/openai_api.h"

namespace {

using namespace ninfer::server;

void run(const std::shared_ptr<const JsonGrammar>& g, std::string_view bytes) {
  JsonMatcher m(g);
  std::string accepted;
  for (char c : bytes) {
    JsonMatcher::State next = m.advance(m.state(), uint8_t(c));
    if (next.empty()) break;
    m.set_state(std::move(next));
    accepted += c;
    if (m.accepting() && !nlohmann::json::accept(accepted)) {
      fprintf(stderr, "accepted as complete but not JSON: %s\n", accepted.c_str());
      std::abort();
    }
  }
  JsonMatcher whole(g);
  const bool all = whole.feed(accepted);
  if (!all) std::abort();  // feed() must accept what advance() accepted byte by byte
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parts = ninfer_fuzz::split_nul(data, size, 2);
  nlohmann::ordered_json schema = nlohmann::ordered_json::parse(parts[0], nullptr, false);
  if (schema.is_discarded()) return 0;
  std::shared_ptr<const JsonGrammar> g;
  try {
    g = compile_json_schema(schema, "response_format.json_schema.schema");
  } catch (const ApiError& e) {
    if (e.status != 400 || e.message.empty()) std::abort();
    return 0;
  }
  if (parts.size() > 1) {
    run(g, parts[1]);
  } else {
    for (std::string_view s : {"{\"a\":1,\"b\":[true,null,\"x\"]}", "[1,2.5e3,-0.1]", "\"str\\u00e9\"", "42", "null",
                               "{\"name\":\"Ann\",\"age\":30}"})
      run(g, s);
  }
  return 0;
}
