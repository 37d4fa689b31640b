// Fuzz target: a safetensors file image (u64 header length, JSON header, data section) through
// parse_safetensors, the parser behind TensorStore. Lying offsets, dtypes and shapes must be an
// Error; every tensor it accepts must lie inside the data section and hold exactly
// numel x dtype size bytes. The image is a heap copy of exactly `size` bytes, so ASan sees a
// read past its end.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/error.h"
#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto buf = std::make_unique<uint8_t[]>(size ? size : 1);
  if (size) std::memcpy(buf.get(), data, size);
  std::vector<ninfer::TensorInfo> ts;
  try {
    ts = ninfer::parse_safetensors(buf.get(), size, "fuzz.safetensors");
  } catch (const ninfer::Error&) {
    return 0;
  }
  for (const ninfer::TensorInfo& t : ts) {
    const auto* p = static_cast<const uint8_t*>(t.data);
    if (p < buf.get() || p > buf.get() + size || t.nbytes > size_t(buf.get() + size - p)) std::abort();
    unsigned __int128 want = ninfer::dtype_size(t.dtype);
    for (int64_t d : t.shape) want *= static_cast<unsigned __int128>(d);
    if (want != t.nbytes || uint64_t(t.numel()) * ninfer::dtype_size(t.dtype) != t.nbytes) std::abort();
    volatile uint8_t sink = 0;
    if (t.nbytes) sink = sink + p[0] + p[t.nbytes - 1];  // ASan: both ends are inside the image
    (void)t.shape_str();
  }
  return 0;
}
