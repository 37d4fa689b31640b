// Fuzz target: a chat template [NUL messages JSON [NUL tools JSON [NUL kwargs JSON]]] through
// render_chat_template (Jinja lexer, parser, evaluator, built-ins) the way the server calls it:
// messages [{role, content, ...fields}], tools and chat_template_kwargs from JSON. Without a
// messages part (or with one that is not a JSON list) a fixed conversation is used. Anything
// the interpreter refuses must be an Error, including templates that recurse without bound,
// nest too deeply or produce too much text.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "fuzz_util.h"
#include "text/chat_template.h"
#include "text/jinja_json.h"

namespace {

using ordered_json = nlohmann::ordered_json;

std::vector<ninfer::ChatMessage> messages_from(std::string_view text) {
  std::vector<ninfer::ChatMessage> msgs;
  ordered_json j = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) {
    msgs.push_back({"system", "You are helpful."});
    msgs.push_back({"user", "Hi"});
    msgs.push_back({"assistant", "Hello! How can I help?"});
    msgs.push_back({"user", "What is 2+2?"});
    return msgs;
  }
  for (const ordered_json& m : j) {
    ninfer::ChatMessage cm;
    if (m.is_object()) {
      if (m.contains("role") && m["role"].is_string()) cm.role = m["role"].get<std::string>();
      if (m.contains("content") && m["content"].is_string()) cm.content = m["content"].get<std::string>();
      ordered_json rest = ordered_json::object();
      for (auto it = m.begin(); it != m.end(); ++it)
        if (it.key() != "role" && it.key() != "content") rest[it.key()] = it.value();
      if (!rest.empty()) cm.fields = ninfer::jinja::from_json(rest);
    }
    msgs.push_back(std::move(cm));
  }
  return msgs;
}

ninfer::jinja::Value value_from(std::string_view text) {
  ordered_json j = ordered_json::parse(text, nullptr, false);
  if (j.is_discarded()) return {};
  return ninfer::jinja::from_json(j);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parts = ninfer_fuzz::split_nul(data, size, 4);
  std::string tmpl(parts[0]);
  std::vector<ninfer::ChatMessage> msgs = messages_from(parts.size() > 1 ? parts[1] : "");
  ninfer::ChatOptions opts;
  if (parts.size() > 2) opts.tools = value_from(parts[2]);
  if (parts.size() > 3) {
    ninfer::jinja::Value kw = value_from(parts[3]);
    if (kw.is_dict()) opts.kwargs = kw;
  }
  for (bool gen : {true, false}) {
    opts.add_generation_prompt = gen;
    try {
      (void)ninfer::render_chat_template(tmpl, msgs, opts, "<s>", "</s>");
    } catch (const ninfer::Error&) {
    }
  }
  return 0;
}
