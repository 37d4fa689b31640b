// Capacity planning: how many KV tokens (whole pages) to allocate, and the startup line
// that says so. The same arithmetic serves the engine at startup and `ninfer kv-plan`
// (which plans without loading weights).
//
// memory available for KV = memory - weights - workspace - headroom, where memory is the
// device's total (or --memory-budget), headroom = max(256 MiB, 4% of memory) for the CUDA
// context, allocator slack and fragmentation.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "kv/format.h"
#include "kv/kv_window.h"
#include "kv/workspace.h"

namespace ninfer {

struct ModelConfig;
struct WeightFormat;

// The row width, in values, of the CUDA backend's KV pages and attention kernels for a model's
// head_dim: 64, 128 and 256 as they are; 96 (Phi-3-mini, Phi-3.5-mini) zero-padded to 128, so
// its pools hold a third more bytes than its heads (kernels native to 96 are future work); 0
// for any other head_dim, which the CUDA backend refuses. The one table of the GPU's head dims:
// the CUDA backend's checks and pools, the workspace estimate and kv-plan's bytes read it.
int cuda_kv_head_dim(int head_dim);

// Bytes of KV per token over all attention layers (DeltaNet layers keep none) and KV heads,
// codes and scales, for rows of row_dim values (0: the model's head_dim; the CUDA backend's
// pools: cuda_kv_head_dim(head_dim)).
size_t kv_bytes_per_token(const ModelConfig& c, const KvFormat& f, int row_dim = 0);
// Bytes of one page (kPageSize tokens) over all layers, K and V: what Backend::page_bytes returns.
size_t kv_page_bytes(const ModelConfig& c, const KvFormat& f, int row_dim = 0);

// Workspace the GPU runtime reserves besides weights and KV: 256 MiB (cuBLAS workspace, CUDA
// graphs, allocator slack), the prefill scratch pool (kv/workspace.h), plus fp32 activations of one prefill
// chunk and its attention partials: chunk * (3 hidden + 2 q_dim + 2 kv_dim + 2 ffn + vocab) * 4 bytes;
// for a head_dim the GPU pads (cuda_kv_head_dim) also the padded copies of q/k/v (fp32) and of the
// attention output (bf16): chunk * (n_heads + 2 n_kv_heads) * 128 * 4 + chunk * n_heads * 128 * 2.
size_t workspace_estimate(const ModelConfig& c, int prefill_chunk);
// Bytes of weights on a device (embedding counted once when tied): bf16, except projections
// held quantised, in the checkpoint's format (quantization_config) or at_load's (--weights),
// codes + scales + zero points (model/weight_format.h).
size_t device_weight_bytes(const ModelConfig& c, const WeightFormat* at_load = nullptr);

struct CapacityInputs {
  size_t memory = 0;           // device memory to plan with (total or --memory-budget)
  size_t weights = 0;          // bytes of weights on the device
  size_t workspace = 0;        // activations, logits, scratch
  size_t page_bytes = 0;       // one page over all layers, K and V
  int64_t max_context = 0;     // tokens one sequence may hold
  int64_t kv_capacity = 0;     // explicit token capacity, 0: automatic
  int64_t auto_cap_tokens = 0; // automatic capacity limited to this many tokens (0: none)
  // Recurrent state (DeltaNet layers): slots planned for and the bytes of one.
  int state_slots = 0;
  size_t state_slot_bytes = 0;
  // Exact KV window (kv/kv_window.h): slots planned for (one per expected sequence) and the
  // bytes of one (kv_window_slot_bytes), taken from the memory before the pages.
  int window_slots = 0;
  size_t window_slot_bytes = 0;
};

struct CapacityPlan {
  int64_t tokens = 0;        // pages * kPageSize
  int64_t pages = 0;
  int64_t pages_fit = 0;     // pages that would fit in the available memory
  size_t kv_bytes = 0;
  int state_slots = 0;       // recurrent-state slots and the bytes of one (0: none)
  size_t state_slot_bytes = 0;
  int window_slots = 0;      // exact-window slots and the bytes of one (0: no window)
  size_t window_slot_bytes = 0;
  size_t runtime_bytes = 0;  // weights + workspace + state + window + kv
  size_t free_bytes = 0;     // memory - runtime (headroom included)
  size_t headroom = 0;
  bool automatic = false;
  int64_t max_context = 0;   // tokens one sequence may hold (CapacityInputs'); 0: not stated
};

size_t capacity_headroom(size_t memory);
// Throws Error when the explicit capacity cannot hold one max_context sequence or does not
// fit, or when not even one max_context sequence fits automatically.
CapacityPlan plan_capacity(const CapacityInputs& in);
// "capacity | KV 181,568 tokens, rk2v4-e8, auto | pages 2,837/4,096 | runtime 7.31 GiB | free 2.30 GiB"
// (pages allocated / pages that fit in the memory available), with "| state 4 x 60.4 MiB"
// before runtime for a model with recurrent state, and with an exact window on, after the format,
// its tokens and "| window 1 x 4.0 MiB" (slots x bytes of one) before runtime:
// "capacity | KV 8,192 tokens, rk2v4-e8 + exact sink 16 / recent 128, explicit | ..."
std::string capacity_line(const CapacityPlan& p, const KvFormat& f, const KvWindow& w = {});

std::string with_commas(int64_t v);
std::string format_bytes(size_t bytes);  // "7.31 GiB", "512.0 MiB"
// Parses "24GiB", "24G", "512MiB", "1.5GB", "1000000" (bytes); Error naming `what` if bad.
size_t parse_bytes(const std::string& s, const std::string& what);

}  // namespace ninfer
