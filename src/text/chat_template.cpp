// render_chat_template (see chat_template.h).
#include "text/chat_template.h"

namespace ninfer {

jinja::Value chat_template_context(const std::vector<ChatMessage>& msgs, bool add_generation_prompt,
                                   const std::string& bos_token, const std::string& eos_token) {
  jinja::List messages;
  messages.reserve(msgs.size());
  for (const ChatMessage& m : msgs)
    messages.push_back(jinja::Value::dict({{"role", jinja::Value(m.role)}, {"content", jinja::Value(m.content)}}));
  return jinja::Value::dict({{"messages", jinja::Value(std::move(messages))},
                             {"add_generation_prompt", jinja::Value(add_generation_prompt)},
                             {"bos_token", jinja::Value(bos_token)},
                             {"eos_token", jinja::Value(eos_token)}});
}

std::string render_chat_template(const std::string& tmpl, const std::vector<ChatMessage>& msgs,
                                 bool add_generation_prompt, const std::string& bos_token,
                                 const std::string& eos_token) {
  return jinja::Template::parse(tmpl).render(
      chat_template_context(msgs, add_generation_prompt, bos_token, eos_token));
}

}  // namespace ninfer
