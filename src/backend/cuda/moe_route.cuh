// The MoE router's top-k selection for one token by one warp: the standalone routing kernel
// (ops.cu moe_route_kernel) and the router GEMV's last block (gemv.cu, GemvFuse) both call it,
// so fused and separate routing choose the same experts with the same weights.
//
// Softmax over the E logits (fp32 exp(l - max), the sum in double as the CPU's), then k rounds
// of a warp argmax by probability, ties to the lower expert (the CPU's stable sort),
// renormalised when norm. Lane i holds experts i, i + 32, ... Logits are read through L2
// (__ldcg): the fused caller reads what other blocks of its grid wrote.
#pragma once
#include "backend/cuda/device_utils.cuh"

namespace ninfer::cuda {

constexpr int kRouteMaxExperts = 256, kRoutePerLane = kRouteMaxExperts / 32;

// lg: [n_experts] one token's logits; ids, w: [k] that token's choices (lane 0 writes them).
__device__ __forceinline__ void route_token(const float* lg, int n_experts, int k, bool norm, int32_t* ids, float* w) {
  const int lane = threadIdx.x % 32;
  float p[kRoutePerLane];
  float mx = -INFINITY;
#pragma unroll
  for (int i = 0; i < kRoutePerLane; ++i) {
    const int e = lane + 32 * i;
    p[i] = e < n_experts ? __ldcg(lg + e) : -INFINITY;
    mx = fmaxf(mx, p[i]);
  }
  mx = warp_max(mx);
  double sum = 0;
#pragma unroll
  for (int i = 0; i < kRoutePerLane; ++i) {
    p[i] = lane + 32 * i < n_experts ? expf(p[i] - mx) : 0.0f;
    sum += double(p[i]);
  }
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  // Probabilities are >= 0; -1 marks a slot past the experts, -2 one already taken.
#pragma unroll
  for (int i = 0; i < kRoutePerLane; ++i) p[i] = lane + 32 * i < n_experts ? float(double(p[i]) / sum) : -1.0f;
  float top = 0;
  for (int j = 0; j < k; ++j) {
    float bp = -3.0f;
    int be = 0;
#pragma unroll
    for (int i = 0; i < kRoutePerLane; ++i)
      if (p[i] > bp) {
        bp = p[i];
        be = lane + 32 * i;
      }
    for (int o = 16; o > 0; o >>= 1) {
      const float op = __shfl_xor_sync(0xffffffffu, bp, o);
      const int oe = __shfl_xor_sync(0xffffffffu, be, o);
      if (op > bp || (op == bp && oe < be)) {
        bp = op;
        be = oe;
      }
    }
#pragma unroll
    for (int i = 0; i < kRoutePerLane; ++i)
      if (lane + 32 * i == be) p[i] = -2.0f;
    if (lane == 0) {
      ids[j] = be;
      w[j] = bp;
    }
    top += bp;
  }
  if (norm && lane == 0)
    for (int j = 0; j < k; ++j) w[j] /= top;
}

}  // namespace ninfer::cuda
