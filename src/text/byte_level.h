#pragma once
// The GPT-2 byte-level alphabet: every byte is shown as one printable character. Bytes
// 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF stand for themselves (as code points); the others, in
// order, become U+0100, U+0101, ... Vocabularies of byte-level BPE store tokens in it.
#include <array>
#include <string>
#include <string_view>

namespace densa {

// UTF-8 of the character that shows byte b.
const std::array<std::string, 256>& byte_level_chars();
// The bytes a byte-level string stands for; false when a character is not in the alphabet.
bool byte_level_decode(std::string_view text, std::string& bytes);
// The byte-level string of raw bytes.
std::string byte_level_encode(std::string_view bytes);

}  // namespace densa
