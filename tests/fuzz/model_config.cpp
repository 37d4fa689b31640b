// Fuzz target: config.json text through parse_model_config (every family's fields, text_config
// nesting, rope scaling). A config it accepts must give the shape arithmetic the rest of the
// engine does (parameter counts, score scale, windows) without overflow or a division by zero.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  ninfer::ModelConfig c;
  try {
    c = ninfer::parse_model_config(text, "config.json");
  } catch (const ninfer::Error&) {
    return 0;
  }
  if (c.n_layers <= 0 || c.hidden <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0 || c.head_dim <= 0 ||
      c.vocab <= 0 || static_cast<int>(c.layers.size()) != c.n_layers || c.ropes.empty())
    std::abort();
  for (const ninfer::LayerSpec& l : c.layers)
    if (l.window < 0 || l.rope < 0 || l.rope >= static_cast<int>(c.ropes.size())) std::abort();
  volatile int64_t sink = c.n_params() + c.n_active_params() + c.q_dim() + c.kv_dim() + c.max_window();
  (void)sink;
  if (!std::isfinite(c.score_scale())) std::abort();
  return 0;
}
