// Fuzz target: a request body through the server's OpenAI layer as Server::completions runs it:
// parse_body, then parse_chat_request (with the ordered parse of the same text) and
// parse_completion_request; a chat request's messages, tools and chat_template_kwargs are then
// rendered through real chat templates (Qwen3, Llama 3.1), as prompt_tokens does. A bad body
// must be an ApiError (a 4xx naming the field) and a template's refusal an Error; a request the
// parser accepts must be within the limits it documents.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/config.h"
#include "server/openai_api.h"
#include "text/chat_template.h"

namespace {

using namespace ninfer;
using namespace ninfer::server;

void check(const ApiRequest& r) {
  if (r.n < 1 || r.n > kMaxChoices || r.best_of < 0 || r.best_of > kMaxChoices) std::abort();
  if (r.logprobs < -1 || r.logprobs > kMaxTopLogprobs || r.max_tokens < -1) std::abort();
  if (r.endpoint == Endpoint::kCompletion) {
    if (r.prompts.empty() || r.prompts.size() > kMaxPrompts) std::abort();
    for (const PromptInput& p : r.prompts)
      for (int32_t id : p.ids)
        if (id < 0) std::abort();
  }
  r.sampling.validate();  // throws (uncaught: a finding) if the parser let a bad value through
}

void render(const ApiRequest& r) {
  static const std::vector<std::string> templates = {
      read_file(NINFER_TEST_DATA "/chat_templates/real/qwen3.jinja"),
      read_file(NINFER_TEST_DATA "/chat_templates/real/llama-3.1-8b-instruct.jinja")};
  std::vector<ChatMessage> msgs;
  for (const Message& m : r.messages) msgs.push_back(ChatMessage{m.role, m.content, m.fields});
  ChatOptions opts;
  opts.tools = r.tools;
  opts.kwargs = r.chat_template_kwargs;
  for (const std::string& t : templates) {
    try {
      (void)render_chat_template(t, msgs, opts, "<s>", "</s>");
    } catch (const Error&) {
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  json body;
  try {
    body = parse_body(text);
  } catch (const ApiError& e) {
    if (e.status < 400 || e.status >= 500) std::abort();
    return 0;
  }
  // parse_body accepted it, so the ordered parse of the same text must too.
  const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(text);
  try {
    ApiRequest r = parse_chat_request(body, &ordered);
    if (r.endpoint != Endpoint::kChat) std::abort();
    check(r);
    render(r);
  } catch (const ApiError& e) {
    if (e.status < 400 || e.status >= 500 || e.message.empty()) std::abort();
  }
  try {
    ApiRequest r = parse_completion_request(body);
    if (r.endpoint != Endpoint::kCompletion) std::abort();
    check(r);
  } catch (const ApiError& e) {
    if (e.status < 400 || e.status >= 500 || e.message.empty()) std::abort();
  }
  return 0;
}
