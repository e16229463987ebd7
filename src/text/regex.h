#pragma once
// PCRE2 regular expressions for tokenizer split patterns: UTF mode with Unicode properties
// for \w \d \s and POSIX classes (UCP), JIT-compiled where the platform allows. Compiled
// patterns are immutable and shared; matching is safe from many threads.
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"

namespace densa {

class Regex {
 public:
  // Compiles `pattern` (PCRE2 syntax); a syntax error names the pattern and the offset.
  static Result<Regex> compile(std::string_view pattern);

  // Calls on_match(begin, end) for each successive non-overlapping match in `text`, which must
  // be valid UTF-8. After an empty match the search resumes one character further on.
  void for_each_match(std::string_view text, const std::function<void(size_t, size_t)>& on_match) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Code;
  std::shared_ptr<const Code> code_;
  std::string pattern_;
};

}  // namespace densa
