// `ninfer run`: generate from a prompt, streaming to stdout; `ninfer chat`: interactive chat.
// Timing goes to stderr.
#include <cstdio>
#include <iostream>

#include "apps/ninfer/command.h"
#include "core/error.h"

namespace ninfer::app {
namespace {

struct SamplingFlags {
  SamplingParams p;
  int max_new = 256;
  std::vector<std::string> stop;
  CLI::Option *temp = nullptr, *top_k = nullptr, *top_p = nullptr, *min_p = nullptr, *rep = nullptr;
  void add(CLI::App* app) {
    app->add_option("-n,--max-tokens", max_new, "tokens to generate")->capture_default_str();
    temp = app->add_option("--temp,--temperature", p.temperature,
                           "sampling temperature (0: greedy; default: generation_config.json's, else 0)");
    top_k = app->add_option("--top-k", p.top_k, "keep the k most likely tokens (0: off; default: generation_config.json's)");
    top_p = app->add_option("--top-p", p.top_p, "nucleus sampling mass (1: off; default: generation_config.json's)");
    min_p = app->add_option("--min-p", p.min_p,
                            "drop tokens below min-p times the top probability (default: generation_config.json's)");
    rep = app->add_option("--repeat-penalty", p.repetition_penalty,
                          "repetition penalty (1: off; default: generation_config.json's)");
    app->add_option("--presence-penalty", p.presence_penalty, "presence penalty")->capture_default_str();
    app->add_option("--frequency-penalty", p.frequency_penalty, "frequency penalty")->capture_default_str();
    app->add_option("--seed", p.seed, "random seed")->capture_default_str();
    app->add_option("--stop", stop, "stop string (repeatable)");
  }
  // The options, with generation_config.json's sampling defaults for what the command line
  // left unset (said on stderr).
  GenerateOptions options(const Engine& eng) {
    if (max_new < 0) fail("-n/--max-tokens must be >= 0, got {}", max_new);
    const SamplingDefaults& d = eng.generation_config().sampling;
    SamplingKnobs k{&p.temperature, &p.top_p, &p.top_k, &p.min_p, &p.repetition_penalty,
                    temp->count() > 0, top_p->count() > 0, top_k->count() > 0, min_p->count() > 0, rep->count() > 0};
    std::vector<std::string> taken = apply_sampling_defaults(d, k);
    if (!taken.empty()) {
      std::string list;
      for (const std::string& t : taken) list += (list.empty() ? "" : ", ") + t;
      std::fprintf(stderr, "sampling defaults from %s: %s (flags override them)\n", d.file.c_str(), list.c_str());
    }
    GenerateOptions g;
    g.sampling = p;
    g.max_new_tokens = max_new;
    g.stop_strings = stop;
    p.validate();
    return g;
  }
};

// --enable-thinking / --no-enable-thinking: the template kwarg enable_thinking (Qwen3 and
// others); an error, not ignored, when the model's chat template does not read it.
struct ThinkingFlag {
  bool value = true;
  CLI::Option* opt = nullptr;
  void add(CLI::App* app) {
    opt = app->add_flag("--enable-thinking,!--no-enable-thinking", value,
                        "pass enable_thinking=true/false to the chat template (models that read it, e.g. Qwen3)");
  }
  ChatOptions chat_options(const Engine& eng) const {
    ChatOptions o;
    if (opt->count() == 0) return o;
    if (!chat_template_mentions(eng.tokenizer().chat_template(), "enable_thinking"))
      fail("{}: this model's chat template does not read enable_thinking; drop --enable-thinking/--no-enable-thinking",
           (eng.model().dir / "tokenizer_config.json").string());
    o.kwargs = jinja::Value::dict({{"enable_thinking", jinja::Value(value)}});
    return o;
  }
};

void print_timing(const GenerateResult& r) {
  std::fprintf(stderr, "\n[prompt %d tokens, %.1f tok/s | generated %zu tokens, %.1f tok/s | %s]\n",
               r.prompt_tokens, r.prefill_seconds > 0 ? r.prompt_tokens / r.prefill_seconds : 0.0,
               r.tokens.size(), r.decode_seconds > 0 ? double(r.tokens.size()) / r.decode_seconds : 0.0,
               r.finish_reason.c_str());
}

bool stream_out(std::string_view s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
  return true;
}

struct RunCmd {
  EngineFlags ef;
  SamplingFlags sf;
  ThinkingFlag think;
  std::string prompt;
  bool chat = false;
  std::string system;
};

RegisterCommand reg_run("run", "generate text from a prompt, streaming to stdout", [](CLI::App* app) {
  auto c = std::make_shared<RunCmd>();
  c->ef.add(app);
  c->sf.add(app);
  app->add_option("-p,--prompt", c->prompt, "prompt text")->required();
  CLI::Option* chat = app->add_flag("--chat", c->chat, "wrap the prompt as a user message in the model's chat template");
  app->add_option("--system", c->system, "system message (with --chat)")->needs(chat);  // else an error, not ignored
  c->think.add(app);
  c->think.opt->needs(chat);
  app->callback([c]() {
    auto eng = Engine::create(c->ef.model_dir, c->ef.options());
    GenerateOptions g = c->sf.options(*eng);
    std::vector<int32_t> ids;
    if (c->chat) {
      std::vector<ChatMessage> msgs;
      if (!c->system.empty()) msgs.push_back({"system", c->system});
      msgs.push_back({"user", c->prompt});
      ids = eng->encode_chat(msgs, c->think.chat_options(*eng));
    } else {
      ids = eng->tokenizer().encode(c->prompt, true);
    }
    if (ids.empty()) fail("the prompt encodes to no tokens and the model adds no BOS token; give a prompt");
    GenerateResult r = eng->generate(ids, g, stream_out);
    std::fflush(stdout);
    print_timing(r);
  });
});

RegisterCommand reg_chat("chat", "interactive chat in the terminal (empty line or EOF ends)", [](CLI::App* app) {
  auto c = std::make_shared<RunCmd>();
  c->ef.add(app);
  c->sf.add(app);
  app->add_option("--system", c->system, "system message");
  c->think.add(app);
  app->callback([c]() {
    auto eng = Engine::create(c->ef.model_dir, c->ef.options());
    GenerateOptions g = c->sf.options(*eng);
    ChatOptions copts = c->think.chat_options(*eng);
    std::vector<ChatMessage> msgs;
    if (!c->system.empty()) msgs.push_back({"system", c->system});
    std::string line;
    while (true) {
      std::fprintf(stderr, "> ");
      if (!std::getline(std::cin, line) || line.empty()) break;
      msgs.push_back({"user", line});
      std::vector<int32_t> ids = eng->encode_chat(msgs, copts);
      GenerateResult r = eng->generate(ids, g, stream_out);
      std::fputc('\n', stdout);
      std::fflush(stdout);
      print_timing(r);
      msgs.push_back({"assistant", r.text});
    }
  });
});

}  // namespace
}  // namespace ninfer::app
