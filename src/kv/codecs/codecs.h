// Declarations of every codec's KvFormat table entry (one codec per file in this folder;
// each file's header comment is the normative bit format).
#pragma once
#include "kv/format.h"

namespace ninfer::codecs {

extern const KvFormat kF32Format;        // exact.cpp
extern const KvFormat kBf16Format;       // exact.cpp
extern const KvFormat kInt8Format;       // int8.cpp
extern const KvFormat kFp8Format;        // fp8.cpp
extern const KvFormat kNvfp4Format;      // nvfp4.cpp
extern const KvFormat kK8v4Format;       // k8v4.cpp
extern const KvFormat kInt4Format;       // int4.cpp
extern const KvFormat kRk4v4E8Format;    // rk4v4_e8.cpp
extern const KvFormat kRk2v4E8Format;    // rk2v4_e8.cpp
extern const KvFormat kE8RootRefFormat;  // e8_root_ref.cpp (comparison only)
extern const KvFormat kIq4nlRefFormat;   // iq4nl_ref.cpp (comparison only)

}  // namespace ninfer::codecs
