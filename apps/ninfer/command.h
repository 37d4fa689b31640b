// Subcommand registry for the `ninfer` binary. Each cmd_*.cpp defines a static
// RegisterCommand that adds its CLI11 subcommand, options and callback; main() builds the
// app from the registry. Callbacks throw ninfer::Error for bad input; main prints it and
// exits 1.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "runtime/engine.h"

namespace ninfer::app {

struct Command {
  std::string name;
  std::string help;
  std::function<void(CLI::App*)> setup;  // adds options and sets the callback
};

std::vector<Command>& commands();

struct RegisterCommand {
  RegisterCommand(std::string name, std::string help, std::function<void(CLI::App*)> setup) {
    commands().push_back(Command{std::move(name), std::move(help), std::move(setup)});
  }
};

// Flags shared by every command that loads a model: -m, --device, --threads, --prefill-chunk,
// --chat-template, --kv-dtype, --max-context, --kv-capacity, --memory-budget.
struct EngineFlags {
  std::string model_dir;
  EngineOptions opt;
  std::string memory_budget;
  void add(CLI::App* app, bool kv_flags = true);
  EngineOptions options() const;  // validated, --memory-budget parsed
  EngineOptions options_with_kv_dtype(const std::string& kv_dtype) const;
};

// --max-context for a command whose own flags fix the length of its sequences (perplexity's
// --ctx, bench's --prompt/--depth/--gen): unset (0), it becomes `fallback`; set, it is used as
// given and must be at least `needed`, else the error names --max-context and `why` (the flags
// that need the tokens, e.g. "--ctx 1024").
void resolve_max_context(EngineOptions& o, int64_t needed, int64_t fallback, const std::string& why);

// Sets the process exit code a command wants (default 0).
void set_exit_code(int code);
int exit_code();

}  // namespace ninfer::app
