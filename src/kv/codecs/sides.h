// Side codecs that more than one format uses (k8v4 = fp8 K + nvfp4 V; rk2v4-e8 and
// e8-root-ref reuse the rk4v4-e8 V). Each is defined, with its bit format, in the file named
// beside it; encoders are instantiated for the rotations the formats use.
#pragma once
#include "kv/format.h"

namespace ninfer::codecs {

// fp8.cpp
extern const KvPlane kFp8Planes[2];
size_t fp8_bytes(int d);
template <KvRotation R>
void fp8_encode(const float* x, int d, uint8_t* out);
void fp8_decode(const uint8_t* in, int d, float* out);

// nvfp4.cpp
extern const KvPlane kNvfp4Planes[2];
size_t nvfp4_bytes(int d);
template <KvRotation R>
void nvfp4_encode(const float* x, int d, uint8_t* out);
void nvfp4_decode(const uint8_t* in, int d, float* out);

// rk4v4_e8.cpp: the 32-bit E8 lattice code per 8 dims with an fp16 scale per 64-group.
extern const KvPlane kE8L32Planes[2];
size_t e8l32_bytes(int d);
template <KvRotation R>
void e8l32_encode(const float* x, int d, uint8_t* out);
void e8l32_decode(const uint8_t* in, int d, float* out);

}  // namespace ninfer::codecs
