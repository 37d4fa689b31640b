// Host side of quantised weights on the GPU: QuantMatrix parts (model/weight_format.h) packed
// into the device layout of cuda/gemv_quant.h, ready to copy. Used by the CUDA backend's upload
// and by the kernel tests (tests/cuda/test_gemv_quant.cpp), so both see one packing.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/cuda/gemv_quant.h"
#include "model/weight_format.h"

namespace ninfer {

struct QuantHost {
  cuda::QuantWeights w;  // shape and grid; the device pointers are left null
  std::vector<uint8_t> codes, zeros;
  std::vector<float> scales;
  std::vector<int32_t> g_idx;
  std::vector<int32_t> col_perm;  // [n_seg][k] when the g_idx were regrouped (then g_idx is empty)
  std::string name;  // the first part's tensor, for errors
};

cuda::QFmt cuda_qfmt(const WeightFormat& f);

// The parts stacked along the output rows (q|k|v, gate|up; one part for a plain projection):
// code rows padded with zero bytes to a multiple of 16; scale (and zero) rows concatenated when
// every part has the same block_rows, all but the last are whole blocks and there are several
// groups per row, else repeated per row (block_rows 1: the FP8 GEMM's per-column scales); g_idx
// one segment per part. Parts that differ in format, columns, groups or g_idx presence, or more
// than cuda::kQuantMaxSegments parts with g_idx, are refused naming the tensors.
// regroup: g_idx whose groups all have one size (the last may be smaller), a multiple of a
// 16-byte load's columns, with parts of whole row groups (4 rows), become col_perm: each part's
// code columns sorted by group, block_cols the group size (gemv_quant.h); not for experts (the
// gathered GEMV takes no col_perm).
QuantHost pack_quant_parts(const std::vector<const QuantMatrix*>& parts, bool regroup = false);

}  // namespace ninfer
