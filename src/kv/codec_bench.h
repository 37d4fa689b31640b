// Codec quality measurement behind `ninfer kv-bench`: for every KV format and each side (K, V)
// it encodes rows, decodes them, rotates them back and reports normalized MSE, SNR and the
// inner-product error for random unit queries, beside the format's true rate R (bits per
// value, scales included), the rate-distortion bound 2^(-2R) of a unit Gaussian and the
// Lloyd-Max (fixed-rate scalar) optimum with 2^floor(R) levels.
// Sources: i.i.d. Gaussian rows, Gaussian rows with a few large-outlier channels (before
// rotation), and real rows dumped by `ninfer dump-kv`: <dir>/k.f32 and <dir>/v.f32, raw
// little-endian float32 [n_rows, head_dim], and <dir>/meta.json {"model","head_dim","n_rows"}
// (K post-rope, pre-rotation).
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ninfer {

struct KvDump {
  std::string name;   // the directory's name (the `source` column)
  std::string model;  // meta.json "model"
  int head_dim = 0;
  size_t n_rows = 0;
  std::vector<float> k, v;  // [n_rows, head_dim]
};
// Reads a dump directory; a missing or malformed file throws ninfer::Error naming it.
KvDump read_kv_dump(const std::filesystem::path& dir);
// Writes one (tests and tools that make fixtures).
void write_kv_dump(const std::filesystem::path& dir, const KvDump& d);

struct CodecBenchOptions {
  size_t rows = 4096;     // rows per synthetic source; at most this many (strided) per dump
  uint64_t seed = 1;
  int head_dim = 128;     // of the synthetic sources
  int outlier_channels = 4;
  float outlier_scale = 10.0f;  // outlier channels have this standard deviation
  std::vector<std::filesystem::path> real_dirs;
  std::vector<std::string> formats;  // empty: every registered lossy format
  bool synthetic = true;             // include the gaussian and outlier sources
};

struct CodecBenchRow {
  std::string format, side, source;
  int head_dim = 0;
  size_t rows = 0;
  double bits_per_value = 0;  // true rate: 8 * bytes(head_dim) / head_dim
  double nmse = 0;            // sum |x - x^|^2 / sum |x|^2
  double snr_db = 0;          // -10 log10(nmse)
  double ip_err = 0;          // sqrt(sum (q.x - q.x^)^2 / sum (q.x)^2), q random unit
  double rd_bound = 0;        // 2^(-2R)
  double lloyd_max = 0;       // Gaussian Lloyd-Max MSE with 2^floor(R) levels
};

std::vector<CodecBenchRow> run_codec_bench(const CodecBenchOptions& opt);
std::string codec_bench_json(const std::vector<CodecBenchRow>& rows);
std::string codec_bench_table(const std::vector<CodecBenchRow>& rows);

// MSE of the optimal fixed-rate scalar quantizer of N(0,1) with `levels` levels (Lloyd-Max,
// computed; Panter-Dite asymptote above 4096 levels).
double lloyd_max_gaussian_mse(double levels);

}  // namespace ninfer
