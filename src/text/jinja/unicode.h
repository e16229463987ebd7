#pragma once
// Code-point helpers for the Jinja engine: Python str operates on code points, densa's strings
// are UTF-8. Invalid UTF-8 bytes decode as U+FFFD one byte at a time (never a crash).
#include <string>
#include <string_view>
#include <vector>

namespace densa::jinja {

// Decodes the code point at s[i] and advances i past it.
char32_t decode_utf8(std::string_view s, size_t& i);
void append_utf8(std::string& out, char32_t cp);
std::vector<char32_t> to_code_points(std::string_view s);
std::string from_code_points(const std::vector<char32_t>& cps, size_t begin, size_t end);
size_t code_point_count(std::string_view s);
bool is_ascii(std::string_view s);

// Python str.isspace() for one code point.
bool is_space(char32_t cp);
// Python str.isprintable() for one code point (used by repr).
bool is_printable(char32_t cp);
bool is_alpha(char32_t cp);
bool is_digit(char32_t cp);
bool is_upper(char32_t cp);
bool is_lower(char32_t cp);
char32_t to_upper(char32_t cp);
char32_t to_lower(char32_t cp);
char32_t to_title(char32_t cp);

// Full case mappings (Python's str.upper / lower / title: ß -> SS, ﬁ -> FI, İ -> i̇) for the
// characters whose mapping is more than one code point; simple mappings otherwise.
void append_upper(std::string& out, char32_t cp);
void append_lower(std::string& out, char32_t cp);
void append_title(std::string& out, char32_t cp);

std::string upper(std::string_view s);
std::string lower(std::string_view s);

}  // namespace densa::jinja
