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
  void add(CLI::App* app) {
    app->add_option("-n,--max-tokens", max_new, "tokens to generate")->capture_default_str();
    app->add_option("--temp,--temperature", p.temperature, "sampling temperature (0: greedy)")->capture_default_str();
    app->add_option("--top-k", p.top_k, "keep the k most likely tokens (0: off)")->capture_default_str();
    app->add_option("--top-p", p.top_p, "nucleus sampling mass (1: off)")->capture_default_str();
    app->add_option("--min-p", p.min_p, "drop tokens below min-p times the top probability")->capture_default_str();
    app->add_option("--repeat-penalty", p.repetition_penalty, "repetition penalty (1: off)")->capture_default_str();
    app->add_option("--presence-penalty", p.presence_penalty, "presence penalty")->capture_default_str();
    app->add_option("--frequency-penalty", p.frequency_penalty, "frequency penalty")->capture_default_str();
    app->add_option("--seed", p.seed, "random seed")->capture_default_str();
    app->add_option("--stop", stop, "stop string (repeatable)");
  }
  GenerateOptions options() const {
    GenerateOptions g;
    g.sampling = p;
    g.max_new_tokens = max_new;
    g.stop_strings = stop;
    if (max_new < 0) fail("-n/--max-tokens must be >= 0, got {}", max_new);
    p.validate();
    return g;
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
  app->callback([c]() {
    GenerateOptions g = c->sf.options();
    auto eng = Engine::create(c->ef.model_dir, c->ef.options());
    std::vector<int32_t> ids;
    if (c->chat) {
      std::vector<ChatMessage> msgs;
      if (!c->system.empty()) msgs.push_back({"system", c->system});
      msgs.push_back({"user", c->prompt});
      ids = eng->encode_chat(msgs);
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
  app->callback([c]() {
    GenerateOptions g = c->sf.options();
    auto eng = Engine::create(c->ef.model_dir, c->ef.options());
    std::vector<ChatMessage> msgs;
    if (!c->system.empty()) msgs.push_back({"system", c->system});
    std::string line;
    while (true) {
      std::fprintf(stderr, "> ");
      if (!std::getline(std::cin, line) || line.empty()) break;
      msgs.push_back({"user", line});
      std::vector<int32_t> ids = eng->encode_chat(msgs);
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
