// Chat prompts from a model's Jinja chat template (tokenizer_config.json "chat_template"),
// rendered with the variables transformers' apply_chat_template provides: messages, tools,
// add_generation_prompt, bos_token, eos_token (plus the raise_exception and strftime_now
// functions) and any extra template kwargs (enable_thinking, ...: vLLM's
// chat_template_kwargs). The generic form with any context is jinja::Template (text/jinja.h).
#pragma once
#include <string>
#include <vector>

#include "text/jinja.h"

namespace ninfer {

struct ChatMessage {
  std::string role, content;
  // Further fields of the message as the template sees them (tool_calls, tool_call_id, name,
  // reasoning_content, or content: none for an assistant turn that only calls tools): a
  // dict whose entries are added after role and content (and replace them), or undefined.
  jinja::Value fields{};
};

struct ChatOptions {
  bool add_generation_prompt = true;
  // The tool definitions ([{"type": "function", "function": {...}}, ...]), or undefined for
  // none: the template then sees `tools` = none, as transformers passes tools=None.
  jinja::Value tools{};
  // Extra template variables (a dict, or undefined), e.g. {"enable_thinking": false}.
  jinja::Value kwargs{};
};

// Throws Error naming the construct (and template line) on an unsupported or invalid
// template, or with the template's message when it calls raise_exception(); an Error naming
// the key when `opts.kwargs` tries to set messages, tools, add_generation_prompt, bos_token
// or eos_token (those have their own fields).
std::string render_chat_template(const std::string& tmpl, const std::vector<ChatMessage>& msgs,
                                 const ChatOptions& opts, const std::string& bos_token,
                                 const std::string& eos_token);
std::string render_chat_template(const std::string& tmpl, const std::vector<ChatMessage>& msgs,
                                 bool add_generation_prompt, const std::string& bos_token,
                                 const std::string& eos_token);

// The context render_chat_template passes to the template; callers may add variables
// before rendering with jinja::Template.
jinja::Value chat_template_context(const std::vector<ChatMessage>& msgs, const ChatOptions& opts,
                                   const std::string& bos_token, const std::string& eos_token);
jinja::Value chat_template_context(const std::vector<ChatMessage>& msgs, bool add_generation_prompt,
                                   const std::string& bos_token, const std::string& eos_token);

// Whether the template source mentions `name` as a word (e.g. "enable_thinking"): the CLI uses
// it to tell the user that a flag has no effect on this model's template.
bool chat_template_mentions(const std::string& tmpl, const std::string& name);

}  // namespace ninfer
