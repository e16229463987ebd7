#pragma once
// Small text helpers the chat-output parsers share: markers that may still be arriving,
// incomplete UTF-8 at the end of a chunk, and the whitespace rule at structural boundaries.
#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>

namespace densa::toolparse {

inline bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// Length of the longest suffix of `text` that is a proper, non-empty prefix of `marker`: the
// bytes that could still grow into the marker and so must not be committed yet.
size_t partial_marker_suffix(std::string_view text, std::string_view marker);
size_t partial_marker_suffix(std::string_view text, std::initializer_list<std::string_view> markers);

// Number of trailing bytes of `text` that start a UTF-8 sequence which is not complete yet
// (0 when the text ends on a whole character or on bytes that can never become one).
size_t incomplete_utf8_tail(std::string_view text);

// `s` with every byte that does not begin a well-formed UTF-8 sequence (Unicode Table 3-7:
// no overlong forms, surrogates or code points past U+10FFFF) replaced by U+FFFD.
std::string sanitize_utf8(std::string_view s);

// True when `text` (the rest of the input) is a proper prefix of `marker`.
inline bool is_proper_prefix_of(std::string_view text, std::string_view marker) {
  return text.size() < marker.size() && marker.substr(0, text.size()) == text;
}

// Earliest occurrence at or after `from` of any of `markers`; npos when none. *which gets the
// index of the marker found (the longest when two start at the same byte).
size_t find_first_marker(std::string_view text, size_t from,
                         std::initializer_list<std::string_view> markers, size_t* which);

// `s` escaped as the inside of a JSON string (no quotes); bytes that are not UTF-8 become
// U+FFFD. Escaping is per character, so escape(a + b) == escape(a) + escape(b) when `a` ends
// on a whole character: the property streaming relies on.
std::string json_escape(std::string_view s);

// Whitespace at structural boundaries. Text arrives in order; whitespace right after a
// structural marker (drop_leading) is dropped, and trailing whitespace is held back until a
// non-space character follows (then it is emitted) or a structure begins (then it is
// dropped). finish() emits the held whitespace when keep_trailing, else drops it.
class BoundaryTrimmer {
 public:
  explicit BoundaryTrimmer(bool drop_leading, bool keep_trailing)
      : drop_leading_(drop_leading), keep_trailing_(keep_trailing) {}
  void text(std::string_view s, std::string* out);
  void structure_begins() { held_.clear(); }
  void structure_ends() {
    held_.clear();
    drop_leading_ = true;
  }
  void finish(std::string* out);

 private:
  std::string held_;
  bool drop_leading_;
  bool keep_trailing_;
};

}  // namespace densa::toolparse
