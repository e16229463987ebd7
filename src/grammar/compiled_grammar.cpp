#include "grammar/compiled_grammar.h"

#include <algorithm>
#include <numeric>

#include "grammar/pda.h"

namespace densa::grammar {

Result<std::shared_ptr<const Vocabulary>> Vocabulary::create(std::vector<std::string> token_bytes,
                                                             std::vector<int32_t> special_ids,
                                                             std::vector<int32_t> eos_ids) {
  const int32_t n = static_cast<int32_t>(token_bytes.size());
  if (n == 0) return invalid_argument("grammar vocabulary is empty");
  auto v = std::shared_ptr<Vocabulary>(new Vocabulary());
  v->bytes_ = std::move(token_bytes);
  v->special_.assign(n, 0);
  v->eos_.assign(n, 0);
  for (int32_t id : special_ids) {
    if (id < 0 || id >= n)
      return invalid_argument("special token id " + std::to_string(id) + " outside vocabulary of " +
                              std::to_string(n));
    v->special_[id] = 1;
  }
  for (int32_t id : eos_ids) {
    if (id < 0 || id >= n)
      return invalid_argument("eos token id " + std::to_string(id) + " outside vocabulary of " +
                              std::to_string(n));
    v->special_[id] = 1;
    if (!v->eos_[id]) v->eos_ids_.push_back(id);
    v->eos_[id] = 1;
  }
  for (int32_t id = 0; id < n; ++id)
    if (!v->special_[id] && !v->bytes_[id].empty()) v->sorted_.push_back(id);
  std::sort(v->sorted_.begin(), v->sorted_.end(), [&](int32_t a, int32_t b) {
    return v->bytes_[a] != v->bytes_[b] ? v->bytes_[a] < v->bytes_[b] : a < b;
  });
  // Preorder trie from the sorted tokens: `path` holds the open nodes, one per byte of the
  // previous token; a node closes when a token no longer shares its prefix.
  auto& trie = v->trie_;
  trie.push_back(TrieNode{});
  std::vector<int32_t> path = {0};
  auto close_to = [&](size_t depth, int32_t tok_index) {
    while (path.size() > depth + 1) {
      trie[path.back()].end = static_cast<int32_t>(trie.size());
      trie[path.back()].tok_end = tok_index;
      path.pop_back();
    }
  };
  const std::string* prev = nullptr;
  for (int32_t i = 0; i < static_cast<int32_t>(v->sorted_.size()); ++i) {
    const std::string& s = v->bytes_[v->sorted_[i]];
    size_t lcp = 0;
    if (prev) {
      const size_t limit = std::min(prev->size(), s.size());
      while (lcp < limit && (*prev)[lcp] == s[lcp]) ++lcp;
    }
    close_to(lcp, i);
    for (size_t d = lcp; d < s.size(); ++d) {
      TrieNode node;
      node.byte = static_cast<uint8_t>(s[d]);
      node.tok_begin = i;
      path.push_back(static_cast<int32_t>(trie.size()));
      trie.push_back(node);
    }
    ++trie[path.back()].tok_here;
    prev = &s;
  }
  close_to(0, static_cast<int32_t>(v->sorted_.size()));
  trie[0].end = static_cast<int32_t>(trie.size());
  trie[0].tok_end = static_cast<int32_t>(v->sorted_.size());
  return std::shared_ptr<const Vocabulary>(std::move(v));
}

size_t CompiledGrammar::uncertain_total() const {
  size_t n = 0;
  for (const auto& m : masks_) n += m.uncertain.size();
  return n;
}

namespace {

// Walks the vocabulary trie from one terminal position with the unknown context below it
// (kEscape), sorting every token into accepted, uncertain or (by omission) rejected.
class PositionWalker {
 public:
  PositionWalker(const FlatGrammar& g, const Vocabulary& v) : pda_(g), vocab_(v) {}

  void run(int32_t pos, std::vector<int32_t>& accepted, std::vector<int32_t>& uncertain) {
    accepted_ = &accepted;
    uncertain_ = &uncertain;
    buf_.clear();
    pda_.truncate(0);
    pda_.close(pos, kEscape, buf_);
    walk(0, 0, buf_.size(), false);
  }

 private:
  void add_range(std::vector<int32_t>& out, int32_t begin, int32_t end) {
    const auto& ids = vocab_.sorted_ids();
    out.insert(out.end(), ids.begin() + begin, ids.begin() + end);
  }

  // `escaped`: the rule could have ended at this node or above it.
  void walk(int32_t node, size_t set_begin, size_t set_end, bool escaped) {
    const auto& trie = vocab_.trie();
    for (int32_t c = node + 1; c < trie[node].end; c = trie[c].end) {
      const auto& tn = trie[c];
      const size_t arena_mark = pda_.mark();
      const size_t out_begin = buf_.size();
      pda_.advance(buf_, set_begin, set_end, tn.byte, buf_);
      bool escape = false;
      size_t live = out_begin;
      for (size_t i = out_begin; i < buf_.size(); ++i) {
        if (buf_[i] == kEscape) escape = true;
        else buf_[live++] = buf_[i];
      }
      buf_.resize(live);
      if (live == out_begin && !escape) {
        if (escaped) add_range(*uncertain_, tn.tok_begin, tn.tok_end);
      } else {
        add_range(*accepted_, tn.tok_begin, tn.tok_begin + tn.tok_here);
        if (live == out_begin) add_range(*uncertain_, tn.tok_begin + tn.tok_here, tn.tok_end);
        else walk(c, out_begin, live, escaped || escape);
      }
      buf_.resize(out_begin);
      pda_.truncate(arena_mark);
    }
  }

  Pda pda_;
  const Vocabulary& vocab_;
  std::vector<int32_t> buf_;
  std::vector<int32_t>* accepted_ = nullptr;
  std::vector<int32_t>* uncertain_ = nullptr;
};

}  // namespace

Result<std::shared_ptr<const CompiledGrammar>> compile(const Grammar& grammar,
                                                        std::shared_ptr<const Vocabulary> vocab,
                                                        const CompileLimits& limits) {
  if (!vocab) return invalid_argument("grammar compile: no vocabulary");
  DENSA_ASSIGN_OR_RETURN(FlatGrammar flat, lower_grammar(grammar, limits.max_elements));
  auto cg = std::shared_ptr<CompiledGrammar>(new CompiledGrammar());
  cg->flat_ = std::move(flat);
  cg->vocab_ = vocab;
  const auto& elems = cg->flat_.elems;
  const size_t terminals = static_cast<size_t>(std::count_if(elems.begin(), elems.end(), is_terminal));
  if (terminals > limits.max_positions)
    return out_of_range("grammar too large to precompute: " + std::to_string(terminals) +
                        " token-mask positions (limit " + std::to_string(limits.max_positions) +
                        "); bounded repetitions (maxLength, maxItems, {m,n}) make one copy per count");
  cg->mask_index_.assign(elems.size(), -1);
  PositionWalker walker(cg->flat_, *vocab);
  const size_t words = vocab->mask_words();
  std::vector<int32_t> accepted, uncertain;
  for (size_t p = 0; p < elems.size(); ++p) {
    if (!is_terminal(elems[p])) continue;
    accepted.clear();
    uncertain.clear();
    walker.run(static_cast<int32_t>(p), accepted, uncertain);
    CompiledGrammar::PositionMasks m;
    if (accepted.size() > 2 * words) {
      m.accepted_bits.assign(words, 0);
      for (int32_t id : accepted) m.accepted_bits[id >> 6] |= uint64_t{1} << (id & 63);
    } else {
      std::sort(accepted.begin(), accepted.end());
      m.accepted_ids = accepted;
    }
    std::sort(uncertain.begin(), uncertain.end());
    m.uncertain = uncertain;
    cg->mask_index_[p] = static_cast<int32_t>(cg->masks_.size());
    cg->masks_.push_back(std::move(m));
  }
  return std::shared_ptr<const CompiledGrammar>(std::move(cg));
}

}  // namespace densa::grammar
