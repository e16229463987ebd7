#include "core/byte_size.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>

namespace densa {

Result<int64_t> parse_byte_size(std::string_view text) {
  const std::string s(text);
  char* end = nullptr;
  const double value = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || !(value >= 0) || !std::isfinite(value)) {
    return invalid_argument("not a byte size: \"" + s + "\"");
  }
  std::string unit(end);
  for (char& ch : unit) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (!unit.empty() && unit.back() == 'b') unit.pop_back();  // "GB", "GiB", "B"
  double mult = 0;
  if (unit.empty()) mult = 1;
  else if (unit == "k") mult = 1e3;
  else if (unit == "m") mult = 1e6;
  else if (unit == "g") mult = 1e9;
  else if (unit == "t") mult = 1e12;
  else if (unit == "ki") mult = 1024.0;
  else if (unit == "mi") mult = 1024.0 * 1024;
  else if (unit == "gi") mult = 1024.0 * 1024 * 1024;
  else if (unit == "ti") mult = 1024.0 * 1024 * 1024 * 1024;
  else return invalid_argument("unknown byte unit in \"" + s + "\" (use K, M, G, T, KiB, MiB, GiB, TiB)");
  const double bytes = std::round(value * mult);
  if (bytes > 9.0e18) return out_of_range("byte size too large: \"" + s + "\"");
  return static_cast<int64_t>(bytes);
}

}  // namespace densa
