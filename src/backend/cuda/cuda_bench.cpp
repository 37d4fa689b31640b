// Benchmarks that need the GPU directly (cuda_backend.h): copy bandwidth and one decode step
// of paged attention on synthetic data. Timings use CUDA events around each repeat, after
// warm-up; medians are reported.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "backend/cuda/attention.h"
#include "backend/cuda/bench_support.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kv_cache.h"
#include "core/error.h"
#include "kv/capacity.h"
#include "kv/format.h"
#include "kv/page_table.h"

namespace ninfer {
namespace {

struct DevMem {
  void* p = nullptr;
  explicit DevMem(size_t bytes) {
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
      cudaGetLastError();
      fail("CUDA out of memory allocating {:.1f} MiB for the benchmark", bytes / 1048576.0);
    }
  }
  ~DevMem() { cudaFree(p); }
  template <typename T>
  T* as() const {
    return static_cast<T*>(p);
  }
};

// Event-timed repeats of fn after warm-up on stream s, sorted; before each repeat (outside the
// events) runs `before`.
template <typename F, typename B>
std::vector<float> time_events(F&& fn, int warmup, int repeats, B&& before, cudaStream_t s = nullptr) {
  cudaEvent_t a, b;
  NINFER_CUDA_CHECK(cudaEventCreate(&a));
  NINFER_CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < warmup; ++i) fn();
  NINFER_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> ms;
  for (int i = 0; i < repeats; ++i) {
    before();
    NINFER_CUDA_CHECK(cudaEventRecord(a, s));
    fn();
    NINFER_CUDA_CHECK(cudaEventRecord(b, s));
    NINFER_CUDA_CHECK(cudaEventSynchronize(b));
    float t = 0;
    NINFER_CUDA_CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms;
}
template <typename F>
std::vector<float> time_events(F&& fn, int warmup, int repeats) {
  return time_events(fn, warmup, repeats, [] {});
}

// The KV pools of the process's attention benchmarks (cuda_bench_reserve_kv): one allocation
// that every later call carves its pools from, null until reserved.
std::unique_ptr<DevMem> g_kv_arena;
size_t g_kv_arena_bytes = 0;

size_t pool_bytes(const AttentionBenchConfig& cfg, cuda::CacheKind kind, int side) {
  const size_t n_pages = size_t((cfg.ctx + kPageSize - 1) / kPageSize) * size_t(cfg.batch);
  return n_pages * size_t(cfg.n_kv_heads) * cuda::cache_block_bytes(kind, cfg.head_dim, side);
}
size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

}  // namespace

double cuda_copy_bandwidth(size_t bytes) {
  DevMem a(bytes), b(bytes);
  NINFER_CUDA_CHECK(cudaMemset(a.p, 1, bytes));
  const auto ms = time_events([&] { NINFER_CUDA_CHECK(cudaMemcpyAsync(b.p, a.p, bytes, cudaMemcpyDeviceToDevice, nullptr)); }, 3, 20);
  return 2.0 * double(bytes) / (double(ms[ms.size() / 2]) * 1e-3);
}

AttentionBenchResult cuda_bench_decode_attention(const AttentionBenchConfig& cfg) {
  const KvFormat& fmt = find_kv_format(cfg.kv_dtype);
  cuda::CacheKind kind;
  if (!cuda::cache_kind_for(fmt.name, &kind))
    fail("--kv-dtype {} has no CUDA kernels yet (bench --attention supports bf16, int8, fp8, nvfp4, "
         "k8v4, int4, rk4v4-e8 and rk2v4-e8)", fmt.name);
  fmt.check_head_dim(cfg.head_dim);
  // NOTE: the kernels' own widths; a model of head_dim 96 runs them at 128 on zero-padded rows
  // (kv/capacity.h, cuda_kv_head_dim), which --head-dim 128 times.
  if (cfg.head_dim != 64 && cfg.head_dim != 128 && cfg.head_dim != 256) {
    const int padded = cuda_kv_head_dim(cfg.head_dim);
    if (padded > 0)
      fail("--head-dim {}: the attention kernels take head_dim 64, 128 and 256; the backend runs head_dim {} as {} "
           "(zero-padded rows): time --head-dim {}", cfg.head_dim, cfg.head_dim, padded, padded);
    fail("--head-dim {}: the attention kernels take head_dim 64, 128 and 256", cfg.head_dim);
  }
  if (cfg.n_kv_heads <= 0 || cfg.n_heads % cfg.n_kv_heads != 0)
    fail("--heads {}/{}: q heads must be a multiple of kv heads", cfg.n_heads, cfg.n_kv_heads);
  if (cfg.ctx < cfg.n_query || cfg.batch < 1) fail("--ctx and --batch must be positive");
  if (cfg.splits < 0 || cfg.splits > cuda::kMaxSplits)
    fail("--splits {}: the kernels take 1 to {} KV splits", cfg.splits, cuda::kMaxSplits);
  if (cfg.window < 0) fail("--window {}: a sliding window is >= 1 key (0: none)", cfg.window);
  const int d = cfg.head_dim, nkv = cfg.n_kv_heads, nh = cfg.n_heads;
  const int pages_per_seq = (cfg.ctx + kPageSize - 1) / kPageSize;
  const int n_pages = pages_per_seq * cfg.batch;
  // K and V pools: carved from the reserved arena when it holds them, else allocated here.
  const size_t k_bytes = pool_bytes(cfg, kind, 0), v_bytes = pool_bytes(cfg, kind, 1);
  std::unique_ptr<DevMem> own_k, own_v;
  uint8_t* k_pool = nullptr;
  uint8_t* v_pool = nullptr;
  if (g_kv_arena && round_up(k_bytes, 256) + v_bytes <= g_kv_arena_bytes) {
    k_pool = g_kv_arena->as<uint8_t>();
    v_pool = k_pool + round_up(k_bytes, 256);
  } else {
    own_k = std::make_unique<DevMem>(k_bytes);
    own_v = std::make_unique<DevMem>(v_bytes);
    k_pool = own_k->as<uint8_t>();
    v_pool = own_v->as<uint8_t>();
  }
  // Zeroed, as the engine's pool: the slots past the context hold finite scales (PagedAttention::run).
  NINFER_CUDA_CHECK(cudaMemset(k_pool, 0, k_bytes));
  NINFER_CUDA_CHECK(cudaMemset(v_pool, 0, v_bytes));
  // Physical pages handed out in a shuffled order, as a long-running server would have them.
  std::vector<int32_t> perm(static_cast<size_t>(n_pages));
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937 rng(uint32_t(cfg.seed));
  std::shuffle(perm.begin(), perm.end(), rng);
  // Fill the cache through the append kernel from random rows, 32K tokens at a time.
  {
    const int chunk = 32768;
    const int ld = 2 * nkv * d;
    DevMem src(size_t(chunk) * ld * 4), pg(size_t(chunk) * 4), sl(size_t(chunk) * 4);
    std::vector<int32_t> hp, hs;
    for (int b = 0; b < cfg.batch; ++b) {
      for (int t0 = 0; t0 < cfg.ctx; t0 += chunk) {
        const int n = std::min(chunk, cfg.ctx - t0);
        hp.resize(size_t(n));
        hs.resize(size_t(n));
        for (int i = 0; i < n; ++i) {
          const int p = t0 + i;
          hp[size_t(i)] = perm[size_t(b * pages_per_seq + p / kPageSize)];
          hs[size_t(i)] = p % kPageSize;
        }
        NINFER_CUDA_CHECK(cudaMemcpy(pg.p, hp.data(), size_t(n) * 4, cudaMemcpyHostToDevice));
        NINFER_CUDA_CHECK(cudaMemcpy(sl.p, hs.data(), size_t(n) * 4, cudaMemcpyHostToDevice));
        cuda::launch_fill_uniform(src.as<float>(), size_t(n) * ld, cfg.seed * 1000003u + uint64_t(b) * 7919u + uint64_t(t0),
                                  1.0f, nullptr);
        cuda::KvAppendParams ap;
        ap.src = src.as<float>();
        ap.ld = ld;
        ap.k_col = 0;
        ap.v_col = nkv * d;
        ap.tok_page = pg.as<int32_t>();
        ap.tok_slot = sl.as<int32_t>();
        ap.k_pool = k_pool;
        ap.v_pool = v_pool;
        ap.n_tokens = n;
        ap.n_kv_heads = nkv;
        ap.head_dim = d;
        ap.kind = kind;
        ap.k_rotate = fmt.k.rotation == KvRotation::HadamardHead;
        cuda::launch_kv_append(ap, nullptr);
      }
    }
    NINFER_CUDA_CHECK(cudaDeviceSynchronize());
  }
  const int T = cfg.batch * cfg.n_query;
  DevMem q(size_t(T) * nh * d * 4), out(size_t(T) * nh * d * 2);
  cuda::launch_fill_uniform(q.as<float>(), size_t(T) * nh * d, cfg.seed + 17, 2.0f, nullptr);
  std::vector<std::vector<int32_t>> tables(static_cast<size_t>(cfg.batch));
  std::vector<cuda::AttnSeq> seqs;
  for (int b = 0; b < cfg.batch; ++b) {
    tables[size_t(b)].assign(perm.begin() + long(b) * pages_per_seq, perm.begin() + long(b + 1) * pages_per_seq);
    seqs.push_back({b * cfg.n_query, cfg.n_query, cfg.ctx - cfg.n_query, tables[size_t(b)].data(), pages_per_seq});
  }
  cuda::AttnShape shape{nh, nkv, d, kind, int(fmt.k.rotation), int(fmt.v.rotation)};
  shape.window = cfg.window;
  cuda::PagedAttention attn(shape);
  if (cfg.splits > 0) attn.force_splits(cfg.splits);
  attn.plan(seqs.data(), int(seqs.size()), T, nullptr);
  // --cold-l2: the repeats otherwise find whatever of the cache the L2 kept from the last one
  // (all of it when the cache is smaller than the L2, as a compressed one at batch 1 can be),
  // which a decode step of a whole model, reading every layer's weights and KV, does not.
  std::unique_ptr<DevMem> flush;
  size_t flush_bytes = 0;
  if (cfg.cold_l2) {
    int l2_bytes = 0;
    NINFER_CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, 0));
    flush_bytes = std::max<size_t>(size_t(2) * size_t(l2_bytes), size_t(64) << 20);
    flush = std::make_unique<DevMem>(flush_bytes);
  }
  auto step = [&](cudaStream_t s) {
    // history_ready: the cache is filled once, before the timed steps, which only read it (as
    // the engine's older slots); q_ready: so is q (the engine's is complete before the KV
    // append, the attention's predecessor, starts).
    attn.run(q.as<float>(), nh * d, k_pool, v_pool, out.as<uint16_t>(), nh * d, s, true, true);
  };
  std::vector<float> ms;
  if (!cfg.graph) {
    const int warmup = cfg.n_query >= 16384 ? 1 : 5;  // a long prompt's call warms up everything at once
    ms = time_events([&] { step(nullptr); }, warmup, std::max(1, cfg.repeats), [&] {
      if (flush) NINFER_CUDA_CHECK(cudaMemsetAsync(flush->p, 0, flush_bytes, nullptr));
    });
  } else {
    // --graph: kGraphSteps steps captured in one CUDA graph (as the engine replays its decode
    // steps), replayed back to back; the time per step leaves out the host's launch costs.
    if (cfg.cold_l2) fail("bench --attention: --graph and --cold-l2 do not combine");
    constexpr int kGraphSteps = 20;
    struct GraphRun {  // released also when a check below throws
      cudaStream_t st = nullptr;
      cudaGraph_t graph = nullptr;
      cudaGraphExec_t exec = nullptr;
      ~GraphRun() {
        if (exec) cudaGraphExecDestroy(exec);
        if (graph) cudaGraphDestroy(graph);
        if (st) cudaStreamDestroy(st);
      }
    } g;
    NINFER_CUDA_CHECK(cudaStreamCreateWithFlags(&g.st, cudaStreamNonBlocking));
    for (int i = 0; i < 3; ++i) step(g.st);
    NINFER_CUDA_CHECK(cudaStreamSynchronize(g.st));
    NINFER_CUDA_CHECK(cudaStreamBeginCapture(g.st, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < kGraphSteps; ++i) step(g.st);
    NINFER_CUDA_CHECK(cudaStreamEndCapture(g.st, &g.graph));
    NINFER_CUDA_CHECK(cudaGraphInstantiate(&g.exec, g.graph, 0));
    ms = time_events([&] { NINFER_CUDA_CHECK(cudaGraphLaunch(g.exec, g.st)); }, 2, std::max(1, cfg.repeats / 2), [] {},
                     g.st);
    for (float& t : ms) t /= float(kGraphSteps);
  }
  AttentionBenchResult r;
  r.median_ms = ms[ms.size() / 2];
  r.min_ms = ms.front();
  // With a window, the keys the last query sees (the kernels read the pages that hold them).
  const int seen = cfg.window > 0 ? std::min(cfg.ctx, cfg.window) : cfg.ctx;
  r.kv_bytes = double(cfg.batch) * seen * nkv * double(fmt.bytes_per_head_token(d));
  r.gbps = r.kv_bytes / (r.median_ms * 1e-3) / 1e9;
  r.splits = cfg.n_query * (nh / nkv) <= 16 ? attn.splits(0) : attn.splits(1);
  cudaDeviceProp prop{};
  NINFER_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  r.device_name = prop.name;
  return r;
}

size_t cuda_bench_kv_bytes(const AttentionBenchConfig& cfg) {
  // A row the benchmark will refuse reserves nothing (its own call names what is wrong).
  cuda::CacheKind kind;
  if (cfg.head_dim != 64 && cfg.head_dim != 128 && cfg.head_dim != 256) return 0;
  if (cfg.ctx < 1 || cfg.batch < 1 || cfg.n_kv_heads < 1) return 0;
  if (!cuda::cache_kind_for(find_kv_format(cfg.kv_dtype).name, &kind)) return 0;
  return round_up(pool_bytes(cfg, kind, 0), 256) + pool_bytes(cfg, kind, 1);
}

void cuda_bench_reserve_kv(size_t bytes) {
  if (bytes <= g_kv_arena_bytes) return;
  g_kv_arena.reset();
  g_kv_arena_bytes = 0;
  g_kv_arena = std::make_unique<DevMem>(bytes);
  g_kv_arena_bytes = bytes;
}

}  // namespace ninfer
