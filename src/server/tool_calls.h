// The model's tool calls, read back out of its generated text. Each family writes them its
// own way, as its chat template teaches it:
//   hermes   (Qwen2.5/Qwen3, Hermes, many fine-tunes):
//            <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>   (one block per call)
//   llama3   (Llama 3.1-3.3 JSON tool calling): [<|python_tag|>]{"name": "f", "parameters": {...}}
//            (several separated by ';')
//   qwen3_coder (Qwen3-Coder, Qwen3.5): <tool_call>\n<function=f>\n<parameter=k>\nvalue\n</parameter>\n
//            </function>\n</tool_call>   (a value that is JSON other than a string is taken as
//            that JSON, anything else as a string: NOTE the tools' schemas are not consulted)
//   mistral  [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]   (v3 tokenizer), or
//            [TOOL_CALLS]f[ARGS]{...}   (v11+, one per marker)
// The format is chosen from the chat template's text (the markers it renders).
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace ninfer::server {

enum class ToolCallFormat { none, hermes, qwen3_coder, llama3, mistral };

// The format a chat template teaches; none when it renders no tool-call markers.
ToolCallFormat tool_call_format_for(std::string_view chat_template);
const char* tool_call_format_name(ToolCallFormat f);

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // a JSON object, compact, as OpenAI sends it (a string)
};

struct ToolOutput {
  std::string content;                // text outside the calls (trimmed); all of it, as written, when no calls
  std::vector<ParsedToolCall> calls;  // empty: the text is a plain answer
};

// Reads the calls out of a whole generated text. Text that only looks like a call (a marker
// with JSON that does not parse, or without a string "name") is left as content: the client
// sees what the model wrote rather than a call it did not make.
ToolOutput parse_tool_output(std::string_view text, ToolCallFormat f);

// Streaming: how many leading bytes of the reply so far may go to the client as content now —
// everything before the first call marker, less a tail that may be the start of one. llama3
// calls open the reply: one whose first non-blank bytes are '{' or the python tag (or could
// still become it) releases nothing. The rest is held, and parsed when the reply ends.
size_t tool_text_releasable(std::string_view text, ToolCallFormat f);

}  // namespace ninfer::server
