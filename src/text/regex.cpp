#include "text/regex.h"

#include "core/check.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "text/tokenizer.h"

namespace densa {

struct Regex::Code {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Code() {
    if (code != nullptr) pcre2_code_free(code);
  }
};

Result<Regex> Regex::compile(std::string_view pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    return invalid_argument("regex '" + std::string(pattern) + "' at offset " + std::to_string(offset) + ": " +
                            reinterpret_cast<const char*>(message));
  }
  auto c = std::make_shared<Code>();
  c->code = code;
  c->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  Regex r;
  r.code_ = std::move(c);
  r.pattern_ = std::string(pattern);
  return r;
}

void Regex::for_each_match(std::string_view text, const std::function<void(size_t, size_t)>& on_match) const {
  // One match-data block per thread and pattern size is plenty: the patterns have few groups.
  // Freed when its thread exits (HTTP worker threads come and go with a server's load).
  struct MatchData {
    pcre2_match_data* md = pcre2_match_data_create(32, nullptr);
    ~MatchData() { pcre2_match_data_free(md); }
  };
  thread_local const MatchData match_data;
  pcre2_match_data* md = match_data.md;
  CHECK(md != nullptr) << "regex: out of memory for PCRE2 match data";
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos <= text.size()) {
    // The caller guarantees valid UTF-8; skipping the check keeps matching linear.
    const int rc = code_->jit ? pcre2_jit_match(code_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, md, nullptr)
                              : pcre2_match(code_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc < 0) break;  // PCRE2_ERROR_NOMATCH (other errors cannot occur on valid input)
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t begin = ov[0], end = ov[1];
    on_match(begin, end);
    if (end > begin) {
      pos = end;
    } else {
      if (end >= text.size()) break;
      pos = end + utf8_char_size(text, end);
    }
  }
}

}  // namespace densa
