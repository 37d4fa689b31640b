// Error checks for CUDA runtime and cuBLAS calls, usable from .cpp and .cu files. A failed
// call throws std::runtime_error naming the call, file and line (the CLI prints it); every
// kernel launch is followed by NINFER_CUDA_LAUNCH_CHECK().
#pragma once
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace ninfer::cuda {

[[noreturn]] inline void throw_cuda_error(cudaError_t e, const char* what, const char* file, int line) {
  throw std::runtime_error(std::string("CUDA error: ") + cudaGetErrorString(e) + " in " + what + " at " +
                           file + ":" + std::to_string(line));
}

}  // namespace ninfer::cuda

#define NINFER_CUDA_CHECK(call)                                                     \
  do {                                                                              \
    cudaError_t _e = (call);                                                        \
    if (_e != cudaSuccess) ::ninfer::cuda::throw_cuda_error(_e, #call, __FILE__, __LINE__); \
  } while (0)

#define NINFER_CUDA_LAUNCH_CHECK() NINFER_CUDA_CHECK(cudaGetLastError())
