// Fuzz target: every KV format's K and V decoders (src/kv/codecs, the registry of
// src/kv/format.h) on arbitrary row bytes. Byte 0 picks the format, byte 1 the head_dim (a
// multiple the format accepts, up to 1024); the rest, zero-padded, is the K row then the V row,
// each copied to a heap buffer of exactly bytes(head_dim) so ASan sees any read past the row.
// The output is poisoned with NaN first, so an element the decoder leaves unwritten fails.
// Finite output: every non-exact format decodes to finite values for any codes when its scales
// are finite (fp16 scales that are not Inf/NaN, e4m3 bytes that are not NaN; the encoders
// write no others), so those scale patterns are replaced before decoding; the exact formats
// (f32, bf16) store what they are given and are checked bit for bit instead.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "kv/format.h"

namespace {

// Replaces the scale patterns an encoder never writes (see above) in one side's row.
void finite_scales(const ninfer::KvSideCodec& side, int head_dim, uint8_t* row) {
  size_t off = 0;
  for (const ninfer::KvPlane& p : side.planes) {
    const size_t n = p.count(head_dim), nb = p.bytes(head_dim);
    if (p.dtype == ninfer::DType::F16) {
      for (size_t i = 0; i < n; ++i) {
        uint8_t* b = row + off + 2 * i;
        if ((b[1] & 0x7c) == 0x7c) b[1] &= 0x83;  // exponent all ones (Inf/NaN): clear it
      }
    } else if (p.name.substr(0, 4) == "e4m3") {
      for (size_t i = 0; i < n; ++i)
        if ((row[off + i] & 0x7f) == 0x7f) row[off + i] &= 0xfe;  // S.1111.111 is NaN in e4m3
    }
    off += nb;
  }
  if (off != side.bytes(head_dim)) std::abort();  // the planes must add up to the row
}

void check_side(const ninfer::KvFormat& f, const ninfer::KvSideCodec& side, int head_dim, std::string_view in) {
  const size_t nb = side.bytes(head_dim);
  std::vector<uint8_t> row(nb, 0);
  if (!in.empty()) std::memcpy(row.data(), in.data(), std::min(nb, in.size()));
  const bool exact = f.name == "f32" || f.name == "bf16";
  if (!exact) finite_scales(side, head_dim, row.data());
  auto heap = std::make_unique<uint8_t[]>(nb);
  std::memcpy(heap.get(), row.data(), nb);
  std::vector<float> out(size_t(head_dim), std::nanf(""));
  side.decode(heap.get(), head_dim, out.data());
  for (int i = 0; i < head_dim; ++i) {
    if (exact) {
      float want;
      if (f.name == "f32") {
        std::memcpy(&want, row.data() + 4 * i, 4);
      } else {
        uint32_t bits = uint32_t(row[2 * i] | (row[2 * i + 1] << 8)) << 16;
        std::memcpy(&want, &bits, 4);
      }
      if (std::memcmp(&want, &out[size_t(i)], 4) != 0 && !(std::isnan(want) && std::isnan(out[size_t(i)])))
        std::abort();
    } else if (!std::isfinite(out[size_t(i)])) {
      std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  auto formats = ninfer::kv_formats();
  const ninfer::KvFormat& f = *formats[data[0] % formats.size()];
  const int m = f.head_dim_multiple;
  const int head_dim = m * (1 + data[1] % (1024 / m));
  try {
    f.check_head_dim(head_dim);
  } catch (const ninfer::Error&) {
    return 0;
  }
  std::string_view rest(reinterpret_cast<const char*>(data + 2), size - 2);
  const size_t kb = f.k_bytes(head_dim);
  check_side(f, f.k, head_dim, rest);
  check_side(f, f.v, head_dim, rest.size() > kb ? rest.substr(kb) : std::string_view());
  return 0;
}
