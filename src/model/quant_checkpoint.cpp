// quantization_config methods and their tensor layouts (quant_checkpoint.h), repacked into
// QuantMatrix (weight_format.h).
#include "model/quant_checkpoint.h"

#include <cstring>

#include "core/error.h"
#include "model/config_reader.h"
#include "model/safetensors.h"

namespace ninfer {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

std::string shape_str(const std::vector<int64_t>& s) {
  TensorInfo t;
  t.shape = s;
  return t.shape_str();
}

const TensorInfo& need(const QuantConfig& q, const TensorStore& s, const std::string& name) {
  const TensorInfo* t = s.find(name);
  if (!t) fail("tensor '{}' is missing from the checkpoint ({}: quantization_config '{}' needs it)", name, q.source, q.name);
  return *t;
}

void need_shape(const TensorInfo& t, const std::vector<int64_t>& shape, const char* why) {
  if (t.shape != shape)
    fail("{}: tensor '{}' has shape {} but {} implies {}", t.file, t.name, t.shape_str(), why, shape_str(shape));
}

void need_dtype(const TensorInfo& t, DType d) {
  if (t.dtype != d) fail("{}: tensor '{}' has dtype {}; expected {}", t.file, t.name, dtype_name(t.dtype), dtype_name(d));
}

std::vector<float> scales_f32(const TensorInfo& t) {
  if (t.dtype != DType::F32 && t.dtype != DType::BF16 && t.dtype != DType::F16)
    fail("{}: tensor '{}' has dtype {}; scales must be F32, BF16 or F16", t.file, t.name, dtype_name(t.dtype));
  std::vector<float> v(size_t(t.numel()));
  convert_to_f32(t.dtype, t.data, v.data(), v.size());
  return v;
}

std::vector<uint32_t> words(const TensorInfo& t) {
  need_dtype(t, DType::I32);
  std::vector<uint32_t> w(size_t(t.numel()));
  std::memcpy(w.data(), t.data, w.size() * 4);
  return w;
}

// Dense module (no quantised tensor under `base`): the binder loads base.weight as usual.
bool is_dense(const TensorStore& s, const std::string& base) {
  const TensorInfo* w = s.find(base + ".weight");
  return w && (w->dtype == DType::BF16 || w->dtype == DType::F16 || w->dtype == DType::F32);
}

// ---- fp8 and compressed-tensors float-quantized ----

void parse_block(const ConfigReader& r, const char* k, QuantConfig& q) {
  std::vector<double> b = r.get_nums(k);
  // NOTE: the range is checked before the conversion to an integer (1e308 would not convert).
  constexpr double kMax = double(int64_t(1) << 30);
  if (b.size() != 2 || !(b[0] >= 1 && b[0] <= kMax) || !(b[1] >= 1 && b[1] <= kMax) || b[0] != int64_t(b[0]) ||
      b[1] != int64_t(b[1]))
    r.bad(k, "must be two positive integers [rows, cols] up to 2^30");
  q.block_rows = int64_t(b[0]);
  q.block_cols = int64_t(b[1]);
}

void parse_fp8(const ConfigReader& r, QuantConfig& q) {
  const std::string f = r.get_str_or("fmt", "e4m3");
  if (f != "e4m3") r.bad("fmt", fmt::format("'{}' is not supported (only e4m3)", f));
  q.format = WeightFormatId::Fp8;
  if (r.has("weight_block_size")) {
    parse_block(r, "weight_block_size", q);
    q.scale_name = "weight_scale_inv";
  }
}

void parse_compressed_tensors(const ConfigReader& r, QuantConfig& q) {
  const std::string f = r.get_str_or("format", "");
  if (f != "float-quantized")
    r.bad("format", fmt::format("'{}' is not supported (only float-quantized: FP8 weights)", f));
  ConfigReader groups = r.sub("config_groups");
  bool first = true;
  for (auto it = groups.j.begin(); it != groups.j.end(); ++it) {
    const std::string gname = it.key();
    ConfigReader g = groups.sub(gname.c_str());
    ConfigReader w = g.sub("weights");
    if (w.get_int("num_bits") != 8) w.bad("num_bits", fmt::format("= {} is not supported (only 8)", w.get_int("num_bits")));
    if (w.get_str_or("type", "") != "float") w.bad("type", "must be 'float' (FP8 e4m3)");
    if (!w.get_bool_or("symmetric", true)) w.bad("symmetric", "must be true (FP8 weights have no zero point)");
    const std::string st = w.get_str_or("strategy", "tensor");
    QuantConfig g_q = q;
    g_q.block_rows = g_q.block_cols = 0;
    if (st == "block") {
      parse_block(w, "block_structure", g_q);
    } else if (st != "tensor" && st != "channel") {
      w.bad("strategy", fmt::format("'{}' is not supported (tensor, channel, block)", st));
    }
    if (!first && (g_q.block_rows != q.block_rows || g_q.block_cols != q.block_cols))
      g.bad("weights", "differs from the first config group's (one weight scheme per checkpoint is supported)");
    q.block_rows = g_q.block_rows;
    q.block_cols = g_q.block_cols;
    first = false;
  }
  if (first) r.bad("config_groups", "has no group");
  q.format = WeightFormatId::Fp8;
  q.scale_name = "weight_scale";
}

std::unique_ptr<QuantMatrix> load_fp8(const QuantConfig& q, const TensorStore& s, const std::string& base,
                                      int64_t rows, int64_t cols) {
  if (is_dense(s, base)) return nullptr;
  const TensorInfo& w = need(q, s, base + ".weight");
  need_dtype(w, DType::F8_E4M3);
  need_shape(w, {rows, cols}, "the config");
  // weight_scale_inv (fp8 block-wise) or weight_scale (the rest); a block-wise config's
  // name first.
  const TensorInfo* st = s.find(base + "." + q.scale_name);
  if (!st) st = s.find(base + ".weight_scale");
  if (!st) st = &need(q, s, base + "." + q.scale_name);
  auto m = std::make_unique<QuantMatrix>();
  m->name = w.name;
  const WeightFormat& f = weight_format(WeightFormatId::Fp8);
  if (q.block_rows > 0) {
    need_shape(*st, {ceil_div(rows, q.block_rows), ceil_div(cols, q.block_cols)},
               fmt::format("a [{}, {}] block grid over {} x {}", q.block_rows, q.block_cols, rows, cols).c_str());
    init_quant_matrix(*m, f, rows, cols, q.block_rows, q.block_cols);
  } else if (st->numel() == 1) {
    init_quant_matrix(*m, f, rows, cols, rows, cols);  // per tensor
  } else if (st->numel() == rows && (st->shape.size() == 1 || (st->shape.size() == 2 && st->shape[1] == 1))) {
    init_quant_matrix(*m, f, rows, cols, 1, cols);  // per output channel
  } else {
    fail("{}: tensor '{}' has shape {}: not a per-tensor ([1]) or per-channel ([{}, 1]) scale of {}", st->file,
         st->name, st->shape_str(), rows, w.name);
  }
  m->scales = scales_f32(*st);
  std::memcpy(m->codes.data(), w.data, m->codes.size());
  return m;
}

// ---- awq (GEMM) and gptq: 4-bit codes packed 8 to an int32 ----

int64_t parse_group(const ConfigReader& r) {
  if (!r.has("group_size")) r.bad("group_size", "is missing");
  if (!r.j["group_size"].is_number_integer()) r.bad("group_size", "must be an integer");
  const int64_t g = r.j["group_size"].get<int64_t>();
  if (g == -1) return 0;
  if (g <= 0 || g % 8 != 0) r.bad("group_size", fmt::format("= {} is not supported (a positive multiple of 8, or -1)", g));
  return g;
}

void parse_bits4(const ConfigReader& r, const char* method) {
  const int bits = r.get_int_or("bits", r.get_int_or("w_bit", 4));
  if (bits != 4) r.bad(r.has("bits") ? "bits" : "w_bit", fmt::format("= {} is not supported for {} (only 4)", bits, method));
}

void parse_awq(const ConfigReader& r, QuantConfig& q) {
  parse_bits4(r, "awq");
  std::string v = r.get_str_or("version", "gemm");
  for (char& c : v) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (v != "gemm") r.bad("version", fmt::format("'{}' is not supported (only gemm)", r.get_str_or("version", "")));
  if (!r.get_bool_or("zero_point", true)) r.bad("zero_point", "must be true (AWQ without zero points is not supported)");
  q.format = WeightFormatId::Int4;
  if (!r.has("group_size") && r.has("q_group_size")) {
    q.group = r.get_int("q_group_size");
  } else {
    q.group = parse_group(r);
  }
  if (q.group == 0) r.bad("group_size", "-1 is not supported for awq");
}

void parse_gptq(const ConfigReader& r, QuantConfig& q) {
  parse_bits4(r, "gptq");
  q.format = WeightFormatId::Int4;
  q.group = parse_group(r);
  q.desc_act = r.get_bool_or("desc_act", false);
  if (r.get_bool_or("lm_head", false)) r.bad("lm_head", "= true (a quantised lm_head) is not supported");
  const char* k = r.has("checkpoint_format") ? "checkpoint_format" : "format";
  const std::string f = r.get_str_or(k, "gptq");
  if (f == "gptq") {
    q.zero_offset = 1;
  } else if (f == "gptq_v2") {
    q.zero_offset = 0;
  } else {
    r.bad(k, fmt::format("'{}' is not supported (gptq, gptq_v2)", f));
  }
}

// Checks rows/cols against the packing and the group size, shared by awq and gptq.
int64_t int4_groups(const QuantConfig& q, const std::string& base, int64_t rows, int64_t cols, int64_t* group) {
  *group = q.group > 0 ? q.group : cols;
  if (rows % 8 != 0)
    fail("tensor '{}.qzeros': out_features {} is not a multiple of 8 ({} packs 8 columns per int32)", base, rows, q.name);
  if (cols % *group != 0)
    fail("tensor '{}': group_size {} does not divide in_features {} ({}: a partial group is not a {} layout)", base,
         *group, cols, q.source, q.name);
  return cols / *group;
}

constexpr int kAwqNibbleOfColumn[8] = {0, 4, 1, 5, 2, 6, 3, 7};  // inverse of order 0 2 4 6 1 3 5 7

std::unique_ptr<QuantMatrix> load_awq(const QuantConfig& q, const TensorStore& s, const std::string& base, int64_t rows,
                                      int64_t cols) {
  if (!s.find(base + ".qweight") && is_dense(s, base)) return nullptr;
  int64_t group = 0;
  const int64_t ng = int4_groups(q, base, rows, cols, &group);
  const TensorInfo& qw = need(q, s, base + ".qweight");
  const TensorInfo& qz = need(q, s, base + ".qzeros");
  const TensorInfo& sc = need(q, s, base + ".scales");
  need_shape(qw, {cols, rows / 8}, "awq's GEMM layout [in, out / 8]");
  need_shape(qz, {ng, rows / 8}, "awq's GEMM layout [in / group, out / 8]");
  need_shape(sc, {ng, rows}, "awq's layout [in / group, out]");
  const std::vector<uint32_t> W = words(qw), Z = words(qz);
  const std::vector<float> S = scales_f32(sc);
  auto m = std::make_unique<QuantMatrix>();
  m->name = qw.name;
  init_quant_matrix(*m, weight_format(WeightFormatId::Int4), rows, cols, 1, group);
  const int64_t rb = m->row_bytes();
  for (int64_t o = 0; o < rows; ++o) {
    const int sh = 4 * kAwqNibbleOfColumn[o % 8];
    for (int64_t k = 0; k < cols; ++k) {
      const uint32_t code = (W[size_t(k * (rows / 8) + o / 8)] >> sh) & 0xF;
      m->codes[size_t(o * rb + k / 2)] |= uint8_t(code << (4 * (k & 1)));
    }
    for (int64_t g = 0; g < ng; ++g) {
      m->zeros[size_t(o * ng + g)] = uint8_t((Z[size_t(g * (rows / 8) + o / 8)] >> sh) & 0xF);
      m->scales[size_t(o * ng + g)] = S[size_t(g * rows + o)];
    }
  }
  return m;
}

std::unique_ptr<QuantMatrix> load_gptq(const QuantConfig& q, const TensorStore& s, const std::string& base,
                                       int64_t rows, int64_t cols) {
  if (!s.find(base + ".qweight") && is_dense(s, base)) return nullptr;
  int64_t group = 0;
  const int64_t ng = int4_groups(q, base, rows, cols, &group);
  if (cols % 8 != 0) fail("tensor '{}.qweight': in_features {} is not a multiple of 8", base, cols);
  const TensorInfo& qw = need(q, s, base + ".qweight");
  const TensorInfo& qz = need(q, s, base + ".qzeros");
  const TensorInfo& sc = need(q, s, base + ".scales");
  need_shape(qw, {cols / 8, rows}, "gptq's layout [in / 8, out]");
  need_shape(qz, {ng, rows / 8}, "gptq's layout [n_groups, out / 8]");
  need_shape(sc, {ng, rows}, "gptq's layout [n_groups, out]");
  const std::vector<uint32_t> W = words(qw), Z = words(qz);
  const std::vector<float> S = scales_f32(sc);
  auto m = std::make_unique<QuantMatrix>();
  m->name = qw.name;
  init_quant_matrix(*m, weight_format(WeightFormatId::Int4), rows, cols, 1, group);
  const TensorInfo* gi = s.find(base + ".g_idx");
  if (q.desc_act && !gi)
    fail("tensor '{}.g_idx' is missing from the checkpoint ({}: desc_act true needs it)", base, q.source);
  if (gi) {
    need_dtype(*gi, DType::I32);
    need_shape(*gi, {cols}, "in_features");
    std::vector<int32_t> g(static_cast<size_t>(cols));
    std::memcpy(g.data(), gi->data, g.size() * 4);
    bool trivial = true;
    for (int64_t k = 0; k < cols; ++k) trivial = trivial && g[size_t(k)] == k / group;
    // NOTE: with desc_act false GPTQ kernels ignore g_idx, so one that is not k / group would
    // mean two different models; refused rather than guessed.
    if (!trivial && !q.desc_act)
      fail("{}: tensor '{}' is not k / group_size but {} says desc_act false", gi->file, gi->name, q.source);
    if (!trivial) m->g_idx = std::move(g);
  }
  const int64_t rb = m->row_bytes();
  for (int64_t o = 0; o < rows; ++o) {
    for (int64_t k = 0; k < cols; ++k) {
      const uint32_t code = (W[size_t((k / 8) * rows + o)] >> (4 * (k % 8))) & 0xF;
      m->codes[size_t(o * rb + k / 2)] |= uint8_t(code << (4 * (k & 1)));
    }
    for (int64_t g = 0; g < ng; ++g) {
      const uint32_t z = (Z[size_t(g * (rows / 8) + o / 8)] >> (4 * (o % 8))) & 0xF;
      m->zeros[size_t(o * ng + g)] = uint8_t((z + uint32_t(q.zero_offset)) & 0xF);
      m->scales[size_t(o * ng + g)] = S[size_t(g * rows + o)];
    }
  }
  return m;
}

const QuantMethod kMethods[] = {
    {"fp8", parse_fp8, load_fp8},
    {"compressed-tensors", parse_compressed_tensors, load_fp8},
    {"awq", parse_awq, load_awq},
    {"gptq", parse_gptq, load_gptq},
};

}  // namespace

std::string quant_method_names() {
  std::string s;
  for (const QuantMethod& m : kMethods) s += (s.empty() ? "" : ", ") + std::string(m.name);
  return s;
}

QuantConfig parse_quant_config(const ConfigReader& r) {
  QuantConfig q;
  q.source = r.src;
  q.name = r.get_str_or("quant_method", "");
  for (const QuantMethod& m : kMethods) {
    if (q.name == m.name) {
      q.method = &m;
      m.parse(r, q);
      return q;
    }
  }
  r.bad("quant_method", fmt::format("'{}' is not supported (supported: {})", q.name, quant_method_names()));
}

size_t quant_checkpoint_matrix_bytes(const QuantConfig& q, int64_t rows, int64_t cols) {
  const WeightFormat& f = weight_format(q.format);
  if (q.format == WeightFormatId::Int4) return quant_matrix_bytes(f, rows, cols, 1, q.group);
  // fp8 without blocks: per channel (the larger of the two grids it may be).
  return q.block_rows > 0 ? quant_matrix_bytes(f, rows, cols, q.block_rows, q.block_cols)
                          : quant_matrix_bytes(f, rows, cols, 1, 0);
}

}  // namespace ninfer
