// The backend interface: what the runtime asks of a device. A backend owns the model's
// weights in its own memory and the KV page pools; the runtime owns the page tables
// (kv/page_table.h) and passes block tables in with every forward call.
//
// One forward call processes a batch of chunks; each chunk is some new tokens of one
// sequence (a whole prompt, a prefill slice, or one decode token). For every chunk the
// backend computes K/V of the new tokens, encodes them into their pages in the cache
// format, attends over the sequence's cached tokens [0, start_pos + n_tokens) causally, and
// returns logits.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "kv/format.h"
#include "kv/kv_window.h"

namespace ninfer {

struct Model;

struct SeqChunk {
  const int32_t* tokens = nullptr;  // [n_tokens]
  int n_tokens = 0;
  int start_pos = 0;                   // position of tokens[0]; [0, start_pos) are cached
  const int32_t* block_table = nullptr;  // [n_blocks] physical page ids
  int n_blocks = 0;                    // must cover start_pos + n_tokens tokens
  bool all_logits = false;             // logits for every token, else only the last one
  // Models with DeltaNet layers (ModelConfig::state_bytes() > 0): the sequence's recurrent
  // state slot (Backend::init_state). A chunk at start_pos 0 starts from a zero state; any
  // other continues the slot's state, which must then be this sequence's after start_pos tokens.
  int state_slot = -1;
  // With an exact KV window on (Backend::init_kv_window): the sequence's window slot. A chunk
  // at start_pos 0 starts an empty window; any other needs the slot as this sequence left it.
  int window_slot = -1;
};

struct MemoryInfo {
  size_t total = 0;    // device memory (RAM for the CPU backend)
  size_t free = 0;     // available now
  size_t weights = 0;  // bytes the backend holds for weights
};

// Observer for raw K/V rows as written (K after q/k-norm and rope, before any format
// rotation). k, v: [n_kv_heads, head_dim]. Used by `ninfer dump-kv`.
using KvObserver = std::function<void(int layer, int pos, const float* k, const float* v)>;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // (Re)allocates the per-layer K and V page pools for n_pages pages of `fmt`.
  virtual void init_kv(const KvFormat& fmt, int n_pages) = 0;
  virtual const KvFormat& kv_format() const = 0;
  // (Re)allocates n_slots recurrent-state slots of ModelConfig::state_bytes() each, keeping the
  // contents of the first min(old, new) slots. Models without DeltaNet layers need none.
  virtual void init_state(int n_slots) { (void)n_slots; }
  // (Re)allocates n_slots window slots (kv/kv_window.h) for the exact window `w`, keeping the
  // contents of the first min(old, new) slots when the window is unchanged. A backend that
  // does not implement the window refuses one that is on, naming the flags.
  virtual void init_kv_window(const KvWindow& w, int n_slots) {
    (void)n_slots;
    if (w.on())
      fail("--kv-sink {} / --kv-recent {}: the {} backend does not implement the exact KV window yet; use "
           "--device cpu, or --kv-sink 0 --kv-recent 0",
           w.sink, w.recent, name());
  }
  virtual KvWindow kv_window() const { return {}; }
  // Whether init_kv_window accepts a window that is on (a format's default window is used only
  // where it does; an explicit --kv-sink / --kv-recent is refused elsewhere).
  virtual bool implements_kv_window() const { return false; }
  // Runs the chunks; `logits` receives, in chunk order, n_tokens rows (all_logits) or one
  // row per chunk, each [vocab] fp32.
  virtual void forward(std::span<const SeqChunk> chunks, std::vector<float>& logits) = 0;
  virtual MemoryInfo memory() const = 0;
  // Bytes of device memory one page takes across all layers (K and V).
  virtual size_t page_bytes(const KvFormat& fmt) const = 0;
  virtual void set_kv_observer(KvObserver obs) { (void)obs; }
  // Copies the whole cached content (every layer, K and V, all slots) of page src[i] into
  // page dst[i]. Engine::extend_by_repeating uses it to build long contexts quickly for
  // benchmarks (`bench --fill-from`).
  virtual void copy_kv_pages(std::span<const int32_t> src, std::span<const int32_t> dst) = 0;
};

// Fast: bf16 weights, SIMD kernels chosen at run time, attention on the cached codes a page
// at a time, idle threads asleep (backend/cpu/cpu_fast.h). Reference: fp32 throughout, the
// oracle the fast path and the GPU kernels are tested against (OpenMP threads).
enum class CpuKernels : uint8_t { Fast, Reference };

// NINFER_CPU_KERNELS=fast|reference (unset: fast); anything else is an Error naming it.
CpuKernels cpu_kernels_from_env();

struct CpuBackendOptions {
  int threads = 0;  // 0: all hardware threads
  CpuKernels kernels = CpuKernels::Fast;
};

std::unique_ptr<Backend> make_cpu_backend(const Model& model, const CpuBackendOptions& opt = {});

}  // namespace ninfer
