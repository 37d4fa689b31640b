// Fuzz target: tokenizer.json [NUL tokenizer_config.json [NUL text]] through
// Tokenizer::from_files (the real file path: the parts are written to a scratch directory),
// then encode + decode of `text` (or of a fixed sample) with the loaded tokenizer. Malformed
// files must be an Error naming the file; every id encode returns must be a token of the
// vocabulary.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "fuzz_util.h"
#include "text/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parts = ninfer_fuzz::split_nul(data, size, 3);
  auto tj = ninfer_fuzz::write_scratch("tokenizer.json", parts[0]);
  std::filesystem::path cfg;
  if (parts.size() > 1) cfg = ninfer_fuzz::write_scratch("tokenizer_config.json", parts[1]);
  std::string text = parts.size() > 2 ? std::string(parts[2]) : "Hello world! <|im_start|> 123 \xc3\xa9t\xc3\xa9\n\n  x";
  try {
    ninfer::Tokenizer tok = ninfer::Tokenizer::from_files(tj, cfg);
    for (bool special : {true, false}) {
      std::vector<int32_t> ids = tok.encode(text, special);
      for (int32_t id : ids)
        if (id < 0 || id >= tok.vocab_size()) std::abort();
      (void)tok.decode(ids, !special);
      ninfer::Tokenizer::StreamDecoder sd(tok, !special);
      for (int32_t id : ids) (void)sd.push(id);
      (void)sd.flush();
    }
    for (int32_t id = -1; id <= tok.vocab_size() && id < 300; ++id) (void)tok.token_piece(id);
  } catch (const ninfer::Error&) {
  }
  return 0;
}
