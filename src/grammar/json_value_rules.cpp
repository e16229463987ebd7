#include "grammar/json_value_rules.h"

#include "grammar/regex.h"

namespace densa::grammar {

namespace {

int32_t digit_range(Grammar& g, char lo, char hi) {
  ByteSet s;
  s.set_range(static_cast<uint8_t>(lo), static_cast<uint8_t>(hi));
  return g.bytes(s);
}

// Equal-length digit strings a <= b: every string of that length in [a, b].
int32_t same_length_range(Grammar& g, const std::string& a, const std::string& b) {
  if (a.empty()) return g.empty();
  if (a == b) return g.literal(a);
  const std::string a_tail = a.substr(1), b_tail = b.substr(1);
  if (a[0] == b[0]) return g.seq({g.byte(static_cast<uint8_t>(a[0])), same_length_range(g, a_tail, b_tail)});
  const size_t n = a_tail.size();
  const bool a_low = a_tail == std::string(n, '0');
  const bool b_high = b_tail == std::string(n, '9');
  std::vector<int32_t> choices;
  char lo = a[0], hi = b[0];
  if (!a_low) {
    choices.push_back(g.seq({g.byte(static_cast<uint8_t>(a[0])), same_length_range(g, a_tail, std::string(n, '9'))}));
    ++lo;
  }
  if (!b_high) --hi;
  if (lo <= hi) {
    const int32_t any = g.repeat(digit_range(g, '0', '9'), static_cast<int32_t>(n), static_cast<int32_t>(n));
    choices.push_back(n == 0 ? digit_range(g, lo, hi) : g.seq({digit_range(g, lo, hi), any}));
  }
  if (!b_high)
    choices.push_back(g.seq({g.byte(static_cast<uint8_t>(b[0])), same_length_range(g, std::string(n, '0'), b_tail)}));
  return g.alt(std::move(choices));
}

int32_t nonnegative_range(Grammar& g, int64_t lo, int64_t hi) {
  std::vector<int32_t> choices;
  int64_t low_of_len = 0, high_of_len = 9;
  for (int len = 1; len <= 18; ++len) {
    const int64_t a = std::max(lo, low_of_len), b = std::min(hi, high_of_len);
    if (a <= b) choices.push_back(same_length_range(g, std::to_string(a), std::to_string(b)));
    if (len == 18) break;
    low_of_len = high_of_len + 1;
    high_of_len = high_of_len * 10 + 9;
  }
  return g.alt(std::move(choices));
}

}  // namespace

int32_t integer_range(Grammar& g, int64_t lo, int64_t hi) {
  std::vector<int32_t> choices;
  if (lo < 0) {
    const int64_t neg_hi = std::min<int64_t>(hi, -1);
    choices.push_back(g.seq({g.byte('-'), nonnegative_range(g, -neg_hi, -lo)}));
  }
  if (hi >= 0) choices.push_back(nonnegative_range(g, std::max<int64_t>(lo, 0), hi));
  return g.alt(std::move(choices));
}

namespace {
// y in [a, b], 0 <= a <= b integers, as an integer part and an optional fraction: below b any
// fraction, at b only zeros.
int32_t nonnegative_decimal_range(Grammar& g, int64_t a, int64_t b) {
  std::vector<int32_t> choices;
  if (a <= b - 1) {
    const int32_t fraction = g.seq({g.byte('.'), g.repeat(digit_range(g, '0', '9'), 1, 18)});
    choices.push_back(g.seq({nonnegative_range(g, a, b - 1), g.optional(fraction)}));
  }
  const int32_t zeros = g.seq({g.byte('.'), g.repeat(g.byte('0'), 1, 18)});
  choices.push_back(g.seq({g.literal(std::to_string(b)), g.optional(zeros)}));
  return g.alt(std::move(choices));
}
}  // namespace

int32_t decimal_range(Grammar& g, int64_t lo, int64_t hi) {
  std::vector<int32_t> choices;
  if (hi >= 0) choices.push_back(nonnegative_decimal_range(g, std::max<int64_t>(lo, 0), hi));
  if (lo < 0) choices.push_back(g.seq({g.byte('-'), nonnegative_decimal_range(g, std::max<int64_t>(-hi, 0), -lo)}));
  return g.alt(std::move(choices));
}

int32_t JsonValueRules::string_rest() {
  if (rest_ < 0) {
    rest_ = g_.add_rule("json_string_rest");
    g_.define_rule(rest_, g_.seq({g_.star(json_string_char(g_)), g_.byte('"')}));
  }
  return rest_;
}

int32_t JsonValueRules::string() {
  if (string_ < 0) {
    string_ = g_.add_rule("json_string");
    g_.define_rule(string_, g_.seq({g_.byte('"'), g_.star(json_string_char(g_)), g_.byte('"')}));
  }
  return string_;
}

int32_t JsonValueRules::integer() {
  if (integer_ < 0) {
    integer_ = g_.add_rule("json_integer");
    const int32_t digits = g_.seq({digit_range(g_, '1', '9'), g_.repeat(digit_range(g_, '0', '9'), 0, 17)});
    g_.define_rule(integer_, g_.seq({g_.optional(g_.byte('-')), g_.alt({g_.byte('0'), digits})}));
  }
  return integer_;
}

int32_t JsonValueRules::number() {
  if (number_ < 0) {
    number_ = g_.add_rule("json_number");
    const int32_t digits = g_.seq({digit_range(g_, '1', '9'), g_.repeat(digit_range(g_, '0', '9'), 0, 17)});
    const int32_t integer = g_.seq({g_.optional(g_.byte('-')), g_.alt({g_.byte('0'), digits})});
    const int32_t fraction = g_.seq({g_.byte('.'), g_.repeat(digit_range(g_, '0', '9'), 1, 18)});
    ByteSet e, sign;
    e.set('e');
    e.set('E');
    sign.set('+');
    sign.set('-');
    const int32_t exponent = g_.seq({g_.bytes(e), g_.optional(g_.bytes(sign)),
                                     g_.repeat(digit_range(g_, '0', '9'), 1, 2)});
    g_.define_rule(number_, g_.seq({integer, g_.optional(fraction), g_.optional(exponent)}));
  }
  return number_;
}

int32_t JsonValueRules::object() {
  if (object_ < 0) {
    object_ = g_.add_rule("json_object");
    const int32_t v = value();
    const int32_t kv = g_.seq({g_.ref(string()), g_.byte(':'), ws(), g_.ref(v)});
    const int32_t kv2 = g_.seq({g_.ref(string()), g_.byte(':'), ws(), g_.ref(v)});
    g_.define_rule(object_, g_.seq({g_.byte('{'),
                                    g_.alt({g_.byte('}'),
                                            g_.seq({kv, g_.star(g_.seq({comma(), kv2})), g_.byte('}')})})}));
  }
  return object_;
}

int32_t JsonValueRules::value() {
  if (value_ < 0) {
    value_ = g_.add_rule("json_value");
    const int32_t array = g_.add_rule("json_array");
    const int32_t items = g_.seq({g_.ref(value_), g_.star(g_.seq({comma(), g_.ref(value_)})), g_.byte(']')});
    g_.define_rule(array, g_.seq({g_.byte('['), g_.alt({g_.byte(']'), items})}));
    g_.define_rule(value_, g_.alt({g_.ref(object()), g_.ref(array), g_.ref(string()), g_.ref(number()),
                                   g_.literal("true"), g_.literal("false"), g_.literal("null")}));
  }
  return value_;
}

int32_t JsonValueRules::key_not_in(const std::vector<std::string>& names) {
  if (names.empty()) return string_rest();
  auto found = keys_.find(names);
  if (found != keys_.end()) return found->second;
  // A trie over the names' code points; node t's rule matches the rest of a key whose first
  // characters spelled t's prefix.
  struct TrieNode {
    std::map<uint32_t, int> kids;
    bool is_name = false;
  };
  std::vector<TrieNode> trie(1);
  for (const auto& name : names) {
    int t = 0;
    for (size_t i = 0; i < name.size();) {
      const auto b0 = static_cast<uint8_t>(name[i]);
      const int n = b0 < 0x80 ? 1 : (b0 >> 5) == 6 ? 2 : (b0 >> 4) == 14 ? 3 : 4;
      uint32_t cp = n == 1 ? b0 : b0 & (0x7F >> n);
      for (int k = 1; k < n && i + k < name.size(); ++k) cp = (cp << 6) | (name[i + k] & 0x3F);
      i += n;
      auto it = trie[t].kids.find(cp);
      if (it == trie[t].kids.end()) {
        trie.push_back(TrieNode{});
        it = trie[t].kids.emplace(cp, static_cast<int>(trie.size() - 1)).first;
      }
      t = it->second;
    }
    trie[t].is_name = true;
  }
  CodepointSet special;
  special.add(0, 0x1F);
  special.add('"', '"');
  special.add('\\', '\\');
  const CodepointSet plain = special.complement();
  std::vector<int32_t> rules(trie.size());
  for (size_t t = 0; t < trie.size(); ++t) rules[t] = g_.add_rule("json_key_not_in#" + std::to_string(t));
  for (size_t t = 0; t < trie.size(); ++t) {
    std::vector<int32_t> choices;
    if (!trie[t].is_name) choices.push_back(g_.byte('"'));
    CodepointSet taken;
    for (auto [cp, kid] : trie[t].kids) {
      if (!plain.contains(cp)) continue;  // only reachable through an escape: never taken
      taken.add(cp, cp);
      std::string utf8;
      append_utf8(cp, utf8);
      choices.push_back(g_.seq({g_.literal(utf8), g_.ref(rules[kid])}));
    }
    const CodepointSet other = plain.minus(taken);
    if (!other.empty()) choices.push_back(g_.seq({g_.codepoints(other), g_.ref(string_rest())}));
    g_.define_rule(rules[t], g_.alt(std::move(choices)));
  }
  keys_.emplace(names, rules[0]);
  return rules[0];
}

}  // namespace densa::grammar
