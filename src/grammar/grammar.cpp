#include "grammar/grammar.h"

#include <algorithm>

#include "core/check.h"

namespace densa::grammar {

namespace {

constexpr uint32_t kMaxCodepoint = 0x10FFFF;

// Number of UTF-8 bytes for cp.
int utf8_length(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

// The bytes of cp's n-byte encoding.
std::array<uint8_t, 4> utf8_bytes(uint32_t cp, int n) {
  std::array<uint8_t, 4> b{};
  if (n == 1) {
    b[0] = static_cast<uint8_t>(cp);
    return b;
  }
  static constexpr uint8_t kLead[5] = {0, 0, 0xC0, 0xE0, 0xF0};
  for (int i = n - 1; i > 0; --i) {
    b[i] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    cp >>= 6;
  }
  b[0] = static_cast<uint8_t>(kLead[n] | cp);
  return b;
}

// Splits [lo, hi] (same encoded length n) into ranges whose encodings are products of byte
// ranges: every continuation byte past the first differing one spans its full 0x80..0xBF.
void split_utf8(uint32_t lo, uint32_t hi, int n,
                std::vector<std::vector<std::pair<uint8_t, uint8_t>>>& out) {
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (uint32_t{1} << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_utf8(lo, lo | m, n, out);
        split_utf8((lo | m) + 1, hi, n, out);
        return;
      }
      if ((hi & m) != m) {
        split_utf8(lo, (hi & ~m) - 1, n, out);
        split_utf8(hi & ~m, hi, n, out);
        return;
      }
    }
  }
  const auto a = utf8_bytes(lo, n), b = utf8_bytes(hi, n);
  std::vector<std::pair<uint8_t, uint8_t>> seq;
  for (int i = 0; i < n; ++i) seq.emplace_back(a[i], b[i]);
  out.push_back(std::move(seq));
}

}  // namespace

void append_utf8(uint32_t cp, std::string& out) {
  const int n = utf8_length(cp);
  const auto b = utf8_bytes(cp, n);
  out.append(reinterpret_cast<const char*>(b.data()), n);
}

void CodepointSet::add(uint32_t lo, uint32_t hi) {
  CHECK(lo <= hi);
  std::vector<std::pair<uint32_t, uint32_t>> merged;
  bool placed = false;
  for (const auto& r : ranges_) {
    if (r.second + 1 < lo) {
      merged.push_back(r);
    } else if (hi + 1 < r.first) {
      if (!placed) merged.emplace_back(lo, hi), placed = true;
      merged.push_back(r);
    } else {
      lo = std::min(lo, r.first);
      hi = std::max(hi, r.second);
    }
  }
  if (!placed) merged.emplace_back(lo, hi);
  ranges_ = std::move(merged);
}

void CodepointSet::add(const CodepointSet& other) {
  for (const auto& r : other.ranges_) add(r.first, r.second);
}

CodepointSet CodepointSet::complement() const {
  CodepointSet out;
  uint32_t next = 0;
  for (const auto& r : ranges_) {
    if (r.first > next) out.add(next, r.first - 1);
    next = r.second + 1;
  }
  if (next <= kMaxCodepoint) out.add(next, kMaxCodepoint);
  CodepointSet surrogates;
  surrogates.add(0xD800, 0xDFFF);
  return out.minus(surrogates);
}

CodepointSet CodepointSet::minus(const CodepointSet& other) const {
  CodepointSet out;
  for (auto [lo, hi] : ranges_) {
    uint64_t cur = lo;
    for (const auto& o : other.ranges_) {
      if (o.second < cur) continue;
      if (o.first > hi) break;
      if (o.first > cur) out.add(static_cast<uint32_t>(cur), o.first - 1);
      cur = uint64_t{o.second} + 1;
      if (cur > hi) break;
    }
    if (cur <= hi) out.add(static_cast<uint32_t>(cur), hi);
  }
  return out;
}

bool CodepointSet::contains(uint32_t cp) const {
  for (const auto& r : ranges_)
    if (cp >= r.first && cp <= r.second) return true;
  return false;
}

int32_t Grammar::push(Node n) {
  nodes_.push_back(std::move(n));
  return static_cast<int32_t>(nodes_.size() - 1);
}

int32_t Grammar::empty() { return push(Node{}); }

int32_t Grammar::bytes(const ByteSet& set) {
  Node n;
  n.kind = Kind::kBytes;
  n.bytes = set;
  return push(std::move(n));
}

int32_t Grammar::byte(uint8_t b) {
  ByteSet s;
  s.set(b);
  return bytes(s);
}

int32_t Grammar::literal(std::string_view text) {
  if (text.size() == 1) return byte(static_cast<uint8_t>(text[0]));
  std::vector<int32_t> kids;
  for (char c : text) kids.push_back(byte(static_cast<uint8_t>(c)));
  return seq(std::move(kids));
}

int32_t Grammar::seq(std::vector<int32_t> kids) {
  if (kids.size() == 1) return kids[0];
  Node n;
  n.kind = Kind::kSeq;
  n.kids = std::move(kids);
  return push(std::move(n));
}

int32_t Grammar::alt(std::vector<int32_t> kids) {
  CHECK(!kids.empty()) << "an alternation needs at least one choice";
  if (kids.size() == 1) return kids[0];
  Node n;
  n.kind = Kind::kAlt;
  n.kids = std::move(kids);
  return push(std::move(n));
}

int32_t Grammar::repeat(int32_t kid, int32_t min, int32_t max) {
  CHECK(min >= 0 && (max == kUnbounded || max >= min));
  if (min == 1 && max == 1) return kid;
  Node n;
  n.kind = Kind::kRepeat;
  n.kids = {kid};
  n.min = min;
  n.max = max;
  return push(std::move(n));
}

int32_t Grammar::ref(int32_t rule) {
  CHECK(rule >= 0 && rule < static_cast<int32_t>(rules_.size()));
  Node n;
  n.kind = Kind::kRef;
  n.rule = rule;
  return push(std::move(n));
}

int32_t Grammar::codepoints(const CodepointSet& set) {
  std::vector<std::vector<std::pair<uint8_t, uint8_t>>> seqs;
  for (auto [lo, hi] : set.ranges()) {
    // Split at the encoded-length boundaries, then into byte-range products.
    for (int n = 1; n <= 4; ++n) {
      static constexpr uint32_t kMax[5] = {0, 0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
      const uint32_t first = n == 1 ? 0 : kMax[n - 1] + 1;
      const uint32_t a = std::max(lo, first), b = std::min(hi, kMax[n]);
      if (a <= b) split_utf8(a, b, n, seqs);
    }
  }
  std::vector<int32_t> choices;
  for (const auto& s : seqs) {
    std::vector<int32_t> kids;
    for (auto [a, b] : s) {
      ByteSet bs;
      bs.set_range(a, b);
      kids.push_back(bytes(bs));
    }
    choices.push_back(seq(std::move(kids)));
  }
  CHECK(!choices.empty()) << "empty code point set";
  return alt(std::move(choices));
}

int32_t Grammar::add_rule(std::string name) {
  rules_.push_back(Rule{std::move(name), -1});
  return static_cast<int32_t>(rules_.size() - 1);
}

void Grammar::define_rule(int32_t rule, int32_t body) {
  CHECK(rule >= 0 && rule < static_cast<int32_t>(rules_.size()));
  rules_[rule].body = body;
}

int32_t Grammar::find_rule(std::string_view name) const {
  for (size_t i = 0; i < rules_.size(); ++i)
    if (rules_[i].name == name) return static_cast<int32_t>(i);
  return -1;
}

int32_t Grammar::import(const Grammar& other, std::string_view prefix) {
  CHECK(other.root_ >= 0) << "imported grammar has no root";
  const int32_t node_base = static_cast<int32_t>(nodes_.size());
  const int32_t rule_base = static_cast<int32_t>(rules_.size());
  for (Node n : other.nodes_) {
    for (auto& k : n.kids) k += node_base;
    if (n.kind == Kind::kRef) n.rule += rule_base;
    nodes_.push_back(std::move(n));
  }
  for (const Rule& r : other.rules_)
    rules_.push_back(Rule{std::string(prefix) + r.name, r.body < 0 ? -1 : r.body + node_base});
  return other.root_ + rule_base;
}

Grammar literal_grammar(std::string_view text) {
  Grammar g;
  const int32_t r = g.add_rule("root");
  g.define_rule(r, text.empty() ? g.empty() : g.literal(text));
  g.set_root(r);
  return g;
}

namespace {
Grammar combine(const std::vector<const Grammar*>& parts, bool as_sequence) {
  CHECK(!parts.empty());
  Grammar g;
  const int32_t root = g.add_rule("root");
  std::vector<int32_t> kids;
  for (size_t i = 0; i < parts.size(); ++i) {
    const int32_t r = g.import(*parts[i], "p" + std::to_string(i) + ".");
    kids.push_back(g.ref(r));
  }
  g.define_rule(root, as_sequence ? g.seq(std::move(kids)) : g.alt(std::move(kids)));
  g.set_root(root);
  return g;
}
}  // namespace

Grammar sequence_grammar(const std::vector<const Grammar*>& pieces) { return combine(pieces, true); }
Grammar alternation_grammar(const std::vector<const Grammar*>& choices) {
  return combine(choices, false);
}

}  // namespace densa::grammar
