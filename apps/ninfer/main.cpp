// `ninfer`: one binary, subcommands registered by the cmd_*.cpp files.
#include <cstdio>

#include "apps/ninfer/command.h"
#include "core/error.h"
#include "kv/capacity.h"
#include "model/weight_format.h"

namespace ninfer::app {

std::vector<Command>& commands() {
  static std::vector<Command> c;
  return c;
}

static int g_exit_code = 0;
void set_exit_code(int code) { g_exit_code = code; }
int exit_code() { return g_exit_code; }

void EngineFlags::add(CLI::App* app, bool kv_flags) {
  app->add_option("-m,--model", model_dir, "Hugging Face model directory (config.json, *.safetensors, tokenizer.json)")
      ->required();
  app->add_option("--device", opt.device, "cpu, cuda or auto")->capture_default_str();
  app->add_option("--threads", opt.threads, "CPU threads (0: all cores)")->capture_default_str();
  app->add_option("--prefill-chunk", opt.prefill_chunk, "prompt tokens per forward call")->capture_default_str();
  app->add_option("--chat-template", opt.chat_template_file,
                  "a Jinja chat template file to use instead of the model's (tokenizer_config.json)");
  app->add_option("--weights", opt.weights,
                  "weights in memory: bf16 (as the checkpoint stores them), or quantise a bf16 checkpoint's "
                  "projections at load: fp8 (e4m3, per-channel scales), int8 (per channel), int4 (group 128, zero points)")
      ->capture_default_str();
  app->add_option("--random-weights", opt.random_weights_seed,
                  "random bf16 weights of --model's config.json made in memory with this seed instead of its "
                  "safetensors (speed and load runs of shapes without a checkpoint; the text is noise)");
  if (kv_flags) {
    opt.kv_sink = opt.kv_recent = -1;  // the format's default unless given
    app->add_option("--kv-dtype", opt.kv_dtype, "KV cache format: " + kv_format_names_joined())
        ->capture_default_str();
    app->add_option("--kv-sink", opt.kv_sink,
                    "first tokens of each sequence kept exact (bf16) beside the compressed cache (default: the "
                    "format's, see docs/BENCHMARKS.md)");
    app->add_option("--kv-recent", opt.kv_recent,
                    "newest tokens of each sequence kept exact (bf16); a page is compressed once complete and older "
                    "(default: the format's)");
    app->add_option("--max-context", opt.max_context, "tokens per sequence (default: the model's max_position_embeddings)");
    app->add_option("--kv-capacity", opt.kv_capacity, "tokens in the KV pool (default: automatic)");
    app->add_flag("--allow-long-context", opt.allow_long_context,
                  "allow --max-context beyond the model's max_position_embeddings (with a warning)");
    app->add_option("--memory-budget,--gpu-memory-budget", memory_budget,
                    "plan as if the device had this much memory (e.g. 24GiB), to emulate a smaller card");
  }
}

EngineOptions EngineFlags::options() const { return options_with_kv_dtype(opt.kv_dtype); }

EngineOptions EngineFlags::options_with_kv_dtype(const std::string& kv_dtype) const {
  EngineOptions o = opt;
  o.kv_dtype = kv_dtype;
  find_kv_format(o.kv_dtype);  // unknown names list the valid ones
  parse_weights_option(o.weights);
  if (o.threads < 0) fail("--threads must be >= 0, got {}", o.threads);
  if (o.prefill_chunk < 1) fail("--prefill-chunk must be >= 1, got {}", o.prefill_chunk);
  if (o.kv_capacity < 0) fail("--kv-capacity must be >= 0, got {}", o.kv_capacity);
  check_kv_window_flags(o.kv_sink, o.kv_recent);
  if (!memory_budget.empty()) o.memory_budget = int64_t(parse_bytes(memory_budget, "--memory-budget"));
  return o;
}

void resolve_max_context(EngineOptions& o, int64_t needed, int64_t fallback, const std::string& why) {
  if (o.max_context == 0) o.max_context = fallback;
  if (o.max_context < needed) fail("--max-context {} is smaller than {}", o.max_context, why);
}

}  // namespace ninfer::app

int main(int argc, char** argv) {
  using namespace ninfer::app;
  CLI::App app{"ninfer: LLM inference with a paged, compressed (E8-lattice) KV cache"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "help for every subcommand");
  for (Command& c : commands()) {
    CLI::App* sub = app.add_subcommand(c.name, c.help);
    c.setup(sub);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const ninfer::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return exit_code();
}
