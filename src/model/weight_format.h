// Quantised weight matrices: how a projection W [rows = out, cols = in] is held in memory when
// it is not bf16/fp16/fp32, and the one table of those formats (kWeightFormats: name -> code
// width, dequantiser, quantiser at load). Checkpoint layouts (fp8 block-wise, compressed-tensors,
// AWQ, GPTQ: model/quant_checkpoint.h) are repacked into this representation at load; `--weights
// fp8|int8|int4` quantises a dense checkpoint into it. The CPU backend dequantises rows on the
// fly (dequant_rows); it is the oracle for GPU kernels.
//
// QuantMatrix layout (normative):
//   codes  [rows][row_bytes] u8
//            fp8   one OCP e4m3 ("E4M3FN") byte per element; 0x7F / 0xFF (NaN) are refused at load
//            int8  one two's-complement byte per element
//            int4  two elements per byte, column 2j in the low nibble, 2j + 1 in the high one
//                  (row_bytes = ceil(cols / 2); a last odd column leaves the high nibble 0); 0..15
//   scales [scale_rows][n_groups] fp32, scale_rows = ceil(rows / block_rows)
//   zeros  [scale_rows][n_groups] u8 in 0..15 (int4 only; the other formats are symmetric)
//   g_idx  [cols] int32, or empty: the group of column c is g_idx[c] (GPTQ desc_act) or
//            c / block_cols; n_groups = ceil(cols / block_cols) or max(g_idx) + 1
// Element (r, c), with s = scales[r / block_rows][group(c)], z = zeros[r / block_rows][group(c)]:
//   fp8  w = e4m3(q) * s       int8  w = q * s       int4  w = (q - z) * s
// each a single fp32 multiply of exact operands (e4m3(q), q and q - z are exact in fp32).
// Scale grids: per tensor (block_rows = rows, block_cols = cols), per output channel
// (1, cols), block-wise (128, 128), per group (1, group).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ninfer {

enum class WeightFormatId : uint8_t { Fp8, Int8, Int4 };

struct QuantMatrix;

struct WeightFormat {
  WeightFormatId id;
  const char* name;      // in errors and the capacity line: "fp8-e4m3", "int8", "int4"
  const char* option;    // the `--weights` value that quantises to it at load
  int code_bits;         // bits of one element's code
  bool zeros;            // has per-group zero points
  int load_group;        // --weights grid: columns per scale (0: the whole row, per output channel)
  const char* load_doc;  // the --weights grid in words
  // out [n_rows][cols]: rows [r0, r0 + n_rows) dequantised.
  void (*dequant_rows)(const QuantMatrix& m, int64_t r0, int64_t n_rows, float* out);
  // Quantises w [rows][cols] on the format's load grid into m (m.rows/cols set, name kept).
  void (*quantize)(const float* w, int64_t rows, int64_t cols, QuantMatrix& m);
};

struct QuantMatrix {
  const WeightFormat* format = nullptr;
  std::string name;  // the checkpoint tensor it came from, for errors
  int64_t rows = 0, cols = 0;
  int64_t block_rows = 1, block_cols = 0;  // the scale grid (see the header comment)
  int64_t n_groups = 0;
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  std::vector<uint8_t> zeros;
  std::vector<int32_t> g_idx;

  int64_t row_bytes() const;   // bytes of one row of codes
  int64_t scale_rows() const;  // rows of scales / zeros
  size_t bytes() const;        // codes + scales + zeros + g_idx as held
  int64_t group_of(int64_t c) const { return g_idx.empty() ? c / block_cols : g_idx[size_t(c)]; }
  // Every size consistent, no NaN-coded e4m3, finite scales, zeros <= 15, g_idx in range;
  // Error naming the tensor and what is wrong otherwise.
  void validate() const;
};

const std::vector<const WeightFormat*>& weight_formats();
const WeightFormat& weight_format(WeightFormatId id);
// The format that `--weights NAME` quantises to; nullptr for "bf16" (keep the checkpoint's
// weights); an Error naming the flag and the valid values otherwise.
const WeightFormat* parse_weights_option(const std::string& name);
std::string weights_option_names();  // "bf16, fp8, int8, int4"

// Bytes a rows x cols matrix takes in format f with scale blocks of block_rows x block_cols
// (0: the whole extent), codes + scales + zeros: capacity planning from config.json alone.
size_t quant_matrix_bytes(const WeightFormat& f, int64_t rows, int64_t cols, int64_t block_rows, int64_t block_cols);

// Sets m's scale grid (block_rows x block_cols, n_groups) and sizes codes/scales/zeros for
// rows x cols in format f (codes zeroed, scales 0, zeros 0).
void init_quant_matrix(QuantMatrix& m, const WeightFormat& f, int64_t rows, int64_t cols, int64_t block_rows,
                       int64_t block_cols);

}  // namespace ninfer
