// QuantMatrix parts -> the device layout of cuda/gemv_quant.h (quant_upload.h).
#include "backend/cuda/quant_upload.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace ninfer {

cuda::QFmt cuda_qfmt(const WeightFormat& f) {
  switch (f.id) {
    case WeightFormatId::Fp8: return cuda::QFmt::Fp8;
    case WeightFormatId::Int8: return cuda::QFmt::Int8;
    case WeightFormatId::Int4: return cuda::QFmt::Int4;
  }
  fail("weight format '{}' has no CUDA kernels", f.name);
}

namespace {

// Whether q's g_idx groups columns in equal groups (the last may be smaller) of a size that is
// a multiple of `unit`; *size receives it.
bool regular_groups(const QuantMatrix& q, int64_t unit, int64_t* size) {
  std::vector<int64_t> count(size_t(q.n_groups), 0);
  for (int32_t g : q.g_idx) ++count[size_t(g)];
  const int64_t gs = count[0];
  if (gs == 0 || gs % unit != 0) return false;
  for (size_t g = 0; g < count.size(); ++g)
    if (g + 1 < count.size() ? count[g] != gs : (count[g] == 0 || count[g] > gs)) return false;
  *size = gs;
  return true;
}

uint8_t code_at(const QuantMatrix& q, int64_t r, int64_t c) {
  const uint8_t* row = q.codes.data() + size_t(r * q.row_bytes());
  return q.format->code_bits == 4 ? uint8_t((row[c / 2] >> (4 * (c & 1))) & 0xF) : row[c];
}

}  // namespace

QuantHost pack_quant_parts(const std::vector<const QuantMatrix*>& parts, bool regroup) {
  NINFER_CHECK(!parts.empty() && parts.front() != nullptr, "pack_quant_parts: no parts");
  const QuantMatrix* q0 = parts.front();
  int64_t n = 0;
  for (const QuantMatrix* q : parts) {
    if (q->format != q0->format || q->cols != q0->cols || q->g_idx.empty() != q0->g_idx.empty() ||
        q->n_groups != q0->n_groups || (q->g_idx.empty() && q->block_cols != q0->block_cols))
      fail("tensor '{}' ({}, {} columns in {} groups of {}) cannot be stacked with '{}' ({}, {} columns in {} groups "
           "of {}) in one projection on the CUDA backend (use --device cpu)", q->name, q->format->name, q->cols,
           q->n_groups, q->block_cols, q0->name, q0->format->name, q0->cols, q0->n_groups, q0->block_cols);
    n += q->rows;
  }
  if (!q0->g_idx.empty() && int(parts.size()) > cuda::kQuantMaxSegments)
    fail("tensor '{}': {} stacked parts with g_idx; the CUDA backend takes at most {}", q0->name, parts.size(),
         cuda::kQuantMaxSegments);
  if (n > (int64_t(1) << 31) - 1 || q0->cols > (int64_t(1) << 31) - 1)
    fail("tensor '{}': {} x {} is too large for the CUDA kernels", q0->name, n, q0->cols);
  QuantHost h;
  h.name = q0->name;
  cuda::QuantWeights& w = h.w;
  w.fmt = cuda_qfmt(*q0->format);
  w.k = int(q0->cols);
  w.n = int(n);
  w.n_groups = int(q0->n_groups);
  w.block_cols = int(q0->block_cols);
  const int64_t rb = q0->row_bytes();
  w.row_bytes = int((rb + 15) / 16 * 16);
  // NOTE: repeating scale rows costs 4 (int4: 5) bytes per row and group: 1 / 32 of fp8 codes
  // for 128 x 128 blocks (only when stacked parts are not whole blocks), nothing measurable for
  // one group per row.
  bool stack = q0->n_groups > 1;
  for (size_t i = 0; i < parts.size(); ++i)
    if (parts[i]->block_rows != q0->block_rows || (i + 1 < parts.size() && parts[i]->rows % q0->block_rows != 0))
      stack = false;
  w.block_rows = stack ? int(q0->block_rows) : 1;
  // NOTE: regrouping needs the codes' 16-byte loads (16 or 32 columns) to lie in one group and
  // the parts to start on a GEMV row group (4 rows), else g_idx stays (the general path).
  const int64_t unit = q0->format->code_bits == 4 ? 32 : 16;
  int64_t gsize = 0;
  bool perm = regroup && !q0->g_idx.empty() && q0->cols % unit == 0;
  for (size_t i = 0; perm && i < parts.size(); ++i) {
    int64_t gs = 0;
    perm = regular_groups(*parts[i], unit, &gs) && (gsize == 0 || gs == gsize) &&
           (i + 1 == parts.size() || parts[i]->rows % 4 == 0);
    gsize = gs;
  }
  if (perm) w.block_cols = int(gsize);
  const bool zeros = q0->format->zeros;
  h.codes.assign(size_t(n) * size_t(w.row_bytes), 0);
  int64_t r = 0;
  w.n_seg = 0;
  for (const QuantMatrix* q : parts) {
    std::vector<int32_t> order;  // regrouped: code column j holds matrix column order[j]
    if (perm) {
      order.resize(size_t(q->cols));
      for (int64_t c = 0; c < q->cols; ++c) order[size_t(c)] = int32_t(c);
      std::stable_sort(order.begin(), order.end(),
                       [&](int32_t a, int32_t b) { return q->g_idx[size_t(a)] < q->g_idx[size_t(b)]; });
      h.col_perm.insert(h.col_perm.end(), order.begin(), order.end());
    }
    for (int64_t i = 0; i < q->rows; ++i, ++r) {
      uint8_t* dst = h.codes.data() + size_t(r) * size_t(w.row_bytes);
      if (!perm) {
        std::memcpy(dst, q->codes.data() + size_t(i * rb), size_t(rb));
      } else if (q->format->code_bits == 4) {
        for (int64_t j = 0; j < q->cols; ++j) dst[j / 2] |= uint8_t(code_at(*q, i, order[size_t(j)]) << (4 * (j & 1)));
      } else {
        for (int64_t j = 0; j < q->cols; ++j) dst[j] = code_at(*q, i, order[size_t(j)]);
      }
    }
    if (stack) {
      h.scales.insert(h.scales.end(), q->scales.begin(), q->scales.end());
      if (zeros) h.zeros.insert(h.zeros.end(), q->zeros.begin(), q->zeros.end());
    } else {
      const size_t ng = size_t(q->n_groups);
      for (int64_t i = 0; i < q->rows; ++i) {
        const size_t s0 = size_t(i / q->block_rows) * ng;
        h.scales.insert(h.scales.end(), q->scales.begin() + s0, q->scales.begin() + s0 + ng);
        if (zeros) h.zeros.insert(h.zeros.end(), q->zeros.begin() + s0, q->zeros.begin() + s0 + ng);
      }
    }
    if (!q0->g_idx.empty()) {
      if (!perm) h.g_idx.insert(h.g_idx.end(), q->g_idx.begin(), q->g_idx.end());
      w.seg_end[w.n_seg++] = int(r);
    }
  }
  if (w.n_seg == 0) w.n_seg = 1;
  return h;
}

}  // namespace ninfer
