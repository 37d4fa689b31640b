// Chat prompts from a model's Jinja chat template (tokenizer_config.json "chat_template"),
// rendered with the variables transformers' apply_chat_template provides: messages,
// add_generation_prompt, bos_token, eos_token (plus the raise_exception and strftime_now
// functions). The generic form with any context is jinja::Template (text/jinja.h).
#pragma once
#include <string>
#include <vector>

#include "text/jinja.h"

namespace ninfer {

struct ChatMessage {
  std::string role, content;
};

// Throws Error naming the construct (and template line) on an unsupported or invalid
// template, or with the template's message when it calls raise_exception().
std::string render_chat_template(const std::string& tmpl, const std::vector<ChatMessage>& msgs,
                                 bool add_generation_prompt, const std::string& bos_token,
                                 const std::string& eos_token);

// The context render_chat_template passes to the template; callers may add variables
// (e.g. "tools", "date_string") before rendering with jinja::Template.
jinja::Value chat_template_context(const std::vector<ChatMessage>& msgs, bool add_generation_prompt,
                                   const std::string& bos_token, const std::string& eos_token);

}  // namespace ninfer
