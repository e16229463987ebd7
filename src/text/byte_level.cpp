#include "text/byte_level.h"

#include <unordered_map>

namespace densa {
namespace {

std::string utf8_of(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

struct Tables {
  std::array<std::string, 256> chars;
  std::unordered_map<uint32_t, uint8_t> code_to_byte;  // code point -> byte
  Tables() {
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool self = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      const uint32_t cp = self ? b : next++;
      chars[b] = utf8_of(cp);
      code_to_byte[cp] = static_cast<uint8_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

const std::array<std::string, 256>& byte_level_chars() { return tables().chars; }

bool byte_level_decode(std::string_view text, std::string& bytes) {
  bytes.clear();
  const auto& map = tables().code_to_byte;
  for (size_t i = 0; i < text.size();) {
    const auto b0 = static_cast<uint8_t>(text[i]);
    uint32_t cp = 0;
    size_t n = 1;
    if (b0 < 0x80) {
      cp = b0;
    } else if ((b0 & 0xE0) == 0xC0 && i + 1 < text.size()) {
      cp = ((b0 & 0x1Fu) << 6) | (static_cast<uint8_t>(text[i + 1]) & 0x3Fu);
      n = 2;
    } else {
      return false;  // every character of the alphabet is below U+0800
    }
    auto it = map.find(cp);
    if (it == map.end()) return false;
    bytes += static_cast<char>(it->second);
    i += n;
  }
  return true;
}

std::string byte_level_encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  const auto& chars = byte_level_chars();
  for (char c : bytes) out += chars[static_cast<uint8_t>(c)];
  return out;
}

}  // namespace densa
