// Probe (session 13, docs/BENCHMARKS.md): can the batch-1 split merge move into a thread-block
// cluster? A: split-KV partials through global memory and a PDL merge kernel (the engine's
// scheme, reduced to a timed spin per CTA); B: 16-CTA clusters of 256 threads, one CTA per SM,
// merging through distributed shared memory. Prints how many 16-CTA clusters fit at once and
// the per-step time of each scheme in CUDA graphs of 20 steps.
//   nvcc -O3 -arch=sm_90 -std=c++17 bench/probes/cluster_merge_probe.cu -o /tmp/cl && /tmp/cl
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cooperative_groups.h>
#include <cuda_runtime.h>
namespace cg = cooperative_groups;
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)
constexpr int KVH = 8, ROWS = 4, D = 128;
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
__device__ __forceinline__ void pdl_go() { asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory"); }
__device__ __forceinline__ void spin(long long c) { long long t0 = clock64(); while (clock64() - t0 < c) {} }

// A: grid (splits, KVH), 128 threads
__global__ void dec_a(float* part, float* ml, int splits, long long busy) {
  extern __shared__ float pad[];
  pdl_wait();
  spin(busy);
  pdl_go();
  const int s = blockIdx.x, h = blockIdx.y;
  for (int i = threadIdx.x; i < ROWS * D; i += blockDim.x) part[((size_t)s * KVH + h) * ROWS * D + i] = s + i * 1e-3f + pad[0] * 0;
  if (threadIdx.x < ROWS) { ml[(((size_t)s * KVH + h) * ROWS + threadIdx.x) * 2] = s * 0.01f; ml[(((size_t)s * KVH + h) * ROWS + threadIdx.x) * 2 + 1] = 1.0f; }
}
// merge: grid (ROWS*2, KVH), 64 threads... use 128 threads, split groups of 2
__global__ void merge_a(const float* part, const float* ml, float* out, int splits) {
  const int r = blockIdx.x / 2, c0 = (blockIdx.x % 2) * 64, h = blockIdx.y;
  __shared__ float w[64];
  __shared__ float red[128];
  pdl_wait();
  pdl_go();
  if (threadIdx.x < 32) {
    float mx = -1e30f; float m[2];
    for (int i = 0; i < 2; ++i) { int s = threadIdx.x + 32 * i; m[i] = s < splits ? ml[(((size_t)s * KVH + h) * ROWS + r) * 2] : -1e30f; mx = fmaxf(mx, m[i]); }
    for (int o = 16; o; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(~0u, mx, o));
    for (int i = 0; i < 2; ++i) { int s = threadIdx.x + 32 * i; if (s < splits) w[s] = exp2f(m[i] - mx); }
  }
  __syncthreads();
  const int c = threadIdx.x % 64, sg = threadIdx.x / 64;
  float acc = 0;
  for (int s = sg; s < splits; s += 2) acc += w[s] * part[((size_t)s * KVH + h) * ROWS * D + r * D + c0 + c];
  red[threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.x < 64) out[(h * ROWS + r) * D + c0 + c] = red[c] + red[64 + c];
}
// B: grid (16, KVH) clusters (16,1,1), 256 threads
__global__ void dec_b(float* out, long long busy) {
  extern __shared__ float pad[];
  __shared__ float O[ROWS * D];
  __shared__ float M[ROWS];
  cg::cluster_group cl = cg::this_cluster();
  pdl_wait();
  spin(busy);
  pdl_go();
  const int s = blockIdx.x, h = blockIdx.y;
  for (int i = threadIdx.x; i < ROWS * D; i += blockDim.x) O[i] = s + i * 1e-3f + pad[0] * 0;
  if (threadIdx.x < ROWS) M[threadIdx.x] = s * 0.01f;
  cl.sync();
  const int rank = cl.block_rank();
  if (rank < 8 && threadIdx.x < 64) {
    const int r = rank / 2, c0 = (rank % 2) * 64;
    float m[16], mx = -1e30f;
    for (int p = 0; p < 16; ++p) { m[p] = cl.map_shared_rank(M, p)[r]; mx = fmaxf(mx, m[p]); }
    float acc = 0;
    for (int p = 0; p < 16; ++p) acc += exp2f(m[p] - mx) * cl.map_shared_rank(O, p)[r * D + c0 + threadIdx.x];
    out[(h * ROWS + r) * D + c0 + threadIdx.x] = acc;
  }
  cl.sync();
}
template <class F> float graph_time(cudaStream_t st, F step) {
  cudaGraph_t g; cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < 20; ++i) step();
  CK(cudaStreamEndCapture(st, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  std::vector<float> v;
  for (int r = 0; r < 15; ++r) {
    CK(cudaEventRecord(a, st)); CK(cudaGraphLaunch(ge, st)); CK(cudaEventRecord(b, st)); CK(cudaEventSynchronize(b));
    float ms; cudaEventElapsedTime(&ms, a, b); v.push_back(ms * 1000 / 20);
  }
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
int main() {
  cudaStream_t st; CK(cudaStreamCreate(&st));
  float *part, *ml, *out; CK(cudaMalloc(&part, 64 * KVH * ROWS * D * 4)); CK(cudaMalloc(&ml, 64 * KVH * ROWS * 8)); CK(cudaMalloc(&out, KVH * ROWS * D * 4));
  const int padA = 100 * 1024, padB = 150 * 1024;
  CK(cudaFuncSetAttribute(dec_a, cudaFuncAttributeMaxDynamicSharedMemorySize, padA));
  CK(cudaFuncSetAttribute(dec_b, cudaFuncAttributeMaxDynamicSharedMemorySize, padB));
  CK(cudaFuncSetAttribute(dec_b, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  cudaLaunchAttribute pdl; pdl.id = cudaLaunchAttributeProgrammaticStreamSerialization; pdl.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchAttribute clu; clu.id = cudaLaunchAttributeClusterDimension; clu.val.clusterDim.x = 16; clu.val.clusterDim.y = 1; clu.val.clusterDim.z = 1;
  {
    cudaLaunchConfig_t cfg = {}; cfg.gridDim = dim3(16, KVH); cfg.blockDim = dim3(256); cfg.dynamicSmemBytes = padB; cfg.stream = st;
    cudaLaunchAttribute at[1] = {clu}; cfg.attrs = at; cfg.numAttrs = 1;
    int n = -1; CK(cudaOccupancyMaxActiveClusters(&n, dec_b, &cfg)); printf("max active 16-clusters (1 CTA/SM): %d\n", n);
    cfg.dynamicSmemBytes = 0; n = -1; CK(cudaOccupancyMaxActiveClusters(&n, dec_b, &cfg)); printf("max active 16-clusters (no pad): %d\n", n);
  }
  for (long long busy : {0LL, 5000LL, 15000LL}) {
    for (int splits : {32}) {
      auto stepA = [&] {
        cudaLaunchConfig_t cfg = {}; cfg.gridDim = dim3(splits, KVH); cfg.blockDim = dim3(128); cfg.dynamicSmemBytes = padA; cfg.stream = st;
        cfg.attrs = &pdl; cfg.numAttrs = 1;
        CK(cudaLaunchKernelEx(&cfg, dec_a, part, ml, splits, busy));
        cudaLaunchConfig_t c2 = {}; c2.gridDim = dim3(ROWS * 2, KVH); c2.blockDim = dim3(128); c2.stream = st; c2.attrs = &pdl; c2.numAttrs = 1;
        CK(cudaLaunchKernelEx(&c2, merge_a, (const float*)part, (const float*)ml, out, splits));
      };
      auto stepA0 = [&] {
        cudaLaunchConfig_t cfg = {}; cfg.gridDim = dim3(splits, KVH); cfg.blockDim = dim3(128); cfg.dynamicSmemBytes = padA; cfg.stream = st;
        cfg.attrs = &pdl; cfg.numAttrs = 1;
        CK(cudaLaunchKernelEx(&cfg, dec_a, part, ml, splits, busy));
      };
      auto stepB = [&] {
        cudaLaunchConfig_t cfg = {}; cfg.gridDim = dim3(16, KVH); cfg.blockDim = dim3(256); cfg.dynamicSmemBytes = padB; cfg.stream = st;
        cudaLaunchAttribute at[2] = {pdl, clu}; cfg.attrs = at; cfg.numAttrs = 2;
        CK(cudaLaunchKernelEx(&cfg, dec_b, out, busy));
      };
      stepA(); stepB(); CK(cudaStreamSynchronize(st));
      float ta = graph_time(st, stepA), ta0 = graph_time(st, stepA0), tb = graph_time(st, stepB);
      printf("busy %6lld cycles: A decode+merge %.2f us, A decode only %.2f us, B cluster %.2f us\n", busy, ta, ta0, tb);
    }
  }
  return 0;
}
