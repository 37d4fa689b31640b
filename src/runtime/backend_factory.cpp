#include "runtime/backend_factory.h"

#include <cstdio>

#include "core/error.h"
#include "model/model.h"

#ifdef NINFER_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace ninfer {

std::unique_ptr<Backend> make_backend(const Model& model, const std::string& device, const std::string& kv_dtype,
                                      int threads, bool quiet) {
  if (device != "cpu" && device != "cuda" && device != "auto")
    fail("--device must be cpu, cuda or auto, got '{}'", device);
#ifdef NINFER_HAVE_CUDA
  if (device == "cuda" || device == "auto") {
    std::string why;
    if (!cuda_device_available()) {
      why = "no usable CUDA GPU found";
    } else if (!cuda_supports_model(model.config, &why)) {
      // why filled in
    } else if (!cuda_supports_kv_format(kv_dtype)) {
      why = fmt::format("--kv-dtype {} has no GPU kernels yet", kv_dtype);
    } else {
      return make_cuda_backend(model);
    }
    if (device == "cuda") fail("--device cuda: {}", why);
    if (!quiet) std::fprintf(stderr, "notice: %s; using the CPU backend\n", why.c_str());
  }
#else
  (void)kv_dtype;
  if (device == "cuda") fail("--device cuda: this ninfer was built without CUDA (configure with the 'cuda' preset)");
#endif
  (void)quiet;
  CpuBackendOptions o;
  o.threads = threads;
  o.kernels = cpu_kernels_from_env();
  return make_cpu_backend(model, o);
}

}  // namespace ninfer
