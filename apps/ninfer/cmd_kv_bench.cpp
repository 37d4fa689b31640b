// `ninfer kv-bench`: codec quality of every KV format (src/kv/codec_bench.h): normalized MSE,
// SNR and inner-product error for K and V on Gaussian rows, Gaussian rows with outlier
// channels, and real rows dumped by `ninfer dump-kv` (--real DIR, repeatable). Prints the
// table last; --json prints a JSON array instead (one object per format, side and source).
#include <cstdio>
#include <memory>

#include "apps/ninfer/command.h"
#include "core/error.h"
#include "kv/codec_bench.h"

namespace ninfer::app {
namespace {

struct KvBenchCmd {
  CodecBenchOptions opt;
  std::vector<std::string> real;
  bool json = false;
  bool no_synthetic = false;
};

RegisterCommand reg_kv_bench(
    "kv-bench", "measure every KV format's codec error (nmse, SNR, q.k error) on synthetic and dumped rows",
    [](CLI::App* app) {
      auto c = std::make_shared<KvBenchCmd>();
      app->add_flag("--json", c->json, "print a JSON array (one object per format, side and source)");
      app->add_option("--rows", c->opt.rows, "rows per synthetic source, and at most this many per dump")
          ->capture_default_str();
      app->add_option("--seed", c->opt.seed, "random seed of rows and queries")->capture_default_str();
      app->add_option("--head-dim", c->opt.head_dim, "head_dim of the synthetic rows (multiple of 64)")
          ->capture_default_str();
      app->add_option("--real", c->real, "a `ninfer dump-kv` directory (k.f32, v.f32, meta.json); repeatable");
      app->add_option("--format", c->opt.formats, "only these formats (repeatable; default: all but f32)");
      app->add_flag("--no-synthetic", c->no_synthetic, "skip the gaussian and outlier sources");
      app->callback([c]() {
        for (const auto& r : c->real) c->opt.real_dirs.emplace_back(r);
        c->opt.synthetic = !c->no_synthetic;
        if (!c->opt.synthetic && c->opt.real_dirs.empty()) fail("kv-bench: --no-synthetic needs --real DIR");
        const auto rows = run_codec_bench(c->opt);
        if (c->json) {
          std::printf("%s\n", codec_bench_json(rows).c_str());
        } else {
          std::printf("kv-bench: %zu rows per source, seed %llu; nmse = |x - x^|^2 / |x|^2 in the input "
                      "basis; ip err = rms(q.x - q.x^) / rms(q.x) for random unit q\n\n%s",
                      c->opt.rows, (unsigned long long)c->opt.seed, codec_bench_table(rows).c_str());
        }
      });
    });

}  // namespace
}  // namespace ninfer::app
