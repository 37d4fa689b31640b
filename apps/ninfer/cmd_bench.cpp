// `ninfer bench`: end-to-end prefill and decode throughput of a model, or (--attention) one
// decode step of paged attention alone on synthetic data. Timings are medians after warm-up;
// the table is printed last; --json also prints one JSON document before it.
//
// Model mode: prefill = one sequence of --prompt random tokens fed in --chunk sized forward
// calls (median of --repeats after one warm-up); decode, for each entry of the --batch list
// (e.g. 1,8,32,max; `max`: as many sequences as the KV pool holds), that many sequences, each
// first prefilled to --depth tokens, then --gen steps of one token per sequence (median step
// time; two warm-up steps), the sequences freed before the next entry; an entry the pool cannot
// hold is reported as not fitting. One engine (one weight upload) serves the whole list. On the GPU it also prints the memory-bandwidth limit of a decode step:
// (weight bytes + KV bytes the step reads) / measured copy bandwidth; of a mixture of experts
// only the experts the step's tokens choose count (read_weight_fraction).
//
// Largest context (issue 6): --max-depth sizes the KV pool automatically (all the memory, or
// --memory-budget's, after weights, workspace and headroom, as `run` would) and decodes at
// the largest depth it holds for --batch sequences. --fill-from N prefills only N tokens
// through the model and reaches the depth by repeating their KV pages
// (Engine::extend_by_repeating): the pool is really allocated and every decode step reads
// all of it, without a 100K+-token prefill.
//
// One long prompt (issue 23): --once prefills --prompt tokens a single time (no warm-up, no
// repeats: a 1M-token prompt takes minutes), then decodes --gen steps on that same sequence,
// and prints the wall time of each phase and the peak memory (host RSS; on the GPU the device
// memory in use at the end, which bounds the peak because device buffers only grow).
//
// Prefix cache (issue 28): --prefix-ttft N times the first token of one N-token random prompt
// twice on an engine with the prefix cache on: cold (nothing cached; prefill in --chunk calls)
// and again (its full pages attached from the cache, only the tail computed; median of
// --repeats), and the largest difference between the two runs' last-token logits.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "apps/ninfer/command.h"
#include "core/error.h"
#include "kv/capacity.h"
#ifdef NINFER_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace ninfer::app {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

std::vector<int> parse_int_list(const std::string& s, const std::string& flag) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      long long v = std::stoll(item, &used);
      if (used != item.size() || v <= 0 || v > (1LL << 30)) throw std::invalid_argument(item);
      out.push_back(int(v));
    } catch (const std::exception&) {
      fail("{}: '{}' is not a positive integer (expected a comma-separated list like 8192,32768)", flag, item);
    }
  }
  if (out.empty()) fail("{} is empty", flag);
  return out;
}

[[maybe_unused]] std::vector<std::string> split_names(const std::string& s) {  // --attention only
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

struct BenchCmd {
  std::string model_dir, device = "auto", kv_dtype = "bf16", weights = "bf16";
  int threads = 0, prompt = 512, gen = 32, depth = 0, batch = 1, repeats = 3, chunk = 2048;
  // Model mode: the --batch list (0: `max`, as many sequences as the KV pool holds); `batch` is
  // its largest explicit entry (1 when the list is only `max`).
  std::vector<int> batches{1};
  int fill_from = 0;
  int kv_sink = -1, kv_recent = -1;  // the exact KV window (-1: the format's default)
  int64_t max_context = 0;  // 0: what the run's own flags need (+ one page)
  int prefix_ttft = 0;  // > 0: time to first token of a prompt this long, cold and from the prefix cache
  bool max_depth = false;
  bool once = false;
  uint64_t random_weights = 0;  // != 0: random weights of -m's config.json with this seed
  std::string memory_budget;
  bool json_out = false;
  // --attention
  bool attention = false;
  std::string ctx_list = "8192,32768,131072", batch_list, heads = "32/8";  // batch_list empty: 1 (model), 1,8 (--attention)
  std::string splits_list;  // empty: the planner's choice
  int head_dim = 128, n_query = 1;
  int window = 0;  // sliding window (0: none)
  bool cold_l2 = false, graph = false;
};

void run_attention(const BenchCmd& c) {
#ifndef NINFER_HAVE_CUDA
  (void)c;
  fail("bench --attention needs the CUDA backend (this ninfer was built without CUDA)");
#else
  if (!cuda_device_available()) fail("bench --attention: no usable CUDA GPU found");
  const auto ctxs = parse_int_list(c.ctx_list, "--ctx");
  const auto batches = parse_int_list(c.batch_list.empty() ? "1,8" : c.batch_list, "--batch");
  // 0: the planner's choice (the default); else forced on the kernels.
  const auto splits_list = c.splits_list.empty() ? std::vector<int>{0} : parse_int_list(c.splits_list, "--splits");
  int nh = 0, nkv = 0;
  if (std::sscanf(c.heads.c_str(), "%d/%d", &nh, &nkv) != 2 || nh <= 0 || nkv <= 0)
    fail("--heads must look like 32/8 (q heads / kv heads), got '{}'", c.heads);
  const auto formats = split_names(c.kv_dtype);
  json rows = json::array();
  struct Row {
    std::string fmt;
    int batch, ctx, forced_splits;
    AttentionBenchResult r;
  };
  std::vector<Row> table;
  std::string dev;
  std::vector<AttentionBenchConfig> cfgs;
  for (const std::string& f : formats)
    for (int b : batches)
      for (int ctx : ctxs)
        for (int splits : splits_list) {
          AttentionBenchConfig cfg;
          cfg.kv_dtype = f;
          cfg.ctx = ctx;
          cfg.batch = b;
          cfg.n_heads = nh;
          cfg.n_kv_heads = nkv;
          cfg.head_dim = c.head_dim;
          cfg.n_query = c.n_query;
          cfg.splits = splits;
          cfg.window = c.window;
          // Prefill-sized rows (a 128K prompt's attention takes seconds): --repeats as given.
          cfg.repeats = c.n_query >= 16384 ? std::max(1, c.repeats) : std::max(20, c.repeats);
          cfg.cold_l2 = c.cold_l2;
          cfg.graph = c.graph;
          cfgs.push_back(cfg);
        }
  // One KV arena for every row, sized for the largest (cuda_bench_reserve_kv).
  size_t kv_max = 0;
  for (const AttentionBenchConfig& cfg : cfgs) kv_max = std::max(kv_max, cuda_bench_kv_bytes(cfg));
  cuda_bench_reserve_kv(kv_max);
  for (const AttentionBenchConfig& cfg : cfgs) {
    std::fprintf(stderr, "bench attention: %s batch %d ctx %d ...\n", cfg.kv_dtype.c_str(), cfg.batch, cfg.ctx);
    AttentionBenchResult r = cuda_bench_decode_attention(cfg);
    dev = r.device_name;
    table.push_back({cfg.kv_dtype, cfg.batch, cfg.ctx, cfg.splits, r});
    rows.push_back({{"kv_dtype", cfg.kv_dtype}, {"batch", cfg.batch}, {"ctx", cfg.ctx}, {"n_heads", nh},
                    {"n_kv_heads", nkv}, {"head_dim", c.head_dim}, {"n_query", c.n_query}, {"median_ms", r.median_ms},
                    {"min_ms", r.min_ms}, {"kv_bytes", r.kv_bytes}, {"gbps", r.gbps}, {"splits", r.splits},
                    {"cold_l2", cfg.cold_l2}, {"graph", cfg.graph}, {"window", cfg.window}});
  }
  if (c.json_out) std::printf("%s\n", json{{"bench", "attention"}, {"device", dev}, {"rows", rows}}.dump().c_str());
  const std::string win =
      c.window > 0 ? " | sliding window " + std::to_string(c.window) + " (KV MiB: the keys a query sees)" : "";
  std::printf("decode attention, one step | %s | heads %d/%d head_dim %d, %d query token(s) per sequence%s%s\n",
              dev.c_str(), nh, nkv, c.head_dim, c.n_query, win.c_str(),
              c.cold_l2 ? " | L2 overwritten before each repeat" : (c.graph ? " | CUDA-graph replays of 20 steps" : ""));
  std::printf("%-8s %5s %8s %10s %10s %8s %6s %10s\n", "kv", "batch", "ctx", "ms", "KV MiB", "GB/s", "splits",
              "vs bf16");
  for (const Row& r : table) {
    double ref = 0;
    for (const Row& o : table)
      if (o.fmt == "bf16" && o.batch == r.batch && o.ctx == r.ctx && o.forced_splits == r.forced_splits)
        ref = o.r.median_ms;
    char ratio[32] = "-";
    if (ref > 0 && r.fmt != "bf16") std::snprintf(ratio, sizeof ratio, "%.2fx", r.r.median_ms / ref);
    std::printf("%-8s %5d %8d %10.4f %10.1f %8.0f %6d %10s\n", r.fmt.c_str(), r.batch, r.ctx, r.r.median_ms,
                r.r.kv_bytes / 1048576.0, r.r.gbps, r.r.splits, ratio);
  }
#endif
}

// The share of the weights a decode step of `batch` sequences reads: all of a dense model's; of a
// mixture of experts, the experts that batch's tokens choose (uniform routing: each of n experts
// is chosen by at least one of B tokens with probability 1 - (1 - k/n)^B).
// ([[maybe_unused]]: only the CUDA build prints the limit.)
[[maybe_unused]] double read_weight_fraction(const ModelConfig& c, int batch) {
  if (c.n_experts == 0) return 1.0;
  const double n = c.n_experts, k = c.top_k;
  const double chosen = n * (1.0 - std::pow(1.0 - k / n, double(batch)));
  double unread = 0;
  for (const LayerSpec& l : c.layers)
    if (l.moe) unread += (n - chosen) * 3.0 * double(c.hidden) * double(c.moe_ffn);
  return 1.0 - unread / double(c.n_params());
}

// `--batch max` plans the CPU's automatic pool for this many sequences.
constexpr int kMaxBenchBatch = 256;

// One decode measurement of the model mode: `asked` is the --batch entry (0: max), `batch` the
// sequences decoded together; a batch whose sequences the KV pool cannot hold is reported, not run.
struct DecodeRow {
  int asked, batch;
  double step_ms, tps;
  double step_bytes, limit_ms;  // the bandwidth limit (GPU only; 0 elsewhere)
  bool fits;
};

// "1,8,max" for the table's header.
std::string batch_names(const std::vector<int>& batches) {
  std::string s;
  for (int b : batches) s += (s.empty() ? "" : ",") + (b == 0 ? std::string("max") : std::to_string(b));
  return s;
}

// The model mode's --batch: positive integers and `max` (0), comma-separated.
std::vector<int> parse_batch_list(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item == "max") {
      out.push_back(0);
      continue;
    }
    const auto v = parse_int_list(item, "--batch");
    out.push_back(v[0]);
  }
  if (out.empty()) fail("--batch is empty");
  return out;
}

// --prefix-ttft: the first token of the same prompt, cold and then from the prefix cache.
void run_prefix_ttft(const BenchCmd& c) {
  if (c.model_dir.empty()) fail("bench: -m/--model is required (or use --attention)");
  const int n = c.prefix_ttft;
  if (n < 2) fail("bench: --prefix-ttft {} must be at least 2 tokens", n);
  if (c.repeats < 1 || c.chunk < 1) fail("bench: --repeats and --chunk must be >= 1");
  EngineOptions o;
  o.device = c.device;
  o.threads = c.threads;
  o.kv_dtype = c.kv_dtype;
  o.kv_sink = c.kv_sink;
  o.kv_recent = c.kv_recent;
  check_kv_window_flags(o.kv_sink, o.kv_recent);
  o.weights = c.weights;
  o.random_weights_seed = c.random_weights;
  if (!c.memory_budget.empty()) o.memory_budget = int64_t(parse_bytes(c.memory_budget, "--memory-budget"));
  o.max_context = int64_t(n) + 64;
  o.allow_long_context = true;  // the length is this tool's own flag (a warning names it)
  o.kv_capacity = o.max_context + 64;
  o.prefill_chunk = c.chunk;
  o.prefix_cache = true;
  auto eng = Engine::create(c.model_dir, o);
  if (!eng->prefix_cache_enabled()) fail("bench --prefix-ttft: the prefix cache is off for this model");
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> tok(3, eng->config().vocab - 1);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t& t : ids) t = tok(rng);
  // Prefill + greedy choice of the first token: what a client waits for.
  std::vector<float> logits;
  int32_t first = -1;
  auto ttft = [&]() {
    const int32_t s = eng->new_sequence();
    const auto t0 = Clock::now();
    eng->prefill(s, ids, logits);
    first = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    eng->free_sequence(s);
    return dt;
  };
  std::fprintf(stderr, "bench: prefix-ttft %d tokens, cold\n", n);
  const double cold = ttft();
  const std::vector<float> cold_logits = logits;
  const int32_t cold_first = first;
  const uint64_t hits0 = eng->prefix_cache_stats().hits;
  std::vector<double> warm;
  for (int r = 0; r < c.repeats; ++r) {
    std::fprintf(stderr, "bench: prefix-ttft %d tokens, from the cache, run %d/%d\n", n, r + 1, c.repeats);
    warm.push_back(ttft());
  }
  const int64_t cached_tokens = int64_t(eng->prefix_cache_stats().hits - hits0) / c.repeats;
  const double warm_s = median(warm);
  double max_diff = 0, max_ref = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    max_diff = std::max(max_diff, double(std::fabs(logits[i] - cold_logits[i])));
    max_ref = std::max(max_ref, double(std::fabs(cold_logits[i])));
  }
  json out{{"bench", "prefix_ttft"},
           {"model", c.model_dir},
           {"backend", eng->backend().name()},
           {"kv_dtype", c.kv_dtype},
           {"weights", c.weights},
           {"prompt", n},
           {"chunk", c.chunk},
           {"cold_ttft_seconds", cold},
           {"cached_ttft_seconds", warm_s},
           {"cached_tokens", cached_tokens},
           {"speedup", cold / warm_s},
           {"max_abs_logit_diff", max_diff},
           {"max_abs_logit", max_ref},
           {"same_first_token", first == cold_first},
           {"repeats", c.repeats}};
  if (c.json_out) std::printf("%s\n", out.dump().c_str());
  FILE* tout = c.json_out ? stderr : stdout;  // --json: the JSON alone on stdout
  std::fprintf(tout, "bench prefix-ttft | %s | backend %s | kv %s | prompt %d tokens, chunk %d\n", c.model_dir.c_str(),
              eng->backend().name().c_str(), c.kv_dtype.c_str(), n, c.chunk);
  std::fprintf(tout, "%-8s %14s %16s %12s\n", "run", "cached tokens", "computed tokens", "TTFT");
  std::fprintf(tout, "%-8s %14d %16d %10.3f s\n", "cold", 0, n, cold);
  std::fprintf(tout, "%-8s %14lld %16lld %10.3f s\n", "cached", (long long)cached_tokens, (long long)(n - cached_tokens),
              warm_s);
  std::fprintf(tout, "speedup %.1fx | last-token logits: max |cached - cold| = %.3g (max |logit| %.3g), first token %s\n",
              cold / warm_s, max_diff, max_ref, first == cold_first ? "equal" : "differs");
}

void run_model(const BenchCmd& c) {
  if (c.model_dir.empty()) fail("bench: -m/--model is required (or use --attention)");
  if (c.prompt < 0 || c.gen < 0 || c.depth < 0 || c.batch < 1 || c.repeats < 1 || c.chunk < 1 || c.fill_from < 0)
    fail("bench: --prompt/--gen/--depth/--fill-from must be >= 0, --batch/--repeats/--chunk >= 1");
  if (c.fill_from % kPageSize != 0)
    fail("bench: --fill-from {} must be a multiple of the page size {}", c.fill_from, kPageSize);
  if (c.max_depth && c.depth > 0) fail("bench: give --depth or --max-depth, not both");
  if (c.once && (c.depth > 0 || c.max_depth || c.fill_from > 0 || c.batch != 1 || c.prompt < 1))
    fail("bench: --once decodes on the prompt's own sequence: it takes --prompt N (N >= 1) and --gen, not --depth, "
         "--max-depth, --fill-from or --batch > 1");
  const bool has_max = std::find(c.batches.begin(), c.batches.end(), 0) != c.batches.end();
  const bool auto_pool = has_max || c.batches.size() > 1;
  if ((c.max_depth || c.once) && c.batches.size() != 1)
    fail("bench: --max-depth and --once take one --batch value, not a list");
  if ((c.max_depth || c.once) && has_max) fail("bench: --batch max does not combine with --max-depth or --once");
  if (c.max_depth && c.max_context > 0)
    fail("bench: --max-depth sets the context to what the KV pool holds; give --max-context or --max-depth, not both");
  if (c.fill_from > 0 && !c.max_depth && c.fill_from > c.depth)
    fail("bench: --fill-from {} is larger than --depth {}", c.fill_from, c.depth);
  EngineOptions o;
  o.max_context = c.max_context;
  o.device = c.device;
  o.threads = c.threads;
  o.kv_dtype = c.kv_dtype;
  o.kv_sink = c.kv_sink;
  o.kv_recent = c.kv_recent;
  check_kv_window_flags(o.kv_sink, o.kv_recent);
  // NOTE: --fill-from repeats compressed pages, which an exact window cannot follow: a format's
  // default window is off for it (explicit flags are refused by Engine::extend_by_repeating).
  if (c.fill_from > 0 && o.kv_sink < 0 && o.kv_recent < 0 && default_kv_window(o.kv_dtype).on()) {
    o.kv_sink = o.kv_recent = 0;
    std::fprintf(stderr, "note: --fill-from: %s's default exact KV window is off\n", o.kv_dtype.c_str());
  }
  o.weights = c.weights;
  o.random_weights_seed = c.random_weights;
  if (!c.memory_budget.empty()) o.memory_budget = int64_t(parse_bytes(c.memory_budget, "--memory-budget"));
  int depth = c.depth;
  if (c.max_depth) {
    // Plan with a short max context (the pool is automatic), then let one sequence grow to
    // the pool's share of each of --batch sequences.
    o.max_context = std::max({c.prompt, c.fill_from, 1}) + 64;
    o.allow_long_context = true;  // the lengths are this tool's own flags (a warning names them)
    o.kv_capacity = 0;
  } else {
    const int64_t longest = c.once ? int64_t(c.prompt) + c.gen + 2
                                   : std::max<int64_t>(c.prompt, int64_t(std::max(c.depth, 1)) + c.gen + 2);
    resolve_max_context(o, longest, longest + 64,
                        fmt::format("the {} tokens --prompt/--depth/--gen need", longest));
    o.allow_long_context = true;  // the lengths are this tool's own flags (a warning names them)
    // A list or `max`: the automatic pool (all the device memory, or --memory-budget's), and
    // the entries it cannot hold are reported; one batch: what it needs (an error if that
    // does not fit).
    o.kv_capacity = auto_pool ? 0 : (o.max_context + 64) * std::max(1, c.batch);
  }
  // NOTE: on the CPU the automatic pool is max-context x max_sequences; `max` plans for up to
  // kMaxBenchBatch sequences there (the GPU's pool takes the memory either way).
  o.max_sequences = has_max ? std::max(c.batch, kMaxBenchBatch) : c.batch;
  o.prefill_chunk = c.chunk;
  auto eng = Engine::create(c.model_dir, o);
  const ModelConfig& cfg = eng->config();
  if (c.max_depth) {
    const int64_t per_seq = eng->kv_capacity_tokens() / kPageSize / c.batch * kPageSize;
    depth = int(std::min<int64_t>(per_seq - c.gen - 2, int64_t(1) << 30));
    if (depth < std::max(c.fill_from, 1))
      fail("bench: the KV pool ({} tokens) holds only {} tokens per sequence for --batch {}, less than --fill-from {} "
           "+ --gen {}",
           eng->kv_capacity_tokens(), per_seq, c.batch, c.fill_from, c.gen);
    eng->set_max_context(per_seq);
  }
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> tok(3, cfg.vocab - 1);
  auto random_tokens = [&](int n) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (int32_t& t : v) t = tok(rng);
    return v;
  };
  json out{{"bench", "model"},       {"model", c.model_dir}, {"backend", eng->backend().name()},
           {"kv_dtype", c.kv_dtype},
           {"weights", c.weights}, {"prompt", c.prompt},   {"gen", c.gen},
           {"depth", depth},         {"batch", c.batch},     {"chunk", c.chunk},
           {"fill_from", c.fill_from}, {"memory_budget", c.memory_budget}, {"random_weights_seed", c.random_weights},
           {"kv_capacity_tokens", eng->kv_capacity_tokens()}, {"max_context", eng->max_context()},
           {"capacity", eng->capacity_line()}};
  std::vector<float> logits;
  // Decodes --gen steps (after two warm-up steps) of one token per sequence; the median step.
  auto time_steps = [&](const std::vector<int32_t>& seqs) {
    std::vector<double> steps;
    std::vector<int32_t> next(seqs.size());
    std::fprintf(stderr, "bench: decode %d steps of batch %zu\n", c.gen + 2, seqs.size());
    for (int i = 0; i < c.gen + 2; ++i) {
      std::vector<StepItem> items;
      for (size_t b = 0; b < seqs.size(); ++b) {
        next[b] = tok(rng);
        items.push_back(StepItem{seqs[b], {&next[b], 1}, false});
      }
      const auto t0 = Clock::now();
      eng->step(items, logits);
      const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
      if (i >= 2) steps.push_back(dt);
    }
    return median(steps) * 1e3;
  };
  double prefill_tps = 0, prefill_s = 0, decode_wall_s = 0;
  std::vector<DecodeRow> rows;  // one per --batch entry (decode only)
  if (c.once) {
    const std::vector<int32_t> ids = random_tokens(c.prompt);
    std::fprintf(stderr, "bench: prefill %d tokens once, then %d decode steps on the same sequence\n", c.prompt,
                 c.gen);
    const int32_t s = eng->new_sequence();
    const auto t0 = Clock::now();
    eng->prefill(s, ids, logits);
    const auto t1 = Clock::now();
    prefill_s = std::chrono::duration<double>(t1 - t0).count();
    prefill_tps = c.prompt / prefill_s;
    if (c.gen > 0) {
      const double step_ms = time_steps({s});
      rows.push_back(DecodeRow{1, 1, step_ms, 1e3 / step_ms, 0, 0, true});
      decode_wall_s = std::chrono::duration<double>(Clock::now() - t1).count();
    }
    depth = c.prompt;
    out["depth"] = depth;
    out["prefill_seconds"] = prefill_s;
    out["prefill_tokens_per_s"] = prefill_tps;
    out["wall_seconds"] = prefill_s + decode_wall_s;
  } else {
    if (c.prompt > 0) {
      std::vector<double> times;
      for (int r = 0; r < c.repeats + 1; ++r) {
        std::fprintf(stderr, "bench: prefill %d tokens, run %d/%d%s\n", c.prompt, r + 1, c.repeats + 1,
                     r == 0 ? " (warm-up)" : "");
        const std::vector<int32_t> ids = random_tokens(c.prompt);
        const int32_t s = eng->new_sequence();
        const auto t0 = Clock::now();
        eng->prefill(s, ids, logits);
        const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
        eng->free_sequence(s);
        if (r > 0) times.push_back(dt);
      }
      prefill_s = median(times);
      prefill_tps = c.prompt / prefill_s;
      out["prefill_seconds"] = prefill_s;
      out["prefill_tokens_per_s"] = prefill_tps;
    }
    if (c.gen > 0) {
      const int ctx0 = std::max(depth, 1);
      // Pages one sequence takes: its depth, the timed steps and two warm-ups.
      const int64_t seq_pages = (int64_t(ctx0) + c.gen + 2 + kPageSize - 1) / kPageSize;
      const int64_t fits = int64_t(eng->kv_capacity_tokens() / kPageSize) / seq_pages;
      for (int want : c.batches) {
        const int b = want == 0 ? int(std::min<int64_t>(fits, 1 << 20)) : want;
        DecodeRow row{want, b, 0, 0, 0, 0, b >= 1 && b <= fits};
        if (!row.fits) {
          std::fprintf(stderr, "bench: batch %d at depth %d does not fit the KV pool (%lld tokens: %lld sequences)\n", b,
                       ctx0, (long long)eng->kv_capacity_tokens(), (long long)fits);
          rows.push_back(row);
          continue;
        }
        std::vector<int32_t> seqs;
        for (int i = 0; i < b; ++i) {
          const int32_t s = eng->new_sequence();
          if (c.fill_from > 0) {
            std::fprintf(stderr, "bench: prefill %d tokens, then repeat their pages to depth %d, sequence %d/%d\n",
                         c.fill_from, ctx0, i + 1, b);
            eng->prefill(s, random_tokens(c.fill_from), logits);
            eng->extend_by_repeating(s, ctx0);
          } else {
            std::fprintf(stderr, "bench: prefill depth %d for sequence %d/%d\n", ctx0, i + 1, b);
            eng->prefill(s, random_tokens(ctx0), logits);
          }
          seqs.push_back(s);
        }
        row.step_ms = time_steps(seqs);
        row.tps = b / (row.step_ms * 1e-3);
        for (int32_t s : seqs) eng->free_sequence(s);
        rows.push_back(row);
      }
    }
  }
  // Peak memory: the host's resident set (ru_maxrss, KiB on Linux) and the device memory in use
  // (total - free; the device's buffers only grow, so the end is the peak).
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const double host_peak_gib = double(ru.ru_maxrss) * 1024.0 / double(1ull << 30);
  out["host_peak_rss_gib"] = host_peak_gib;
  double device_used_gib = 0, device_total_gib = 0;
  if (eng->backend().name() != "cpu") {
    const MemoryInfo mi = eng->backend().memory();
    device_used_gib = double(mi.total - mi.free) / double(1ull << 30);
    device_total_gib = double(mi.total) / double(1ull << 30);
    out["device_memory_in_use_gib"] = device_used_gib;
  }
  double bw = 0;
#ifdef NINFER_HAVE_CUDA
  if (eng->backend().name() == "cuda" && c.gen > 0) {
    bw = cuda_copy_bandwidth();
    out["copy_bandwidth_gbps"] = bw / 1e9;
    // NOTE: the bytes the GPU's pool holds per token (head_dim 96 stored as 128: kv/capacity.h).
    const double kv_tok = double(eng->backend().page_bytes(eng->kv_format())) / kPageSize;
    const double ctx_mean = std::max(depth, 1) + c.gen / 2.0;
    for (DecodeRow& r : rows) {
      if (!r.fits) continue;
      r.step_bytes = double(eng->backend().memory().weights) * read_weight_fraction(cfg, r.batch) +
                     r.batch * ctx_mean * kv_tok;
      // NOTE: a decode step only reads; the copy bandwidth counts reads + writes, so the read
      // rate of a copy is the same number (each byte copied is read once and written once at
      // the same total rate).
      r.limit_ms = r.step_bytes / bw * 1e3;
    }
  }
#endif
  if (c.gen > 0) {
    const int decode_ctx = std::max(depth, 1) + c.gen / 2;
    json per_batch = json::array();
    for (const DecodeRow& r : rows) {
      json j{{"batch", r.batch}, {"fits", r.fits}};
      if (r.asked == 0) j["batch_max"] = true;
      if (r.fits) {
        j["decode_step_ms"] = r.step_ms;
        j["decode_tokens_per_s"] = r.tps;
        j["decode_context"] = decode_ctx;
        if (r.limit_ms > 0) {
          j["decode_step_bytes"] = r.step_bytes;
          j["decode_limit_ms"] = r.limit_ms;
          j["decode_vs_limit"] = r.step_ms / r.limit_ms;
        }
      }
      per_batch.push_back(j);
    }
    out["decode_batches"] = per_batch;
    out["batch"] = rows.size() == 1 ? json(rows[0].batch) : json(batch_names(c.batches));
    // One batch: its fields at the top level too (the document as before the list).
    if (rows.size() == 1)
      for (auto& [k, v] : per_batch[0].items())
        if (k != "batch" && k != "fits" && k != "batch_max") out[k] = v;
    if (c.once) out["decode_wall_seconds"] = decode_wall_s;
  }
  if (c.json_out) std::printf("%s\n", out.dump().c_str());
  // With --json, stdout holds the JSON alone; the table goes to stderr (as kv-plan does).
  FILE* tout = c.json_out ? stderr : stdout;
  std::fprintf(tout, "bench | %s | backend %s | kv %s | batch %s\n", c.model_dir.c_str(), eng->backend().name().c_str(),
              c.kv_dtype.c_str(), batch_names(c.batches).c_str());
  std::fprintf(tout, "%s%s\n", eng->capacity_line().c_str(),
              c.fill_from > 0 ? fmt::format(" | depth filled from {} prefilled tokens", c.fill_from).c_str() : "");
  std::fprintf(tout, "%-10s %6s %10s %12s %14s %14s %10s\n", "phase", "batch", "tokens", "ctx", "median", "tokens/s",
              "vs limit");
  if (c.prompt > 0)
    std::fprintf(tout, "%-10s %6d %10d %12d %12.1f ms %14.1f %10s\n", "prefill", 1, c.prompt, c.prompt, prefill_s * 1e3,
                prefill_tps, "-");
  for (const DecodeRow& r : rows) {
    if (!r.fits) {
      std::fprintf(tout, "%-10s %6d   does not fit the KV pool at depth %d\n", "decode", r.batch, std::max(depth, 1));
      continue;
    }
    char lim[48] = "-";
    if (r.limit_ms > 0) std::snprintf(lim, sizeof lim, "%.2fx", r.step_ms / r.limit_ms);
    std::fprintf(tout, "%-10s %6d %10d %12d %9.3f ms/step %14.1f %10s\n", "decode", r.batch, c.gen * r.batch,
                std::max(depth, 1) + c.gen / 2, r.step_ms, r.tps, lim);
  }
  for (const DecodeRow& r : rows)
    if (r.fits && r.limit_ms > 0)
      std::fprintf(tout, "limit, batch %d: %.2f GB per step (weights + KV) / %.0f GB/s copy bandwidth = %.3f ms/step\n",
                  r.batch, r.step_bytes / 1e9, bw / 1e9, r.limit_ms);
  if (c.once)
    std::fprintf(tout, "wall: prefill %.1f s + decode %.1f s (%d steps) = %.1f s\n", prefill_s, decode_wall_s,
                c.gen > 0 ? c.gen + 2 : 0, prefill_s + decode_wall_s);
  if (device_total_gib > 0)
    std::fprintf(tout, "peak memory: host RSS %.2f GiB, device in use %.2f GiB of %.2f GiB\n", host_peak_gib, device_used_gib,
                device_total_gib);
  else
    std::fprintf(tout, "peak memory: host RSS %.2f GiB\n", host_peak_gib);
}

RegisterCommand reg_bench("bench", "prefill/decode throughput of a model, or decode attention alone (--attention)",
                          [](CLI::App* app) {
  auto c = std::make_shared<BenchCmd>();
  // Options of one mode only: given in the other, they are an error, not silently ignored.
  std::vector<CLI::Option*> model_only, attn_only;
  auto model = [&](CLI::Option* o) { model_only.push_back(o); };
  auto attn = [&](CLI::Option* o) { attn_only.push_back(o); };
  model(app->add_option("-m,--model", c->model_dir, "Hugging Face model directory"));
  model(app->add_option("--device", c->device, "cpu, cuda or auto")->capture_default_str());
  model(app->add_option("--threads", c->threads, "CPU threads (0: all cores)")->capture_default_str());
  app->add_option("--kv-sink", c->kv_sink, "first tokens kept exact (bf16) beside the compressed cache (default: the format's)");
  app->add_option("--kv-recent", c->kv_recent, "newest tokens kept exact (bf16) (default: the format's)");
  app->add_option("--kv-dtype", c->kv_dtype, "KV cache format (--attention: a comma-separated list)")
      ->capture_default_str();
  model(app->add_option("--weights", c->weights,
                        "bf16 (as stored), or quantise the projections at load: fp8, int8, int4")
            ->capture_default_str());
  model(app->add_option("--prompt", c->prompt, "prompt tokens for the prefill measurement (0: skip)")
            ->capture_default_str());
  model(app->add_option("--gen", c->gen, "decode steps to time (0: skip)")->capture_default_str());
  model(app->add_option("--depth", c->depth, "context tokens before decoding starts")->capture_default_str());
  app->add_option("--batch", c->batch_list,
                  "sequences decoded together, a list (default 1; --attention: default 1,8); without --attention "
                  "`max` is as many as the KV pool holds at --depth");
  model(app->add_option("--prefix-ttft", c->prefix_ttft,
                        "time to first token of an N-token prompt cold, then sent again (served from the prefix "
                        "cache; median of --repeats)"));
  model(app->add_flag("--once", c->once,
                      "prefill --prompt once (no warm-up), then decode --gen steps on that sequence; prints wall time "
                      "and peak memory (for very long prompts)"));
  model(app->add_option("--random-weights", c->random_weights,
                        "random bf16 weights of --model's config.json made in memory with this seed (no weight files "
                        "read: speed runs of shapes whose checkpoints do not fit the disk)"));
  model(app->add_option("--max-context", c->max_context,
                        "tokens per sequence (default: what --prompt/--depth/--gen need, plus one page)"));
  model(app->add_flag("--max-depth", c->max_depth, "decode at the largest depth the automatically sized KV pool holds"));
  model(app->add_option("--fill-from", c->fill_from,
                        "prefill only this many tokens (a multiple of 64) and reach the depth by repeating their KV pages")
            ->capture_default_str());
  model(app->add_option("--memory-budget,--gpu-memory-budget", c->memory_budget,
                        "plan the KV pool as if the device had this much memory"));
  app->add_option("--repeats", c->repeats, "prefill repeats (median reported)")->capture_default_str();
  model(app->add_option("--chunk", c->chunk, "prefill tokens per forward call")->capture_default_str());
  app->add_flag("--json", c->json_out, "also print the results as one JSON document (before the table)");
  app->add_flag("--attention", c->attention, "benchmark one decode step of paged attention alone");
  attn(app->add_option("--ctx", c->ctx_list, "--attention: context lengths")->capture_default_str());
  attn(app->add_option("--heads", c->heads, "--attention: q heads / kv heads")->capture_default_str());
  attn(app->add_option("--head-dim", c->head_dim, "--attention: head_dim (64, 128, 256)")->capture_default_str());
  attn(app->add_option("--queries", c->n_query, "--attention: query tokens per sequence")->capture_default_str());
  attn(app->add_option("--window", c->window,
                       "--attention: sliding window of the attention (keys p - N < k <= p; 0: none)")
           ->capture_default_str());
  attn(app->add_option("--splits", c->splits_list,
                       "--attention: KV splits forced on the kernels, a list (1 to 128; default: the planner's choice)"));
  attn(app->add_flag("--cold-l2", c->cold_l2,
                     "--attention: overwrite a buffer of twice the L2 size before each timed repeat (default: the "
                     "repeats run back to back, as the peer baseline's do)"));
  attn(app->add_flag("--graph", c->graph,
                     "--attention: time CUDA-graph replays of 20 steps back to back (the time per step without the "
                     "host's launch costs; default: each step launched and timed on its own)"));
  app->callback([c, model_only, attn_only]() {
    for (const CLI::Option* o : c->attention ? model_only : attn_only)
      if (o->count() > 0)
        fail("bench: {} {} --attention", o->get_name(), c->attention ? "does not apply with" : "applies only with");
    if (c->attention) {
      if (c->graph && c->cold_l2)
        fail("bench --attention: --graph and --cold-l2 do not combine (the graph replays steps back to back)");
      run_attention(*c);
    } else {
      BenchCmd m = *c;
      m.batches = parse_batch_list(c->batch_list.empty() ? "1" : c->batch_list);
      m.batch = std::max(1, *std::max_element(m.batches.begin(), m.batches.end()));
      if (m.prefix_ttft > 0) {
        if (m.once || m.max_depth || m.depth > 0 || m.fill_from > 0 || m.batches != std::vector<int>{1})
          fail("bench: --prefix-ttft times one prompt: it does not combine with --once, --max-depth, --depth, "
               "--fill-from or --batch");
        run_prefix_ttft(m);
      } else {
        run_model(m);
      }
    }
  });
});

}  // namespace
}  // namespace ninfer::app
