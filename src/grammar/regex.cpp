#include "grammar/regex.h"

#include <cctype>
#include <string>

namespace densa::grammar {

namespace {

CodepointSet range_set(uint32_t lo, uint32_t hi) {
  CodepointSet s;
  s.add(lo, hi);
  return s;
}

CodepointSet digit_set() { return range_set('0', '9'); }
CodepointSet word_set() {
  CodepointSet s;
  s.add('0', '9');
  s.add('A', 'Z');
  s.add('a', 'z');
  s.add('_', '_');
  return s;
}
// ECMAScript \s: WhiteSpace and LineTerminator.
CodepointSet space_set() {
  CodepointSet s;
  s.add('\t', '\r');
  s.add(' ', ' ');
  s.add(0xA0, 0xA0);
  s.add(0x1680, 0x1680);
  s.add(0x2000, 0x200A);
  s.add(0x2028, 0x2029);
  s.add(0x202F, 0x202F);
  s.add(0x205F, 0x205F);
  s.add(0x3000, 0x3000);
  s.add(0xFEFF, 0xFEFF);
  return s;
}
// ECMAScript '.': anything but a line terminator.
CodepointSet dot_set() {
  CodepointSet s;
  s.add('\n', '\n');
  s.add('\r', '\r');
  s.add(0x2028, 0x2029);
  return s.complement();
}

// The node for one character from `set` in `encoding`.
int32_t encode_set(Grammar& g, const CodepointSet& set, RegexEncoding encoding) {
  if (encoding == RegexEncoding::kUtf8) return g.codepoints(set);
  CodepointSet special;
  special.add(0, 0x1F);
  special.add('"', '"');
  special.add('\\', '\\');
  std::vector<int32_t> choices;
  const CodepointSet plain = set.minus(special);
  if (!plain.empty()) choices.push_back(g.codepoints(plain));
  for (auto [lo, hi] : set.ranges()) {
    for (uint32_t cp = lo; cp <= hi && cp <= '\\'; ++cp) {
      if (!special.contains(cp)) continue;
      std::string esc;
      switch (cp) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default: {
          static const char* kHex = "0123456789abcdef";
          esc = std::string("\\u00") + kHex[cp >> 4] + kHex[cp & 15];
        }
      }
      choices.push_back(g.literal(esc));
    }
  }
  return g.alt(std::move(choices));
}

class RegexParser {
 public:
  RegexParser(std::string_view p, Grammar& g, RegexEncoding enc, const RegexLimits& limits)
      : p_(p), g_(g), enc_(enc), limits_(limits) {}

  Result<RegexNode> parse() {
    if (p_.size() > limits_.max_length)
      return out_of_range("regex too long: " + std::to_string(p_.size()) + " bytes (limit " +
                          std::to_string(limits_.max_length) + ")");
    RegexNode out;
    if (peek('^')) {
      ++i_;
      out.anchored_start = true;
    }
    if (!p_.empty() && p_.back() == '$' && !escaped_at(p_.size() - 1)) {
      p_.remove_suffix(1);
      out.anchored_end = true;
    }
    DENSA_ASSIGN_OR_RETURN(out.node, alternation(0));
    if (i_ < p_.size()) return error("unbalanced ')'");
    return out;
  }

 private:
  bool peek(char c) const { return i_ < p_.size() && p_[i_] == c; }
  bool escaped_at(size_t pos) const {
    size_t n = 0;
    while (pos > n && p_[pos - n - 1] == '\\') ++n;
    return n % 2 == 1;
  }
  Status error(const std::string& what) const {
    return invalid_argument("regex: " + what + " at offset " + std::to_string(i_) + " in /" +
                            std::string(p_) + "/");
  }

  // One literal character: a well-formed UTF-8 sequence of a Unicode scalar value. The lead
  // byte's shape alone admits overlong forms, surrogates and values up to 0x1FFFFF (lead bytes
  // F5-F7), which no grammar character can be: Grammar::codepoints() has no encoding for them.
  Result<uint32_t> utf8_char() {
    const auto b0 = static_cast<uint8_t>(p_[i_]);
    int n = b0 < 0x80 ? 1 : (b0 >> 5) == 6 ? 2 : (b0 >> 4) == 14 ? 3 : (b0 >> 3) == 30 ? 4 : 0;
    if (n == 0 || i_ + n > p_.size()) return error("invalid UTF-8");
    uint32_t cp = n == 1 ? b0 : b0 & (0x7F >> n);
    for (int k = 1; k < n; ++k) {
      const auto b = static_cast<uint8_t>(p_[i_ + k]);
      if ((b & 0xC0) != 0x80) return error("invalid UTF-8");
      cp = (cp << 6) | (b & 0x3F);
    }
    static constexpr uint32_t kShortest[5] = {0, 0, 0x80, 0x800, 0x10000};  // by length
    if (cp < kShortest[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      return error("invalid UTF-8 (overlong, a surrogate or past U+10FFFF)");
    i_ += n;
    return cp;
  }

  Result<uint32_t> hex(int digits) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k, ++i_) {
      if (i_ >= p_.size() || !isxdigit(static_cast<unsigned char>(p_[i_])))
        return error("expected " + std::to_string(digits) + " hex digits");
      const char c = p_[i_];
      v = v * 16 + (c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    return v;
  }

  // After '\': a class escape (\d ...) into `set`, or one character.
  Result<CodepointSet> escape(bool in_class) {
    if (i_ >= p_.size()) return error("trailing '\\'");
    const char c = p_[i_++];
    CodepointSet s;
    auto one = [&](uint32_t cp) { s.add(cp, cp); return s; };
    switch (c) {
      case 'd': return digit_set();
      case 'D': return digit_set().complement();
      case 'w': return word_set();
      case 'W': return word_set().complement();
      case 's': return space_set();
      case 'S': return space_set().complement();
      case 'n': return one('\n');
      case 'r': return one('\r');
      case 't': return one('\t');
      case 'f': return one('\f');
      case 'v': return one('\v');
      case '0': return one(0);
      case 'x': {
        DENSA_ASSIGN_OR_RETURN(uint32_t v, hex(2));
        return one(v);
      }
      case 'u': {
        uint32_t v;
        if (peek('{')) {
          ++i_;
          v = 0;
          size_t digits = 0;
          while (i_ < p_.size() && isxdigit(static_cast<unsigned char>(p_[i_])) && digits < 7) {
            DENSA_ASSIGN_OR_RETURN(uint32_t d, hex(1));
            v = v * 16 + d;
            ++digits;
          }
          if (!peek('}') || digits == 0) return error("bad \\u{...} escape");
          ++i_;
        } else {
          DENSA_ASSIGN_OR_RETURN(v, hex(4));
        }
        if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
          return error("escape is not a Unicode scalar value");
        return one(v);
      }
      case 'b':
        if (in_class) return one('\b');
        return error("word boundary \\b is unsupported");
      case 'B': return error("\\B is unsupported");
      case 'p': case 'P': return error("Unicode property escapes \\p{..} are unsupported");
      case 'k': return error("named backreferences are unsupported");
      default:
        if (c >= '1' && c <= '9') return error("backreferences are unsupported");
        if (isalnum(static_cast<unsigned char>(c))) return error(std::string("unknown escape \\") + c);
        --i_;
        DENSA_ASSIGN_OR_RETURN(uint32_t cp, utf8_char());
        return one(cp);
    }
  }

  Result<CodepointSet> char_class() {
    ++i_;  // '['
    bool negate = false;
    if (peek('^')) {
      negate = true;
      ++i_;
    }
    CodepointSet set;
    bool first = true;
    while (true) {
      if (i_ >= p_.size()) return error("unterminated character class");
      if (p_[i_] == ']' && !first) break;
      first = false;
      CodepointSet lo_set;
      bool single = true;
      if (p_[i_] == '\\') {
        ++i_;
        DENSA_ASSIGN_OR_RETURN(lo_set, escape(true));
        single = lo_set.ranges().size() == 1 && lo_set.ranges()[0].first == lo_set.ranges()[0].second;
      } else {
        DENSA_ASSIGN_OR_RETURN(uint32_t cp, utf8_char());
        lo_set.add(cp, cp);
      }
      if (single && peek('-') && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
        ++i_;
        uint32_t hi;
        if (p_[i_] == '\\') {
          ++i_;
          DENSA_ASSIGN_OR_RETURN(CodepointSet hs, escape(true));
          if (hs.ranges().size() != 1 || hs.ranges()[0].first != hs.ranges()[0].second)
            return error("class escape as a range end");
          hi = hs.ranges()[0].first;
        } else {
          DENSA_ASSIGN_OR_RETURN(hi, utf8_char());
        }
        const uint32_t lo = lo_set.ranges()[0].first;
        if (hi < lo) return error("character range out of order");
        set.add(lo, hi);
      } else {
        set.add(lo_set);
      }
    }
    ++i_;  // ']'
    if (negate) set = set.complement();
    if (set.empty()) return error("character class matches nothing");
    return set;
  }

  Result<int32_t> number() {
    const size_t start = i_;
    int64_t v = 0;
    while (i_ < p_.size() && isdigit(static_cast<unsigned char>(p_[i_]))) {
      v = v * 10 + (p_[i_++] - '0');
      if (v > limits_.max_repeat) return error("repetition count over " + std::to_string(limits_.max_repeat));
    }
    if (i_ == start) return error("expected a number in {m,n}");
    return static_cast<int32_t>(v);
  }

  Result<int32_t> atom(int depth) {
    const char c = p_[i_];
    if (c == '(') {
      if (depth >= limits_.max_nesting)
        return out_of_range("regex nested deeper than " + std::to_string(limits_.max_nesting));
      ++i_;
      if (peek('?')) {
        ++i_;
        if (peek(':')) {
          ++i_;
        } else if (peek('<') && i_ + 1 < p_.size() && p_[i_ + 1] != '=' && p_[i_ + 1] != '!') {
          while (i_ < p_.size() && p_[i_] != '>') ++i_;
          if (i_ >= p_.size()) return error("unterminated group name");
          ++i_;
        } else if (peek('P') && i_ + 1 < p_.size() && p_[i_ + 1] == '<') {
          while (i_ < p_.size() && p_[i_] != '>') ++i_;
          if (i_ >= p_.size()) return error("unterminated group name");
          ++i_;
        } else if (peek('=') || peek('!') || peek('<')) {
          return error("lookaround assertions are unsupported");
        } else {
          return error("inline flags and other (? groups are unsupported");
        }
      }
      DENSA_ASSIGN_OR_RETURN(int32_t inner, alternation(depth + 1));
      if (!peek(')')) return error("missing ')'");
      ++i_;
      return inner;
    }
    if (c == '[') {
      DENSA_ASSIGN_OR_RETURN(CodepointSet s, char_class());
      return encode_set(g_, s, enc_);
    }
    if (c == '.') {
      ++i_;
      return encode_set(g_, dot_set(), enc_);
    }
    if (c == '\\') {
      ++i_;
      DENSA_ASSIGN_OR_RETURN(CodepointSet s, escape(false));
      return encode_set(g_, s, enc_);
    }
    if (c == '^' || c == '$') return error(std::string("anchor '") + c + "' inside the pattern is unsupported");
    if (c == '*' || c == '+' || c == '?' || c == '{') return error("nothing to repeat");
    if (c == ']' || c == '}') {
      ++i_;
      CodepointSet s;
      s.add(static_cast<uint8_t>(c), static_cast<uint8_t>(c));
      return encode_set(g_, s, enc_);
    }
    DENSA_ASSIGN_OR_RETURN(uint32_t cp, utf8_char());
    CodepointSet s;
    s.add(cp, cp);
    return encode_set(g_, s, enc_);
  }

  Result<int32_t> repeated(int depth) {
    DENSA_ASSIGN_OR_RETURN(int32_t node, atom(depth));
    while (i_ < p_.size()) {
      int32_t lo, hi;
      const char c = p_[i_];
      if (c == '*') lo = 0, hi = kUnbounded, ++i_;
      else if (c == '+') lo = 1, hi = kUnbounded, ++i_;
      else if (c == '?') lo = 0, hi = 1, ++i_;
      else if (c == '{') {
        ++i_;
        DENSA_ASSIGN_OR_RETURN(lo, number());
        hi = lo;
        if (peek(',')) {
          ++i_;
          if (peek('}')) hi = kUnbounded;
          else {
            DENSA_ASSIGN_OR_RETURN(hi, number());
          }
        }
        if (!peek('}')) return error("missing '}' in {m,n}");
        ++i_;
        if (hi != kUnbounded && hi < lo) return error("{m,n} with n < m");
      } else {
        break;
      }
      if (peek('?')) ++i_;  // lazy: same language
      else if (peek('+')) return error("possessive quantifiers are unsupported");
      node = g_.repeat(node, lo, hi);
    }
    return node;
  }

  Result<int32_t> alternation(int depth) {
    std::vector<int32_t> choices;
    while (true) {
      std::vector<int32_t> items;
      while (i_ < p_.size() && p_[i_] != '|' && p_[i_] != ')') {
        DENSA_ASSIGN_OR_RETURN(int32_t n, repeated(depth));
        items.push_back(n);
      }
      choices.push_back(items.empty() ? g_.empty() : g_.seq(std::move(items)));
      if (!peek('|')) break;
      ++i_;
    }
    if (depth == 0 && peek(')')) return error("unbalanced ')'");
    return g_.alt(std::move(choices));
  }

  std::string_view p_;
  Grammar& g_;
  RegexEncoding enc_;
  const RegexLimits& limits_;
  size_t i_ = 0;
};

}  // namespace

Result<RegexNode> parse_regex_into(std::string_view pattern, Grammar& g, RegexEncoding encoding,
                                   const RegexLimits& limits) {
  RegexParser parser(pattern, g, encoding, limits);
  return parser.parse();
}

Result<Grammar> grammar_from_regex(std::string_view pattern, const RegexLimits& limits) {
  Grammar g;
  const int32_t root = g.add_rule("root");
  DENSA_ASSIGN_OR_RETURN(RegexNode r, parse_regex_into(pattern, g, RegexEncoding::kUtf8, limits));
  g.define_rule(root, r.node);
  g.set_root(root);
  return g;
}

int32_t json_string_char(Grammar& g) {
  CodepointSet special;
  special.add(0, 0x1F);
  special.add('"', '"');
  special.add('\\', '\\');
  const int32_t plain = g.codepoints(special.complement());
  ByteSet simple;
  for (char c : std::string("\"\\/bfnrt")) simple.set(static_cast<uint8_t>(c));
  ByteSet hexd, hex_not_d, d, lo8;
  for (char c : std::string("0123456789abcdefABCDEF")) hexd.set(static_cast<uint8_t>(c));
  hex_not_d = hexd;
  d.set('d');
  d.set('D');
  hex_not_d.words[1] &= ~d.words[1];
  lo8.set_range('0', '7');
  // \uXXXX without surrogates (D800-DFFF): a lone surrogate is not a character, and a pair
  // would be two grammar characters but one code point for length counting.
  const int32_t u_escape = g.alt({g.seq({g.bytes(hex_not_d), g.bytes(hexd), g.bytes(hexd), g.bytes(hexd)}),
                                  g.seq({g.bytes(d), g.bytes(lo8), g.bytes(hexd), g.bytes(hexd)})});
  const int32_t escape = g.seq({g.byte('\\'), g.alt({g.bytes(simple), g.seq({g.byte('u'), u_escape})})});
  return g.alt({plain, escape});
}

}  // namespace densa::grammar
