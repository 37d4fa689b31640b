// Chooses and builds a backend: "cpu", "cuda", or "auto" (CUDA when built with it and a GPU
// is present, else the CPU with a one-line notice).
#pragma once
#include <memory>
#include <string>

#include "backend/backend.h"

namespace ninfer {

std::unique_ptr<Backend> make_backend(const Model& model, const std::string& device, const std::string& kv_dtype,
                                      int threads, bool quiet);

}  // namespace ninfer
