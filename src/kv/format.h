// KV-cache storage formats: one registry maps a `--kv-dtype` name to its layout and its CPU
// reference codec. The normative description of every format is ../shared/docs/KV_FORMATS.md
// and the header comment of its codec file in src/kv/codecs/.
//
// A head-token is one (layer, kv-head, token) K row plus its V row, each `head_dim` floats.
// Encoders take the raw (unrotated) row and apply the format's rotation themselves;
// decoders return the reconstruction in the stored (rotated) basis. Attention therefore
// rotates the query by the K rotation and rotates its output back by the V rotation
// (rotate_kv() is self-inverse for every rotation used here).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace ninfer {

enum class KvRotation : uint8_t {
  None,
  HadamardHead,  // H_D over the whole head (K of the compressed formats)
  Hadamard64,    // H_64 applied to each 64-dim group (V of int4 / rk*-e8)
};

// One plane of a side's row: a run of `count(head_dim)` elements of `dtype`. A side's row
// bytes are its planes concatenated in order (no padding); kernels address a plane by its
// offset. Element counts: `per_group` elements for every `group` values of the row (group 0:
// none) plus `per_row` elements per row. `dtype` is the storage type; `name` says the
// encoding (e.g. "e4m3 codes" are stored as U8).
struct KvPlane {
  std::string_view name;
  DType dtype = DType::U8;
  int group = 0;
  int per_group = 0;
  int per_row = 0;

  constexpr size_t count(int head_dim) const {
    return (group > 0 ? size_t(head_dim / group) * size_t(per_group) : 0) + size_t(per_row);
  }
  size_t bytes(int head_dim) const { return count(head_dim) * dtype_size(dtype); }
};

struct KvSideCodec {
  KvRotation rotation = KvRotation::None;
  size_t (*bytes)(int head_dim) = nullptr;  // bytes per row for this side, codes + scales
  // x: [head_dim] raw row; out: [bytes(head_dim)]
  void (*encode)(const float* x, int head_dim, uint8_t* out) = nullptr;
  // in: [bytes(head_dim)]; out: [head_dim] reconstruction in the stored (rotated) basis
  void (*decode)(const uint8_t* in, int head_dim, float* out) = nullptr;
  // The row layout: planes in byte order; their bytes sum to bytes(head_dim).
  std::span<const KvPlane> planes{};
};

struct KvFormat {
  std::string_view name;         // the --kv-dtype name
  std::string_view description;  // one line for help texts and tables
  int head_dim_multiple = 1;     // head_dim must be a positive multiple of this
  KvSideCodec k, v;

  size_t k_bytes(int head_dim) const { return k.bytes(head_dim); }
  size_t v_bytes(int head_dim) const { return v.bytes(head_dim); }
  size_t bytes_per_head_token(int head_dim) const { return k_bytes(head_dim) + v_bytes(head_dim); }
  // Throws ninfer::Error naming the format and head_dim when this format cannot store it.
  void check_head_dim(int head_dim) const;
};

// All registered formats, in table order.
std::span<const KvFormat* const> kv_formats();
// Looks a format up by name; an unknown name throws an Error that lists the valid ones.
// Throws Error naming `flag` and the valid names when `name` is not a format.
const KvFormat& find_kv_format(std::string_view name, std::string_view flag = "--kv-dtype");
std::string kv_format_names_joined(std::string_view sep = ", ");

// Applies (and, being self-inverse, undoes) a rotation in place. x: [head_dim]
void rotate_kv(KvRotation r, float* x, int head_dim);

}  // namespace ninfer
