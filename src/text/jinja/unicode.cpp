#include "text/jinja/unicode.h"

#include <utf8proc.h>

namespace densa::jinja {

char32_t decode_utf8(std::string_view s, size_t& i) {
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i);
  if (static_cast<unsigned char>(s[i]) < 0x80) return static_cast<char32_t>(s[i++]);
  utf8proc_int32_t cp = 0;
  const utf8proc_ssize_t n = utf8proc_iterate(p, static_cast<utf8proc_ssize_t>(s.size() - i), &cp);
  if (n <= 0) {
    ++i;
    return 0xFFFD;
  }
  i += static_cast<size_t>(n);
  return static_cast<char32_t>(cp);
}

void append_utf8(std::string& out, char32_t cp) {
  utf8proc_uint8_t buf[4];
  const utf8proc_ssize_t n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(cp), buf);
  out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

std::vector<char32_t> to_code_points(std::string_view s) {
  std::vector<char32_t> cps;
  cps.reserve(s.size());
  for (size_t i = 0; i < s.size();) cps.push_back(decode_utf8(s, i));
  return cps;
}

std::string from_code_points(const std::vector<char32_t>& cps, size_t begin, size_t end) {
  std::string out;
  for (size_t k = begin; k < end; ++k) append_utf8(out, cps[k]);
  return out;
}

size_t code_point_count(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size();) decode_utf8(s, i), ++n;
  return n;
}

bool is_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

bool is_space(char32_t cp) {
  switch (cp) {
    case 0x09: case 0x0a: case 0x0b: case 0x0c: case 0x0d: case 0x1c: case 0x1d: case 0x1e:
    case 0x1f: case 0x20: case 0x85: case 0xa0: case 0x1680: case 0x2028: case 0x2029:
    case 0x202f: case 0x205f: case 0x3000: return true;
    default: return cp >= 0x2000 && cp <= 0x200a;
  }
}

bool is_printable(char32_t cp) {
  if (cp == ' ') return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO: case UTF8PROC_CATEGORY_CN: case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP: case UTF8PROC_CATEGORY_ZS: return false;
    default: return true;
  }
}

bool is_alpha(char32_t cp) {
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: return true;
    default: return false;
  }
}

bool is_digit(char32_t cp) { return utf8proc_category(static_cast<utf8proc_int32_t>(cp)) == UTF8PROC_CATEGORY_ND; }
bool is_upper(char32_t cp) { return utf8proc_isupper(static_cast<utf8proc_int32_t>(cp)); }
bool is_lower(char32_t cp) { return utf8proc_islower(static_cast<utf8proc_int32_t>(cp)); }
char32_t to_upper(char32_t cp) { return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(cp))); }
char32_t to_lower(char32_t cp) { return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))); }
char32_t to_title(char32_t cp) { return static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(cp))); }

namespace {

struct SpecialCase {
  char32_t cp;
  const char* upper;
  const char* title;
};
// SpecialCasing.txt's unconditional multi-character mappings for Latin / Armenian ligatures.
constexpr SpecialCase kSpecial[] = {
    {0x00DF, "SS", "Ss"}, {0x0149, "\u02BCN", "\u02BCN"}, {0x0587, "\u0535\u0552", "\u0535\u0582"},
    {0xFB00, "FF", "Ff"}, {0xFB01, "FI", "Fi"}, {0xFB02, "FL", "Fl"}, {0xFB03, "FFI", "Ffi"},
    {0xFB04, "FFL", "Ffl"}, {0xFB05, "ST", "St"}, {0xFB06, "ST", "St"},
};

const SpecialCase* special(char32_t cp) {
  if (cp < 0xDF) return nullptr;
  for (const SpecialCase& s : kSpecial)
    if (s.cp == cp) return &s;
  return nullptr;
}

}  // namespace

void append_upper(std::string& out, char32_t cp) {
  if (const SpecialCase* s = special(cp)) out += s->upper;
  else append_utf8(out, to_upper(cp));
}
void append_title(std::string& out, char32_t cp) {
  if (const SpecialCase* s = special(cp)) out += s->title;
  else append_utf8(out, to_title(cp));
}
void append_lower(std::string& out, char32_t cp) {
  if (cp == 0x0130) out += "i\u0307";
  else append_utf8(out, to_lower(cp));
}

namespace {
template <typename F>
std::string map_chars(std::string_view s, F f) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      f(out, static_cast<char32_t>(c));
      ++i;
    } else {
      f(out, decode_utf8(s, i));
    }
  }
  return out;
}
}  // namespace

std::string upper(std::string_view s) { return map_chars(s, append_upper); }
std::string lower(std::string_view s) { return map_chars(s, append_lower); }

}  // namespace densa::jinja
