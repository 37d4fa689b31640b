// Declarations of every codec's KvFormat table entry (one codec per file in this folder;
// each file's header comment is the normative bit format).
#pragma once
#include "kv/format.h"

namespace ninfer::codecs {

extern const KvFormat kF32Format;
extern const KvFormat kBf16Format;

}  // namespace ninfer::codecs
