#include "text/tokenizer.h"

#include <algorithm>

namespace densa {
namespace {

// Start of a trailing UTF-8 sequence in s that is incomplete but may still be completed by
// more bytes; s.size() when there is none.
size_t incomplete_utf8_tail(std::string_view s) {
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const uint8_t b = static_cast<uint8_t>(s[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    size_t need = 0;
    if (b >= 0xC2 && b <= 0xDF) need = 2;
    else if (b >= 0xE0 && b <= 0xEF) need = 3;
    else if (b >= 0xF0 && b <= 0xF4) need = 4;
    return need > back ? n - back : n;
  }
  return n;
}

uint64_t fnv1a(uint64_t h, std::string_view s) {
  for (char c : s) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

}  // namespace

size_t utf8_char_size(std::string_view s, size_t pos) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const uint8_t lead = byte(pos);
  if (lead < 0x80) return 1;
  size_t size = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    size = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    size = 3;
    if (lead == 0xE0) lo = 0xA0;  // no overlong forms
    if (lead == 0xED) hi = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    size = 4;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
  } else {
    return 1;
  }
  if (pos + size > s.size()) return 1;
  if (byte(pos + 1) < lo || byte(pos + 1) > hi) return 1;
  for (size_t i = 2; i < size; ++i) {
    if ((byte(pos + i) & 0xC0) != 0x80) return 1;
  }
  return size;
}

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t n = utf8_char_size(s, i);
    if (n == 1) return false;
    i += n;
  }
  return true;
}

Result<Tokenizer> Tokenizer::from_parts(TokenizerParts parts) {
  const std::string what = "tokenizer (" + parts.kind + ")";
  TokenizerVocab& v = parts.vocab;
  const size_t n = v.pieces.size();
  if (n == 0) return invalid_argument(what + ": empty vocabulary");
  if (n > (1u << 30)) return invalid_argument(what + ": vocabulary too large");
  if (v.scores.empty()) v.scores.assign(n, 0.0f);
  if (v.scores.size() != n || v.types.size() != n || parts.decoded.size() != n) {
    return invalid_argument(what + ": pieces, scores, types and decoded texts differ in length");
  }
  if (parts.strippable.empty()) parts.strippable.assign(n, 0);
  if (parts.strippable.size() != n) return invalid_argument(what + ": strippable table has the wrong length");
  if (!parts.encoder) return invalid_argument(what + ": no encoder");
  const auto check_id = [&](TokenId id, const char* name) -> Status {
    if (id < -1 || id >= static_cast<TokenId>(n)) {
      return invalid_argument(what + ": " + name + " id " + std::to_string(id) + " is outside the vocabulary (" +
                              std::to_string(n) + ")");
    }
    return Status::ok();
  };
  DENSA_RETURN_IF_ERROR(check_id(v.bos_id, "bos"));
  DENSA_RETURN_IF_ERROR(check_id(v.eos_id, "eos"));
  DENSA_RETURN_IF_ERROR(check_id(v.unk_id, "unk"));
  for (const auto* list : {&parts.prefix, &parts.suffix, &parts.eos_ids}) {
    for (TokenId id : *list) {
      DENSA_RETURN_IF_ERROR(check_id(id, "post-processor / eos"));
      if (id < 0) return invalid_argument(what + ": negative id in the post-processor or eos list");
    }
  }
  if (v.eos_id >= 0 && std::find(parts.eos_ids.begin(), parts.eos_ids.end(), v.eos_id) == parts.eos_ids.end()) {
    parts.eos_ids.insert(parts.eos_ids.begin(), v.eos_id);
  }
  auto state = std::make_shared<State>();
  state->piece_to_id.reserve(n);
  uint64_t h = fnv1a(0xcbf29ce484222325ULL, parts.kind);
  for (size_t i = 0; i < n; ++i) {
    state->piece_to_id.emplace(v.pieces[i], static_cast<TokenId>(i));
    h = fnv1a(h, "|");
    h = fnv1a(h, v.pieces[i]);
    h = fnv1a(h, std::string_view(reinterpret_cast<const char*>(&v.types[i]), sizeof(TokenType)));
  }
  for (TokenId id : {v.bos_id, v.eos_id}) h = fnv1a(h, std::to_string(id));
  state->fingerprint = h;
  state->parts = std::move(parts);
  Tokenizer tok;
  tok.s_ = std::move(state);
  return tok;
}

Result<Tokenizer> Tokenizer::with_config(const SpecialTokenConfig& c) const {
  TokenizerParts parts = s_->parts;
  TokenizerVocab& v = parts.vocab;
  const TokenId old_bos = v.bos_id, old_eos = v.eos_id;
  if (c.bos_id) v.bos_id = *c.bos_id;
  if (c.eos_id) v.eos_id = *c.eos_id;
  const auto drop = [](std::vector<TokenId>& ids, TokenId id) { ids.erase(std::remove(ids.begin(), ids.end(), id), ids.end()); };
  if (c.add_bos) {
    if (old_bos >= 0) drop(parts.prefix, old_bos);
    drop(parts.prefix, v.bos_id);
    if (*c.add_bos) {
      if (v.bos_id < 0) return invalid_argument("tokenizer: add_bos_token is set but there is no bos token");
      parts.prefix.insert(parts.prefix.begin(), v.bos_id);
    }
  }
  if (c.add_eos) {
    if (old_eos >= 0) drop(parts.suffix, old_eos);
    drop(parts.suffix, v.eos_id);
    if (*c.add_eos) {
      if (v.eos_id < 0) return invalid_argument("tokenizer: add_eos_token is set but there is no eos token");
      parts.suffix.push_back(v.eos_id);
    }
  }
  v.add_bos = !parts.prefix.empty();
  if (c.eos_id && old_eos >= 0 && old_eos != v.eos_id) drop(parts.eos_ids, old_eos);
  for (TokenId id : c.eos_ids) {
    if (std::find(parts.eos_ids.begin(), parts.eos_ids.end(), id) == parts.eos_ids.end()) parts.eos_ids.push_back(id);
  }
  return from_parts(std::move(parts));
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const TokenizerParts& p = s_->parts;
  std::vector<TokenId> ids;
  ids.reserve(text.size() / 3 + 4);
  if (add_special_tokens) ids.insert(ids.end(), p.prefix.begin(), p.prefix.end());
  if (!text.empty()) p.encoder->encode(text, ids);
  if (add_special_tokens) ids.insert(ids.end(), p.suffix.begin(), p.suffix.end());
  return ids;
}

bool Tokenizer::is_special(TokenId id) const {
  if (id < 0 || id >= vocab_size()) return false;
  const TokenType t = s_->parts.vocab.types[id];
  return t == TokenType::kControl || t == TokenType::kUnknown;
}

bool Tokenizer::is_eos(TokenId id) const {
  const auto& e = s_->parts.eos_ids;
  return std::find(e.begin(), e.end(), id) != e.end();
}

std::optional<TokenId> Tokenizer::token_to_id(std::string_view piece) const {
  auto it = s_->piece_to_id.find(piece);
  if (it == s_->piece_to_id.end()) return std::nullopt;
  return it->second;
}

std::string Tokenizer::token_bytes(TokenId id) const {
  if (id < 0 || id >= vocab_size()) return {};
  if (is_special(id)) return s_->parts.vocab.pieces[id];
  return s_->parts.decoded[id];
}

void Tokenizer::append_decoded(TokenId id, bool skip_special, int& strip_left, std::string& out) const {
  if (id < 0 || id >= vocab_size()) return;
  const TokenizerParts& p = s_->parts;
  const bool special = is_special(id);
  if (special && skip_special) return;
  const std::string& text = special ? p.vocab.pieces[id] : p.decoded[id];
  if (text.empty()) return;
  size_t skip = 0;
  if (strip_left > 0 && p.strippable[id]) {
    while (strip_left > 0 && skip < text.size() && text[skip] == p.strip_char) {
      ++skip;
      --strip_left;
    }
  }
  if (skip < text.size()) strip_left = 0;
  out.append(text, skip);
}

size_t Tokenizer::decoded_size(TokenId id, bool skip_special, int& strip_left) const {
  if (id < 0 || id >= vocab_size()) return 0;
  const TokenizerParts& p = s_->parts;
  const bool special = is_special(id);
  if (special && skip_special) return 0;
  const std::string& text = special ? p.vocab.pieces[id] : p.decoded[id];
  if (text.empty()) return 0;
  size_t skip = 0;
  if (strip_left > 0 && p.strippable[id]) {
    while (strip_left > 0 && skip < text.size() && text[skip] == p.strip_char) {
      ++skip;
      --strip_left;
    }
  }
  if (skip < text.size()) strip_left = 0;
  return text.size() - skip;
}

std::string Tokenizer::decode(std::span<const TokenId> ids, bool skip_special) const {
  std::string out;
  int strip_left = s_->parts.strip_count;
  for (TokenId id : ids) append_decoded(id, skip_special, strip_left, out);
  return out;
}

std::string Tokenizer::decode_incremental(std::span<const TokenId> ids, size_t& emitted_bytes,
                                          bool flush, bool skip_special) const {
  // Find the first token whose text reaches past emitted_bytes, then decode from there.
  int strip_left = s_->parts.strip_count;
  size_t offset = 0;
  size_t first_idx = ids.size();
  size_t first_offset = 0;
  int first_strip = strip_left;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int before = strip_left;
    const size_t size = decoded_size(ids[i], skip_special, strip_left);
    if (first_idx == ids.size() && offset + size > emitted_bytes) {
      first_idx = i;
      first_offset = offset;
      first_strip = before;
    }
    offset += size;
  }
  if (first_idx == ids.size()) return {};
  std::string tail;
  for (size_t i = first_idx; i < ids.size(); ++i) append_decoded(ids[i], skip_special, first_strip, tail);
  std::string_view fresh = std::string_view(tail).substr(emitted_bytes - first_offset);
  if (!flush) fresh = fresh.substr(0, incomplete_utf8_tail(fresh));
  emitted_bytes += fresh.size();
  return std::string(fresh);
}

}  // namespace densa
