// The weight-format table and the CPU reference (de)quantisers; layout in weight_format.h.
#include "model/weight_format.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/minifloat.h"

namespace ninfer {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The scale (and zero) of element (r, c).
inline size_t scale_index(const QuantMatrix& m, int64_t r, int64_t c) {
  return size_t((r / m.block_rows) * m.n_groups + m.group_of(c));
}

void dequant_fp8(const QuantMatrix& m, int64_t r0, int64_t n, float* out) {
  for (int64_t r = r0; r < r0 + n; ++r) {
    const uint8_t* q = m.codes.data() + size_t(r * m.cols);
    float* o = out + size_t((r - r0) * m.cols);
    for (int64_t c = 0; c < m.cols; ++c) o[c] = e4m3_to_f32(q[c]) * m.scales[scale_index(m, r, c)];
  }
}

void dequant_int8(const QuantMatrix& m, int64_t r0, int64_t n, float* out) {
  for (int64_t r = r0; r < r0 + n; ++r) {
    const int8_t* q = reinterpret_cast<const int8_t*>(m.codes.data()) + size_t(r * m.cols);
    float* o = out + size_t((r - r0) * m.cols);
    for (int64_t c = 0; c < m.cols; ++c) o[c] = float(q[c]) * m.scales[scale_index(m, r, c)];
  }
}

void dequant_int4(const QuantMatrix& m, int64_t r0, int64_t n, float* out) {
  const int64_t rb = m.row_bytes();
  for (int64_t r = r0; r < r0 + n; ++r) {
    const uint8_t* q = m.codes.data() + size_t(r * rb);
    float* o = out + size_t((r - r0) * m.cols);
    for (int64_t c = 0; c < m.cols; ++c) {
      const int code = (q[c / 2] >> (4 * (c & 1))) & 0xF;
      const size_t s = scale_index(m, r, c);
      o[c] = float(code - int(m.zeros[s])) * m.scales[s];
    }
  }
}

float row_amax(const float* w, int64_t n) {
  float a = 0.0f;
  for (int64_t i = 0; i < n; ++i) a = std::max(a, std::fabs(w[i]));
  return a;
}

// NOTE: --weights fp8: per output channel, s = amax / 448 so the row's largest magnitude maps
// to e4m3's largest finite value; codes round to nearest even (core/minifloat.h). A zero row
// gets s = 0 and codes 0.
void quantize_fp8(const float* w, int64_t rows, int64_t cols, QuantMatrix& m) {
  init_quant_matrix(m, weight_format(WeightFormatId::Fp8), rows, cols, 1, cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = w + size_t(r * cols);
    const float s = row_amax(x, cols) / kE4m3Max;
    m.scales[size_t(r)] = s;
    if (s == 0.0f) continue;
    for (int64_t c = 0; c < cols; ++c) m.codes[size_t(r * cols + c)] = f32_to_e4m3(x[c] / s);
  }
}

// NOTE: --weights int8: symmetric per output channel, s = amax / 127, q = round-half-even(w / s)
// in [-127, 127] (-128 unused, so the grid is symmetric).
void quantize_int8(const float* w, int64_t rows, int64_t cols, QuantMatrix& m) {
  init_quant_matrix(m, weight_format(WeightFormatId::Int8), rows, cols, 1, cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = w + size_t(r * cols);
    const float s = row_amax(x, cols) / 127.0f;
    m.scales[size_t(r)] = s;
    if (s == 0.0f) continue;
    for (int64_t c = 0; c < cols; ++c) {
      const float q = std::clamp(std::nearbyint(x[c] / s), -127.0f, 127.0f);
      m.codes[size_t(r * cols + c)] = uint8_t(int8_t(q));
    }
  }
}

// NOTE: --weights int4: asymmetric per group of 128 columns (a last partial group when cols
// is not a multiple), GPTQ's min-max grid: the range [min(w, 0), max(w, 0)] (it always holds 0,
// so a zero weight is exact), s = range / 15, z = round(-lo / s), q = clamp(round(w / s) + z,
// 0, 15). An all-zero group gets s = 0, z = 0.
void quantize_int4(const float* w, int64_t rows, int64_t cols, QuantMatrix& m) {
  const WeightFormat& f = weight_format(WeightFormatId::Int4);
  init_quant_matrix(m, f, rows, cols, 1, std::min<int64_t>(f.load_group, cols));
  const int64_t rb = m.row_bytes();
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = w + size_t(r * cols);
    for (int64_t g = 0; g < m.n_groups; ++g) {
      const int64_t c0 = g * m.block_cols, c1 = std::min(cols, c0 + m.block_cols);
      float lo = 0.0f, hi = 0.0f;
      for (int64_t c = c0; c < c1; ++c) {
        lo = std::min(lo, x[c]);
        hi = std::max(hi, x[c]);
      }
      const float s = (hi - lo) / 15.0f;
      const size_t si = size_t(r * m.n_groups + g);
      if (s == 0.0f) continue;  // scale 0, zero 0, codes 0
      const float z = std::clamp(std::nearbyint(-lo / s), 0.0f, 15.0f);
      m.scales[si] = s;
      m.zeros[si] = uint8_t(z);
      for (int64_t c = c0; c < c1; ++c) {
        const int q = int(std::clamp(std::nearbyint(x[c] / s) + z, 0.0f, 15.0f));
        m.codes[size_t(r * rb + c / 2)] |= uint8_t(q << (4 * (c & 1)));
      }
    }
  }
}

const WeightFormat kFp8{WeightFormatId::Fp8, "fp8-e4m3", "fp8", 8, false, 0,
                        "e4m3, one fp32 scale per output channel", dequant_fp8, quantize_fp8};
const WeightFormat kInt8{WeightFormatId::Int8, "int8", "int8", 8, false, 0,
                         "symmetric int8, one fp32 scale per output channel", dequant_int8, quantize_int8};
const WeightFormat kInt4{WeightFormatId::Int4, "int4", "int4", 4, true, 128,
                         "asymmetric int4, fp32 scale + 4-bit zero per 128 columns", dequant_int4, quantize_int4};

}  // namespace

const std::vector<const WeightFormat*>& weight_formats() {
  static const std::vector<const WeightFormat*> all = {&kFp8, &kInt8, &kInt4};
  return all;
}

const WeightFormat& weight_format(WeightFormatId id) {
  for (const WeightFormat* f : weight_formats())
    if (f->id == id) return *f;
  fail("unknown weight format id {}", int(id));
}

std::string weights_option_names() {
  std::string s = "bf16";
  for (const WeightFormat* f : weight_formats()) s += std::string(", ") + f->option;
  return s;
}

const WeightFormat* parse_weights_option(const std::string& name) {
  if (name == "bf16") return nullptr;
  for (const WeightFormat* f : weight_formats())
    if (name == f->option) return f;
  fail("--weights '{}' is not a weight format (valid: {})", name, weights_option_names());
}

int64_t QuantMatrix::row_bytes() const { return format->code_bits == 4 ? ceil_div(cols, 2) : cols; }
int64_t QuantMatrix::scale_rows() const { return ceil_div(rows, block_rows); }

size_t QuantMatrix::bytes() const { return codes.size() + scales.size() * 4 + zeros.size() + g_idx.size() * 4; }

size_t quant_matrix_bytes(const WeightFormat& f, int64_t rows, int64_t cols, int64_t block_rows, int64_t block_cols) {
  const int64_t br = block_rows > 0 ? block_rows : rows, bc = block_cols > 0 ? block_cols : cols;
  const int64_t n_scales = ceil_div(rows, br) * ceil_div(cols, bc);
  const int64_t code_bytes = rows * (f.code_bits == 4 ? ceil_div(cols, 2) : cols);
  return size_t(code_bytes + n_scales * (4 + (f.zeros ? 1 : 0)));
}

void init_quant_matrix(QuantMatrix& m, const WeightFormat& f, int64_t rows, int64_t cols, int64_t block_rows,
                       int64_t block_cols) {
  NINFER_CHECK(rows > 0 && cols > 0 && block_rows > 0 && block_cols > 0, "bad quant grid {}x{} / {}x{}", rows, cols,
               block_rows, block_cols);
  m.format = &f;
  m.rows = rows;
  m.cols = cols;
  m.block_rows = block_rows;
  m.block_cols = block_cols;
  m.n_groups = ceil_div(cols, block_cols);
  m.g_idx.clear();
  m.codes.assign(size_t(rows * m.row_bytes()), 0);
  m.scales.assign(size_t(m.scale_rows() * m.n_groups), 0.0f);
  m.zeros.assign(f.zeros ? m.scales.size() : 0, 0);
}

void QuantMatrix::validate() const {
  NINFER_CHECK(format != nullptr, "tensor '{}': no format", name);
  if (rows <= 0 || cols <= 0 || block_rows <= 0 || block_cols <= 0 || n_groups <= 0)
    fail("tensor '{}': bad {} grid: {} x {} with scale blocks {} x {}, {} groups", name, format->name, rows, cols,
         block_rows, block_cols, n_groups);
  if (codes.size() != size_t(rows * row_bytes()))
    fail("tensor '{}': {} codes of {} bytes, expected {} x {}", name, format->name, codes.size(), rows, row_bytes());
  if (scales.size() != size_t(scale_rows() * n_groups))
    fail("tensor '{}': {} scales, expected {} x {}", name, scales.size(), scale_rows(), n_groups);
  if (zeros.size() != (format->zeros ? scales.size() : 0))
    fail("tensor '{}': {} zero points, expected {}", name, zeros.size(), format->zeros ? scales.size() : 0);
  if (g_idx.empty()) {
    if (n_groups != ceil_div(cols, block_cols))
      fail("tensor '{}': {} groups of {} columns cannot cover {} columns", name, n_groups, block_cols, cols);
  } else {
    if (g_idx.size() != size_t(cols)) fail("tensor '{}': g_idx has {} entries, expected {}", name, g_idx.size(), cols);
    for (size_t c = 0; c < g_idx.size(); ++c)
      if (g_idx[c] < 0 || g_idx[c] >= n_groups)
        fail("tensor '{}': g_idx[{}] = {} is not a group index (0..{})", name, c, g_idx[c], n_groups - 1);
  }
  for (size_t i = 0; i < scales.size(); ++i)
    if (!std::isfinite(scales[i])) fail("tensor '{}': scale {} is {} (scales must be finite)", name, i, scales[i]);
  for (size_t i = 0; i < zeros.size(); ++i)
    if (zeros[i] > 15) fail("tensor '{}': zero point {} is {} (4-bit zero points are 0..15)", name, i, zeros[i]);
  if (format->id == WeightFormatId::Fp8) {
    // NOTE: e4m3 has no infinities; 0x7F / 0xFF are NaN. A NaN weight would poison every
    // logit, so such a checkpoint is refused rather than computed.
    for (size_t i = 0; i < codes.size(); ++i)
      if ((codes[i] & 0x7F) == 0x7F)
        fail("tensor '{}': element ({}, {}) is the e4m3 NaN code 0x{:02X}; NaN weights are refused", name,
             int64_t(i) / cols, int64_t(i) % cols, codes[i]);
  }
}

}  // namespace ninfer
