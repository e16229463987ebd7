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
