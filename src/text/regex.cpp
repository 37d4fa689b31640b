// PCRE2 wrapper (see regex.h). The compiled code is shared read-only; each find_all call
// makes its own match data, so one Regex may be used from several threads.
#include "text/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"
#include "text/utf8.h"

namespace ninfer {

struct Regex::Impl {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Impl() {
    if (code) pcre2_code_free(code);
  }
};

Regex::Regex(std::string_view pattern, Options opts, std::string_view what)
    : impl_(std::make_unique<Impl>()) {
  // PCRE2_LITERAL allows UTF but not UCP or MULTILINE (they would mean nothing anyway).
  uint32_t flags = PCRE2_UTF;
  if (opts.literal) {
    flags |= PCRE2_LITERAL;
  } else {
    flags |= PCRE2_UCP;
    if (opts.multiline) flags |= PCRE2_MULTILINE;
  }
  pcre2_compile_context* cctx = pcre2_compile_context_create(nullptr);
  // NOTE: Oniguruma (Ruby syntax) treats only '\n' as a line break for ^ and $.
  pcre2_set_newline(cctx, PCRE2_NEWLINE_LF);
  int err = 0;
  PCRE2_SIZE off = 0;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), flags,
                              &err, &off, cctx);
  pcre2_compile_context_free(cctx);
  if (!impl_->code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    fail("{}: cannot compile regex '{}' at offset {}: {}", what, pattern, off,
         reinterpret_cast<const char*>(msg));
  }
  impl_->jit = pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() = default;
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view s) const {
  std::vector<std::pair<size_t, size_t>> out;
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  auto subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  size_t pos = 0;
  while (pos <= s.size()) {
    // NOTE: callers validate UTF-8 once up front, so PCRE2's per-call check is skipped
    // (it would make the loop quadratic on long inputs).
    int rc = impl_->jit ? pcre2_jit_match(impl_->code, subject, s.size(), pos, PCRE2_NO_UTF_CHECK,
                                          md, nullptr)
                        : pcre2_match(impl_->code, subject, s.size(), pos, PCRE2_NO_UTF_CHECK, md,
                                      nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      pcre2_match_data_free(md);
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      fail("regex match failed: {}", reinterpret_cast<const char*>(msg));
    }
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    size_t b = ov[0], e = ov[1];
    out.emplace_back(b, e);
    if (e > b) {
      pos = e;
    } else {
      if (e >= s.size()) break;
      size_t n = utf8::valid_char_len(s, e);
      pos = e + (n == 0 ? 1 : n);
    }
  }
  pcre2_match_data_free(md);
  return out;
}

std::string Regex::replace_all(std::string_view s, std::string_view with) const {
  std::string out;
  size_t last = 0;
  for (auto [b, e] : find_all(s)) {
    out.append(s.substr(last, b - last));
    out.append(with);
    last = e;
  }
  out.append(s.substr(last));
  return out;
}

}  // namespace ninfer
