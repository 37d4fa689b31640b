// `k8v4`: K as the `fp8` K (e4m3, fp16 scale per row, rotated H_D; fp8.cpp), V as the `nvfp4`
// V (e2m1 pairs, e4m3 scale per 16, rotated H_64; nvfp4.cpp). The bit formats are those files'.
#include "kv/codecs/codecs.h"
#include "kv/codecs/sides.h"

namespace ninfer::codecs {

constinit const KvFormat kK8v4Format{
    "k8v4", "K as fp8 (rotated H_D), V as nvfp4 (rotated H_64)", 64,
    {KvRotation::HadamardHead, fp8_bytes, fp8_encode<KvRotation::HadamardHead>, fp8_decode, kFp8Planes},
    {KvRotation::Hadamard64, nvfp4_bytes, nvfp4_encode<KvRotation::Hadamard64>, nvfp4_decode, kNvfp4Planes}};

}  // namespace ninfer::codecs
