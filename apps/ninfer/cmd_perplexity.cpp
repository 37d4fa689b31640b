// `ninfer perplexity`: sliding-window NLL / perplexity over a text file with any KV format,
// optionally against a reference format in the same process (--kl-ref) for KL divergence
// and top-1 agreement. --kv-dtype may list several formats (comma-separated): each window's
// reference pass is then shared by all of them, and --json prints an array. --kl-ref-weights
// runs the reference pass in a second engine whose weights are held another way (`--weights
// int4 --kl-ref-weights bf16`: the KL of quantised weights against the checkpoint's).
//
// Windows: window w covers tokens [w*stride, w*stride + ctx + 1): the first ctx tokens are
// the input and each predicts the next. The first window scores all ctx targets; later
// windows score only the last min(stride, ctx) targets (the tokens the stride adds). With
// ctx == stride this is golden.json's scheme (non-overlapping windows of ctx predictions).
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "apps/ninfer/command.h"
#include "core/error.h"
#include "model/config.h"
#include "model/weight_format.h"

namespace ninfer::app {
namespace {

struct PplCmd {
  EngineFlags ef;
  std::string file;
  int ctx = 1024;
  int stride = 0;
  int max_windows = 0;
  std::string kl_ref;
  std::string kl_ref_weights;  // reference pass with these --weights (a second engine)
  bool json = false;
};

// log-softmax of one row (double, for a stable KL). out: [n]
void log_softmax_into(const float* row, int n, double* out) {
  double mx = -INFINITY;
  for (int i = 0; i < n; ++i) mx = std::max(mx, double(row[i]));
  double s = 0;
  for (int i = 0; i < n; ++i) s += std::exp(double(row[i]) - mx);
  const double lse = mx + std::log(s);
  for (int i = 0; i < n; ++i) out[i] = double(row[i]) - lse;
}

struct Totals {
  const KvFormat* fmt = nullptr;
  double nll = 0, kl = 0;
  int64_t agree = 0;
};

std::vector<const KvFormat*> parse_formats(const std::string& list) {
  std::vector<const KvFormat*> out;
  std::stringstream ss(list);
  std::string name;
  while (std::getline(ss, name, ',')) {
    if (name.empty()) fail("--kv-dtype '{}' has an empty entry", list);
    out.push_back(&find_kv_format(name));
  }
  if (out.empty()) fail("--kv-dtype is empty");
  return out;
}

RegisterCommand reg("perplexity", "sliding-window perplexity of a text file (any --kv-dtype, --kl-ref for KL)",
                    [](CLI::App* app) {
  auto c = std::make_shared<PplCmd>();
  c->ef.add(app);
  app->add_option("-f,--file", c->file, "text file to score")->required();
  app->add_option("--ctx", c->ctx, "tokens of context per window")->capture_default_str();
  app->add_option("--stride", c->stride, "tokens between window starts (default: ctx)");
  app->add_option("--max-windows", c->max_windows, "score at most this many windows (0: all)");
  app->add_option("--kl-ref", c->kl_ref, "also run each window with this KV format and report KL, top-1 agreement");
  app->add_option("--kl-ref-weights", c->kl_ref_weights,
                  "run the reference pass with these --weights (bf16, fp8, int8, int4) in a second engine "
                  "(KV format: --kl-ref, else the first --kv-dtype)");
  app->add_flag("--json", c->json, "print JSON (an object, or an array for several --kv-dtype)");
  app->callback([c]() {
    if (c->ctx < 2) fail("--ctx must be >= 2, got {}", c->ctx);
    if (c->stride == 0) c->stride = c->ctx;
    if (c->stride < 1 || c->stride > c->ctx) fail("--stride must be in [1, --ctx], got {}", c->stride);
    if (c->max_windows < 0) fail("--max-windows must be >= 0, got {}", c->max_windows);
    std::vector<const KvFormat*> fmts = parse_formats(c->ef.opt.kv_dtype);
    EngineOptions o = c->ef.options_with_kv_dtype(std::string(fmts[0]->name));
    resolve_max_context(o, c->ctx, c->ctx, fmt::format("--ctx {}", c->ctx));
    o.allow_long_context = true;  // the lengths are this tool's own flags (a warning names them)
    // One sequence at a time: the pool holds one window unless --kv-capacity says otherwise
    // (automatic capacity would take all of a GPU's memory for the first format, and the
    // --kl-ref or later formats re-create the pool at the same token count).
    if (o.kv_capacity == 0) o.kv_capacity = o.max_context;
    const KvFormat* ref = c->kl_ref.empty() ? nullptr : &find_kv_format(c->kl_ref, "--kl-ref");
    if (!ref && !c->kl_ref_weights.empty()) ref = fmts[0];
    std::string text = read_file(c->file);
    auto eng = Engine::create(c->ef.model_dir, o);
    std::unique_ptr<Engine> ref_eng;
    if (!c->kl_ref_weights.empty()) {
      EngineOptions ro = o;
      ro.weights = c->kl_ref_weights;
      try {
        parse_weights_option(ro.weights);
      } catch (const Error& e) {
        fail("--kl-ref-weights: {}", e.what());
      }
      ro.quiet = true;
      ref_eng = Engine::create(c->ef.model_dir, ro);
    }
    Engine& ref_engine = ref_eng ? *ref_eng : *eng;
    for (const KvFormat* f : fmts) f->check_head_dim(eng->config().head_dim);
    if (ref) ref->check_head_dim(eng->config().head_dim);
    std::vector<int32_t> toks = eng->tokenizer().encode(text, true);
    if (int64_t(toks.size()) < c->ctx + 1)
      fail("{}: {} tokens, fewer than --ctx + 1 = {}", c->file, toks.size(), c->ctx + 1);
    int n_windows = int((int64_t(toks.size()) - c->ctx - 1) / c->stride) + 1;
    if (c->max_windows > 0) n_windows = std::min(n_windows, c->max_windows);
    const int vocab = eng->config().vocab;

    std::vector<Totals> tot(fmts.size());
    for (size_t i = 0; i < fmts.size(); ++i) tot[i].fmt = fmts[i];
    double ref_nll = 0;
    int64_t n_scored = 0;
    std::vector<float> logits, ref_logits;
    std::vector<double> ref_lp;  // [scored positions][vocab] log-probs of the reference
    std::vector<int> ref_top;    // [scored positions] its argmax
    // NOTE: the reference runs without an exact window (a plain bf16 cache); the formats under
    // test get --kv-sink / --kv-recent or their defaults.
    auto run_window = [&](Engine& e, const KvFormat& f, std::span<const int32_t> in, std::vector<float>& out,
                          std::optional<KvWindow> w = std::nullopt) {
      e.set_kv_format(f, w);
      int32_t seq = e.new_sequence();
      try {
        e.prefill(seq, in, out, true);
      } catch (...) {
        e.free_sequence(seq);
        throw;
      }
      e.free_sequence(seq);
    };
    auto t0 = std::chrono::steady_clock::now();
    int64_t passes = 0;
    for (int w = 0; w < n_windows; ++w) {
      const int64_t begin = int64_t(w) * c->stride;
      std::span<const int32_t> in(toks.data() + begin, size_t(c->ctx));
      const int first = w == 0 ? 0 : c->ctx - c->stride;  // first scored input position
      // Scoring runs on the host over [positions x vocab] rows: the reference's log-probs and
      // argmax are computed once per window and shared by every format; rows are scored in
      // parallel (per-thread partial sums, combined in a fixed order per thread count).
      const int n_pos = c->ctx - first;
      if (ref) {
        run_window(ref_engine, *ref, in, ref_logits, KvWindow{});
        ++passes;
        ref_lp.resize(size_t(n_pos) * vocab);
        ref_top.resize(size_t(n_pos));
        double nll = 0;
#pragma omp parallel for reduction(+ : nll) schedule(static)
        for (int k = 0; k < n_pos; ++k) {
          const int i = first + k;
          const float* b = ref_logits.data() + size_t(i) * vocab;
          log_softmax_into(b, vocab, ref_lp.data() + size_t(k) * vocab);
          ref_top[size_t(k)] = int(std::max_element(b, b + vocab) - b);
          nll -= ref_lp[size_t(k) * vocab + size_t(toks[size_t(begin + i + 1)])];
        }
        ref_nll += nll;
      }
      for (Totals& T : tot) {
        run_window(*eng, *T.fmt, in, logits);
        ++passes;
        double nll = 0, kl = 0;
        int64_t agree = 0;
#pragma omp parallel reduction(+ : nll, kl, agree)
        {
          std::vector<double> lq(static_cast<size_t>(vocab));
#pragma omp for schedule(static)
          for (int k = 0; k < n_pos; ++k) {
            const int i = first + k;
            const float* a = logits.data() + size_t(i) * vocab;
            log_softmax_into(a, vocab, lq.data());
            nll -= lq[size_t(toks[size_t(begin + i + 1)])];
            if (ref) {
              const double* lp = ref_lp.data() + size_t(k) * vocab;
              double d = 0;
              for (int v = 0; v < vocab; ++v) d += std::exp(lp[v]) * (lp[v] - lq[size_t(v)]);
              kl += d;
              agree += int(std::max_element(a, a + vocab) - a) == ref_top[size_t(k)];
            }
          }
        }
        T.nll += nll;
        T.kl += kl;
        T.agree += agree;
      }
      n_scored += c->ctx - first;
      const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::fprintf(stderr, "\rperplexity: window %d/%d  %s ppl %.4f  (%.0f tok/s)", w + 1, n_windows,
                   std::string(fmts[0]->name).c_str(), std::exp(tot[0].nll / double(n_scored)),
                   double(passes) * c->ctx / el);
      std::fflush(stderr);
    }
    std::fprintf(stderr, "\n");
    nlohmann::json arr = nlohmann::json::array();
    for (const Totals& T : tot) {
      const double mean_nll = T.nll / double(n_scored);
      nlohmann::json j = {{"model", eng->model().dir.filename().string()},
                          {"file", c->file},
                          {"kv_dtype", std::string(T.fmt->name)},
                          {"kv_sink", eng->window_for(*T.fmt).sink},
                          {"kv_recent", eng->window_for(*T.fmt).recent},
                          {"weights", o.weights},
                          {"ctx", c->ctx},
                          {"stride", c->stride},
                          {"windows", n_windows},
                          {"tokens", n_scored},
                          {"nll", mean_nll},
                          {"ppl", std::exp(mean_nll)}};
      if (ref) {
        j["kl_ref"] = std::string(ref->name);
        if (ref_eng) j["kl_ref_weights"] = c->kl_ref_weights;
        j["kl"] = T.kl / double(n_scored);
        j["top1_agree"] = double(T.agree) / double(n_scored);
        j["ref_nll"] = ref_nll / double(n_scored);
        j["ref_ppl"] = std::exp(ref_nll / double(n_scored));
      }
      arr.push_back(j);
      if (!c->json) {
        const KvWindow w = eng->window_for(*T.fmt);
        std::printf("kv_dtype %-11s | exact sink %d recent %d | weights %s | windows %d x %d | tokens %lld | nll %.6f | ppl %.4f",
                    std::string(T.fmt->name).c_str(), w.sink, w.recent, o.weights.c_str(), n_windows, c->ctx, (long long)n_scored, mean_nll, std::exp(mean_nll));
        if (ref)
          std::printf(" | ref %s%s%s ppl %.4f (%+.2f%%) | kl %.6f | top1 %.4f", std::string(ref->name).c_str(),
                      ref_eng ? " weights " : "", ref_eng ? c->kl_ref_weights.c_str() : "",
                      j["ref_ppl"].get<double>(), 100.0 * (std::exp(mean_nll) / j["ref_ppl"].get<double>() - 1.0),
                      j["kl"].get<double>(), j["top1_agree"].get<double>());
        std::printf("\n");
      }
    }
    if (c->json) std::printf("%s\n", (arr.size() == 1 ? arr[0] : arr).dump(2).c_str());
  });
});

}  // namespace
}  // namespace ninfer::app
