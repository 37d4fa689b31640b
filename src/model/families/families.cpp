// The family table: every supported Hugging Face architecture class, and its family.
#include "model/family.h"

namespace ninfer {

extern const Family kLlamaFamily, kGemmaFamily, kOlmo2Family, kMoeFamily, kQwen3NextFamily;

namespace {
const Family* const kFamilies[] = {&kLlamaFamily, &kGemmaFamily, &kOlmo2Family, &kMoeFamily, &kQwen3NextFamily};
}

const Family* find_family(std::string_view architecture) {
  for (const Family* f : kFamilies)
    for (const std::string& a : f->architectures)
      if (a == architecture) return f;
  return nullptr;
}

std::string supported_architectures() {
  std::string s;
  for (const Family* f : kFamilies)
    for (const std::string& a : f->architectures) s += (s.empty() ? "" : ", ") + a;
  return s;
}

}  // namespace ninfer
