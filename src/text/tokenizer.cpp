#include "text/tokenizer.h"

#include <algorithm>
#include <fstream>
#include <iterator>

#include "text/sentencepiece_model.h"

namespace densa {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // "▁" (U+2581) marks a space in pieces

// Length of the UTF-8 character at s[pos], or 1 when the bytes there are not well-formed UTF-8
// (each such byte then stands alone and falls back to a byte token).
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

// Parses "<0xNN>" into NN.
bool parse_byte_piece(std::string_view piece, uint8_t& out) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return false;
  int v = 0;
  for (char c : piece.substr(3, 2)) {
    v <<= 4;
    if (c >= '0' && c <= '9') v |= c - '0';
    else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
    else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
    else return false;
  }
  out = static_cast<uint8_t>(v);
  return true;
}

std::string replace_space_marks(std::string_view piece) {
  std::string out;
  out.reserve(piece.size());
  for (size_t i = 0; i < piece.size();) {
    if (piece.substr(i, kSpace.size()) == kSpace) {
      out += ' ';
      i += kSpace.size();
    } else {
      out += piece[i++];
    }
  }
  return out;
}

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

}  // namespace

// Working memory of one encode() call, reused across the runs of the text.
struct Tokenizer::EncodeScratch {
  // A live symbol: bytes [begin, begin + size) of the run.
  struct Symbol {
    uint32_t begin;
    uint32_t size;  // 0 once merged into its left neighbour
    int32_t prev;   // -1 at the ends
    int32_t next;
  };
  // A possible merge of symbol `left` with its right neighbour into `size` bytes, piece `id`.
  struct MergeCandidate {
    float score;
    uint32_t left;
    uint32_t size;
    TokenId id;
  };
  // Heap order: highest score on top; on equal scores the leftmost pair.
  static bool below(const MergeCandidate& a, const MergeCandidate& b) {
    if (a.score != b.score) return a.score < b.score;
    return a.left > b.left;
  }

  std::vector<Symbol> symbols;
  std::vector<MergeCandidate> heap;
};

Result<Tokenizer> Tokenizer::from_vocab(TokenizerVocab vocab) {
  const size_t n = vocab.pieces.size();
  if (n == 0) return invalid_argument("tokenizer: empty vocabulary");
  if (n > (1u << 30)) return invalid_argument("tokenizer: vocabulary too large");
  if (vocab.scores.size() != n || vocab.types.size() != n) {
    return invalid_argument("tokenizer: pieces, scores and types differ in length");
  }
  for (TokenId id : {vocab.bos_id, vocab.eos_id, vocab.unk_id}) {
    if (id < 0 || static_cast<size_t>(id) >= n) {
      return invalid_argument("tokenizer: special token id " + std::to_string(id) + " out of range");
    }
  }
  Tokenizer tok;
  tok.decoded_.resize(n);
  tok.dummy_prefix_.assign(n, 0);
  bool have_byte[256] = {};
  for (size_t i = 0; i < n; ++i) {
    const auto id = static_cast<TokenId>(i);
    const std::string& piece = vocab.pieces[i];
    tok.piece_to_id_.emplace(piece, id);
    switch (vocab.types[i]) {
      case TokenType::kNormal:
      case TokenType::kUserDefined:
        if (piece.empty()) break;
        tok.merge_ids_.emplace(piece, id);
        for (char c : piece) tok.piece_byte_[static_cast<uint8_t>(c)] = true;
        if (vocab.types[i] == TokenType::kUserDefined) tok.user_defined_.push_back(piece);
        tok.decoded_[i] = replace_space_marks(piece);
        tok.dummy_prefix_[i] = piece.starts_with(kSpace) ? 1 : 0;
        break;
      case TokenType::kByte: {
        uint8_t b = 0;
        if (!parse_byte_piece(piece, b)) return data_loss("tokenizer: byte token '" + piece + "' is not <0xNN>");
        if (!have_byte[b]) tok.byte_ids_[b] = id;
        have_byte[b] = true;
        tok.decoded_[i] = std::string(1, static_cast<char>(b));
        break;
      }
      case TokenType::kUnused:
        tok.decoded_[i] = replace_space_marks(piece);
        tok.dummy_prefix_[i] = piece.starts_with(kSpace) ? 1 : 0;
        break;
      case TokenType::kUnknown:
      case TokenType::kControl:
        break;
      default:
        return data_loss("tokenizer: token " + std::to_string(i) + " has an unknown type");
    }
  }
  tok.byte_fallback_ = std::all_of(std::begin(have_byte), std::end(have_byte), [](bool b) { return b; });
  std::sort(tok.user_defined_.begin(), tok.user_defined_.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  tok.vocab_ = std::move(vocab);
  return tok;
}

Result<Tokenizer> Tokenizer::from_sentencepiece_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("tokenizer: cannot open " + path.string());
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return data_loss("tokenizer: read error on " + path.string());
  auto model = parse_sentencepiece_model(bytes);
  if (!model.is_ok()) return Status(model.status().code(), path.string() + ": " + model.status().message());
  const bool wants_byte_fallback = model->spec.byte_fallback;
  auto tok = from_vocab(std::move(model->vocab));
  if (!tok.is_ok()) return Status(tok.status().code(), path.string() + ": " + tok.status().message());
  if (wants_byte_fallback && !tok->byte_fallback()) {
    return data_loss(path.string() + ": byte_fallback set but the 256 <0xNN> pieces are missing");
  }
  return tok;
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool add_bos) const {
  std::vector<TokenId> ids;
  if (add_bos) ids.push_back(vocab_.bos_id);
  if (text.empty()) return ids;
  std::string normalized;
  normalized.reserve(text.size() + text.size() / 4 + kSpace.size());
  if (vocab_.add_dummy_prefix) normalized += kSpace;
  for (char c : text) {
    if (c == ' ') normalized += kSpace;
    else normalized += c;
  }
  ids.reserve(ids.size() + normalized.size() / 3 + 1);
  encode_normalized(normalized, ids);
  return ids;
}

// SentencePiece BPE: start from characters (user-defined pieces whole), then repeatedly merge
// the adjacent pair whose concatenation is the highest-scoring piece (leftmost on ties). The
// queue holds candidate merges; one whose symbols changed since it was queued is stale, which
// shows as a dead left symbol or a pair size that no longer matches.
//
// A byte that occurs in no mergeable piece (here "\n" and digits) can never be inside a merged
// symbol, so it splits the text into runs that merge independently: the same result as one
// queue over the whole text, with small queues that stay in cache.
void Tokenizer::encode_normalized(std::string_view text, std::vector<TokenId>& out) const {
  EncodeScratch scratch;
  bool last_was_unk = false;
  size_t run_begin = 0;
  for (size_t pos = 0; pos <= text.size(); ++pos) {
    if (pos < text.size() && piece_byte_[static_cast<uint8_t>(text[pos])]) continue;
    if (pos > run_begin) encode_run(text.substr(run_begin, pos - run_begin), scratch, last_was_unk, out);
    if (pos < text.size()) emit_unknown(text.substr(pos, 1), last_was_unk, out);
    run_begin = pos + 1;
  }
}

void Tokenizer::emit_unknown(std::string_view piece, bool& last_was_unk, std::vector<TokenId>& out) const {
  if (byte_fallback_) {
    for (char b : piece) out.push_back(byte_ids_[static_cast<uint8_t>(b)]);
  } else if (!last_was_unk) {  // like SentencePiece, a run of unknown characters is one unk
    out.push_back(vocab_.unk_id);
    last_was_unk = true;
  }
}

void Tokenizer::encode_run(std::string_view text, EncodeScratch& scratch, bool& last_was_unk,
                           std::vector<TokenId>& out) const {
  using Symbol = EncodeScratch::Symbol;
  std::vector<Symbol>& symbols = scratch.symbols;
  symbols.clear();
  for (size_t pos = 0; pos < text.size();) {
    size_t size = 0;
    for (const std::string& piece : user_defined_) {
      if (text.substr(pos).starts_with(piece)) {
        size = piece.size();
        break;
      }
    }
    if (size == 0) size = utf8_char_size(text, pos);
    const auto idx = static_cast<int32_t>(symbols.size());
    symbols.push_back({static_cast<uint32_t>(pos), static_cast<uint32_t>(size), idx - 1, idx + 1});
    pos += size;
  }
  symbols.back().next = -1;

  std::vector<EncodeScratch::MergeCandidate>& heap = scratch.heap;
  heap.clear();
  const auto order = &EncodeScratch::below;
  const auto try_pair = [&](int32_t left) {
    if (left < 0) return;
    const int32_t right = symbols[left].next;
    if (right < 0) return;
    const uint32_t size = symbols[left].size + symbols[right].size;
    auto it = merge_ids_.find(text.substr(symbols[left].begin, size));
    if (it == merge_ids_.end()) return;
    heap.push_back({vocab_.scores[it->second], static_cast<uint32_t>(left), size, it->second});
    std::push_heap(heap.begin(), heap.end(), order);
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) try_pair(i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), order);
    const EncodeScratch::MergeCandidate c = heap.back();
    heap.pop_back();
    Symbol& left = symbols[c.left];
    if (left.size == 0 || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    if (left.size + right.size != c.size) continue;  // stale
    left.size = c.size;
    right.size = 0;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = static_cast<int32_t>(c.left);
    try_pair(left.prev);
    try_pair(static_cast<int32_t>(c.left));
  }

  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    const std::string_view piece = text.substr(symbols[i].begin, symbols[i].size);
    auto it = merge_ids_.find(piece);
    if (it != merge_ids_.end()) {
      out.push_back(it->second);
      last_was_unk = false;
    } else {
      emit_unknown(piece, last_was_unk, out);
    }
  }
}

std::string Tokenizer::token_bytes(TokenId id) const {
  if (id < 0 || id >= vocab_size()) return {};
  switch (vocab_.types[id]) {
    case TokenType::kControl:
    case TokenType::kUnknown:
      return vocab_.pieces[id];
    case TokenType::kNormal:
    case TokenType::kUserDefined:
    case TokenType::kUnused:
    case TokenType::kByte:
      return decoded_[id];
  }
  return {};
}

void Tokenizer::append_decoded(TokenId id, bool& at_start, std::string& out) const {
  if (id < 0 || id >= vocab_size()) return;
  const std::string& text = decoded_[id];
  if (text.empty()) return;
  const bool strip = at_start && vocab_.add_dummy_prefix && dummy_prefix_[id];
  at_start = false;
  out.append(text, strip ? 1 : 0);
}

size_t Tokenizer::decoded_size(TokenId id, bool& at_start) const {
  if (id < 0 || id >= vocab_size()) return 0;
  const size_t size = decoded_[id].size();
  if (size == 0) return 0;
  const bool strip = at_start && vocab_.add_dummy_prefix && dummy_prefix_[id];
  at_start = false;
  return size - (strip ? 1 : 0);
}

std::string Tokenizer::decode(std::span<const TokenId> ids) const {
  std::string out;
  bool at_start = true;
  for (TokenId id : ids) append_decoded(id, at_start, out);
  return out;
}

std::string Tokenizer::decode_incremental(std::span<const TokenId> ids, size_t& emitted_bytes,
                                          bool flush) const {
  // Find the first token whose text reaches past emitted_bytes, then decode from there.
  bool at_start = true;
  size_t offset = 0;
  size_t first_idx = ids.size();
  size_t first_offset = 0;
  bool first_at_start = true;
  for (size_t i = 0; i < ids.size(); ++i) {
    const bool before = at_start;
    const size_t size = decoded_size(ids[i], at_start);
    if (first_idx == ids.size() && offset + size > emitted_bytes) {
      first_idx = i;
      first_offset = offset;
      first_at_start = before;
    }
    offset += size;
  }
  if (first_idx == ids.size()) return {};
  std::string tail;
  for (size_t i = first_idx; i < ids.size(); ++i) append_decoded(ids[i], first_at_start, tail);
  std::string_view fresh = std::string_view(tail).substr(emitted_bytes - first_offset);
  if (!flush) fresh = fresh.substr(0, incomplete_utf8_tail(fresh));
  emitted_bytes += fresh.size();
  return std::string(fresh);
}

}  // namespace densa
