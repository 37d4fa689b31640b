// Decode attention straight from the codes (int8, int4, rk4v4-e8, rk2v4-e8): no shared
// memory for K or V, every code decoded once, by the lane whose tensor-core fragment needs it.
// Included by attention.cu inside its anonymous namespace (uses KernelParams, smem_rotate,
// write_tile, mma_s8_16832 and the decoders of kv_codecs.cuh); see attention.h for the design.
//
// A CTA (4 warps) takes a tile of <= 8 query rows of one chunk and kv head (kCompRows) and a
// KV split; warp w owns keys [16 w, 16 w + 16) of every page of the split, as in the other
// decode kernels. Per 16-key slice, everything stays in registers:
//  - S^T = K Q^T on int8 tensor cores (mma m16n8k32: m = 16 keys, n = 8 query rows, k = 32
//    head dims). The A operand is K: lane (g = lane / 4, c = lane % 4) holds keys g and g + 8
//    and, for k-step ks of 64-group grp (ks = 2 grp + kk), the 8 values of code block
//    b = 8 grp + 2 c + kk, i.e. exactly one code per key, decoded in registers. Q's B fragment
//    (per lane: row g, the same 8 dims, in the order the decoder leaves the values: 0..3 | 4..7,
//    or even | odd for the nibble formats) comes from that block's 8 bytes of the int8 Q row,
//    once per CTA: the permutation of the head dims costs nothing. Per format:
//      int4: the nibbles masked into the high half of each byte (16 v, exact int8);
//      rk4v4-e8: the raw nibbles n = z + 8 as unsigned bytes (u8 x s8 MMA; nibble 7 gets its
//        parity bit back); 2y = 2n + c - 16 is restored exactly by starting the int32
//        accumulators at -8 sum(q) per group and adding sum_blocks c Qbs (the coset bits of the
//        lane's blocks times the rows' int8 Q sums per block) from an fp16 m16n8k8 MMA;
//      rk2v4-e8 (FMT 6, the default, and 4): magnitudes 2|a| and XOR masks (the signs and the
//        +-1 shift t) from two shared tables indexed by the code's two bytes (e8p_tables.h),
//        one XOR per register, so the bytes are 4y and the int8 MMA alone gives the scores.
//        FMT 5 (NINFER_CUDA_E8P_DECODE=alu): one 4-byte shared table word per code, signs and
//        t in integer arithmetic (e8p_alu.h), again 4y.
//    Group sums are scaled by q_scale * k_scale. int8: the K codes are the A operand as stored.
//  - Online softmax on S^T's accumulators: lane holds keys g, g + 8 of rows 2c, 2c + 1; the
//    row max is a 3-step shuffle over g; O is rescaled only when a row max moved (by more
//    than kSlack: P then stays <= 2^kSlack against the stale maximum).
//  - O^T += V^T P^T on bf16 tensor cores (m16n8k16: m = 16 head dims, n = 8 rows, k = 16 keys).
//    P^T's B fragment is P (times the V scale of its key and group) transposed by movmatrix. V^T's A fragment: lane (g, c) takes, per group grp, code block
//    8 grp + g of keys 2c, 2c + 1, 2c + 8, 2c + 9 (one code each); value e of the block is head
//    dim 64 grp + 8 g + e and sits in m-tile 4 grp + e / 2, row g + 8 (e % 2). Two keys' nibbles
//    are paired per register by one byte permute as exact bf16 subnormals n 2^-133
//    (nib_mtile_sub; P' = P v_scale enters as P' 2^64); O = 2 sum P' n + sum P' c - 16 sum P'
//    (E8; int4: sum P'(n ^ 8) - 8 sum P'), the last two sums from one more MMA per group whose
//    A rows are c and 1 (times 2^-95: bit28_pair's unit).
//  - Codes and scales of the next slice are loaded (plain 4- and 8-byte global loads) while the
//    current one is computed (PIPE: the loop variants, below).
// Before the page walk, loads in the order their data is needed (a warp's loads return in
// order): rk2v4-e8's table entries (host-built, kv_append.cu), the work item and the first page
// ids (these three before the wait for the predecessor grid: they overlap it when it starts
// this grid early), Q, the first two slices (PIPE 1, 2); then the table copies and the Q
// prologue (comp_q_prologue: registers and shuffles, one warp per two rows) run while the
// slices' codes are in flight. The grid is capped at the planned CTAs per SM
// (pad_for_ctas_per_sm, attention.cu), so that an early start places it as planned. The four
// warps combine (max, sum, O) at the end through shared memory; with several splits the
// combine writes the split's partial rows for merge_kernel, with one write_tile normalises and
// rotates back.
// Numerics: Q quantised per (row, 64-group), exact int32 group sums, P * v_scale rounded to
// bf16 (int8: p * v_scale / sref to fp16, see sref below), V exact, fp32 accumulation.

constexpr int kCompRows = 8;  // query rows per tile of decode_comp_kernel

__device__ __forceinline__ __half2 u32_as_h2(uint32_t a) { return *reinterpret_cast<const __half2*>(&a); }
__device__ __forceinline__ uint32_t h2_as_u32(__half2 a) { return *reinterpret_cast<const uint32_t*>(&a); }

__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t a) {
  uint32_t d;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(d) : "r"(a));
  return d;
}

// prmt.b32 with the sign-replicate selectors (bit 3 of a selector nibble), which
// __byte_perm does not offer.
__device__ __forceinline__ uint32_t prmt_sign(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}

// Bit 28 of x (low half) and of y (high half) as bit 12 of each 16-bit half: one byte permute
// (byte 3 of x to byte 1, byte 3 of y to byte 3) and one mask. Bit 12 alone is a power of two
// in both 16-bit float formats: bf16 2^-95 (exponent field 32), fp16 2^-11 (exponent field 4),
// so the pair is an MMA operand of c times that power (against a shift of each word and a
// sign-replicating permute for 1.0: 2 instructions fewer per pair).
constexpr uint32_t kBit12Pair = 0x10001000u;
constexpr float kBit12Bf16 = 39614081257132168796771975168.0f;  // 2^95: 1 / (bf16 0x1000)
constexpr float kBit12Fp16 = 2048.0f;                           // 2^11: 1 / (fp16 0x1000)
__device__ __forceinline__ uint32_t bit28_pair(uint32_t x, uint32_t y) {
  return __byte_perm(x, y, 0x7733u) & kBit12Pair;
}
// The same bits as the 16-bit pattern `one` or 0 (one2: that pattern twice): the form the
// register decode kernel keeps at head_dim 256, where the form above together with the P shift
// (kPShift, decode_comp_kernel) cost rk4v4-e8 1.08-1.14x (H200, session 14, graph timing).
__device__ __forceinline__ uint32_t bit28_one(uint32_t x, uint32_t y, uint32_t one2) {
  return prmt_sign(x << 3, y << 3, 0xFFBBu) & one2;
}

// (a & ~c) | (b & c) as one LOP3 (ptxas splits the and/or form into two).
__device__ __forceinline__ uint32_t bit_select(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0xD8;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// (a & m) ^ c as one LOP3: with both constants as immediates ptxas emits two (a LOP3 takes
// one immediate); here the second is a register, set once.
__device__ __forceinline__ uint32_t and_xor(uint32_t a, uint32_t m, uint32_t c) {
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0x6A;\n" : "=r"(d) : "r"(a), "r"(m), "r"(c));
  return d;
}

// 2^x with subnormal results flushed to 0 (exp2f's extra scaling steps for them cost 3
// instructions per call; P or a rescale factor below 2^-126 is 0 for the softmax anyway).
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// E8 code (rk4v4_e8.cpp e8l32) with nibble 7 made z7 + 8: its low bit (stored: the coset bit
// c) replaced by the parity of z0..z6 (bit 28 of the nibble sum, no carries: 7 bits).
__device__ __forceinline__ uint32_t e8_fix_nibble7(uint32_t w) {
  return bit_select(w, (w & 0x01111111u) * 0x11111111u, 0x10000000u);
}

// V^T's A fragment of m-tile 4 grp + J (block values 2J, 2J + 1): rows g (value 2J) and g + 8
// (2J + 1), keys 2c, 2c + 1 | 2c + 8, 2c + 9, each nibble n as the bf16 subnormal n 2^-133
// (mantissa n, exponent 0), one byte permute per register. xl, xh hold the low and the high
// nibbles of each byte of the four keys' code words (bytes <= 15), so the permute's
// sign-replicating selectors (bit 3) give the zero upper bytes. Exact: the tensor cores take
// subnormal bf16 inputs as they are (the fp64 attention tests, session 8). Against bf16
// 128 + n (a permute and a mask-and-or per register) this is 28 instead of 36 ALU
// instructions per 64-dim group: 0.95-0.96x of rk2v4-e8's time at 32/8/128 (H200).
template <int J>
__device__ __forceinline__ void nib_mtile_sub(const uint32_t xl[4], const uint32_t xh[4], uint32_t a[4]) {
  constexpr uint32_t sel = J | ((J | 8) << 4) | ((4 + J) << 8) | (((4 + J) | 8) << 12);
  a[0] = prmt_sign(xl[0], xl[1], sel);
  a[1] = prmt_sign(xh[0], xh[1], sel);
  a[2] = prmt_sign(xl[2], xl[3], sel);
  a[3] = prmt_sign(xh[2], xh[3], sel);
}

// One int4 code block -> int8 bytes: values 0, 2, 4, 6 in lo and 1, 3, 5, 7 in hi, each as
// 16 * value (the nibble in the high half of its byte is the int8 two's complement of 16 v).
__device__ __forceinline__ void int4_dec8(uint32_t code, uint32_t& lo, uint32_t& hi) {
  lo = (code << 4) & 0xF0F0F0F0u;
  hi = code & 0xF0F0F0F0u;
}

// The FMT template argument of decode_comp_kernel: the K decode (V: int8, int4 nibbles, or
// the E8 nibbles of rk4v4-e8, which rk2v4-e8 shares).
//   1 int8, 2 int4, 3 rk4v4-e8,
//   4 rk2v4-e8 with two shared tables (magnitudes; XOR masks of the signs and the +-1 shift t,
//     e8p_tables.h),
//   5 rk2v4-e8 with one 4-byte shared table and the signs and t in integer arithmetic
//     (e8p_alu.h; NINFER_CUDA_E8P_DECODE=alu, attention.cu),
//   6 rk2v4-e8 as 4, with both tables replicated once per shared-memory bank group
//     (NINFER_CUDA_E8P_DECODE=banked; kE8pBankedBytes of dynamic shared memory): lane l reads
//     copy l % 16 of an entry (8 bytes), so that the 16 lanes of one memory phase hit distinct
//     banks whatever codes they hold. FMT 4's random indices cost ~7.9 wavefronts per lookup
//     instead of 2 (ncu, session 5: L1 73 % busy).
constexpr bool is_e8p(int fmt) { return fmt == 4 || fmt == 5 || fmt == 6; }
constexpr bool e8p_tables_fmt(int fmt) { return fmt == 4 || fmt == 6; }  // the two tables of e8p_tables.h
// FMT 6's dynamic shared memory: 256 rows of 256 bytes, row r = the 16 copies (uint2) of XOR
// entry r, then those of magnitude entry r (one entry's copies: 128 bytes, all 32 banks), so
// that a lookup's byte offset is one byte permute: the code byte as byte 1, the lane's copy
// offset as byte 0. After the page walk the rows hold the warps' O exchange instead.
constexpr int kE8pBankedBytes = 256 * 256;

__device__ __forceinline__ void mma_u8s8_16832(int d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// d += a b, m16n8k8, fp16 in, fp32 accumulators: a0 (row g, k 2c, 2c + 1), a1 (row g + 8, ...),
// b0 (k 2c, 2c + 1; col g).
__device__ __forceinline__ void mma_f16_1688(float d[4], uint32_t a0, uint32_t a1, uint32_t b0) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(b0));
}

// The Q prologue of decode_comp_kernel, in two parts so that the kernel can request Q before
// the slices' codes (a warp's loads return in order: Q requested after them would wait for
// them). comp_q_load: warp w takes rows w and w + 4 of the tile, each lane E = D / 32
// consecutive head dims, loaded straight into registers (both rows' loads in flight at once;
// the row's address costs one division by the group size). comp_q_prologue: the K rotation as
// butterflies in registers (stages h < E) and across lanes by shuffles (h >= E): the same
// additions and subtractions of the same operands, stage by stage, as smem_rotate, so the
// values are bit-identical. Then the int8 quantisation per (row, 64-group): scale Qsc, codes
// Q8 and, with SUMS (rk4v4-e8, whose nibble offsets need them), sums per 8-dim block (Qbs)
// and per group (Qgs), exact integers. No barrier inside; the
// caller's barrier publishes the shared arrays.
template <int D>
__device__ __forceinline__ void comp_q_load(const KernelParams& p, int row0, int R, int tok0, int kvh, float (&x)[2][D / 32]) {
  constexpr int E = D / 32;
  static_assert(E >= 2 && E <= 8, "head_dim 64, 128 or 256");
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int gr = row0 + warp + 4 * i;
    if (gr < R) {
      const float* src =
          p.q + size_t(tok0 + gr / p.group) * p.q_ld + size_t(kvh * p.group + gr % p.group) * D + lane * E;
      if constexpr (E == 2) {
        const float2 t = *reinterpret_cast<const float2*>(src);
        x[i][0] = t.x;
        x[i][1] = t.y;
      } else {
#pragma unroll
        for (int e = 0; e < E; e += 4) {
          const float4 t = *reinterpret_cast<const float4*>(src + e);
          x[i][e] = t.x;
          x[i][e + 1] = t.y;
          x[i][e + 2] = t.z;
          x[i][e + 3] = t.w;
        }
      }
    } else {
#pragma unroll
      for (int e = 0; e < E; ++e) x[i][e] = 0.0f;
    }
  }
}

template <int D, bool SUMS>
__device__ __forceinline__ void comp_q_prologue(const KernelParams& p, float (&x)[2][D / 32], int8_t* Q8, float* Qsc,
                                                int* Qbs, int* Qgs) {
  constexpr int E = D / 32, NG = D / 64, LPG = 64 / E, LPB = 8 / E < 1 ? 1 : 8 / E;  // lanes per group, per block
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (p.q_rot != 0) {
    warp_butterflies<2, E, D>(x, p.q_rot == 1 ? D : 64);
    const float sc = p.q_rot == 1 ? 1.0f / sqrtf(float(D)) : 1.0f / sqrtf(64.0f);  // smem_rotate's constants
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int e = 0; e < E; ++e) x[i][e] *= sc;
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = warp + 4 * i, grp = lane / LPG;
    float amax = 0.0f;
#pragma unroll
    for (int e = 0; e < E; ++e) amax = fmaxf(amax, fabsf(x[i][e]));
#pragma unroll
    for (int m = 1; m < LPG; m <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, m));
    const float sc = amax > 0.0f ? amax / 127.0f : 1.0f, inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    uint32_t w[(E + 3) / 4] = {};
    int sum = 0;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const int v = int(fminf(fmaxf(rintf(x[i][e] * inv), -127.0f), 127.0f));
      if constexpr (SUMS) sum += v;
      w[e / 4] |= uint32_t(v & 0xFF) << (8 * (e % 4));
    }
    int8_t* dst = Q8 + r * D + lane * E;
    if constexpr (E == 8) {
      *reinterpret_cast<uint2*>(dst) = make_uint2(w[0], w[1]);
    } else if constexpr (E == 4) {
      *reinterpret_cast<uint32_t*>(dst) = w[0];
    } else {
      *reinterpret_cast<uint16_t*>(dst) = uint16_t(w[0]);
    }
    if constexpr (SUMS) {
#pragma unroll
      for (int m = 1; m < LPB; m <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, m);  // the 8-dim block
      if (lane % LPB == 0) Qbs[r * (D / 8) + lane * E / 8] = sum;
#pragma unroll
      for (int m = LPB; m < LPG; m <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, m);  // the 64-group
      if (lane % LPG == 0) Qgs[r * NG + grp] = sum;
    }
    if (lane % LPG == 0) Qsc[r * NG + grp] = sc;
  }
}

template <int D, int FMT>
struct CompSlice {
  static constexpr int NG = D / 64, NW = (NG + 1) / 2;
  // K: the keys of m-rows g, g + 8; per group, blocks 8 grp + 2c and + 1 (rk2v4-e8: both u16
  // codes in k[.][grp][0]; int8: the 16 bytes of both blocks).
  uint32_t k[2][NG][is_e8p(FMT) ? 1 : (FMT == 1 ? 4 : 2)];
  // V: keys 2c, 2c + 1, 2c + 8, 2c + 9; block 8 grp + g. int8 (dim-major pages): v[e][grp] =
  // head dim 64 grp + 8 g + e of the keys of k-rows 2c, 2c + 1, 2c + 8, 2c + 9 (bytes 0..3).
  uint32_t v[FMT == 1 ? 8 : 4][NG];
  uint32_t ks[2][NW], vs[2][NW];  // fp16 scales of keys g, g + 8 (NG halves)
};

// A page's codes and scales, read once per CTA: code_ld<true> reads them without allocating
// L1 lines (ld.global.nc.L1::no_allocate), code_ld<false> as __ldg. The register decode
// kernel takes no_allocate for int4 and rk4v4-e8 at head_dim <= 128 (kNoL1 below): H200,
// session 13, against __ldg on 32/8/128: with the L2 flushed 0.88-0.94x at batch 1 (0.96-1.02x
// at batch 8), the 8B-shaped checkpoint's decode at 32K 0.972x (int4) and 0.978x (rk4v4-e8),
// graph timing 1.003-1.017x. Not for rk2v4-e8 (graph 1.19-1.41x at head_dim 128, whatever
// its K loads took) nor at head_dim 256 (int4 and rk4v4-e8 graph up to 1.19x at batch 8),
// nor int8 V (a warp reads half of each 32-byte sector of its dim-major page; the L1 serves
// the other warp). Not volatile, so the compiler schedules them as freely as __ldg: every
// such load's address comes from a page id read after the kernel's predecessor wait (or, on
// rk2v4-e8's early path, deliberately before it), which orders it.
template <bool NA>
__device__ __forceinline__ uint16_t code_ld(const uint16_t* p) {
  if constexpr (!NA) {
    return __ldg(p);
  } else {
    uint16_t v;
    asm("ld.global.nc.L1::no_allocate.u16 %0, [%1];\n" : "=h"(v) : "l"(p));
    return v;
  }
}
template <bool NA>
__device__ __forceinline__ uint32_t code_ld(const uint32_t* p) {
  if constexpr (!NA) {
    return __ldg(p);
  } else {
    uint32_t v;
    asm("ld.global.nc.L1::no_allocate.u32 %0, [%1];\n" : "=r"(v) : "l"(p));
    return v;
  }
}
template <bool NA>
__device__ __forceinline__ uint2 code_ld(const uint2* p) {
  if constexpr (!NA) {
    return __ldg(p);
  } else {
    uint2 v;
    asm("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "l"(p));
    return v;
  }
}
template <bool NA>
__device__ __forceinline__ uint4 code_ld(const uint4* p) {
  if constexpr (!NA) {
    return __ldg(p);
  } else {
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p));
    return v;
  }
}

template <int NG, bool NA>
__device__ __forceinline__ void load_scales(const uint8_t* src, uint32_t* w) {
  if constexpr (NG == 1) {
    w[0] = code_ld<NA>(reinterpret_cast<const uint16_t*>(src));
  } else if constexpr (NG == 2) {
    w[0] = code_ld<NA>(reinterpret_cast<const uint32_t*>(src));
  } else {
    const uint2 t = code_ld<NA>(reinterpret_cast<const uint2*>(src));
    w[0] = t.x;
    w[1] = t.y;
  }
}

__device__ __forceinline__ float scale_of(const uint32_t* w, int grp) {
  return __half2float(__ushort_as_half(uint16_t(w[grp / 2] >> (16 * (grp % 2)))));
}

// PIPE 1: the software pipeline below; 0: two register sets, one slice per step (load the
// next slice, then compute the current one). Chosen at run time (NINFER_CUDA_COMP_PIPE,
// attention.cu) while both are measured.
// PIPE 2: the pipeline with 2 CTAs per SM at head_dim <= 128 (more registers, no spills);
// 3: PIPE 0's loop with 4 CTAs per SM at head_dim <= 128 (128 registers: a few spills).
// 4: one register set, the loads of the next slice split around this slice's P V (below).
// EXT: the window's lower bounds and the softcap (KernelParams::ext; applied to the fp32 score
// formed from the groups' int32 sums, before the mask and the running maximum).
template <int D, int FMT, int PIPE, bool EXT>
__global__ void __launch_bounds__(kThreads, D <= 128 ? (PIPE == 2 ? 2 : (PIPE == 3 ? 4 : 3)) : 2)
    decode_comp_kernel(KernelParams p) {
  constexpr int NG = D / 64, R8 = kCompRows;
  constexpr int KCB = is_e8p(FMT) ? D / 4 : (FMT == 1 ? D : D / 2), VCB = FMT == 1 ? D : D / 2;  // code bytes per row
  constexpr size_t KBLK = size_t(kPage) * (KCB + 2 * NG), VBLK = size_t(kPage) * (VCB + 2 * NG);
  constexpr int OP = D + 2;  // row pitch of the O exchange (the epilogue)
  // O exchange [4 warps][8 rows][OP]; FMT 6: in the table copies' memory, free after the walk
  static_assert(4 * R8 * OP * 4 <= kE8pBankedBytes, "the O exchange fits in FMT 6's table memory");
  __shared__ __align__(16) float big[FMT == 6 ? 1 : 4 * R8 * OP];
  __shared__ __align__(16) int8_t Q8[R8 * D];
  __shared__ float Qsc[R8 * NG];
  // int8 Q sums per 8-dim block and per group (rk4v4-e8's offsets only)
  __shared__ int Qbs[FMT == 3 ? R8 * D / 8 : 1], Qgs[FMT == 3 ? R8 * NG : 1];
  // rk2v4-e8 K (E8P, e8p_tables.h): e8pT[pattern] = the 8 values 2|a_i| as bytes (value 7
  // negated when the pattern's sign parity is odd); e8pS[code byte 1] = per-byte XOR masks
  // that negate (the 8th sign from the 7's parity) and add t.
  __shared__ uint2 e8pT[FMT == 4 ? 256 : 1];
  __shared__ uint2 e8pS[FMT == 4 ? 256 : 1];
  extern __shared__ __align__(128) uint8_t e8p_banked[];  // FMT 6: kE8pBankedBytes (above)
  __shared__ uint32_t e8pW[FMT == 5 ? 256 : 1];  // FMT 5: e8p_alu::table_word of each entry
  __shared__ float m_w[4 * R8], l_w[4 * R8], mfin_s[R8], lfin_s[R8];
  __shared__ int grow_s[R8];  // the output row of each tile row (several splits)
  __shared__ int ids_s[FMT == 2 || is_e8p(FMT) ? 4 : 1][64];  // page-id rings of the warps (pid, below)

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int gq = lane / 4, cq = lane % 4;
  // FMT 6: the lane's copy offsets in a row (magnitudes in the upper half)
  const uint32_t lane_s = (lane & 15) * 8, lane_t = 128 + lane_s;
  // rk2v4-e8's table entries (built on the host, kv_append.cu) are requested first: they depend
  // on nothing, and a warp's loads return in order.
  static_assert(kThreads == 128, "two XOR and two magnitude entries per thread");
  uint2 tm0, tm1, ts0, ts1;
  if constexpr (e8p_tables_fmt(FMT)) {
    tm0 = __ldg(p.e8p_mag + tid);
    tm1 = __ldg(p.e8p_mag + 128 + tid);
    ts0 = __ldg(p.e8p_sgn + tid);
    ts1 = __ldg(p.e8p_sgn + 128 + tid);
  }
  // A programmatic dependent launch (comp_kernel_call): the predecessor kernel may still run
  // until pdl_wait below. Before it, only what the predecessor cannot write is read: the
  // tables above (written once, at start-up), the work item and the first page ids (the
  // planner's upload, ordered before the predecessor), so that with a predecessor that lets
  // its dependents start early (the merge kernel, the KV append) those round trips overlap it.
  // With run's history_ready, rk2v4-e8 also requests its first slices before the wait (and,
  // at head_dim 256, builds its table copies there too: `early` below). Otherwise the copies
  // are built after the first slices' loads are requested: built before the wait they cost
  // the same when the predecessor does not start them early (H200, session 10: graph
  // 0.956-0.998x of the old order either way, host-launched batch 1 up to 1.03x built early).
  const DecodeTile t = decode_tile<R8>(p);
  const int row0 = t.row0, kvh = t.kvh, split = t.split, tok0 = t.tok0, start = t.start, g = t.g, R = t.R;
  const int row_end = t.row_end, n_keys = t.n_keys, p_begin = t.p_begin, n_iter = t.n_iter;
  const int32_t* table = t.table;

  // The keys (slots of the warp's 16) of this lane's m-rows g and g + 8. int8: m-row 2a + e
  // holds key 4a + e and m-row 8 + 2a + e key 4a + 2 + e, so that the k-rows 2c, 2c + 1, 2c + 8,
  // 2c + 9 of P V are the four consecutive keys 4c..4c + 3: one 4-byte load per head dim of
  // the dim-major V page. The other formats: keys g and g + 8.
  const int kr0 = FMT == 1 ? 2 * gq - (gq & 1) : gq, kr1 = FMT == 1 ? kr0 + 2 : gq + 8;
  const int lim0 = row0 + 2 * cq < R ? start + (row0 + 2 * cq) / g : -1;
  const int lim1 = row0 + 2 * cq + 1 < R ? start + (row0 + 2 * cq + 1) / g : -1;
  const int lo0 = EXT ? window_lo(lim0, p.window) : 0, lo1 = EXT ? window_lo(lim1, p.window) : 0;

  using Slice = CompSlice<D, FMT>;
  // Per-lane base addresses of page 0 (codes and scales, K and V): a page adds one multiple of
  // the page stride, every other offset below is a compile-time constant (an immediate of the
  // load), so that no load needs 64-bit address arithmetic of its own.
  const uint32_t k_stride = uint32_t(p.n_kv_heads) * uint32_t(KBLK), v_stride = uint32_t(p.n_kv_heads) * uint32_t(VBLK);
  const uint8_t* k_head = p.k_pool + size_t(kvh) * KBLK;
  const uint8_t* v_head = p.v_pool + size_t(kvh) * VBLK;
  // K: m-row g's key, head dims of block 8 grp + 2c (int8: 16 bytes at 64 grp + 16 c); m-row
  // g + 8 (int8: + 2) is KH rows further.
  const uint8_t* k_lane = k_head + (warp * 16 + kr0) * KCB + (FMT == 1 ? 16 : (is_e8p(FMT) ? 4 : 8)) * cq;
  const uint8_t* ks_lane = k_head + kPage * KCB + (warp * 16 + kr0) * 2 * NG;
  constexpr int KH = FMT == 1 ? 2 : 8, KG = FMT == 1 ? 64 : KCB / NG;  // rows to m-row g + 8; bytes per group
  // V: int8 (dim-major): head dim 8 g of keys 4c..4c + 3; else key 2c, block g.
  const uint8_t* v_lane = v_head + (FMT == 1 ? 8 * gq * kPage + warp * 16 + 4 * cq : (warp * 16 + 2 * cq) * VCB + 4 * gq);
  const uint8_t* vs_lane = v_head + kPage * VCB + (warp * 16 + kr0) * 2 * NG;
  constexpr bool kNoL1 = (FMT == 2 || FMT == 3) && D <= 128;  // code_ld: no L1 lines
  auto loadK = [&](Slice& s, int page) {
    const uint8_t* kl = k_lane + size_t(uint32_t(page)) * k_stride;
    const uint8_t* ksl = ks_lane + size_t(uint32_t(page)) * k_stride;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int grp = 0; grp < NG; ++grp) {
        const uint8_t* src = kl + h * KH * KCB + grp * KG;
        if constexpr (FMT == 1) {
          const uint4 t = code_ld<kNoL1>(reinterpret_cast<const uint4*>(src));
          s.k[h][grp][0] = t.x;
          s.k[h][grp][1] = t.y;
          s.k[h][grp][2] = t.z;
          s.k[h][grp][3] = t.w;
        } else if constexpr (is_e8p(FMT)) {
          s.k[h][grp][0] = code_ld<kNoL1>(reinterpret_cast<const uint32_t*>(src));
        } else {
          const uint2 t = code_ld<kNoL1>(reinterpret_cast<const uint2*>(src));
          s.k[h][grp][0] = t.x;
          s.k[h][grp][1] = t.y;
        }
      }
      load_scales<NG, kNoL1>(ksl + h * KH * 2 * NG, s.ks[h]);
    }
  };
  auto loadV = [&](Slice& s, int page) {
    const uint8_t* vl = v_lane + size_t(uint32_t(page)) * v_stride;
    const uint8_t* vsl = vs_lane + size_t(uint32_t(page)) * v_stride;
#pragma unroll
    for (int h = 0; h < 2; ++h) load_scales<NG, kNoL1>(vsl + h * KH * 2 * NG, s.vs[h]);
    if constexpr (FMT == 1) {
#pragma unroll
      for (int grp = 0; grp < NG; ++grp)
#pragma unroll
        for (int e = 0; e < 8; ++e) s.v[e][grp] = __ldg(reinterpret_cast<const uint32_t*>(vl + (64 * grp + e) * kPage));
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int grp = 0; grp < NG; ++grp)
          s.v[j][grp] = code_ld<kNoL1>(reinterpret_cast<const uint32_t*>(vl + ((j & 1) + 8 * (j >> 1)) * VCB + 32 * grp));
    }
  };

  // The loads before the page walk, in the order their data is needed: Q (its prologue runs
  // first), then the first two slices' codes (PIPE 1, 2), so that their latency overlaps the
  // prologue (a batch-1 split is a few slices per warp: the prologue was most of it).
  //
  // The split's page ids. int4 and rk2v4-e8 (kIdRing): through a ring of 64 per warp in shared
  // memory (ids_s): batch b (ids p_begin + 32 b + lane) is copied by cp.async while batch b - 1
  // is walked, so pid(i) is a shared-memory read. A page id read from the table just before
  // its page's loads waited behind the codes requested ahead of it, whose DRAM latency then
  // stalled the address of every next load (ncu, 32/8/128, batch 8: 22 % of rk2v4-e8's and
  // 43 % of int4's loop stall samples; with the ring, 32/8/128 batch 8: int4 0.90-0.92x, rk2v4-e8
  // 0.96-0.97x of the time). int8 and rk4v4-e8 read the table directly: their register budget
  // is tighter (more spills with the ring; 1.04-1.08x the time at int8 head_dim 128 and
  // rk4v4-e8 head_dim 256). pid(i) needs id_batch <= i / 32 <= id_batch + 1: ids_advance moves
  // the window forward (the walks ask for non-decreasing page indices). The kernel's only
  // cp.async copies are these, so a wait for all of them waits for the batch.
  constexpr bool kIdRing = FMT == 2 || is_e8p(FMT);
  const int last = n_iter - 1;
  int id_batch = 0;
  int* ids_w = ids_s[kIdRing ? warp : 0];
  auto ids_copy = [&](int b) { cp_async4(ids_w + 32 * (b & 1) + lane, table + p_begin + min(32 * b + lane, last)); };
  if (kIdRing && n_iter > 0) {
    ids_copy(0);
    if (n_iter > 32) ids_copy(1);
    cp_async_commit();
  }
  auto pid = [&](int i) { return kIdRing ? ids_w[min(i, last) & 63] : table[p_begin + min(i, last)]; };
  auto ids_advance = [&](int i) {  // pid is called with indices >= i from here on
    if (kIdRing && (min(i, last) >> 5) > id_batch) {
      ++id_batch;
      cp_async_wait<0>();  // batch id_batch (requested 32 pages ago)
      __syncwarp();        // ... seen by all lanes; batch id_batch - 1 read by all lanes
      if (32 * (id_batch + 1) <= last) {
        ids_copy(id_batch + 1);
        cp_async_commit();
      }
    }
  };
  // The first two slices' codes (PIPE 1, 2). With p.history_ready (run's history_ready: the
  // predecessor writes no position below the chunk's start) and both pages wholly below the
  // start, they are requested before the wait, their round trip overlapping the predecessor;
  // else after it.
  Slice KA, KB, VA, VB;
  auto first_loads = [&] {
    if (kIdRing && n_iter > 0) {
      cp_async_wait<0>();
      __syncwarp();
    }
    if ((PIPE == 1 || PIPE == 2) && n_iter > 0) {
      const int pg0 = pid(0), pg1 = pid(1);
      loadK(KA, pg0);
      loadV(VA, pg0);
      loadK(KB, pg1);
      loadV(VB, pg1);
    }
  };
  // rk2v4-e8 (FMT 6) only. H200, graph-timed against loading after the wait: rk2v4-e8
  // 0.90-1.02x (session 11; head_dim 128 0.90-0.98x); for every format it cost rk4v4-e8 at
  // head_dim 256 8-14 % (its registers are the tightest; session 10). Building the FMT 6
  // table copies before the wait as well lost the head_dim 128 gain (session 11).
  const bool early = FMT == 6 && p.history_ready && p_begin + 2 <= start / kPage;
  // FMT 6's table copies (visible to the loop after the Q prologue's barrier). At head_dim 256
  // they are built before the wait as well when the first loads are early: there that frees
  // the registers of the table entries (no spill in PIPE 1 and 2, 8 bytes otherwise) and was
  // 0.96-0.99x at batch 1 (H200, session 11); at head_dim 128 it lost the early loads' gain.
  const bool early_copies = D == 256 && early;
  auto build_copies = [&] {
    // Rows tid and tid + 128, 16 bytes (two copies) per store. The start column rotates with
    // tid, so the 8 threads of a store phase write distinct banks.
    uint4* rw = reinterpret_cast<uint4*>(e8p_banked);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int col = (j + tid) & 7;
      rw[tid * 16 + col] = make_uint4(ts0.x, ts0.y, ts0.x, ts0.y);
      rw[tid * 16 + 8 + col] = make_uint4(tm0.x, tm0.y, tm0.x, tm0.y);
      rw[(tid + 128) * 16 + col] = make_uint4(ts1.x, ts1.y, ts1.x, ts1.y);
      rw[(tid + 128) * 16 + 8 + col] = make_uint4(tm1.x, tm1.y, tm1.x, tm1.y);
    }
  };
  if (early) {
    first_loads();
    if constexpr (FMT == 6) {
      if (early_copies) build_copies();
    }
  }
  // With p.q_ready (run's q_ready: the predecessor does not write Q), the prologue runs before
  // the wait: Q's load and rotation, rk2v4-e8's table copies. At batch 1 that was ~1.3 us
  // from the wait to the loop (H200, session 12 timestamps: Q's round trip ~0.8 us, the copies
  // ~0.6 us, the Q prologue ~0.55 us). Graph A/B (session 12): rk2v4-e8 (with its early
  // slices) 0.95x at batch 1 32K, int4 0.93-0.99x at batch 1; rk4v4-e8 0.95-0.97x at head_dim
  // 128 but 1.08-1.13x at 256 (its registers are the tightest), so not there; int8 not measured.
  const bool pro_early = p.q_ready && (FMT == 6 ? early : (FMT == 2 || (FMT == 3 && D <= 128)));
  if (!pro_early) pdl_wait();  // Q and the pages may be the predecessor's output (the append's new token)
  float qx[2][D / 32];
  comp_q_load<D>(p, row0, R, tok0, kvh, qx);
  if (!early && !pro_early) first_loads();
  if constexpr (FMT == 4) {
    e8pT[tid] = tm0;
    e8pT[tid + 128] = tm1;
    e8pS[tid] = ts0;
    e8pS[tid + 128] = ts1;
  }
  if constexpr (FMT == 5) {
    for (int i = tid; i < 256; i += kThreads) e8pW[i] = e8p_alu::table_word(__ldg(p.e8p_abs + i));
  }
  if (FMT == 6 && !early_copies) build_copies();
  // ---- Q: fp32 -> rotate (K rotation) -> int8 per (row, 64-group) ----
  comp_q_prologue<D, FMT == 3>(p, qx, Q8, Qsc, Qbs, Qgs);  // the Q sums: rk4v4-e8's offsets only
  __syncthreads();
  if (pro_early) {
    pdl_wait();
    if (!early) first_loads();
  }
  // Q's B fragments: row g, block 8 grp + 2c + kk (8 bytes: b0 = values 0..3, b1 = 4..7).
  uint32_t qf[2 * NG][2];
#pragma unroll
  for (int grp = 0; grp < NG; ++grp)
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
      const uint2 t = *reinterpret_cast<const uint2*>(Q8 + gq * D + 8 * (8 * grp + 2 * cq + kk));
      // int4, E8: even / odd values of the block (the nibble masks' order)
      qf[2 * grp + kk][0] = FMT == 2 || FMT == 3 ? __byte_perm(t.x, t.y, 0x6420) : t.x;
      qf[2 * grp + kk][1] = FMT == 2 || FMT == 3 ? __byte_perm(t.x, t.y, 0x7531) : t.y;
    }
  // Grid steps of the int8 K values (int4: 16 v; E8: 2 y; E8P: 4 y; int8: the codes themselves)
  // and of the V values (int4: v; E8: 2 y), times the fp16 scale. k_mul and the softmax's
  // log2 scale are folded into the rows' Q scales qs0, qs1 (rows 2c, 2c + 1), v_mul into the
  // output at the end (P' below is P v_scale; a power of two: the same bf16 roundings).
  constexpr float k_mul = FMT == 2 ? 1.0f / 16 : (FMT == 3 || FMT == 1 ? 1.0f : 0.25f);  // E8: (2y / 2) via ia + cor / 2; E8P: 4y
  constexpr float v_mul = FMT == 2 ? 1.0f : 0.5f;
  // The nibble kinds' P V in scaled units (pv below): P'' = P v_scale 2^64. At head_dim <= 128
  // P comes as 2^(s - m + kPShift) straight from exp2 (mc0, mc1 below: the running maxima less
  // kPShift), so the 2^64 costs no multiply per key, and l is in those units until the loop
  // ends; at head_dim 256 the V scales take it (see bit28_one). The offsets' MMA rows are
  // kCorOne2: bf16 2^-95 twice (bit28_pair's unit), at head_dim 256 2^-69 twice (bit28_one).
  // With this session's other cuts, graph-timed against session 13 (H200, session 14):
  // rk2v4-e8 0.96-0.99x and rk4v4-e8 0.97-0.98x at head_dim 128.
  constexpr bool kB12 = D <= 128;  // bit28_pair (else bit28_one) for the coset bits
  constexpr uint32_t kCorOne2 = kB12 ? kBit12Pair : 0x1D001D00u;
  constexpr float kPShift = FMT != 1 && D <= 128 ? 64.0f : 0.0f;
  constexpr float kVsMul = kPShift != 0.0f ? 1.0f : 18446744073709551616.0f;  // 2^(64 - kPShift)
  constexpr float kPUnshift = kPShift != 0.0f ? 5.42101086242752217e-20f : 1.0f;  // 2^-kPShift
  const float q_mul = k_mul * p.scale_log2;
  float qs0[NG], qs1[NG];
  // rk4v4-e8 K: the int8 product runs on the unsigned nibbles n (2y = 2n + c - 16, c the coset
  // bit of the block): sum q 2y = 2 (sum q n - 8 sum_group q) + sum_blocks c Qbs. The first
  // term's offset starts the int32 accumulators (ia0: rows 2c, 2c + 1); the c term is an fp16
  // MMA (m16n8k8: keys x the group's 8 blocks x rows) with A = c 2^-11 (bit28_pair) and B = the
  // rows' block sums (|.| <= 1016: exact in fp16), qb[grp] = blocks 8 grp + 2c, + 1 of row g.
  int ia0[NG][2];
  uint32_t qb[NG];
#pragma unroll
  for (int grp = 0; grp < NG; ++grp) {
    qs0[grp] = Qsc[(2 * cq) * NG + grp] * q_mul;
    qs1[grp] = Qsc[(2 * cq + 1) * NG + grp] * q_mul;
    if constexpr (FMT == 3) {
      ia0[grp][0] = -8 * Qgs[(2 * cq) * NG + grp];
      ia0[grp][1] = -8 * Qgs[(2 * cq + 1) * NG + grp];
      const __half2 h = __floats2half2_rn(float(Qbs[gq * (D / 8) + 8 * grp + 2 * cq]),
                                          float(Qbs[gq * (D / 8) + 8 * grp + 2 * cq + 1]));
      qb[grp] = *reinterpret_cast<const uint32_t*>(&h);
    }
  }
  float o[D / 16][4];
#pragma unroll
  for (int t = 0; t < D / 16; ++t) o[t][0] = o[t][1] = o[t][2] = o[t][3] = 0.0f;
  // Per group: sum over keys of P v_scale c (E8 coset bit of the lane's V block; rows 2c, 2c + 1)
  // and of P v_scale (the same rows), for the offsets of the V values (see pv below).
  float cor[NG][4];
#pragma unroll
  for (int grp = 0; grp < NG; ++grp) cor[grp][0] = cor[grp][1] = cor[grp][2] = cor[grp][3] = 0.0f;
  // Running maxima of rows 2c, 2c + 1 (l: this lane's keys). rk4v4-e8 and rk2v4-e8 start them
  // at kMaxStart, finite and below any score, instead of -inf, so that neither exp2(s - m) of
  // a masked key (s = -inf: 0) nor the rescale exp2(m - m_new) needs a guard for a row that
  // has seen no key yet; a row that never sees one keeps kMaxStart and l = 0, whose weight in
  // the warps' combine and in the merge is exp2(kMaxStart - M) = 0 beside any row that has.
  // int4 and int8 keep -inf and the guards: with the finite start their registers spilled
  // (int4 at head_dim 256: 1.06-1.07x the time, H200, session 8).
  constexpr bool kFiniteMax = FMT == 3 || is_e8p(FMT);
  constexpr float kMaxStart = kFiniteMax ? -1e30f : -INFINITY;
  float m0 = kMaxStart, m1 = kMaxStart, l0 = 0.0f, l1 = 0.0f;
  float mc0 = m0 - kPShift, mc1 = m1 - kPShift;  // the exponents' offsets (kPShift above; else unused)
  // kSlack (int4, rk4v4-e8 at head_dim <= 128; rk2v4-e8 at every head dim): the maxima move
  // (and O, l and the offsets' sums are rescaled) only when a slice's score exceeds its row's
  // running maximum by more than kSlack (log2 units). Below that, P = 2^(s - m) <= 2^kSlack,
  // which every operand holds (bf16 P'' <= 2^(64 + kSlack) times a V scale, fp32 l and O),
  // and the results are those of the exact maximum: O and l share the stale m. So a row's
  // later keys, whose scores stay near its maximum, cost no rescale. The exact rule paid one
  // for a new maximum of any of the warp's rows: with random scores a row sets one in ~3.4 of
  // 16 slices (the harmonic number), 4 rows in up to ~10 (batch 1 32K: 16 per warp). The loop
  // keeps the thresholds mt0, mt1 = m + kSlack instead of m, and m0, m1 = mt - kSlack after
  // it. H200, session 15, graph timing against the exact rule: rk2v4-e8 32/8/128 0.937x
  // (batch 1 32K) to 0.985x, rk2v4-e8 at 256 0.979-1.003x, int4 and rk4v4-e8 at 128
  // 0.945-1.002x; not int4 / rk4v4-e8 at 256 (their registers spill) nor int8 (fp16 P).
  constexpr bool kSlackOn = FMT != 1 && (D <= 128 || is_e8p(FMT));
  constexpr float kSlack = kSlackOn ? 8.0f : 0.0f;
  constexpr bool kOffsets = kPShift != 0.0f || kSlackOn;  // the loop reads mc0, mc1 (else m0, m1)
  float mt0 = m0 + kSlack, mt1 = m1 + kSlack;
  // int8 V runs on fp16 tensor cores (its codes are exact fp16, bf16 has too few bits): P's
  // operand is p * s / sref, with sref[grp] the largest V scale of group grp among the valid
  // keys the warp has seen (a running maximum, warp-uniform, like the softmax's), so that it
  // stays <= 1 and far from fp16's subnormals; when sref grows, O is rescaled by old / new. O
  // is multiplied by sref at the end.
  float sref[NG], sinv[NG];
#pragma unroll
  for (int grp = 0; grp < NG; ++grp) sref[grp] = sinv[grp] = 0.0f;

  // S^T (keys g, g + 8) x (rows 2c, 2c + 1) of the slice whose K part is in s, unmasked.
  auto scores = [&](const Slice& s, float acc[4]) {
    acc[0] = acc[1] = acc[2] = acc[3] = 0.0f;
#pragma unroll
    for (int grp = 0; grp < NG; ++grp) {
      float kv[4];
      if constexpr (FMT == 3) {
        int ia[4] = {ia0[grp][0], ia0[grp][1], ia0[grp][0], ia0[grp][1]};
#pragma unroll
        for (int kk = 0; kk < 2; ++kk) {
          uint32_t a[4];
          const uint32_t w0 = e8_fix_nibble7(s.k[0][grp][kk]);
          const uint32_t w1 = e8_fix_nibble7(s.k[1][grp][kk]);
          a[0] = w0 & 0x0F0F0F0Fu;
          a[2] = (w0 >> 4) & 0x0F0F0F0Fu;
          a[1] = w1 & 0x0F0F0F0Fu;
          a[3] = (w1 >> 4) & 0x0F0F0F0Fu;
          mma_u8s8_16832(ia, a, qf[2 * grp + kk][0], qf[2 * grp + kk][1]);
        }
        float cr[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        // c 2^-11 (bit28_pair) or c (bit28_one: fp16 1.0) as fp16
        const uint32_t ca0 = kB12 ? bit28_pair(s.k[0][grp][0], s.k[0][grp][1])
                                  : bit28_one(s.k[0][grp][0], s.k[0][grp][1], 0x3C003C00u);
        const uint32_t ca1 = kB12 ? bit28_pair(s.k[1][grp][0], s.k[1][grp][1])
                                  : bit28_one(s.k[1][grp][0], s.k[1][grp][1], 0x3C003C00u);
        mma_f16_1688(cr, ca0, ca1, qb[grp]);
        constexpr float half_c = kB12 ? 0.5f * kBit12Fp16 : 0.5f;
#pragma unroll
        for (int e = 0; e < 4; ++e) kv[e] = float(ia[e]) + half_c * cr[e];  // exact: |.| < 2^22, halves
      } else if constexpr (is_e8p(FMT)) {
        // E8P: 4y_i = s_i 2|a_i| + t (t = +-1 per block, code bit 15). FMT 4, 6: a magnitude
        // entry XOR a mask entry; FMT 5: integer arithmetic (e8p_alu.h). Either way the bytes
        // are 4y exactly, so sum q 4y = ia.
        int ia[4] = {0, 0, 0, 0};
#pragma unroll
        for (int kk = 0; kk < 2; ++kk) {
          uint32_t a[4];
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const uint32_t code = kk ? s.k[h][grp][0] >> 16 : s.k[h][grp][0] & 0xFFFFu;
            if constexpr (FMT == 4) {
              const uint2 t = e8pT[code & 0xFFu];
              const uint2 m = e8pS[code >> 8];
              a[h] = t.x ^ m.x;  // e8p_tables::apply
              a[h + 2] = t.y ^ m.y;
            } else if constexpr (FMT == 6) {
              // byte offsets: row = code byte 2 kk (magnitudes) or 2 kk + 1 (XOR masks) as byte
              // 1, the lane's copy as byte 0, bytes 2, 3 from the copy offset's zero byte 1
              const uint32_t w = s.k[h][grp][0];
              const uint32_t ot = __byte_perm(w, lane_t, kk ? 0x5524u : 0x5504u);
              const uint32_t os = __byte_perm(w, lane_s, kk ? 0x5534u : 0x5514u);
              const uint2 t = *reinterpret_cast<const uint2*>(e8p_banked + ot);
              const uint2 m = *reinterpret_cast<const uint2*>(e8p_banked + os);
              a[h] = t.x ^ m.x;  // e8p_tables::apply
              a[h + 2] = t.y ^ m.y;
            } else {
              e8p_alu::decode(code, e8pW[code & 0xFFu], a[h], a[h + 2]);
            }
          }
          mma_s8_16832(ia, a, qf[2 * grp + kk][0], qf[2 * grp + kk][1]);
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) kv[e] = float(ia[e]);  // exact integers
      } else if constexpr (FMT == 1) {
        int ia[4] = {0, 0, 0, 0};
#pragma unroll
        for (int kk = 0; kk < 2; ++kk) {
          const uint32_t a[4] = {s.k[0][grp][2 * kk], s.k[1][grp][2 * kk], s.k[0][grp][2 * kk + 1],
                                 s.k[1][grp][2 * kk + 1]};
          mma_s8_16832(ia, a, qf[2 * grp + kk][0], qf[2 * grp + kk][1]);
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) kv[e] = float(ia[e]);
      } else {  // int4
        int ia[4] = {0, 0, 0, 0};
#pragma unroll
        for (int kk = 0; kk < 2; ++kk) {
          uint32_t a[4];
          int4_dec8(s.k[0][grp][kk], a[0], a[2]);
          int4_dec8(s.k[1][grp][kk], a[1], a[3]);
          mma_s8_16832(ia, a, qf[2 * grp + kk][0], qf[2 * grp + kk][1]);
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) kv[e] = float(ia[e]);
      }
      const float k0 = scale_of(s.ks[0], grp), k1 = scale_of(s.ks[1], grp);
      acc[0] += kv[0] * (qs0[grp] * k0);
      acc[1] += kv[1] * (qs1[grp] * k0);
      acc[2] += kv[2] * (qs0[grp] * k1);
      acc[3] += kv[3] * (qs1[grp] * k1);
    }
  };
  // Mask, online softmax and O += P V for the slice starting at key key0 (V part in s).
  auto softmax_pv = [&](const Slice& s, int key0, const float acc[4]) {
    const int ka = key0 + kr0, kb = key0 + kr1;
    float a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
    if (EXT && p.cap2 != 0.0f) {
      a0 = softcap_log2(a0, p.cap2, p.cap_k);
      a1 = softcap_log2(a1, p.cap2, p.cap_k);
      a2 = softcap_log2(a2, p.cap2, p.cap_k);
      a3 = softcap_log2(a3, p.cap2, p.cap_k);
    }
    const float s0 = ka <= lim0 && (!EXT || ka >= lo0) ? a0 : -INFINITY;
    const float s1 = ka <= lim1 && (!EXT || ka >= lo1) ? a1 : -INFINITY;
    const float s2 = kb <= lim0 && (!EXT || kb >= lo0) ? a2 : -INFINITY;
    const float s3 = kb <= lim1 && (!EXT || kb >= lo1) ? a3 : -INFINITY;
    // The row maxima over the slice's 16 keys take three shuffle rounds. A slice in which no
    // score exceeds its row's running maximum (by more than kSlack) leaves the maxima as they
    // are, so the rounds (and the rescale factors) run only when some lane's score does (one
    // vote). Once the maxima settle, most slices skip them.
    float mx0 = fmaxf(s0, s2), mx1 = fmaxf(s1, s3);
    float al0 = 1.0f, al1 = 1.0f;
    const bool moved = __any_sync(0xffffffffu, kSlackOn ? mx0 > mt0 || mx1 > mt1 : mx0 > m0 || mx1 > m1);
    if (moved) {
#pragma unroll
      for (int off = 4; off < 32; off <<= 1) {
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, off));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, off));
      }
      const float mo0 = kSlackOn ? mt0 - kSlack : m0, mo1 = kSlackOn ? mt1 - kSlack : m1;  // the old maxima
      const float mn0 = fmaxf(mo0, mx0), mn1 = fmaxf(mo1, mx1);
      al0 = !kFiniteMax && mn0 == -INFINITY ? 1.0f : exp2_ftz(mo0 - mn0);
      al1 = !kFiniteMax && mn1 == -INFINITY ? 1.0f : exp2_ftz(mo1 - mn1);
      if constexpr (kSlackOn) {
        mt0 = mn0 + kSlack;
        mt1 = mn1 + kSlack;
      } else {
        m0 = mn0;
        m1 = mn1;
      }
      if constexpr (kOffsets) {
        mc0 = mn0 - kPShift;
        mc1 = mn1 - kPShift;
      }
    }
    const float e0 = kOffsets ? mc0 : m0, e1 = kOffsets ? mc1 : m1;
    const bool none0 = !kFiniteMax && (kSlackOn ? mt0 : m0) == -INFINITY;  // the row has seen no key
    const bool none1 = !kFiniteMax && (kSlackOn ? mt1 : m1) == -INFINITY;
    const float p0 = none0 ? 0.0f : exp2_ftz(s0 - e0);
    const float p2 = none0 ? 0.0f : exp2_ftz(s2 - e0);
    const float p1 = none1 ? 0.0f : exp2_ftz(s1 - e1);
    const float p3 = none1 ? 0.0f : exp2_ftz(s3 - e1);
    l0 = l0 * al0 + (p0 + p2);
    l1 = l1 * al1 + (p1 + p3);
    // Slots past the sequence's end hold stale bytes. A masked key's P is exactly 0, and the
    // pools hold finite V scales in every slot (the encoders clamp; the engine's pool and the
    // bench's are zeroed when allocated; PagedAttention::run's contract, attention.h), so P V
    // is 0 for it without masking its scales (kVsUnmasked; H200, session 14, with the other
    // changes of that session: 0.977-0.99x at head_dim 128, rk2v4-e8 0.98-1.00x at 256, graph
    // timing). int8 masks them still (its running maximum sref takes them in), and so do int4
    // and rk4v4-e8 at head_dim 256 (1.01x and 1.06-1.09x unmasked: their registers spill).
    constexpr bool kVsUnmasked = FMT != 1 && (D <= 128 || is_e8p(FMT));
    uint32_t vs0[Slice::NW], vs1[Slice::NW];
#pragma unroll
    for (int w = 0; w < Slice::NW; ++w) {
      vs0[w] = kVsUnmasked || ka < n_keys ? s.vs[0][w] : 0u;
      vs1[w] = kVsUnmasked || kb < n_keys ? s.vs[1][w] : 0u;
    }
    float sg[NG];  // int8: sref's growth factor old / new per group (1: unchanged)
    bool grew = false;
    if constexpr (FMT == 1) {
#pragma unroll
      for (int w = 0; w < Slice::NW; ++w) {
        // The slice's largest V scale per group (two fp16 per word; keys of lanes g = 0..7).
        __half2 mx = __hmax2(*reinterpret_cast<const __half2*>(&vs0[w]), *reinterpret_cast<const __half2*>(&vs1[w]));
#pragma unroll
        for (int off = 4; off < 32; off <<= 1) {
          const uint32_t o_ = __shfl_xor_sync(0xffffffffu, *reinterpret_cast<const uint32_t*>(&mx), off);
          mx = __hmax2(mx, *reinterpret_cast<const __half2*>(&o_));
        }
#pragma unroll
        for (int hh = 0; hh < 2 && 2 * w + hh < NG; ++hh) {
          const int grp = 2 * w + hh;
          const float sn = __half2float(hh ? __high2half(mx) : __low2half(mx));
          sg[grp] = 1.0f;
          if (sn > sref[grp]) {  // warp-uniform
            sg[grp] = sref[grp] / sn;
            sref[grp] = sn;
            sinv[grp] = 1.0f / sn;
            grew = true;
          }
        }
      }
    }
    if (moved || grew) {  // once the maxima settle: rarely (a factor of 1 leaves O as it is)
#pragma unroll
      for (int t = 0; t < D / 16; ++t) {
        const float f = FMT == 1 ? sg[t / 4] : 1.0f;
        o[t][0] *= al0 * f;
        o[t][1] *= al1 * f;
        o[t][2] *= al0 * f;
        o[t][3] *= al1 * f;
      }
#pragma unroll
      for (int grp = 0; grp < NG; ++grp) {
        cor[grp][0] *= al0;
        cor[grp][1] *= al1;
        cor[grp][2] *= al0;
        cor[grp][3] *= al1;
      }
    }
    auto sp = [](float pv_, float s_) { return pv_ * s_; };
    if constexpr (FMT == 1) {
#pragma unroll
      for (int grp = 0; grp < NG; ++grp) {
        const float v0 = scale_of(vs0, grp) * sinv[grp], v1 = scale_of(vs1, grp) * sinv[grp];
        const uint32_t b0 = movmatrix_trans(cvt_f16x2(sp(p0, v0), sp(p1, v0)));
        const uint32_t b1 = movmatrix_trans(cvt_f16x2(sp(p2, v1), sp(p3, v1)));
        // V^T: byte b of a word is key k-row 2c + b (b < 2) or 2c + 6 + b; as fp16, 0x6400 | (b
        // ^ 0x80) is 1152 + v exactly, and the subtraction is exact too.
        uint32_t h[8][2];
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const uint32_t x = s.v[e][grp] ^ 0x80808080u;
          const __half2 lo = __hsub2(u32_as_h2(__byte_perm(x, 0x64646464u, 0x4140)), u32_as_h2(0x64806480u));
          const __half2 hi = __hsub2(u32_as_h2(__byte_perm(x, 0x64646464u, 0x4342)), u32_as_h2(0x64806480u));
          h[e][0] = h2_as_u32(lo);
          h[e][1] = h2_as_u32(hi);
        }
#pragma unroll
        for (int u = 0; u < 4; ++u) {  // m-tile 4 grp + u: rows g (dim 2u of the block), g + 8 (2u + 1)
          const uint32_t a[4] = {h[2 * u][0], h[2 * u + 1][0], h[2 * u][1], h[2 * u + 1][1]};
          mma_f16_16816(o[4 * grp + u], a, b0, b1);
        }
      }
    } else {
#pragma unroll
      for (int grp = 0; grp < NG; ++grp) {
        const float v0 = scale_of(vs0, grp) * kVsMul, v1 = scale_of(vs1, grp) * kVsMul;  // P carries 2^kPShift
        // P^T fragment: rows g; keys 2c, 2c + 1 (b0) and 2c + 8, 2c + 9 (b1).
        const uint32_t b0 = movmatrix_trans(cvt_bf16x2(sp(p0, v0), sp(p1, v0)));
        const uint32_t b1 = movmatrix_trans(cvt_bf16x2(sp(p2, v1), sp(p3, v1)));
        // V^T: the raw nibbles n (int4: n ^ 8) as bf16 subnormals n 2^-133 (nib_mtile_sub);
        // value = n + c / 2 - 8 (E8, in units of 2 y / 2) or (n ^ 8) - 8 (int4). With P' = P
        // v_scale and P'' = P' 2^64 the MMA sums are 2^-69 sum(P' n); one more MMA whose A
        // rows are c (pairs of keys) and 1, both times 2^-95, gives 2^-31 sum(P' c) and 2^-31
        // sum(P') (head_dim 256: 2^-69 and 2^-5); the epilogue combines them (OA, OB, kCorScale).
        uint32_t xl[4], xh[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const uint32_t x = FMT == 2 ? s.v[j][grp] : e8_fix_nibble7(s.v[j][grp]);
          xl[j] = FMT == 2 ? and_xor(x, 0x0F0F0F0Fu, 0x08080808u) : x & 0x0F0F0F0Fu;
          xh[j] = FMT == 2 ? and_xor(x >> 4, 0x0F0F0F0Fu, 0x08080808u) : (x >> 4) & 0x0F0F0F0Fu;
        }
        {
          uint32_t a[4];
          auto cpair = [&](uint32_t x, uint32_t y) { return kB12 ? bit28_pair(x, y) : bit28_one(x, y, kCorOne2); };
          a[0] = FMT == 2 ? 0u : cpair(s.v[0][grp], s.v[1][grp]);
          a[2] = FMT == 2 ? 0u : cpair(s.v[2][grp], s.v[3][grp]);
          a[1] = a[3] = kCorOne2;
          mma_bf16_16816(cor[grp], a, b0, b1);
        }
        uint32_t a[4];
        nib_mtile_sub<0>(xl, xh, a);
        mma_bf16_16816(o[4 * grp + 0], a, b0, b1);
        nib_mtile_sub<1>(xl, xh, a);
        mma_bf16_16816(o[4 * grp + 1], a, b0, b1);
        nib_mtile_sub<2>(xl, xh, a);
        mma_bf16_16816(o[4 * grp + 2], a, b0, b1);
        nib_mtile_sub<3>(xl, xh, a);
        mma_bf16_16816(o[4 * grp + 3], a, b0, b1);
      }
    }
  };

  // Software pipeline over the warp's slices, two register sets per side: while step i computes
  // the scores of slice i + 1 and the softmax and P V of slice i (independent work in one
  // block), K of slice i + 2 and V of slice i + 1 are in flight; at its end it requests K of
  // slice i + 3 and V of slice i + 2 into the sets it has just freed. Page ids come from pid
  // (above) one step before their loads. Slices past the split's end (at most two per warp)
  // run on a valid page with every key masked.
  if (PIPE == 0 || PIPE == 3) {
    Slice sa, sb;
    auto load = [&](Slice& st, int page) {
      loadK(st, page);
      loadV(st, page);
    };
    auto compute = [&](const Slice& st, int key0) {
      float acc[4];
      scores(st, acc);
      softmax_pv(st, key0, acc);
    };
    if (n_iter > 0) load(sa, pid(0));
    int next_id = pid(1);
#pragma unroll 1
    for (int it = 0; it < n_iter; it += 2) {
      if (it + 1 < n_iter) load(sb, next_id);
      ids_advance(it + 2);
      next_id = pid(it + 2);
      const int key0a = (p_begin + it) * kPage + warp * 16;
      if (key0a < n_keys) compute(sa, key0a);
      if (it + 1 >= n_iter) break;
      if (it + 2 < n_iter) load(sa, next_id);
      next_id = pid(it + 3);
      const int key0b = key0a + kPage;
      if (key0b < n_keys) compute(sb, key0b);
    }
  } else if (PIPE == 4) {
    // One register set: K of the next slice loads while this slice's softmax and P V run, V
    // of the next while the next scores run (half of PIPE 0's registers for the codes: int8
    // at head_dim 256 spills with two sets).
    Slice st;
    if (n_iter > 0) {
      loadK(st, pid(0));
      loadV(st, pid(0));
    }
    int next_id = pid(1);
#pragma unroll 1
    for (int it = 0; it < n_iter; ++it) {
      const bool more = it + 1 < n_iter;
      float acc[4];
      scores(st, acc);
      if (more) loadK(st, next_id);
      const int key0 = (p_begin + it) * kPage + warp * 16;
      if (key0 < n_keys) softmax_pv(st, key0, acc);
      if (more) loadV(st, next_id);
      ids_advance(it + 2);
      next_id = pid(it + 2);
    }
  } else if (n_iter > 0) {
    auto key0_of = [&](int i) {
      const int k = (p_begin + i) * kPage + warp * 16;
      return i < n_iter && k < n_keys ? k : (1 << 29);
    };
    // K(0), K(1), V(0), V(1): loaded before the prologue (above)
    float sc[4], sn[4];
    scores(KA, sc);
    int pgv = pid(2);
    loadK(KA, pgv);
    int pgk = pid(3);
#pragma unroll 1
    for (int i = 0; i < n_iter; i += 2) {
      ids_advance(i + 4);
      // K(i + 1) in KB, K(i + 2) in KA; V(i) in VA, V(i + 1) in VB
      scores(KB, sn);
      softmax_pv(VA, key0_of(i), sc);
      loadK(KB, pgk);
      loadV(VA, pgv);
      pgv = pgk;
      pgk = pid(i + 4);
      // K(i + 2) in KA, K(i + 3) in KB; V(i + 1) in VB, V(i + 2) in VA
      scores(KA, sc);
      softmax_pv(VB, key0_of(i + 1), sn);
      loadK(KA, pgk);
      loadV(VB, pgv);
      pgv = pgk;
      pgk = pid(i + 5);
    }
  }

  // ---- combine the warps ----
  // The merge kernel (a programmatic dependent launch) may now be scheduled: it waits for this
  // grid's completion before it reads the partials.
  pdl_launch_dependents();
  l0 *= kPUnshift;  // kPShift's units back to P's (a power of two: exact)
  l1 *= kPUnshift;
  if constexpr (kSlackOn) {  // the maxima, which O and l are relative to
    m0 = mt0 - kSlack;
    m1 = mt1 - kSlack;
  }
#pragma unroll
  for (int off = 4; off < 32; off <<= 1) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, off);
    l1 += __shfl_xor_sync(0xffffffffu, l1, off);
  }
  // Each warp's O rows go to shared memory ([4][8][OP]; OP = D + 2: the lanes' 8-byte stores
  // meet at most two to a bank), are weighted by exp2(m_w - M) and summed over the warps in
  // warp order, then written as the split's partial rows (or, with one split, normalised and
  // rotated back by write_tile).
  if constexpr (FMT == 6) __syncthreads();  // every warp is done with the table copies
  float* Ow = FMT == 6 ? reinterpret_cast<float*>(e8p_banked) : big;
  // O / v_mul = OA * sum(P' n) + sum(P' c) + OB * sum(P'): E8 2 n + c - 16 = 2 y (2 y / 2 is
  // the value in units of v_mul); int4 (n ^ 8) - 8 = v. In the MMAs' units (pv): sum(P' n) =
  // 2^69 o and the offsets' sums = 2^31 cor (head_dim 256: 2^5; kCorScale). The MMA sums are
  // sums of exact bf16 products in fp32 (a product below 2^-126, P' n < 2^-57 or P' < 2^-95,
  // may be flushed: far below the 2^-9 of P's rounding relative to the row's largest term).
  constexpr float OA = FMT == 2 ? 590295810358705651712.0f : 1180591620717411303424.0f;  // 2^69, 2^70
  constexpr float OB = FMT == 2 ? -8.0f : -16.0f;
  constexpr float kCorScale = kB12 ? kBit12Bf16 / 18446744073709551616.0f : 32.0f;  // 2^95 / 2^64, 2^69 / 2^64
#pragma unroll
  for (int grp = 0; grp < NG; ++grp)
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int d = 64 * grp + 8 * gq + 2 * u;  // m-row g: value 2u of the block; g + 8: 2u + 1
      const float* c = o[4 * grp + u];
      const float* k = cor[grp];
      const float va = FMT == 1 ? sref[grp] : OA;  // int8: cor stays 0
      constexpr float om = FMT == 1 ? 1.0f : v_mul;  // int8 V has its own scaling (sref)
      const float ks = FMT == 1 ? 0.0f : kCorScale;
      *reinterpret_cast<float2*>(Ow + (warp * R8 + 2 * cq) * OP + d) =
          make_float2(om * (va * c[0] + ks * (k[0] + OB * k[2])), om * (va * c[2] + ks * (k[0] + OB * k[2])));
      *reinterpret_cast<float2*>(Ow + (warp * R8 + 2 * cq + 1) * OP + d) =
          make_float2(om * (va * c[1] + ks * (k[1] + OB * k[3])), om * (va * c[3] + ks * (k[1] + OB * k[3])));
    }
  if (gq == 0) {
    m_w[warp * R8 + 2 * cq] = m0;
    m_w[warp * R8 + 2 * cq + 1] = m1;
    l_w[warp * R8 + 2 * cq] = l0;
    l_w[warp * R8 + 2 * cq + 1] = l1;
  }
  __syncthreads();
  const int rows = row_end - row0;
  if (tid < R8) {
    float M = -INFINITY;
    for (int w = 0; w < 4; ++w) M = fmaxf(M, m_w[w * R8 + tid]);
    float Lsum = 0.0f;
    for (int w = 0; w < 4; ++w) {
      const float mw = m_w[w * R8 + tid];
      const float f = mw == -INFINITY ? 0.0f : exp2f(mw - M);
      m_w[w * R8 + tid] = f;  // now the warp's weight
      Lsum += f * l_w[w * R8 + tid];
    }
    mfin_s[tid] = M;
    lfin_s[tid] = Lsum;
    if (p.n_splits > 1 && tid < rows) {  // the split's (m, l) of this row
      const int gr = row0 + tid;
      const size_t grow = size_t(tok0 + gr / g) * p.n_heads + kvh * g + gr % g;
      grow_s[tid] = int(grow);
      *reinterpret_cast<float2*>(p.part_ml + (size_t(split) * p.n_rows_total + grow) * 2) = make_float2(M, Lsum);
    }
  }
  __syncthreads();
  auto combined = [&](int r, int d) {  // the warps' weighted O of row r, dims d, d + 1, in warp order
    float2 v = make_float2(0.0f, 0.0f);
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const float f = m_w[w * R8 + r];
      const float2 x = *reinterpret_cast<const float2*>(Ow + (w * R8 + r) * OP + d);
      v.x += f * x.x;
      v.y += f * x.y;
    }
    return v;
  };
  if (p.n_splits > 1) {
    for (int idx = tid; idx < rows * (D / 2); idx += kThreads) {
      const int r = idx / (D / 2), d = 2 * (idx % (D / 2));
      *reinterpret_cast<float2*>(p.part_o + (size_t(split) * p.n_rows_total + grow_s[r]) * D + d) = combined(r, d);
    }
    return;
  }
  for (int idx = tid; idx < R8 * (D / 2); idx += kThreads) {
    const int r = idx / (D / 2), d = 2 * (idx % (D / 2));
    *reinterpret_cast<float2*>(Ow + r * OP + d) = combined(r, d);
  }
  __syncthreads();
  write_tile<D>(p, Ow, OP, mfin_s, lfin_s, rows, row0, tok0, kvh, split);
}
