// Deterministic random fills (bench_support.h): splitmix64 of (seed, index), top 24 bits to
// a float in [-1, 1), times scale.
#include "backend/cuda/bench_support.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_utils.cuh"

namespace ninfer::cuda {
namespace {

__host__ __device__ inline float hash_uniform(uint64_t seed, uint64_t i) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + i + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return float(int32_t(uint32_t(z >> 40)) - (1 << 23)) * (1.0f / float(1 << 23));
}

__global__ void fill_kernel(float* x, size_t n, uint64_t seed, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    x[i] = hash_uniform(seed, i) * scale;
}

__global__ void fill_bf16_kernel(uint16_t* x, size_t n, uint64_t seed, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    x[i] = f32_to_bf16_bits(hash_uniform(seed, i) * scale);
}

int blocks_for(size_t n) {
  const size_t b = (n + 255) / 256;
  return int(b < 8192 ? (b > 0 ? b : 1) : 8192);
}

}  // namespace

void launch_fill_uniform(float* x, size_t n, uint64_t seed, float scale, cudaStream_t s) {
  fill_kernel<<<blocks_for(n), 256, 0, s>>>(x, n, seed, scale);
  NINFER_CUDA_LAUNCH_CHECK();
}

void fill_uniform_host(float* x, size_t n, uint64_t seed, float scale) {
  for (size_t i = 0; i < n; ++i) x[i] = hash_uniform(seed, i) * scale;
}

void launch_fill_uniform_bf16(uint16_t* x, size_t n, uint64_t seed, float scale, cudaStream_t s) {
  fill_bf16_kernel<<<blocks_for(n), 256, 0, s>>>(x, n, seed, scale);
  NINFER_CUDA_LAUNCH_CHECK();
}

}  // namespace ninfer::cuda
