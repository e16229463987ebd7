// SentencePiece BPE with byte fallback (Llama style): a "▁" dummy prefix, no normalisation,
// merges by highest piece score, unknown bytes as <0xNN> tokens. Control tokens in the text
// are not parsed (they encode as ordinary text).
#include <algorithm>
#include <fstream>
#include <iterator>

#include "text/sentencepiece_model.h"
#include "text/tokenizer.h"

namespace densa {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // "▁" (U+2581) marks a space in pieces

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

struct PieceHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using PieceMap = std::unordered_map<std::string, TokenId, PieceHash, std::equal_to<>>;

class SentencePieceEncoder final : public TextEncoder {
 public:
  void encode(std::string_view text, std::vector<TokenId>& out) const override;

  std::vector<float> scores;
  PieceMap merge_ids;                    // normal + user-defined pieces: what BPE may produce
  std::vector<std::string> user_defined; // matched whole before BPE, longest first
  TokenId byte_ids[256] = {};
  bool piece_byte[256] = {};  // bytes that occur in some mergeable piece; others split runs
  bool byte_fallback = false;
  bool add_dummy_prefix = true;
  TokenId unk_id = 0;

 private:
  // Working memory of one encode() call, reused across the runs of the text.
  struct Scratch {
    struct Symbol {  // bytes [begin, begin + size) of the run
      uint32_t begin;
      uint32_t size;  // 0 once merged into its left neighbour
      int32_t prev;   // -1 at the ends
      int32_t next;
    };
    struct Candidate {  // merge of symbol `left` with its right neighbour into `size` bytes
      float score;
      uint32_t left;
      uint32_t size;
      TokenId id;
    };
    // Heap order: highest score on top; on equal scores the leftmost pair.
    static bool below(const Candidate& a, const Candidate& b) {
      if (a.score != b.score) return a.score < b.score;
      return a.left > b.left;
    }
    std::vector<Symbol> symbols;
    std::vector<Candidate> heap;
  };

  void encode_run(std::string_view text, Scratch& scratch, bool& last_was_unk, std::vector<TokenId>& out) const;
  void emit_unknown(std::string_view piece, bool& last_was_unk, std::vector<TokenId>& out) const;
};

void SentencePieceEncoder::encode(std::string_view raw, std::vector<TokenId>& out) const {
  std::string text;
  text.reserve(raw.size() + raw.size() / 4 + kSpace.size());
  if (add_dummy_prefix) text += kSpace;
  for (char c : raw) {
    if (c == ' ') text += kSpace;
    else text += c;
  }
  // A byte that occurs in no mergeable piece (e.g. "\n" and digits) can never be inside a
  // merged symbol, so it splits the text into runs that merge independently: the same result
  // as one queue over the whole text, with small queues that stay in cache.
  Scratch scratch;
  bool last_was_unk = false;
  size_t run_begin = 0;
  for (size_t pos = 0; pos <= text.size(); ++pos) {
    if (pos < text.size() && piece_byte[static_cast<uint8_t>(text[pos])]) continue;
    const std::string_view view(text);
    if (pos > run_begin) encode_run(view.substr(run_begin, pos - run_begin), scratch, last_was_unk, out);
    if (pos < text.size()) emit_unknown(view.substr(pos, 1), last_was_unk, out);
    run_begin = pos + 1;
  }
}

void SentencePieceEncoder::emit_unknown(std::string_view piece, bool& last_was_unk, std::vector<TokenId>& out) const {
  if (byte_fallback) {
    for (char b : piece) out.push_back(byte_ids[static_cast<uint8_t>(b)]);
  } else if (!last_was_unk) {  // like SentencePiece, a run of unknown characters is one unk
    out.push_back(unk_id);
    last_was_unk = true;
  }
}

// SentencePiece BPE: start from characters (user-defined pieces whole), then repeatedly merge
// the adjacent pair whose concatenation is the highest-scoring piece (leftmost on ties). The
// queue holds candidate merges; one whose symbols changed since it was queued is stale, which
// shows as a dead left symbol or a pair size that no longer matches.
void SentencePieceEncoder::encode_run(std::string_view text, Scratch& scratch, bool& last_was_unk,
                                      std::vector<TokenId>& out) const {
  using Symbol = Scratch::Symbol;
  std::vector<Symbol>& symbols = scratch.symbols;
  symbols.clear();
  for (size_t pos = 0; pos < text.size();) {
    size_t size = 0;
    for (const std::string& piece : user_defined) {
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

  std::vector<Scratch::Candidate>& heap = scratch.heap;
  heap.clear();
  const auto order = &Scratch::below;
  const auto try_pair = [&](int32_t left) {
    if (left < 0) return;
    const int32_t right = symbols[left].next;
    if (right < 0) return;
    const uint32_t size = symbols[left].size + symbols[right].size;
    auto it = merge_ids.find(text.substr(symbols[left].begin, size));
    if (it == merge_ids.end()) return;
    heap.push_back({scores[it->second], static_cast<uint32_t>(left), size, it->second});
    std::push_heap(heap.begin(), heap.end(), order);
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) try_pair(i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), order);
    const Scratch::Candidate c = heap.back();
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
    auto it = merge_ids.find(piece);
    if (it != merge_ids.end()) {
      out.push_back(it->second);
      last_was_unk = false;
    } else {
      emit_unknown(piece, last_was_unk, out);
    }
  }
}

}  // namespace

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
  auto enc = std::make_shared<SentencePieceEncoder>();
  TokenizerParts parts;
  parts.kind = "sentencepiece";
  parts.decoded.resize(n);
  parts.strippable.assign(n, 0);
  parts.strip_count = vocab.add_dummy_prefix ? 1 : 0;
  bool have_byte[256] = {};
  for (size_t i = 0; i < n; ++i) {
    const auto id = static_cast<TokenId>(i);
    const std::string& piece = vocab.pieces[i];
    switch (vocab.types[i]) {
      case TokenType::kNormal:
      case TokenType::kUserDefined:
        if (piece.empty()) break;
        enc->merge_ids.emplace(piece, id);
        for (char c : piece) enc->piece_byte[static_cast<uint8_t>(c)] = true;
        if (vocab.types[i] == TokenType::kUserDefined) enc->user_defined.push_back(piece);
        parts.decoded[i] = replace_space_marks(piece);
        parts.strippable[i] = piece.starts_with(kSpace) ? 1 : 0;
        break;
      case TokenType::kByte: {
        uint8_t b = 0;
        if (!parse_byte_piece(piece, b)) return data_loss("tokenizer: byte token '" + piece + "' is not <0xNN>");
        if (!have_byte[b]) enc->byte_ids[b] = id;
        have_byte[b] = true;
        parts.decoded[i] = std::string(1, static_cast<char>(b));
        break;
      }
      case TokenType::kUnused:
        parts.decoded[i] = replace_space_marks(piece);
        parts.strippable[i] = piece.starts_with(kSpace) ? 1 : 0;
        break;
      case TokenType::kUnknown:
      case TokenType::kControl:
        break;
      default:
        return data_loss("tokenizer: token " + std::to_string(i) + " has an unknown type");
    }
  }
  enc->byte_fallback = std::all_of(std::begin(have_byte), std::end(have_byte), [](bool b) { return b; });
  std::sort(enc->user_defined.begin(), enc->user_defined.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  enc->scores = vocab.scores;
  enc->add_dummy_prefix = vocab.add_dummy_prefix;
  enc->unk_id = vocab.unk_id;
  parts.byte_fallback = enc->byte_fallback;
  if (vocab.add_bos) parts.prefix.push_back(vocab.bos_id);
  parts.eos_ids.push_back(vocab.eos_id);
  parts.encoder = std::move(enc);
  parts.vocab = std::move(vocab);
  return from_parts(std::move(parts));
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

}  // namespace densa
