#include "kv/codec_bench.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.h"
#include "kv/format.h"

namespace ninfer {
namespace fs = std::filesystem;

namespace {

std::vector<float> read_f32(const fs::path& p, size_t count) {
  std::ifstream f(p, std::ios::binary);
  if (!f) fail("kv dump: cannot open {}", p.string());
  f.seekg(0, std::ios::end);
  const auto size = size_t(f.tellg());
  if (size != count * 4)
    fail("kv dump: {} has {} bytes, but meta.json's n_rows x head_dim needs {} (float32)", p.string(),
         size, count * 4);
  f.seekg(0);
  std::vector<float> v(count);
  f.read(reinterpret_cast<char*>(v.data()), std::streamsize(size));
  if (!f) fail("kv dump: short read from {}", p.string());
  return v;  // NOTE: little-endian hosts only (x86-64, aarch64), like the dump writer
}

void write_f32(const fs::path& p, const std::vector<float>& v) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * 4));
  if (!f) fail("kv dump: cannot write {}", p.string());
}

}  // namespace

KvDump read_kv_dump(const fs::path& dir) {
  const fs::path meta_path = dir / "meta.json";
  std::ifstream mf(meta_path);
  if (!mf) fail("kv dump: cannot open {} (expected a directory written by `ninfer dump-kv`)", meta_path.string());
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(mf);
  } catch (const std::exception& e) {
    fail("kv dump: {} is not valid JSON: {}", meta_path.string(), e.what());
  }
  KvDump d;
  d.name = fs::absolute(dir).lexically_normal().filename().string();
  if (d.name.empty()) d.name = fs::absolute(dir).lexically_normal().parent_path().filename().string();
  auto get_int = [&](const char* key) -> long long {
    if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<long long>() <= 0)
      fail("kv dump: {} needs a positive integer \"{}\"", meta_path.string(), key);
    return j[key].get<long long>();
  };
  d.head_dim = int(get_int("head_dim"));
  d.n_rows = size_t(get_int("n_rows"));
  d.model = j.contains("model") && j["model"].is_string() ? j["model"].get<std::string>() : "";
  d.k = read_f32(dir / "k.f32", d.n_rows * size_t(d.head_dim));
  d.v = read_f32(dir / "v.f32", d.n_rows * size_t(d.head_dim));
  return d;
}

void write_kv_dump(const fs::path& dir, const KvDump& d) {
  fs::create_directories(dir);
  std::ofstream mf(dir / "meta.json");
  mf << nlohmann::json{{"model", d.model}, {"head_dim", d.head_dim}, {"n_rows", d.n_rows}}.dump() << "\n";
  write_f32(dir / "k.f32", d.k);
  write_f32(dir / "v.f32", d.v);
}

double lloyd_max_gaussian_mse(double levels) {
  const int n = int(levels);
  if (n < 1) return 1.0;
  if (n == 1) return 1.0;
  if (n > 4096) return M_PI * std::sqrt(3.0) / 2.0 / (double(n) * n);
  auto pdf = [](double x) { return std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI); };
  auto cdf = [](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); };
  // Lloyd iteration from a uniform start; symmetric, converges monotonically.
  std::vector<double> c(n), t(n + 1);
  for (int i = 0; i < n; ++i) c[i] = 3.0 * (2.0 * (i + 0.5) / n - 1.0) * std::min(1.0, std::log2(n) / 3);
  double mse = 1.0;
  for (int it = 0; it < 20000; ++it) {
    t[0] = -INFINITY;
    t[n] = INFINITY;
    for (int i = 1; i < n; ++i) t[i] = 0.5 * (c[i - 1] + c[i]);
    double m = 1.0, delta = 0;
    for (int i = 0; i < n; ++i) {
      const double p = cdf(t[i + 1]) - cdf(t[i]);
      const double a = pdf(t[i]), b = pdf(t[i + 1]);
      const double ci = p > 0 ? (a - b) / p : c[i];
      delta = std::max(delta, std::fabs(ci - c[i]));
      c[i] = ci;
      m -= p * ci * ci;  // with centroids, MSE = 1 - sum p_i c_i^2
    }
    mse = m;
    if (delta < 1e-12) break;
  }
  return mse;
}

namespace {

struct Source {
  std::string name;
  int head_dim;
  const std::vector<float>* k;
  const std::vector<float>* v;
  size_t n_rows;
};

struct Acc {
  double err = 0, sig = 0, ip_err = 0, ip_sig = 0;
};

Acc measure(const KvSideCodec& side, const std::vector<float>& rows, int d, size_t n_rows,
            size_t max_rows, uint64_t seed) {
  const size_t n = std::min(n_rows, max_rows);
  const size_t stride = n_rows / n;
  Acc total;
#pragma omp parallel
  {
    Acc acc;
    std::vector<uint8_t> code(side.bytes(d));
    std::vector<float> xh(d), q(d);
#pragma omp for schedule(static)
    for (long long r = 0; r < (long long)n; ++r) {
      const float* x = rows.data() + size_t(r) * stride * size_t(d);
      side.encode(x, d, code.data());
      side.decode(code.data(), d, xh.data());
      rotate_kv(side.rotation, xh.data(), d);
      std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + uint64_t(r));
      std::normal_distribution<double> nd;
      double qn = 0;
      for (int i = 0; i < d; ++i) {
        q[i] = float(nd(rng));
        qn += double(q[i]) * q[i];
      }
      qn = 1.0 / std::sqrt(qn);
      double qx = 0, qxh = 0;
      for (int i = 0; i < d; ++i) {
        const double e = double(x[i]) - xh[i];
        acc.err += e * e;
        acc.sig += double(x[i]) * x[i];
        qx += q[i] * qn * x[i];
        qxh += q[i] * qn * xh[i];
      }
      acc.ip_err += (qx - qxh) * (qx - qxh);
      acc.ip_sig += qx * qx;
    }
#pragma omp critical
    {
      total.err += acc.err;
      total.sig += acc.sig;
      total.ip_err += acc.ip_err;
      total.ip_sig += acc.ip_sig;
    }
  }
  return total;
}

}  // namespace

std::vector<CodecBenchRow> run_codec_bench(const CodecBenchOptions& opt) {
  if (opt.rows == 0) fail("kv-bench: --rows must be positive");
  if (opt.head_dim <= 0 || opt.head_dim % 64 != 0)
    fail("kv-bench: --head-dim must be a positive multiple of 64, got {}", opt.head_dim);
  std::vector<const KvFormat*> formats;
  if (opt.formats.empty()) {
    for (const KvFormat* f : kv_formats())
      if (f->name != "f32") formats.push_back(f);
  } else {
    for (const std::string& n : opt.formats) formats.push_back(&find_kv_format(n));
  }

  // Synthetic sources.
  const int d = opt.head_dim;
  std::vector<float> gk(opt.rows * d), gv(opt.rows * d), ok(opt.rows * d), ov(opt.rows * d);
  std::vector<Source> sources;
  if (opt.synthetic) {
    std::mt19937_64 rng(opt.seed);
    std::normal_distribution<float> nd;
    for (auto* buf : {&gk, &gv, &ok, &ov})
      for (float& x : *buf) x = nd(rng);
    // Outlier channels: the same few channels in every row (as in real K), drawn once.
    std::vector<int> ch(d);
    for (int i = 0; i < d; ++i) ch[i] = i;
    std::shuffle(ch.begin(), ch.end(), rng);
    for (size_t r = 0; r < opt.rows; ++r)
      for (int c = 0; c < std::min(opt.outlier_channels, d); ++c) {
        ok[r * d + ch[c]] *= opt.outlier_scale;
        ov[r * d + ch[c]] *= opt.outlier_scale;
      }
    sources.push_back({"gaussian", d, &gk, &gv, opt.rows});
    sources.push_back({"outlier", d, &ok, &ov, opt.rows});
  }
  std::vector<KvDump> dumps;
  dumps.reserve(opt.real_dirs.size());
  for (const auto& dir : opt.real_dirs) {
    dumps.push_back(read_kv_dump(dir));
    const KvDump& dd = dumps.back();
    sources.push_back({dd.name, dd.head_dim, &dd.k, &dd.v, dd.n_rows});
  }

  std::vector<CodecBenchRow> out;
  for (const Source& src : sources) {
    for (const KvFormat* f : formats) {
      if (src.head_dim % f->head_dim_multiple != 0) continue;
      for (int side = 0; side < 2; ++side) {
        const KvSideCodec& sc = side == 0 ? f->k : f->v;
        const Acc a = measure(sc, side == 0 ? *src.k : *src.v, src.head_dim, src.n_rows, opt.rows,
                              opt.seed + 17 * uint64_t(side));
        CodecBenchRow row;
        row.format = std::string(f->name);
        row.side = side == 0 ? "K" : "V";
        row.source = src.name;
        row.head_dim = src.head_dim;
        row.rows = std::min(src.n_rows, opt.rows);
        row.bits_per_value = 8.0 * double(sc.bytes(src.head_dim)) / src.head_dim;
        row.nmse = a.sig > 0 ? a.err / a.sig : 0.0;
        row.snr_db = row.nmse > 0 ? -10.0 * std::log10(row.nmse) : INFINITY;
        row.ip_err = a.ip_sig > 0 ? std::sqrt(a.ip_err / a.ip_sig) : 0.0;
        row.rd_bound = std::exp2(-2.0 * row.bits_per_value);
        row.lloyd_max = lloyd_max_gaussian_mse(std::exp2(std::floor(row.bits_per_value)));
        out.push_back(row);
      }
    }
  }
  return out;
}

std::string codec_bench_json(const std::vector<CodecBenchRow>& rows) {
  nlohmann::json arr = nlohmann::json::array();
  for (const CodecBenchRow& r : rows) {
    nlohmann::json o{{"format", r.format},
                     {"side", r.side},
                     {"source", r.source},
                     {"head_dim", r.head_dim},
                     {"rows", r.rows},
                     {"bits_per_value", r.bits_per_value},
                     {"nmse", r.nmse},
                     {"ip_err", r.ip_err},
                     {"rd_bound", r.rd_bound},
                     {"lloyd_max", r.lloyd_max}};
    o["snr_db"] = std::isfinite(r.snr_db) ? nlohmann::json(r.snr_db) : nlohmann::json(nullptr);
    arr.push_back(std::move(o));
  }
  return arr.dump(1);
}

std::string codec_bench_table(const std::vector<CodecBenchRow>& rows) {
  // nmse / int4 on the same side and source: the lattice formats' bar is <= 0.88 for K.
  std::map<std::string, double> int4;
  for (const CodecBenchRow& r : rows)
    if (r.format == "int4") int4[r.source + "/" + r.side] = r.nmse;
  std::string s = fmt::format("| {:<11} | {} | {:<16} | {:>6} | {:>9} | {:>6} | {:>8} | {:>9} | {:>9} | {:>7} |\n", "format",
                              "side", "source", "bits/v", "nmse", "SNR dB", "ip err", "2^-2R", "LloydMax", "vs int4");
  s += "|-------------|------|------------------|-------:|----------:|-------:|---------:|----------:|----------:|--------:|\n";
  for (const CodecBenchRow& r : rows) {
    auto it = int4.find(r.source + "/" + r.side);
    const std::string ratio = it != int4.end() && it->second > 0 ? fmt::format("{:.3f}", r.nmse / it->second) : "";
    s += fmt::format("| {:<11} | {:<4} | {:<16} | {:>6.3f} | {:>9.3e} | {:>6.2f} | {:>8.4f} | {:>9.3e} | {:>9.3e} | {:>7} |\n",
                     r.format, r.side, r.source, r.bits_per_value, r.nmse, r.snr_db, r.ip_err, r.rd_bound,
                     r.lloyd_max, ratio);
  }
  return s;
}

}  // namespace ninfer
