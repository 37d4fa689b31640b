#include "kv/format.h"

#include "core/error.h"
#include "kv/codecs/codecs.h"
#include "kv/codecs/common.h"
#include "kv/hadamard.h"

namespace ninfer {

void KvFormat::check_head_dim(int head_dim) const {
  if (head_dim <= 0 || head_dim % head_dim_multiple != 0) {
    fail("--kv-dtype {} needs head_dim to be a multiple of {}, but the model has head_dim {}",
         name, head_dim_multiple, head_dim);
  }
  const bool whole_head = k.rotation == KvRotation::HadamardHead || v.rotation == KvRotation::HadamardHead;
  if (whole_head && (head_dim & (head_dim - 1)) != 0) {
    fail("--kv-dtype {} rotates K by the Hadamard matrix H_D, which needs head_dim to be a power "
         "of two, but the model has head_dim {}",
         name, head_dim);
  }
  // NOTE: the lossy encoders work in a stack buffer of codecs::kMaxHeadDim floats.
  if (head_dim_multiple > 1 && head_dim > codecs::kMaxHeadDim) {
    fail("--kv-dtype {} supports head_dim up to {}, but the model has head_dim {}", name,
         codecs::kMaxHeadDim, head_dim);
  }
}

std::span<const KvFormat* const> kv_formats() {
  // NOTE: table order is the order of help texts and benchmark tables: the exact reference
  // first, then the rows of the KV_FORMATS.md table in its order, then comparison-only codes.
  static const KvFormat* const table[] = {
      &codecs::kF32Format,    &codecs::kBf16Format,     &codecs::kInt8Format,
      &codecs::kFp8Format,    &codecs::kNvfp4Format,    &codecs::kK8v4Format,
      &codecs::kInt4Format,   &codecs::kRk4v4E8Format,  &codecs::kRk2v4E8Format,
      &codecs::kE8RootRefFormat, &codecs::kIq4nlRefFormat,
  };
  return table;
}

std::string kv_format_names_joined(std::string_view sep) {
  std::string s;
  for (const KvFormat* f : kv_formats()) {
    if (!s.empty()) s += sep;
    s += f->name;
  }
  return s;
}

const KvFormat& find_kv_format(std::string_view name, std::string_view flag) {
  for (const KvFormat* f : kv_formats()) {
    if (f->name == name) return *f;
  }
  fail("unknown {} '{}'; valid formats: {}", flag, name, kv_format_names_joined());
}

void rotate_kv(KvRotation r, float* x, int head_dim) {
  switch (r) {
    case KvRotation::None:
      return;
    case KvRotation::HadamardHead:
      hadamard_inplace(x, head_dim);
      return;
    case KvRotation::Hadamard64:
      for (int g = 0; g < head_dim; g += 64) hadamard_inplace(x + g, 64);
      return;
  }
}

}  // namespace ninfer
