// `ninfer perplexity`: sliding-window NLL / perplexity over a text file with any KV format,
// optionally against a reference format in the same process (--kl-ref) for KL divergence
// and top-1 agreement.
//
// Windows: window w covers tokens [w*stride, w*stride + ctx + 1): the first ctx tokens are
// the input and each predicts the next. The first window scores all ctx targets; later
// windows score only the last min(stride, ctx) targets (the tokens the stride adds). With
// ctx == stride this is golden.json's scheme (non-overlapping windows of ctx predictions).
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "apps/ninfer/command.h"
#include "core/error.h"
#include "model/config.h"

namespace ninfer::app {
namespace {

struct PplCmd {
  EngineFlags ef;
  std::string file;
  int ctx = 1024;
  int stride = 0;
  int max_windows = 0;
  std::string kl_ref;
  bool json = false;
};

// log-softmax of one row into out (double for a stable KL).
void log_softmax(const float* row, int n, std::vector<double>& out) {
  out.resize(size_t(n));
  double mx = -INFINITY;
  for (int i = 0; i < n; ++i) mx = std::max(mx, double(row[i]));
  double s = 0;
  for (int i = 0; i < n; ++i) s += std::exp(double(row[i]) - mx);
  const double lse = mx + std::log(s);
  for (int i = 0; i < n; ++i) out[size_t(i)] = double(row[i]) - lse;
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
  app->add_flag("--json", c->json, "print one JSON object");
  app->callback([c]() {
    if (c->ctx < 2) fail("--ctx must be >= 2, got {}", c->ctx);
    if (c->stride == 0) c->stride = c->ctx;
    if (c->stride < 1 || c->stride > c->ctx) fail("--stride must be in [1, --ctx], got {}", c->stride);
    if (c->max_windows < 0) fail("--max-windows must be >= 0, got {}", c->max_windows);
    EngineOptions o = c->ef.options();
    if (o.max_context == 0) o.max_context = c->ctx;
    if (o.max_context < c->ctx) fail("--max-context {} is smaller than --ctx {}", o.max_context, c->ctx);
    const KvFormat* ref = c->kl_ref.empty() ? nullptr : &find_kv_format(c->kl_ref);
    std::string text = read_file(c->file);
    auto eng = Engine::create(c->ef.model_dir, o);
    const KvFormat& fmt = eng->kv_format();
    if (ref) ref->check_head_dim(eng->config().head_dim);
    std::vector<int32_t> toks = eng->tokenizer().encode(text, true);
    if (int64_t(toks.size()) < c->ctx + 1)
      fail("{}: {} tokens, fewer than --ctx + 1 = {}", c->file, toks.size(), c->ctx + 1);
    int n_windows = int((int64_t(toks.size()) - c->ctx - 1) / c->stride) + 1;
    if (c->max_windows > 0) n_windows = std::min(n_windows, c->max_windows);
    const int vocab = eng->config().vocab;

    double nll = 0, ref_nll = 0, kl = 0;
    int64_t n_scored = 0, agree = 0;
    std::vector<float> logits, ref_logits;
    std::vector<double> lp, lq;
    auto run_window = [&](const KvFormat& f, std::span<const int32_t> in, std::vector<float>& out) {
      eng->set_kv_format(f);
      int32_t seq = eng->new_sequence();
      try {
        eng->prefill(seq, in, out, true);
      } catch (...) {
        eng->free_sequence(seq);
        throw;
      }
      eng->free_sequence(seq);
    };
    auto t0 = std::chrono::steady_clock::now();
    for (int w = 0; w < n_windows; ++w) {
      const int64_t begin = int64_t(w) * c->stride;
      std::span<const int32_t> in(toks.data() + begin, size_t(c->ctx));
      const int first = w == 0 ? 0 : c->ctx - c->stride;  // first scored input position
      run_window(fmt, in, logits);
      if (ref) run_window(*ref, in, ref_logits);
      for (int i = first; i < c->ctx; ++i) {
        const int32_t target = toks[size_t(begin + i + 1)];
        log_softmax(logits.data() + size_t(i) * vocab, vocab, lq);
        nll -= lq[size_t(target)];
        if (ref) {
          log_softmax(ref_logits.data() + size_t(i) * vocab, vocab, lp);
          ref_nll -= lp[size_t(target)];
          double k = 0;
          for (int v = 0; v < vocab; ++v) k += std::exp(lp[size_t(v)]) * (lp[size_t(v)] - lq[size_t(v)]);
          kl += k;
          const float* a = logits.data() + size_t(i) * vocab;
          const float* b = ref_logits.data() + size_t(i) * vocab;
          agree += (std::max_element(a, a + vocab) - a) == (std::max_element(b, b + vocab) - b);
        }
        ++n_scored;
      }
      const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::fprintf(stderr, "\rperplexity: window %d/%d  ppl %.4f  (%.0f tok/s)", w + 1, n_windows,
                   std::exp(nll / double(n_scored)), double(n_scored) * (ref ? 2 : 1) / el);
      std::fflush(stderr);
    }
    std::fprintf(stderr, "\n");
    const double mean_nll = nll / double(n_scored);
    nlohmann::json j = {{"model", eng->model().dir.filename().string()},
                        {"file", c->file},
                        {"kv_dtype", std::string(fmt.name)},
                        {"ctx", c->ctx},
                        {"stride", c->stride},
                        {"windows", n_windows},
                        {"tokens", n_scored},
                        {"nll", mean_nll},
                        {"ppl", std::exp(mean_nll)}};
    if (ref) {
      j["kl_ref"] = std::string(ref->name);
      j["kl"] = kl / double(n_scored);
      j["top1_agree"] = double(agree) / double(n_scored);
      j["ref_nll"] = ref_nll / double(n_scored);
      j["ref_ppl"] = std::exp(ref_nll / double(n_scored));
    }
    if (c->json) {
      std::printf("%s\n", j.dump(2).c_str());
    } else {
      std::printf("kv_dtype %s | windows %d x %d | tokens %lld | nll %.6f | ppl %.4f", std::string(fmt.name).c_str(),
                  n_windows, c->ctx, (long long)n_scored, mean_nll, std::exp(mean_nll));
      if (ref)
        std::printf(" | ref %s ppl %.4f | kl %.6f | top1 %.4f", std::string(ref->name).c_str(),
                    j["ref_ppl"].get<double>(), j["kl"].get<double>(), j["top1_agree"].get<double>());
      std::printf("\n");
    }
  });
});

}  // namespace
}  // namespace ninfer::app
