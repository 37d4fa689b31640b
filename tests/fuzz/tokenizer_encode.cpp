// Fuzz target: arbitrary bytes through Tokenizer::encode / decode / StreamDecoder of every
// tokenizer fixture in tests/data/tokenizers and of ../shared/models when present (byte-level
// BPE, SentencePiece BPE with byte fallback, NFC/NFKC normalizers). Byte 0 picks the
// tokenizer and add_special; the rest is the text. Invalid UTF-8 must be an Error; every id
// must be in the vocabulary; the streamed text must be valid UTF-8.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

namespace {

std::vector<ninfer::Tokenizer> load_all() {
  std::vector<ninfer::Tokenizer> out;
  std::vector<std::filesystem::path> dirs;
  for (const auto& e : std::filesystem::directory_iterator(NINFER_TEST_DATA "/tokenizers"))
    if (std::filesystem::exists(e.path() / "tokenizer.json")) dirs.push_back(e.path());
  std::filesystem::path shared = NINFER_TEST_DATA "/../../../shared/models";
  if (const char* s = std::getenv("NINFER_SHARED_DIR")) shared = std::filesystem::path(s) / "models";
  if (std::filesystem::exists(shared))
    for (const auto& e : std::filesystem::directory_iterator(shared))
      if (std::filesystem::exists(e.path() / "tokenizer.json")) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  for (const auto& d : dirs) out.push_back(ninfer::Tokenizer::load(d));
  if (out.empty()) std::abort();
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<ninfer::Tokenizer> toks = load_all();
  if (size == 0) return 0;
  const ninfer::Tokenizer& tok = toks[(data[0] >> 1) % toks.size()];
  const bool special = data[0] & 1;
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  std::vector<int32_t> ids;
  try {
    ids = tok.encode(text, special);
  } catch (const ninfer::Error&) {
    if (ninfer::utf8::first_invalid(text) == text.size()) std::abort();  // refused valid UTF-8
    return 0;
  }
  for (int32_t id : ids)
    if (id < 0 || id >= tok.vocab_size()) std::abort();
  std::string dec = tok.decode(ids, false);
  ninfer::Tokenizer::StreamDecoder sd(tok, false);
  std::string streamed;
  for (int32_t id : ids) streamed += sd.push(id);
  streamed += sd.flush();
  if (ninfer::utf8::first_invalid(dec) != dec.size() || ninfer::utf8::first_invalid(streamed) != streamed.size())
    std::abort();
  return 0;
}
