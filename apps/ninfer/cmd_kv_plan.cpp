// `ninfer kv-plan`: how many tokens of KV fit for a model and a memory size, per format,
// from config.json alone (no weights loaded). Uses the engine's capacity arithmetic
// (kv/capacity.h) with weights as bf16 on the device, projections as the checkpoint's
// quantised format or --weights' (their real bytes: codes, scales, zero points), and KV rows as
// wide as the GPU stores them (cuda_kv_head_dim: head_dim 96 in 128-wide rows).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "apps/ninfer/command.h"
#include "core/error.h"
#include "kv/capacity.h"
#include "kv/page_table.h"
#include "model/config.h"
#include "model/weight_format.h"

namespace ninfer::app {
namespace {

struct PlanCmd {
  std::string model_dir, memory, kv_dtype, weights = "bf16";
  int64_t max_context = 0;
  int prefill_chunk = 512;
  // The exact KV window to count. NOTE: kv-plan plans for the GPU, which has no window yet, so
  // none unless given (-1: the format's CPU default, default_kv_window).
  int kv_sink = 0, kv_recent = 0;
  bool json = false;
};

RegisterCommand reg("kv-plan", "tokens of KV context that fit in a memory size, per format (no weights loaded)",
                    [](CLI::App* app) {
  auto c = std::make_shared<PlanCmd>();
  app->add_option("-m,--model", c->model_dir, "model directory (only config.json is read)")->required();
  app->add_option("--memory", c->memory, "device memory to plan for, e.g. 24GiB, 80GB")->required();
  app->add_option("--kv-dtype", c->kv_dtype, "one format (default: every format)");
  app->add_option("--weights", c->weights, "weights as held: bf16 (as stored) or quantised at load: fp8, int8, int4")
      ->capture_default_str();
  app->add_option("--max-context", c->max_context, "tokens of one sequence (default: max_position_embeddings)");
  app->add_option("--kv-sink", c->kv_sink, "first tokens kept exact (bf16) per sequence, counted once (-1: the format's CPU default)")
      ->capture_default_str();
  app->add_option("--kv-recent", c->kv_recent, "newest tokens kept exact (bf16) per sequence, counted once (-1: the format's CPU default)")
      ->capture_default_str();
  app->add_flag("--json", c->json, "print a JSON array");
  app->callback([c]() {
    ModelConfig cfg = load_model_config(c->model_dir);
    const size_t memory = parse_bytes(c->memory, "--memory");
    std::vector<const KvFormat*> fmts;
    if (!c->kv_dtype.empty()) {
      fmts.push_back(&find_kv_format(c->kv_dtype));
    } else {
      for (const KvFormat* f : kv_formats()) fmts.push_back(f);
    }
    check_kv_window_flags(c->kv_sink, c->kv_recent);
    const WeightFormat* at_load = parse_weights_option(c->weights);
    if (at_load && cfg.quant)
      fail("--weights {}: {}/config.json says the checkpoint is already quantised (quantization_config '{}')",
           c->weights, c->model_dir, cfg.quant.name);
    const size_t weights = device_weight_bytes(cfg, at_load);
    const std::string weights_label =
        at_load ? at_load->name : cfg.quant ? fmt::format("{} checkpoint", cfg.quant.name) : std::string("bf16");
    const size_t workspace = workspace_estimate(cfg, c->prefill_chunk);
    const size_t headroom = capacity_headroom(memory);
    // One sequence's recurrent state (DeltaNet layers), planned like the engine's one slot.
    const size_t state = cfg.state_bytes();
    // The table goes to stdout unless --json, which prints only the JSON array.
    FILE* out = c->json ? stderr : stdout;
    std::fprintf(out, "model %s | %s | layers %d, kv heads %d, head_dim %d | weights %s (%s) | workspace %s | "
                "headroom %s | memory %s\n",
                c->model_dir.c_str(), cfg.architecture.c_str(), cfg.n_layers, cfg.n_kv_heads, cfg.head_dim,
                format_bytes(weights).c_str(), weights_label.c_str(), format_bytes(workspace).c_str(), format_bytes(headroom).c_str(),
                format_bytes(memory).c_str());
    if (state > 0)
      std::fprintf(out, "layers: %d with a KV cache (full attention), %d Gated DeltaNet with a recurrent state of %s per "
                   "sequence (conv %d x %d + delta rule %d x %d x %d, fp32), counted once below\n",
                   cfg.n_attention_layers(), cfg.n_deltanet_layers(), format_bytes(state).c_str(), cfg.dn.conv - 1,
                   cfg.dn.conv_dim(), cfg.dn.nv, cfg.dn.dk, cfg.dn.dv);
    // NOTE: the rows the GPU's pools hold; a head_dim the GPU cannot run is planned at its own width.
    const int gpu_dim = cuda_kv_head_dim(cfg.head_dim);
    const int row_dim = gpu_dim > 0 ? gpu_dim : cfg.head_dim;
    if (row_dim != cfg.head_dim)
      std::fprintf(out, "head_dim %d is stored zero-padded to %d on the GPU (%.0f%% more KV bytes): the bytes below are "
                   "the GPU's\n", cfg.head_dim, row_dim, 100.0 * (row_dim - cfg.head_dim) / cfg.head_dim);
    nlohmann::json arr = nlohmann::json::array();
    std::fprintf(out, "%-12s %14s %14s %12s %10s  %s\n", "format", "bytes/token", "tokens", "pages", "vs bf16",
                 "exact window (one sequence's, counted once)");
    int64_t bf16_tokens = 0;
    for (const KvFormat* f : fmts) {
      nlohmann::json row = {{"format", std::string(f->name)}};
      if (cfg.head_dim % f->head_dim_multiple != 0) {
        std::fprintf(out, "%-12s %14s  (head_dim %d is not a multiple of %d)\n", std::string(f->name).c_str(), "-",
                    cfg.head_dim, f->head_dim_multiple);
        row["error"] = "head_dim not supported";
        arr.push_back(row);
        continue;
      }
      const size_t per_token = kv_bytes_per_token(cfg, *f, row_dim);
      // The exact window of one sequence, planned like the engine's one slot (at the GPU's row width).
      const KvWindow w = resolve_kv_window(f->name, c->kv_sink, c->kv_recent);
      const size_t window = kv_window_slot_bytes(w, cfg.n_attention_layers(), cfg.n_kv_heads, row_dim);
      const size_t used = weights + workspace + headroom + state + window;
      const int64_t pages = memory > used ? int64_t((memory - used) / (per_token * kPageSize)) : 0;
      const int64_t tokens = pages * kPageSize;
      if (f->name == "bf16") bf16_tokens = tokens;
      std::fprintf(out, "%-12s %14s %14s %12s", std::string(f->name).c_str(), with_commas(int64_t(per_token)).c_str(),
                  with_commas(tokens).c_str(), with_commas(pages).c_str());
      if (bf16_tokens > 0) std::fprintf(out, " %9.2fx", double(tokens) / double(bf16_tokens));
      else std::fprintf(out, " %10s", "");
      if (w.on()) std::fprintf(out, "  sink %d + recent %d: %s", w.sink, w.recent, format_bytes(window).c_str());
      std::fprintf(out, "\n");
      row["kv_sink"] = w.sink;
      row["kv_recent"] = w.recent;
      row["window_bytes_per_sequence"] = window;
      row["kv_bytes_per_token"] = per_token;
      row["tokens"] = tokens;
      row["pages"] = pages;
      row["weights_bytes"] = weights;
      row["weights"] = weights_label;
      row["workspace_bytes"] = workspace;
      row["headroom_bytes"] = headroom;
      row["state_bytes_per_sequence"] = state;
      row["memory_bytes"] = memory;
      if (c->max_context > 0) row["sequences_at_max_context"] = tokens / c->max_context;
      arr.push_back(row);
    }
    if (c->json) std::printf("%s\n", arr.dump(2).c_str());
    if (weights + workspace + headroom + state >= memory)
      fail("{}: the weights alone ({} as {}) with workspace {} and headroom {} do not fit in --memory {}; no KV cache fits",
           c->model_dir, format_bytes(weights), weights_label, format_bytes(workspace), format_bytes(headroom), format_bytes(memory));
  });
});

}  // namespace
}  // namespace ninfer::app
