#include "text/chat_parse/text_util.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace densa::toolparse {

size_t partial_marker_suffix(std::string_view text, std::string_view marker) {
  const size_t longest = std::min(text.size(), marker.empty() ? 0 : marker.size() - 1);
  for (size_t n = longest; n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

size_t partial_marker_suffix(std::string_view text, std::initializer_list<std::string_view> markers) {
  size_t best = 0;
  for (std::string_view m : markers) best = std::max(best, partial_marker_suffix(text, m));
  return best;
}

size_t incomplete_utf8_tail(std::string_view text) {
  // Look back at most 3 bytes for a lead byte whose sequence runs past the end.
  const size_t n = text.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(text[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    size_t need = 0;
    if ((c & 0xE0) == 0xC0) need = 2;
    else if ((c & 0xF0) == 0xE0) need = 3;
    else if ((c & 0xF8) == 0xF0) need = 4;
    return need > back ? back : 0;
  }
  return 0;
}

namespace {
// Length of the well-formed UTF-8 sequence at s[i], or 0.
size_t utf8_sequence_length(std::string_view s, size_t i) {
  const auto at = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = at(0);
  if (c < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // bounds of the second byte
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c == 0xE0) n = 3, lo = 0xA0;
  else if (c >= 0xE1 && c <= 0xEC) n = 3;
  else if (c == 0xED) n = 3, hi = 0x9F;
  else if (c >= 0xEE && c <= 0xEF) n = 3;
  else if (c == 0xF0) n = 4, lo = 0x90;
  else if (c >= 0xF1 && c <= 0xF3) n = 4;
  else if (c == 0xF4) n = 4, hi = 0x8F;
  else return 0;
  if (i + n > s.size() || at(1) < lo || at(1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if ((at(k) & 0xC0) != 0x80) return 0;
  }
  return n;
}
}  // namespace

std::string sanitize_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence_length(s, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

size_t find_first_marker(std::string_view text, size_t from,
                         std::initializer_list<std::string_view> markers, size_t* which) {
  size_t best = std::string_view::npos;
  size_t best_len = 0;
  size_t i = 0;
  for (std::string_view m : markers) {
    if (!m.empty()) {
      const size_t p = text.find(m, from);
      if (p != std::string_view::npos && (p < best || (p == best && m.size() > best_len))) {
        best = p;
        best_len = m.size();
        if (which) *which = i;
      }
    }
    ++i;
  }
  return best;
}

std::string json_escape(std::string_view s) {
  const std::string quoted =
      nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return quoted.substr(1, quoted.size() - 2);
}

void BoundaryTrimmer::text(std::string_view s, std::string* out) {
  for (char c : s) {
    if (is_space(c)) {
      if (!drop_leading_) held_ += c;
      continue;
    }
    drop_leading_ = false;
    out->append(held_);
    held_.clear();
    out->push_back(c);
  }
}

void BoundaryTrimmer::finish(std::string* out) {
  if (keep_trailing_ && out) out->append(held_);
  held_.clear();
}

}  // namespace densa::toolparse
