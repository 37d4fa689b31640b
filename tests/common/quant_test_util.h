// Test helpers for quantised weights, written from the published layouts and independent of
// src/model/weight_format.* and quant_checkpoint.*: an fp64 e4m3 decoder, brute-force
// quantisers (fp8 nearest code, int4 min-max groups), the AWQ / GPTQ packers, a safetensors
// writer and tiny Llama / Qwen3 checkpoints (quantised, plus the fp32 dequantised twin that is
// the oracle: its weights are the fp64 dequantisation rounded once to fp32).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

#include "core/dtype.h"

namespace ninfer::test {

// e4m3 ("E4M3FN") in fp64 from its definition: bias 7, subnormals at exponent 0, S.1111.111 NaN.
inline double e4m3_ref(uint8_t b) {
  const int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
  if (e == 15 && m == 7) return NAN;
  const double v = e == 0 ? std::ldexp(double(m) / 8.0, -6) : std::ldexp(1.0 + double(m) / 8.0, e - 7);
  return s ? -v : v;
}

// The finite code nearest to x (brute force over all 254; ties to the lower code).
inline uint8_t e4m3_nearest(double x) {
  uint8_t best = 0;
  double bd = INFINITY;
  for (int c = 0; c < 256; ++c) {
    const double v = e4m3_ref(uint8_t(c));
    if (std::isnan(v)) continue;
    if (std::fabs(v - x) < bd) {
      bd = std::fabs(v - x);
      best = uint8_t(c);
    }
  }
  return best;
}

struct StTensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

template <typename T>
StTensor st_tensor(const std::string& name, const char* dtype, std::vector<int64_t> shape, const std::vector<T>& v) {
  StTensor t{name, dtype, std::move(shape), std::string(v.size() * sizeof(T), '\0')};
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

inline void write_st(const std::filesystem::path& p, const std::vector<StTensor>& ts) {
  std::string header = "{", data;
  for (size_t i = 0; i < ts.size(); ++i) {
    const StTensor& t = ts[i];
    std::string shape;
    for (size_t j = 0; j < t.shape.size(); ++j) shape += (j ? "," : "") + std::to_string(t.shape[j]);
    header += (i ? "," : "") + ("\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":[" + shape +
                                "],\"data_offsets\":[" + std::to_string(data.size()) + "," +
                                std::to_string(data.size() + t.bytes.size()) + "]}");
    data += t.bytes;
  }
  header += "}";
  std::string file(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(file.data(), &n, 8);
  file += header + data;
  std::ofstream(p, std::ios::binary) << file;
}

inline std::filesystem::path fresh_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("ninfer_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

inline float f16_round(double x) { return f16_to_f32(f32_to_f16(float(x))); }

// A matrix W [rows][cols] (fp32, as a dense checkpoint would hold it).
struct Mat {
  int64_t rows = 0, cols = 0;
  std::vector<float> w;
  float at(int64_t r, int64_t c) const { return w[size_t(r * cols + c)]; }
};

// One quantised module: its checkpoint tensors and the exact dequantised matrix.
struct QuantOut {
  std::vector<StTensor> tensors;
  Mat dequant;
};

// fp8 with scale blocks br x bc (0: per tensor if both 0 and per_channel false; per_channel:
// one scale per row). Scales: amax / 448 of each block, written as F32 under `scale_name`.
inline QuantOut quant_fp8(const std::string& base, const Mat& m, int64_t br, int64_t bc, bool per_channel,
                          const std::string& scale_name, const char* scale_dtype = "F32") {
  QuantOut o;
  o.dequant = m;
  const int64_t R = br ? br : (per_channel ? 1 : m.rows), C = bc ? bc : m.cols;
  const int64_t sr = (m.rows + R - 1) / R, sc = (m.cols + C - 1) / C;
  std::vector<float> scales(size_t(sr * sc));
  for (int64_t i = 0; i < sr; ++i)
    for (int64_t j = 0; j < sc; ++j) {
      double a = 0;
      for (int64_t r = i * R; r < std::min(m.rows, (i + 1) * R); ++r)
        for (int64_t c = j * C; c < std::min(m.cols, (j + 1) * C); ++c) a = std::max(a, std::fabs(double(m.at(r, c))));
      float s = float(a / 448.0);
      if (std::string(scale_dtype) == "BF16") s = bf16_to_f32(f32_to_bf16(s));
      scales[size_t(i * sc + j)] = s;
    }
  std::vector<uint8_t> codes(size_t(m.rows * m.cols));
  for (int64_t r = 0; r < m.rows; ++r)
    for (int64_t c = 0; c < m.cols; ++c) {
      const double s = scales[size_t((r / R) * sc + c / C)];
      const uint8_t q = s == 0 ? 0 : e4m3_nearest(double(m.at(r, c)) / s);
      codes[size_t(r * m.cols + c)] = q;
      o.dequant.w[size_t(r * m.cols + c)] = float(e4m3_ref(q) * s);
    }
  o.tensors.push_back(st_tensor(base + ".weight", "F8_E4M3", {m.rows, m.cols}, codes));
  std::vector<int64_t> sshape = br ? std::vector<int64_t>{sr, sc} : per_channel ? std::vector<int64_t>{m.rows, 1}
                                                                                 : std::vector<int64_t>{1};
  if (std::string(scale_dtype) == "BF16") {
    std::vector<uint16_t> b(scales.size());
    for (size_t i = 0; i < b.size(); ++i) b[i] = f32_to_bf16(scales[i]);
    o.tensors.push_back(st_tensor(base + "." + scale_name, "BF16", sshape, b));
  } else {
    o.tensors.push_back(st_tensor(base + "." + scale_name, "F32", sshape, scales));
  }
  return o;
}

// int4 codes of W [out][in] in groups given by group_of(k) (n_groups groups), min-max
// asymmetric (sym: zero 8, scale amax / 7), fp16 scales. q[o][k], z[o][g], s[o][g].
struct Int4 {
  int64_t n_groups = 0;
  std::vector<int> q, z;   // [out][in], [out][n_groups]
  std::vector<float> s;    // [out][n_groups] (fp16 values)
};

inline Int4 quant_int4(const Mat& m, int64_t n_groups, const std::function<int64_t(int64_t)>& group_of, bool sym,
                       Mat* dequant) {
  Int4 r;
  r.n_groups = n_groups;
  r.q.assign(size_t(m.rows * m.cols), 0);
  r.z.assign(size_t(m.rows * n_groups), 0);
  r.s.assign(size_t(m.rows * n_groups), 0.0f);
  *dequant = m;
  for (int64_t o = 0; o < m.rows; ++o) {
    for (int64_t g = 0; g < n_groups; ++g) {
      double lo = 0, hi = 0, amax = 0;
      for (int64_t k = 0; k < m.cols; ++k)
        if (group_of(k) == g) {
          lo = std::min(lo, double(m.at(o, k)));
          hi = std::max(hi, double(m.at(o, k)));
          amax = std::max(amax, std::fabs(double(m.at(o, k))));
        }
      const float s = f16_round(sym ? amax / 7.0 : (hi - lo) / 15.0);
      const int z = sym ? 8 : (s == 0 ? 0 : int(std::clamp(std::lround(-lo / s), 0L, 15L)));
      r.s[size_t(o * n_groups + g)] = s;
      r.z[size_t(o * n_groups + g)] = z;
    }
    for (int64_t k = 0; k < m.cols; ++k) {
      const size_t gi = size_t(o * n_groups + group_of(k));
      const double s = r.s[gi];
      const int q = s == 0 ? r.z[gi] : int(std::clamp(std::lround(double(m.at(o, k)) / s) + r.z[gi], 0L, 15L));
      r.q[size_t(o * m.cols + k)] = q;
      dequant->w[size_t(o * m.cols + k)] = float(double(q - r.z[gi]) * s);
    }
  }
  return r;
}

inline std::vector<uint16_t> f16_bits(const std::vector<float>& v) {
  std::vector<uint16_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = f32_to_f16(v[i]);
  return b;
}

// [n_groups][out] from [out][n_groups]
inline std::vector<float> transpose(const std::vector<float>& v, int64_t out, int64_t ng) {
  std::vector<float> t(v.size());
  for (int64_t o = 0; o < out; ++o)
    for (int64_t g = 0; g < ng; ++g) t[size_t(g * out + o)] = v[size_t(o * ng + g)];
  return t;
}

// AutoAWQ GEMM: qweight [in][out / 8], word (k, j) holds column 8j + order[i] at bits 4i.
inline QuantOut quant_awq(const std::string& base, const Mat& m, int64_t group) {
  QuantOut o;
  const int64_t ng = m.cols / group;
  Int4 q = quant_int4(m, ng, [&](int64_t k) { return k / group; }, false, &o.dequant);
  const int order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  std::vector<uint32_t> qw(size_t(m.cols * m.rows / 8), 0), qz(size_t(ng * m.rows / 8), 0);
  for (int64_t k = 0; k < m.cols; ++k)
    for (int64_t j = 0; j < m.rows / 8; ++j)
      for (int i = 0; i < 8; ++i)
        qw[size_t(k * (m.rows / 8) + j)] |= uint32_t(q.q[size_t((8 * j + order[i]) * m.cols + k)]) << (4 * i);
  for (int64_t g = 0; g < ng; ++g)
    for (int64_t j = 0; j < m.rows / 8; ++j)
      for (int i = 0; i < 8; ++i)
        qz[size_t(g * (m.rows / 8) + j)] |= uint32_t(q.z[size_t((8 * j + order[i]) * ng + g)]) << (4 * i);
  o.tensors.push_back(st_tensor(base + ".qweight", "I32", {m.cols, m.rows / 8}, qw));
  o.tensors.push_back(st_tensor(base + ".qzeros", "I32", {ng, m.rows / 8}, qz));
  o.tensors.push_back(st_tensor(base + ".scales", "F16", {ng, m.rows}, f16_bits(transpose(q.s, m.rows, ng))));
  return o;
}

// GPTQ: qweight [in / 8][out] (row 8j + i at bits 4i), qzeros [n_groups][out / 8] (column
// 8j + i at bits 4i) holding z - 1 mod 16 (v1) or z (v2), scales [n_groups][out], g_idx [in].
// desc_act: the groups follow a fixed shuffle of the input rows (as act-order leaves them).
inline QuantOut quant_gptq(const std::string& base, const Mat& m, int64_t group, bool sym, bool desc_act, bool v1,
                           uint32_t seed = 7) {
  QuantOut o;
  const int64_t ng = m.cols / group;
  std::vector<int32_t> g_idx(size_t(m.cols));
  std::vector<int64_t> perm(size_t(m.cols));
  for (int64_t k = 0; k < m.cols; ++k) perm[size_t(k)] = k;
  if (desc_act) std::shuffle(perm.begin(), perm.end(), std::mt19937(seed));
  for (int64_t i = 0; i < m.cols; ++i) g_idx[size_t(perm[size_t(i)])] = int32_t(i / group);
  Int4 q = quant_int4(m, ng, [&](int64_t k) { return int64_t(g_idx[size_t(k)]); }, sym, &o.dequant);
  std::vector<uint32_t> qw(size_t(m.cols / 8 * m.rows), 0), qz(size_t(ng * m.rows / 8), 0);
  for (int64_t j = 0; j < m.cols / 8; ++j)
    for (int64_t c = 0; c < m.rows; ++c)
      for (int i = 0; i < 8; ++i) qw[size_t(j * m.rows + c)] |= uint32_t(q.q[size_t(c * m.cols + 8 * j + i)]) << (4 * i);
  for (int64_t g = 0; g < ng; ++g)
    for (int64_t j = 0; j < m.rows / 8; ++j)
      for (int i = 0; i < 8; ++i) {
        const int z = q.z[size_t((8 * j + i) * ng + g)];
        qz[size_t(g * (m.rows / 8) + j)] |= uint32_t(v1 ? (z - 1) & 15 : z) << (4 * i);
      }
  o.tensors.push_back(st_tensor(base + ".qweight", "I32", {m.cols / 8, m.rows}, qw));
  o.tensors.push_back(st_tensor(base + ".qzeros", "I32", {ng, m.rows / 8}, qz));
  o.tensors.push_back(st_tensor(base + ".scales", "F16", {ng, m.rows}, f16_bits(transpose(q.s, m.rows, ng))));
  o.tensors.push_back(st_tensor(base + ".g_idx", "I32", {m.cols}, g_idx));
  return o;
}

// A tiny checkpoint: Llama or Qwen3 (q/k norm), hidden 128, 2 layers, 4 heads of 32, 2 KV
// heads, ffn 256, vocab 96; weights from a fixed seed, projections ~U(-2, 2) / sqrt(in) so the
// logits are far from uniform.
struct TinySpec {
  std::string arch = "LlamaForCausalLM";
  int hidden = 128, layers = 2, heads = 4, kv_heads = 2, head_dim = 32, ffn = 256, vocab = 96;
  uint32_t seed = 1234;
};

inline std::string tiny_config_json(const TinySpec& s, const std::string& quant_json) {
  std::string j = "{\"architectures\": [\"" + s.arch + "\"], \"hidden_size\": " + std::to_string(s.hidden) +
                  ", \"num_hidden_layers\": " + std::to_string(s.layers) + ", \"num_attention_heads\": " +
                  std::to_string(s.heads) + ", \"num_key_value_heads\": " + std::to_string(s.kv_heads) +
                  ", \"head_dim\": " + std::to_string(s.head_dim) + ", \"intermediate_size\": " +
                  std::to_string(s.ffn) + ", \"vocab_size\": " + std::to_string(s.vocab) +
                  ", \"rms_norm_eps\": 1e-6, \"max_position_embeddings\": 512, \"rope_theta\": 10000.0, "
                  "\"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\"";
  if (!quant_json.empty()) j += ", \"quantization_config\": " + quant_json;
  return j + "}";
}

// Writes `quant_dir` (projections through `quantise`, which returns the module's tensors and
// its dequantised matrix) and `dense_dir` (every weight in F32; projections dequantised).
// An empty quantise() result keeps the module dense in both.
inline void write_tiny_pair(const TinySpec& s, const std::string& quant_json,
                            const std::function<QuantOut(const std::string& base, const Mat& m)>& quantise,
                            const std::filesystem::path& quant_dir, const std::filesystem::path& dense_dir) {
  std::mt19937 rng(s.seed);
  auto mat = [&](int64_t rows, int64_t cols, double amp) {
    std::uniform_real_distribution<double> u(-amp, amp);
    Mat m{rows, cols, std::vector<float>(size_t(rows * cols))};
    for (float& v : m.w) v = float(u(rng));
    return m;
  };
  auto vec = [&](int64_t n, double center, double amp) {
    std::uniform_real_distribution<double> u(center - amp, center + amp);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = float(u(rng));
    return v;
  };
  std::vector<StTensor> qt, dt;
  auto dense = [&](const std::string& name, std::vector<int64_t> shape, const std::vector<float>& v) {
    qt.push_back(st_tensor(name, "F32", shape, v));
    dt.push_back(st_tensor(name, "F32", shape, v));
  };
  auto proj = [&](const std::string& base, int64_t rows, int64_t cols) {
    Mat m = mat(rows, cols, 2.0 / std::sqrt(double(cols)));
    QuantOut o = quantise(base, m);
    if (o.tensors.empty()) {
      dense(base + ".weight", {rows, cols}, m.w);
      return;
    }
    for (StTensor& t : o.tensors) qt.push_back(std::move(t));
    dt.push_back(st_tensor(base + ".weight", "F32", {rows, cols}, o.dequant.w));
  };
  const int64_t H = s.hidden, q = s.heads * s.head_dim, kv = s.kv_heads * s.head_dim;
  dense("model.embed_tokens.weight", {s.vocab, H}, mat(s.vocab, H, 1.0).w);
  dense("model.norm.weight", {H}, vec(H, 1.0, 0.2));
  dense("lm_head.weight", {s.vocab, H}, mat(s.vocab, H, 3.0 / std::sqrt(double(H))).w);
  for (int l = 0; l < s.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    dense(p + "input_layernorm.weight", {H}, vec(H, 1.0, 0.2));
    dense(p + "post_attention_layernorm.weight", {H}, vec(H, 1.0, 0.2));
    if (s.arch == "Qwen3ForCausalLM") {
      dense(p + "self_attn.q_norm.weight", {s.head_dim}, vec(s.head_dim, 1.0, 0.2));
      dense(p + "self_attn.k_norm.weight", {s.head_dim}, vec(s.head_dim, 1.0, 0.2));
    }
    proj(p + "self_attn.q_proj", q, H);
    proj(p + "self_attn.k_proj", kv, H);
    proj(p + "self_attn.v_proj", kv, H);
    proj(p + "self_attn.o_proj", H, q);
    proj(p + "mlp.gate_proj", s.ffn, H);
    proj(p + "mlp.up_proj", s.ffn, H);
    proj(p + "mlp.down_proj", H, s.ffn);
  }
  for (const auto& [dir, ts, qj] : {std::tuple{quant_dir, &qt, quant_json}, std::tuple{dense_dir, &dt, std::string()}}) {
    std::filesystem::create_directories(dir);
    write_st(dir / "model.safetensors", *ts);
    std::ofstream(dir / "config.json") << tiny_config_json(s, qj);
  }
}

}  // namespace ninfer::test
