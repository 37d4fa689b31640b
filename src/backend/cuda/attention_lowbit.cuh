// Attention over the minifloat KV kinds (fp8, nvfp4, k8v4; layout in kv_cache.h). Included by
// attention.cu inside its anonymous namespace, after the shared helpers (KernelParams,
// SmemLayout, load_q_tile, write_tile, swz) and before the prefill kernel, which calls
// expand_lowbit_tile for its KIND 3.
//
// Per side a lowbit row is either fp8 (e4m3 codes, one fp16 scale per row) or nvfp4 (e2m1
// pairs, one e4m3 scale per 16 values). Both expand *exactly* to 16-bit floats (kv_lowbit.cuh):
// an e4m3 code value (the fp8 row scale kept apart), or an e2m1 value times its e4m3 block
// scale (at most 6 significant bits, in [2^-10, 2688]).
//  - decode (decode_lowbit_kernel, below): the bf16 decode kernel's warp-independent walk on
//    fp16 tensor cores; each warp's cp.async ring holds its raw 16-key slices (codes and
//    scales as stored) and the warp expands a slice with a few integer operations per value
//    (__byte_perm tables and shifts, no fp32 round trip) into one fp16 working tile (K, then
//    V). Details and the scale folding at the kernel.
//  - prefill (paged_attention_kernel<D, 3, MT>): page blocks are copied as stored, and
//    expand_lowbit_tile writes the bf16 working tiles; there fp8 values are code * scale
//    rounded to bf16 (2^-9, the budget of the int8 prefill), nvfp4 values are exact.

template <int D>
void launch_merge(const KernelParams& kp, int n_work, int rows, cudaStream_t s, int decode_smem_per_sm = 0);  // attention.cu

// Prefill (KIND 3): rows [0, rows) of a stored block (codes [rows][cb], scales [rows][sb]) ->
// swizzled bf16 [rows][D] tile, scales applied; rows >= valid become 0.
template <int D>
__device__ __forceinline__ void expand_lowbit_tile(const KernelParams& p, int side, const uint8_t* src, int rows,
                                                   int valid, uint8_t* dst, int tid0, int nthr) {
  constexpr int CPR = D / 8;
  const bool nv = cache_side_nvfp4(CacheKind(p.fmt), side);
  const int cb = side == 0 ? p.k_cb : p.v_cb;
  const int sb = nv ? D / 16 : 2;
  const uint8_t* scales = src + rows * cb;
  for (int u = tid0; u < rows * CPR; u += nthr) {
    const int r = u / CPR, c = u % CPR;
    uint4 w = make_uint4(0, 0, 0, 0);
    if (r < valid) {
      const uint8_t* sc = scales + r * sb;
      const float mul = nv ? 1.0f : __half2float(__ushort_as_half(*reinterpret_cast<const uint16_t*>(sc)));
      w = expand_lowbit8(nv, src + r * cb, sc, c, mul);
    }
    *reinterpret_cast<uint4*>(dst + r * D * 2 + swz(r, c) * 16) = w;
  }
}

// ---- fp16 helpers of the decode kernel ----
__device__ __forceinline__ void mma_f16_16816(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// Two floats -> f16x2 (lo in the low half), round to nearest even.
__device__ __forceinline__ uint32_t cvt_f16x2(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ uint32_t hmul2_u32(uint32_t a, uint32_t b) {
  uint32_t r;
  asm("mul.rn.f16x2 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(b));
  return r;
}

// Four e4m3 codes (bytes of w) -> two f16x2 words (codes 0, 1 and 2, 3), each value times
// 2^-8, exactly: the code's 7 magnitude bits placed at fp16 bits 7..13 (normal and subnormal
// codes alike; subnormal e4m3 codes become fp16 subnormals), the sign at bit 15.
__device__ __forceinline__ void e4m3x4_to_f16x4(uint32_t w, uint32_t& h0, uint32_t& h1) {
  const uint32_t t0 = __byte_perm(w, 0u, 0x1404), t1 = __byte_perm(w, 0u, 0x3424);  // code << 8 per half
  h0 = (t0 & 0x80008000u) | ((t0 >> 1) & 0x3F803F80u);
  h1 = (t1 & 0x80008000u) | ((t1 >> 1) & 0x3F803F80u);
}

// Eight e2m1 nibbles (value i at bits 4i..4i+3 of q) -> four f16x2 words of the exact values
// (values 2j, 2j+1 in word j). Every e2m1 magnitude is an fp16 whose low byte is zero: its high
// byte comes from an 8-entry byte table through __byte_perm, the sign is OR-ed in.
__device__ __forceinline__ void e2m1x8_to_f16x8(uint32_t q, uint32_t h[4]) {
  constexpr uint32_t kLo = 0x3E3C3800u, kHi = 0x46444240u;  // 0, .5, 1, 1.5 | 2, 3, 4, 6
  uint32_t m0 = __byte_perm(kLo, kHi, q & 0x7777u);           // high bytes of values 0..3
  uint32_t m1 = __byte_perm(kLo, kHi, (q >> 16) & 0x7777u);   // values 4..7
  // Sign bits (bit 3 of each nibble) -> bit 7 of the byte of that value.
  const uint32_t even = q & 0x08080808u, odd = (q >> 4) & 0x08080808u;
  m0 |= __byte_perm(even, odd, 0x5140) << 4;
  m1 |= __byte_perm(even, odd, 0x7362) << 4;
  h[0] = __byte_perm(m0, 0u, 0x1404);
  h[1] = __byte_perm(m0, 0u, 0x3424);
  h[2] = __byte_perm(m1, 0u, 0x1404);
  h[3] = __byte_perm(m1, 0u, 0x3424);
}

// 8 values (chunk c) of a raw row as 4 f16x2 words: fp8 codes times 2^-8 (scale kept apart),
// or nvfp4 values times their e4m3 block scale (exact: <= 6 significant bits, in [2^-10, 2688]).
__device__ __forceinline__ uint4 expand_lowbit8_f16(bool nv, const uint8_t* codes, const uint8_t* sc, int c) {
  uint4 w;
  if (nv) {
    uint32_t h[4];
    e2m1x8_to_f16x8(*reinterpret_cast<const uint32_t*>(codes + 4 * c), h);
    const uint32_t s16 = uint32_t(__half_as_ushort(__float2half_rn(e4m3_to_f32_dev(sc[c / 2]))));
    const uint32_t s2 = s16 | (s16 << 16);
    w.x = hmul2_u32(h[0], s2);
    w.y = hmul2_u32(h[1], s2);
    w.z = hmul2_u32(h[2], s2);
    w.w = hmul2_u32(h[3], s2);
  } else {
    const uint2 q = *reinterpret_cast<const uint2*>(codes + 8 * c);
    e4m3x4_to_f16x4(q.x, w.x, w.y);
    e4m3x4_to_f16x4(q.y, w.z, w.w);
  }
  return w;
}

// Shared memory sized for occupancy (registers allow 4 / 3 / 2 CTAs per SM at head_dim 64 /
// 128 / 256): raw-slice ring depth 4 / 3 / 2 and one fp16 working tile per warp (K, then V).
template <int D, bool KN, bool VN>
struct DecodeLowbitLayout {
  static constexpr int STAGES = D == 256 ? 2 : (D == 128 ? 3 : 4);
  static constexpr int kKcb = KN ? D / 2 : D, kKsb = KN ? D / 16 : 2;  // per row
  static constexpr int kVcb = VN ? D / 2 : D, kVsb = VN ? D / 16 : 2;
  // A raw slice: K codes [16][kKcb], K scales [16][kKsb], V codes [16][kVcb], V scales.
  static constexpr int rKs = 16 * kKcb, rV = rKs + 16 * kKsb, rVs = rV + 16 * kVcb;
  static constexpr int kRaw = rVs + 16 * kVsb;  // a multiple of 16
  static constexpr int kTile = 16 * D * 2;       // fp16 working tile
  static constexpr int kWarp = STAGES * kRaw + kTile;
  static constexpr int kRing = 4 * kWarp;
  static constexpr int kQf = 16 * D * 4;
  static constexpr int kOw = 4 * 16 * D * 4;
  static constexpr int kBig0 = kRing > kQf ? kRing : kQf;
  static constexpr int kBig = kBig0 > kOw ? kBig0 : kOw;
  static constexpr int QP = D + 8;
  static constexpr int oQs = (kBig + 127) / 128 * 128;
  static constexpr int oQinv = oQs + 16 * QP * 2;
  static constexpr int oRow = oQinv + 16 * 4;
  static constexpr int kBytes = oRow + (4 * 16 * 2 + 2 * 16) * 4;
  static_assert(kRaw % 16 == 0 && rKs % 16 == 0 && rV % 16 == 0 && rVs % 16 == 0, "16-byte cp.async pieces");
};

// Decode kernel of the lowbit kinds (KN / VN: K / V side is nvfp4, else fp8). fp16 tensor
// cores throughout:
//  - Q (rotated) is scaled per row by a power of two 2^k so that its amax lies in
//    [2^14, 2^15), rounded to fp16 (relative 2^-11, better than bf16's 2^-9); 2^-k goes
//    back on the score.
//  - K, V: each warp expands its raw 16-key slice with a few integer operations per value
//    into fp16 tiles: fp8 codes times 2^-8 (exact; the 2^8 and the fp8 row scale are
//    applied to the fp32 score for K), nvfp4 values times their block scale (exact).
//  - fp8 V: the row scale s_j of key j enters P V as p_j * s_j / s_ref, where s_ref is the
//    largest V scale of the valid keys the warp has seen so far (a running maximum, like the
//    softmax's: when it grows, O is rescaled by old / new together with the softmax factor),
//    so the fp16 A operand stays <= 1; O is multiplied by s_ref * 2^8 once at the end.
// EXT: the window's lower bounds and the softcap (KernelParams::ext).
template <int D, bool KN, bool VN, bool EXT>
__global__ void __launch_bounds__(kThreads) decode_lowbit_kernel(KernelParams p) {
  using L = DecodeLowbitLayout<D, KN, VN>;
  constexpr int STAGES = L::STAGES, CPR = D / 8, NT = D / 8;
  extern __shared__ __align__(128) uint8_t smem[];
  uint8_t* big = smem;
  uint16_t* Qs = reinterpret_cast<uint16_t*>(smem + L::oQs);
  float* qinv_s = reinterpret_cast<float*>(smem + L::oQinv);  // [16]
  float* m_w = reinterpret_cast<float*>(smem + L::oRow);  // m, l [4][16], mfin, lfin [16]: combine_warps_and_write

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int gq = lane / 4, cq = lane % 4;
  const DecodeTile t = decode_tile<16>(p);
  const int row0 = t.row0, kvh = t.kvh, split = t.split, tok0 = t.tok0, start = t.start, g = t.g, R = t.R;
  const int row_end = t.row_end, n_keys = t.n_keys, p_begin = t.p_begin, n_iter = t.n_iter;
  const int32_t* table = t.table;

  // ---- Q: fp32 -> rotate (K rotation) -> times 2^k per row -> fp16 ----
  {
    float* Qf = reinterpret_cast<float*>(big);
    load_q_rotated<D>(p, Qf, 16, row0, R, tok0, kvh);
    const int r = tid / 8, sub = tid % 8;  // 8 consecutive lanes per row
    float amax = 0.0f;
    for (int d = sub; d < D; d += 8) amax = fmaxf(amax, fabsf(Qf[r * D + d]));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 4));
    const int e = amax > 0.0f ? int((__float_as_uint(amax) >> 23) & 0xFF) - 127 : 0;
    const int k = min(max(14 - e, -126), 126);
    const float qmul = __uint_as_float(uint32_t(127 + k) << 23);
    for (int d = sub; d < D; d += 8) Qs[r * L::QP + d] = __half_as_ushort(__float2half_rn(Qf[r * D + d] * qmul));
    if (sub == 0) qinv_s[r] = __uint_as_float(uint32_t(127 - k) << 23);
    __syncthreads();
  }
  // Per-row factors of this thread's two rows (gq, gq + 8): Q's 2^-k times the softmax scale.
  const float qf0 = qinv_s[gq] * p.scale_log2, qf1 = qinv_s[gq + 8] * p.scale_log2;

  const int lim0 = row0 + gq < R ? start + (row0 + gq) / g : -1;
  const int lim1 = row0 + gq + 8 < R ? start + (row0 + gq + 8) / g : -1;
  const int lo0 = EXT ? window_lo(lim0, p.window) : 0, lo1 = EXT ? window_lo(lim1, p.window) : 0;

  uint8_t* wbase = big + warp * L::kWarp;
  uint8_t* Wt = wbase + STAGES * L::kRaw;  // the working tile after the raw ring: K, then V
  // The warp's 16 rows of a (page, kv head) block: codes, then scales; all pieces are
  // multiples of 16 bytes at 16-byte aligned offsets.
  auto load_slice = [&](int page, int stage) {
    uint8_t* dst = wbase + stage * L::kRaw;
    const uint8_t* kb = p.k_pool + (size_t(page) * p.n_kv_heads + kvh) * size_t(p.k_blk);
    const uint8_t* vb = p.v_pool + (size_t(page) * p.n_kv_heads + kvh) * size_t(p.v_blk);
    const uint8_t* kc = kb + size_t(warp * 16) * L::kKcb;
    const uint8_t* ks = kb + size_t(kPage) * L::kKcb + size_t(warp * 16) * L::kKsb;
    const uint8_t* vc = vb + size_t(warp * 16) * L::kVcb;
    const uint8_t* vs = vb + size_t(kPage) * L::kVcb + size_t(warp * 16) * L::kVsb;
    for (int u = lane; u < L::kKcb; u += 32) cp_async16(dst + u * 16, kc + u * 16, 16);
    for (int u = lane; u < L::kKsb; u += 32) cp_async16(dst + L::rKs + u * 16, ks + u * 16, 16);
    for (int u = lane; u < L::kVcb; u += 32) cp_async16(dst + L::rV + u * 16, vc + u * 16, 16);
    for (int u = lane; u < L::kVsb; u += 32) cp_async16(dst + L::rVs + u * 16, vs + u * 16, 16);
  };

  float o[NT][4];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
  float s_ref = 0.0f;  // fp8 V: running maximum of the valid keys' V scales (warp-uniform)

#pragma unroll 1
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < n_iter) load_slice(table[p_begin + s], s);
    cp_async_commit();
  }
  int next_page = STAGES - 1 < n_iter ? table[p_begin + STAGES - 1] : 0;

#pragma unroll 1
  for (int it = 0; it < n_iter; ++it) {
    cp_async_wait<STAGES - 2>();
    __syncwarp();
    {
      // NOTE: the stage being refilled was last read (expanded) in iteration it - 1.
      const int nx = it + STAGES - 1;
      if (nx < n_iter) load_slice(next_page, nx % STAGES);
      cp_async_commit();
      if (nx + 1 < n_iter) next_page = table[p_begin + nx + 1];
    }
    const int pg = p_begin + it;
    const int key0 = pg * kPage + warp * 16;
    if (key0 >= n_keys) continue;  // this warp's slice of the last page is empty
    const uint8_t* raw = wbase + (it % STAGES) * L::kRaw;

    // Expand the raw K slice into the fp16 working tile (last read by this warp, as V, in
    // iteration it - 1, ordered by the __syncwarp above). Rows past the valid keys hold
    // finite stale values (every e4m3 / e2m1 byte decodes to a finite number); their scores
    // are masked. The lane's chunk c is fixed; its rows step by 32 / CPR (unrolled).
    auto expand = [&](bool nv, const uint8_t* codes, const uint8_t* scales, int cb, int sb) {
#pragma unroll(D == 256 ? 4 : 8)
      for (int i = 0; i < 16 * CPR / 32; ++i) {
        const int u = lane + 32 * i, r = u / CPR, c = u % CPR;
        const uint4 w = expand_lowbit8_f16(nv, codes + r * cb, scales + r * sb, c);
        *reinterpret_cast<uint4*>(Wt + r * D * 2 + swz(r, c) * 16) = w;
      }
    };
    expand(KN, raw, raw + L::rKs, L::kKcb, L::kKsb);
    __syncwarp();

    // S = Q K^T: 16 rows x 16 keys (key of (n-tile j, element e) = key0 + 8 j + 2 cq + e % 2).
    float acc[2][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      uint32_t a[4], b[4];
      ldmatrix_x4(a, Qs + (lane % 16) * L::QP + ks * 16 + (lane / 16) * 8);
      const int kr = (lane / 16) * 8 + lane % 8;
      ldmatrix_x4(b, Wt + kr * D * 2 + swz(kr, ks * 2 + (lane / 8) % 2) * 16);
      mma_f16_16816(acc[0], a, b[0], b[1]);
      mma_f16_16816(acc[1], a, b[2], b[3]);
    }
    __syncwarp();  // every lane's K reads are done before V overwrites the tile
    // V into the same tile; its integer work overlaps the latency of the MMAs above.
    expand(VN, raw + L::rV, raw + L::rVs, L::kVcb, L::kVsb);
    __syncwarp();
    // Per-key factors of this thread's keys 8 j + 2 cq + i: fp8 K: 2^8 * row scale.
    float kf[2][2], vsc[2][2];
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int r = 8 * j + 2 * cq + i;
        kf[j][i] = KN ? 1.0f
                      : 256.0f * __half2float(__ushort_as_half(*reinterpret_cast<const uint16_t*>(raw + L::rKs + 2 * r)));
        vsc[j][i] = VN ? 1.0f
                       : (key0 + r < n_keys
                              ? __half2float(__ushort_as_half(*reinterpret_cast<const uint16_t*>(raw + L::rVs + 2 * r)))
                              : 0.0f);  // stale slots take no part in s_ref
      }
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = key0 + j * 8 + 2 * cq + (e % 2);
        const bool ok = key <= (e < 2 ? lim0 : lim1) && (!EXT || key >= (e < 2 ? lo0 : lo1));
        float v = acc[j][e] * (e < 2 ? qf0 : qf1);
        if constexpr (!KN) v *= kf[j][e % 2];
        if (EXT && p.cap2 != 0.0f) v = softcap_log2(v, p.cap2, p.cap_k);
        v = ok ? v : -INFINITY;
        acc[j][e] = v;
        if (e < 2) mx0 = fmaxf(mx0, v);
        else mx1 = fmaxf(mx1, v);
      }
    float pr[2][4], al0, al1;
    softmax_tile_step(mx0, mx1, acc, pr, m0, m1, al0, al1);
    l0 = l0 * al0 + ((pr[0][0] + pr[0][1]) + (pr[1][0] + pr[1][1]));
    l1 = l1 * al1 + ((pr[0][2] + pr[0][3]) + (pr[1][2] + pr[1][3]));
    if constexpr (!VN) {
      float smax = fmaxf(fmaxf(vsc[0][0], vsc[0][1]), fmaxf(vsc[1][0], vsc[1][1]));
      smax = fmaxf(smax, __shfl_xor_sync(0xffffffffu, smax, 1));
      smax = fmaxf(smax, __shfl_xor_sync(0xffffffffu, smax, 2));
      const float s_new = fmaxf(s_ref, smax);
      if (s_new > s_ref) {  // warp-uniform; O so far is in units of s_ref (0 when s_ref == 0)
        const float f = s_ref / s_new;
        al0 *= f;
        al1 *= f;
        s_ref = s_new;
      }
      const float inv = s_ref > 0.0f ? 1.0f / s_ref : 0.0f;
      // p * s / s_ref <= 1; a masked key (p == 0) never meets a stale scale (0 * Inf).
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) pr[j][e] = pr[j][e] == 0.0f ? 0.0f : pr[j][e] * (vsc[j][e % 2] * inv);
    }
    uint32_t pa[4];
    pa[0] = cvt_f16x2(pr[0][0], pr[0][1]);
    pa[1] = cvt_f16x2(pr[0][2], pr[0][3]);
    pa[2] = cvt_f16x2(pr[1][0], pr[1][1]);
    pa[3] = cvt_f16x2(pr[1][2], pr[1][3]);
    // At long contexts the running maxima (and s_ref) rarely move: skip the rescale when no
    // row of the warp needs it.
    if (__any_sync(0xffffffffu, al0 != 1.0f || al1 != 1.0f)) {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        o[nt][0] *= al0;
        o[nt][1] *= al0;
        o[nt][2] *= al1;
        o[nt][3] *= al1;
      }
    }
#pragma unroll
    for (int np = 0; np < NT / 2; ++np) {
      uint32_t b[4];
      const int vr = ((lane / 8) % 2) * 8 + lane % 8;
      ldmatrix_x4_trans(b, Wt + vr * D * 2 + swz(vr, np * 2 + lane / 16) * 16);
      mma_f16_16816(o[2 * np], pa, b[0], b[1]);
      mma_f16_16816(o[2 * np + 1], pa, b[2], b[3]);
    }
  }
  cp_async_wait<0>();
  // fp8 V: O back from units of s_ref * 2^-8 (the V codes' fp16 encoding).
  const float ofac = VN ? 1.0f : s_ref * 256.0f;
  combine_warps_and_write<D>(p, o, ofac, m0, m1, l0, l1, big, m_w, row_end - row0, row0, tok0, kvh, split);
}

template <int D, bool KN, bool VN>
void launch_decode_lowbit_kv(const KernelParams& kp, int n_work, cudaStream_t s, bool occupancy_only, int* occ) {
  using L = DecodeLowbitLayout<D, KN, VN>;
  static bool configured = false;  // NOTE: per instantiation (both EXT variants); the attribute is per function
  if (!configured) {
    NINFER_CUDA_CHECK(cudaFuncSetAttribute(decode_lowbit_kernel<D, KN, VN, false>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, L::kBytes));
    NINFER_CUDA_CHECK(cudaFuncSetAttribute(decode_lowbit_kernel<D, KN, VN, true>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, L::kBytes));
    configured = true;
  }
  const auto kernel = kp.ext ? decode_lowbit_kernel<D, KN, VN, true> : decode_lowbit_kernel<D, KN, VN, false>;
  if (occupancy_only) {
    NINFER_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(occ, kernel, kThreads, L::kBytes));
    return;
  }
  const dim3 grid(unsigned(n_work), unsigned(kp.n_kv_heads), unsigned(kp.n_splits));
  kernel<<<grid, kThreads, L::kBytes, s>>>(kp);
  NINFER_CUDA_LAUNCH_CHECK();
  if (kp.n_splits > 1) launch_merge<D>(kp, n_work, 16, s);
}

// Decode launch (or, with occupancy_only, the resident CTAs per SM into *occ) for a lowbit kind.
template <int D>
void launch_decode_lowbit(CacheKind kind, const KernelParams& kp, int n_work, cudaStream_t s,
                          bool occupancy_only = false, int* occ = nullptr) {
  if (kind == CacheKind::Fp8) launch_decode_lowbit_kv<D, false, false>(kp, n_work, s, occupancy_only, occ);
  else if (kind == CacheKind::Nvfp4) launch_decode_lowbit_kv<D, true, true>(kp, n_work, s, occupancy_only, occ);
  else launch_decode_lowbit_kv<D, false, true>(kp, n_work, s, occupancy_only, occ);
}
