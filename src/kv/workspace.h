// Device workspace sizes shared by the capacity planner (kv/capacity.h, workspace_estimate) and
// the CUDA backend that allocates them. Plain constants: included by CUDA sources too.
#pragma once
#include <cstddef>

namespace ninfer {

// The CUDA prefill attention's bf16 scratch pool for pages of compressed formats (attention.h,
// PagedAttention::plan: larger histories are expanded a segment at a time).
constexpr size_t kPrefillScratchBytes = size_t(512) << 20;

}  // namespace ninfer
