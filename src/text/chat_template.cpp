// render_chat_template (see chat_template.h).
#include "text/chat_template.h"

#include <array>
#include <cctype>

#include "core/error.h"

namespace ninfer {

jinja::Value chat_template_context(const std::vector<ChatMessage>& msgs, const ChatOptions& opts,
                                   const std::string& bos_token, const std::string& eos_token) {
  jinja::List messages;
  messages.reserve(msgs.size());
  for (const ChatMessage& m : msgs) {
    jinja::Value d = jinja::Value::dict({{"role", jinja::Value(m.role)}, {"content", jinja::Value(m.content)}});
    if (m.fields.is_dict())
      for (const auto& [k, v] : m.fields.as_dict().items) d.set(k, v);
    messages.push_back(std::move(d));
  }
  // NOTE: transformers renders with tools=None and documents=None when there are none, so a
  // template sees them defined and none (`tools is not none` is the usual check).
  jinja::Value ctx = jinja::Value::dict({{"messages", jinja::Value(std::move(messages))},
                                         {"tools", opts.tools.is_undefined() ? jinja::Value::none() : opts.tools},
                                         {"documents", jinja::Value::none()},
                                         {"add_generation_prompt", jinja::Value(opts.add_generation_prompt)},
                                         {"bos_token", jinja::Value(bos_token)},
                                         {"eos_token", jinja::Value(eos_token)}});
  if (opts.kwargs.is_dict()) {
    static constexpr std::array<const char*, 5> kReserved = {"messages", "tools", "add_generation_prompt",
                                                             "bos_token", "eos_token"};
    for (const auto& [k, v] : opts.kwargs.as_dict().items) {
      for (const char* r : kReserved)
        if (k == r) fail("chat template kwargs: '{}' cannot be set as a template kwarg (it has its own field)", k);
      ctx.set(k, v);
    }
  } else if (!opts.kwargs.is_undefined()) {
    fail("chat template kwargs must be a dict, not '{}'", opts.kwargs.type_name());
  }
  return ctx;
}

jinja::Value chat_template_context(const std::vector<ChatMessage>& msgs, bool add_generation_prompt,
                                   const std::string& bos_token, const std::string& eos_token) {
  ChatOptions o;
  o.add_generation_prompt = add_generation_prompt;
  return chat_template_context(msgs, o, bos_token, eos_token);
}

std::string render_chat_template(const std::string& tmpl, const std::vector<ChatMessage>& msgs,
                                 const ChatOptions& opts, const std::string& bos_token,
                                 const std::string& eos_token) {
  return jinja::Template::parse(tmpl).render(chat_template_context(msgs, opts, bos_token, eos_token));
}

std::string render_chat_template(const std::string& tmpl, const std::vector<ChatMessage>& msgs,
                                 bool add_generation_prompt, const std::string& bos_token,
                                 const std::string& eos_token) {
  ChatOptions o;
  o.add_generation_prompt = add_generation_prompt;
  return render_chat_template(tmpl, msgs, o, bos_token, eos_token);
}

bool chat_template_mentions(const std::string& tmpl, const std::string& name) {
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t k = tmpl.find(name); k != std::string::npos; k = tmpl.find(name, k + 1)) {
    bool left = k == 0 || !word(tmpl[k - 1]);
    bool right = k + name.size() >= tmpl.size() || !word(tmpl[k + name.size()]);
    if (left && right) return true;
  }
  return false;
}

}  // namespace ninfer
