#include "text/bpe.h"

#include <algorithm>

#include "text/tokenizer.h"

namespace densa {

std::optional<std::pair<uint32_t, TokenId>> BpeModel::pair_priority(std::string_view word, const Symbol& a,
                                                                     const Symbol& b) const {
  if (a.id < 0 || b.id < 0) return std::nullopt;
  if (ranks_mode) {
    auto it = tokens.find(word.substr(a.begin, a.size + b.size));
    if (it == tokens.end()) return std::nullopt;
    return std::make_pair(static_cast<uint32_t>(it->second), it->second);
  }
  auto it = merges.find((static_cast<uint64_t>(static_cast<uint32_t>(a.id)) << 32) | static_cast<uint32_t>(b.id));
  if (it == merges.end()) return std::nullopt;
  return std::make_pair(static_cast<uint32_t>(it->second >> 32), static_cast<TokenId>(it->second & 0xFFFFFFFFu));
}

void BpeModel::initial_symbols(std::string_view word, std::vector<Symbol>& symbols) const {
  symbols.clear();
  for (size_t pos = 0; pos < word.size();) {
    size_t size = 1;
    TokenId id = -1;
    if (byte_level) {
      id = byte_ids[static_cast<uint8_t>(word[pos])];
    } else {
      size = utf8_char_size(word, pos);
      auto it = tokens.find(word.substr(pos, size));
      if (it != tokens.end()) {
        id = it->second;
      } else if (byte_fallback && std::all_of(word.begin() + pos, word.begin() + pos + size,
                                               [&](char c) { return byte_ids[static_cast<uint8_t>(c)] >= 0; })) {
        // One symbol per byte, as <0xNN> tokens; they never merge (no merge names them).
        for (size_t i = 0; i < size; ++i) {
          const auto idx = static_cast<int32_t>(symbols.size());
          symbols.push_back({static_cast<uint32_t>(pos + i), 1, idx - 1, idx + 1,
                             byte_ids[static_cast<uint8_t>(word[pos + i])]});
        }
        pos += size;
        continue;
      }
    }
    const auto idx = static_cast<int32_t>(symbols.size());
    symbols.push_back({static_cast<uint32_t>(pos), static_cast<uint32_t>(size), idx - 1, idx + 1, id});
    pos += size;
  }
  if (!symbols.empty()) symbols.back().next = -1;
}

void BpeModel::emit(std::string_view, const Symbol& s, bool& last_unk, std::vector<TokenId>& out) const {
  if (s.id >= 0) {
    out.push_back(s.id);
    last_unk = false;
    return;
  }
  if (unk_id < 0) return;
  if (fuse_unk && last_unk) return;
  out.push_back(unk_id);
  last_unk = true;
}

void BpeModel::encode_word(std::string_view word, std::vector<TokenId>& out) const {
  if (word.empty()) return;
  if (ignore_merges) {
    auto it = tokens.find(word);
    if (it != tokens.end()) {
      out.push_back(it->second);
      return;
    }
  }
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<Candidate> heap;
  initial_symbols(word, symbols);
  heap.clear();
  // Heap order: lowest priority on top, then the leftmost pair.
  const auto below = [](const Candidate& a, const Candidate& b) {
    if (a.priority != b.priority) return a.priority > b.priority;
    return a.left > b.left;
  };
  const auto try_pair = [&](int32_t left) {
    if (left < 0) return;
    const int32_t right = symbols[left].next;
    if (right < 0) return;
    auto p = pair_priority(word, symbols[left], symbols[right]);
    if (!p) return;
    heap.push_back({p->first, static_cast<uint32_t>(left), symbols[left].size, symbols[right].size, p->second});
    std::push_heap(heap.begin(), heap.end(), below);
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) try_pair(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), below);
    const Candidate c = heap.back();
    heap.pop_back();
    Symbol& left = symbols[c.left];
    // Stale when either symbol changed since the candidate was queued.
    if (left.size != c.left_size || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    if (right.size != c.right_size) continue;
    left.size += right.size;
    left.id = c.id;
    right.size = 0;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = static_cast<int32_t>(c.left);
    try_pair(left.prev);
    try_pair(static_cast<int32_t>(c.left));
  }
  bool last_unk = false;
  for (int32_t i = 0; i >= 0; i = symbols[i].next) emit(word, symbols[i], last_unk, out);
}

}  // namespace densa
