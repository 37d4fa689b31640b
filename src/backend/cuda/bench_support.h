// Helpers for benchmarks and tests on the GPU: deterministic random fill of device buffers.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace ninfer::cuda {

// x[i] = uniform in [-scale, scale) from a counter-based hash of (seed, i); the same seed
// gives the same values on every GPU. x: [n] fp32
void launch_fill_uniform(float* x, size_t n, uint64_t seed, float scale, cudaStream_t s);

// Same values as launch_fill_uniform, on the host (tests compare against it). x: [n]
void fill_uniform_host(float* x, size_t n, uint64_t seed, float scale);

// x[i] = bf16 bits of uniform [-scale, scale) (for random-weight checkpoints). x: [n]
void launch_fill_uniform_bf16(uint16_t* x, size_t n, uint64_t seed, float scale, cudaStream_t s);

}  // namespace ninfer::cuda
