// Head-width copies for a head_dim the attention kernels lack (kv/capacity.h, cuda_kv_head_dim).
// The KV pages and attention kernels take head_dim 64, 128 or 256; a model of head_dim 96 runs
// them at 128: after rope its q, k and v heads are copied zero-padded to 128 values each (exact
// for bf16 pages: a padded K column adds 0 to every score, a padded V column reaches only an
// output column), and the attention output's heads are cut back to 96 values before o_proj.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace ninfer::cuda {

// For every token t, head h < n_heads and i < dst_dim:
//   dst[t * dst_ld + h * dst_dim + i] = i < src_dim ? src[t * src_ld + h * src_dim + i] : 0
// (src_dim < dst_dim pads with zeros, src_dim > dst_dim drops each head's last columns).
// Elements of a dst row past n_heads * dst_dim are not written.
// src: [n_tokens, src_ld]; dst: [n_tokens, dst_ld]; n_heads * src_dim <= src_ld, n_heads * dst_dim <= dst_ld
void launch_copy_heads_f32(const float* src, int src_ld, int src_dim, float* dst, int dst_ld, int dst_dim,
                           int n_tokens, int n_heads, cudaStream_t s);
// The same on bf16 bit patterns.
void launch_copy_heads_bf16(const uint16_t* src, int src_ld, int src_dim, uint16_t* dst, int dst_ld, int dst_dim,
                            int n_tokens, int n_heads, cudaStream_t s);

}  // namespace ninfer::cuda
