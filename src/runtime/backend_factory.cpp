#include "runtime/backend_factory.h"

#include <cstdio>

#include "core/error.h"

#ifdef NINFER_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace ninfer {

std::unique_ptr<Backend> make_backend(const Model& model, const std::string& device, int threads, bool quiet) {
  if (device != "cpu" && device != "cuda" && device != "auto")
    fail("--device must be cpu, cuda or auto, got '{}'", device);
#ifdef NINFER_HAVE_CUDA
  if (device == "cuda" || device == "auto") {
    if (cuda_device_available()) return make_cuda_backend(model);
    if (device == "cuda") fail("--device cuda: no usable CUDA GPU found");
    if (!quiet) std::fprintf(stderr, "notice: no CUDA GPU found; using the CPU backend\n");
  }
#else
  if (device == "cuda") fail("--device cuda: this ninfer was built without CUDA (configure with the 'cuda' preset)");
#endif
  (void)quiet;
  CpuBackendOptions o;
  o.threads = threads;
  return make_cpu_backend(model, o);
}

}  // namespace ninfer
