// The OpenAI wire format: request bodies of /v1/chat/completions and /v1/completions parsed
// and checked field by field into what the scheduler needs, and the response, stream-chunk,
// usage and error objects. Pure JSON in and out: no HTTP, no engine (so it is testable
// without a model). Errors are ApiError values naming the field ("messages[2].content").
//
// Policy on fields: every field we implement is type- and range-checked; fields OpenAI has
// and we do not implement are accepted at their default/neutral value and refused (400,
// code "unsupported_parameter") otherwise (tool_choice "required", suffix, audio, ...);
// fields we do not know are ignored, as clients send vendor extensions.
// Choices: `n` choices per prompt (and `best_of` candidates, the n with the highest mean
// token log-probability returned); /v1/completions takes a list of prompts, choice index
// prompt * n + i, as OpenAI numbers them. `response_format` json_object / json_schema is
// compiled here (json_schema.h; a schema it cannot enforce is a 400 naming the keyword). `logprobs` (chat: bool + top_logprobs; completions:
// an int, with `echo` also the prompt's) report log_softmax of the model's logits.
// Tools: `tools`, assistant `tool_calls` (arguments given as a JSON string are parsed into an
// object, as vLLM does), `tool` messages and `reasoning_content` go to the chat template,
// which renders them; the reply is the model's text as is (no tool-call parser: a call comes
// back inside `content`). `chat_template_kwargs` (vLLM's extension, e.g. enable_thinking)
// become template variables.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/sampler.h"
#include "text/jinja.h"

namespace ninfer::server {

using json = nlohmann::json;
class JsonGrammar;  // json_schema.h

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // "" -> null
  std::string code;   // "" -> null
};

// {"error": {"message", "type", "param", "code"}}
json error_body(const ApiError& e);

enum class Endpoint { kChat, kCompletion };

struct Message {
  std::string role, content;
  jinja::Value fields{};  // tool_calls, tool_call_id, name, reasoning_content (a dict), or undefined
};

// One /v1/completions prompt: text, or token ids when `text` is empty.
struct PromptInput {
  std::optional<std::string> text;
  std::vector<int32_t> ids;
};

// NOTE: bounds on what one request may fan out to (each choice is a scheduler request; the
// queue limit applies on top).
constexpr int kMaxChoices = 16;       // n, best_of
constexpr size_t kMaxPrompts = 32;    // prompts in one /v1/completions request
constexpr int kMaxTopLogprobs = 20;   // OpenAI's limit for top_logprobs (vLLM's too)
// NOTE: request bodies nested deeper than this are refused: everything that reads a body after
// parsing it (jinja::from_json for tools and kwargs, dump, the ordered copy) recurses once per
// level, and a 200 KB body of brackets overflowed the stack. Tool schemas nest < 20 levels.
constexpr int kMaxJsonDepth = 128;

// tool_choice: automatic covers "auto" and "none" (what the template is shown decides those);
// required and named constrain sampling (ApiRequest::grammar).
enum class ToolChoice { automatic, required, named };

// A checked request. The prompt is either chat messages (kChat), text or token ids
// (kCompletion); the server turns it into tokens.
struct ApiRequest {
  Endpoint endpoint = Endpoint::kChat;
  std::string model;                   // as sent ("" if absent)
  std::vector<Message> messages;       // kChat
  std::vector<PromptInput> prompts;    // kCompletion: one or more
  int n = 1;                           // choices per prompt
  int best_of = 0;                     // kCompletion: candidates per prompt (0: n)
  int logprobs = -1;                   // -1: none; else alternatives per token (top_logprobs)
  bool echo = false;                   // kCompletion: the prompt comes back before the completion
  // kChat: response_format json_object / json_schema, or a forced tool call (tool_choice), compiled;
  // null for neither.
  std::shared_ptr<const JsonGrammar> grammar;
  int64_t max_tokens = -1;             // -1: up to the context limit
  SamplingParams sampling;
  bool seed_given = false;
  // Which sampling fields the request set (the rest may come from generation_config.json).
  bool set_temperature = false, set_top_p = false, set_top_k = false, set_min_p = false,
       set_repetition_penalty = false;
  jinja::Value tools{};                 // kChat: the tool list, undefined if none
  ToolChoice tool_choice = ToolChoice::automatic;
  std::string tool_choice_name;         // ToolChoice::named: the function
  bool parallel_tool_calls = true;      // false: at most one call (required: an array of one)
  jinja::Value chat_template_kwargs{};  // kChat: a dict, or undefined
  std::vector<std::string> stop;
  bool ignore_eos = false;
  bool stream = false;
  bool include_usage = false;
};

// Throw ApiError. `body` is the parsed JSON (any type: a non-object is refused). `ordered`,
// the same body parsed as ordered_json, gives tools / tool_calls / kwargs their key order
// (templates print them with tojson); without it they come in sorted key order.
ApiRequest parse_chat_request(const json& body, const nlohmann::ordered_json* ordered = nullptr);
ApiRequest parse_completion_request(const json& body);
// Parses the raw body text; malformed JSON is a 400 naming the position.
json parse_body(const std::string& text);

struct Usage {
  int prompt_tokens = 0, completion_tokens = 0;
  int cached_tokens = 0;  // prompt tokens served from the prefix cache (prompt_tokens_details)
};
json usage_json(const Usage& u);

// One token of a logprobs report: its bytes (may be part of a UTF-8 character), its
// log-probability (none for the first prompt token, which has no context), the alternatives.
struct LogprobEntry {
  std::string token;
  std::optional<float> logprob;
  std::vector<std::pair<std::string, float>> top;
};
// Chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}], "refusal": null}.
json chat_logprobs(const std::vector<LogprobEntry>& entries);
// Completions: {"tokens", "token_logprobs", "top_logprobs", "text_offset"}; text_offset is the
// byte offset of each token in the choice's text, starting at `offset0`.
json completion_logprobs(const std::vector<LogprobEntry>& entries, size_t offset0);

// One choice of a response; logprobs null when not asked for.
struct Choice {
  std::string text;
  std::string finish_reason;
  json logprobs;
  // Chat with tools: the calls read out of the text ([{"id", "type", "function": {"name",
  // "arguments"}}]); null when the text is a plain answer. With calls, `text` holds the rest
  // (content null when empty) and a "stop" finish becomes "tool_calls".
  json tool_calls;
};

// Identity of one response: "chatcmpl-..."/"cmpl-..." id, creation time, model name.
struct ResponseMeta {
  std::string id;
  int64_t created = 0;
  std::string model;
};

// finish_reason "" -> null. Choices are numbered in order.
json chat_completion(const ResponseMeta& m, const std::vector<Choice>& choices, const Usage& u);
json text_completion(const ResponseMeta& m, const std::vector<Choice>& choices, const Usage& u);
// Stream chunks of choice `index`. `delta` for chat ({"role": ...} or {"content": ...} or {});
// `text` for completions. include_usage adds "usage": null, as OpenAI does on every chunk
// but the last.
json chat_chunk(const ResponseMeta& m, const json& delta, const std::string& finish_reason, bool include_usage,
                int index = 0, const json& logprobs = nullptr);
json text_chunk(const ResponseMeta& m, const std::string& text, const std::string& finish_reason, bool include_usage,
                int index = 0, const json& logprobs = nullptr);
// The final usage chunk: empty choices and the usage object.
json usage_chunk(const ResponseMeta& m, bool chat, const Usage& u);

// "data: <json>\n\n"
std::string sse_event(const json& j);

}  // namespace ninfer::server
