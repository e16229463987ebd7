#include "grammar/gbnf.h"

#include <cctype>
#include <map>
#include <set>
#include <string>

namespace densa::grammar {

namespace {

bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; }

class GbnfParser {
 public:
  GbnfParser(std::string_view text, const GbnfLimits& limits) : s_(text), limits_(limits) {}

  Result<Grammar> parse() {
    if (s_.size() > limits_.max_source_bytes)
      return out_of_range("GBNF grammar too large: " + std::to_string(s_.size()) + " bytes (limit " +
                          std::to_string(limits_.max_source_bytes) + ")");
    skip_space();
    while (i_ < s_.size()) {
      const size_t line_start = i_;
      const std::string name = read_name();
      if (name.empty()) return error("expected a rule name");
      skip_space();
      if (s_.substr(i_, 3) != "::=") {
        i_ = line_start;
        return error("expected '::=' after rule name '" + name + "'");
      }
      i_ += 3;
      const int32_t rule = rule_id(name);
      if (defined_.count(rule)) return error("rule '" + name + "' is defined twice");
      defined_.insert(rule);
      DENSA_ASSIGN_OR_RETURN(int32_t body, alternation(0));
      g_.define_rule(rule, body);
      skip_space();
    }
    for (const auto& [name, id] : ids_)
      if (!defined_.count(id)) return invalid_argument("GBNF: rule '" + name + "' is used but not defined");
    auto root = ids_.find("root");
    if (root == ids_.end()) return invalid_argument("GBNF: no 'root' rule");
    g_.set_root(root->second);
    return std::move(g_);
  }

 private:
  Status error(const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t k = 0; k < i_ && k < s_.size(); ++k) {
      if (s_[k] == '\n') ++line, col = 1;
      else ++col;
    }
    return invalid_argument("GBNF: " + what + " at line " + std::to_string(line) + " column " +
                            std::to_string(col));
  }

  void skip_space() {
    while (i_ < s_.size()) {
      if (std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
      else if (s_[i_] == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      } else break;
    }
  }

  std::string read_name() {
    const size_t start = i_;
    while (i_ < s_.size() && is_name_char(s_[i_])) ++i_;
    return std::string(s_.substr(start, i_ - start));
  }

  // A rule name followed by '::=' starts the next rule.
  bool at_rule_start() const {
    size_t k = i_;
    while (k < s_.size() && is_name_char(s_[k])) ++k;
    if (k == i_) return false;
    while (k < s_.size() && std::isspace(static_cast<unsigned char>(s_[k]))) ++k;
    return s_.substr(k, 3) == "::=";
  }

  int32_t rule_id(const std::string& name) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    const int32_t id = g_.add_rule(name);
    ids_.emplace(name, id);
    return id;
  }

  Result<uint32_t> hex(int digits) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k, ++i_) {
      if (i_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[i_])))
        return error("expected " + std::to_string(digits) + " hex digits");
      const char c = s_[i_];
      v = v * 16 + (c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    return v;
  }

  // One character (code point) of a literal or class, escapes decoded.
  Result<uint32_t> character() {
    if (i_ >= s_.size()) return error("unexpected end of grammar");
    if (s_[i_] == '\\') {
      ++i_;
      if (i_ >= s_.size()) return error("trailing '\\'");
      const char c = s_[i_++];
      switch (c) {
        case 'n': return uint32_t{'\n'};
        case 'r': return uint32_t{'\r'};
        case 't': return uint32_t{'\t'};
        case '\\': case '"': case '[': case ']': case '-': case '^': case '\'': return uint32_t(c);
        case 'x': return hex(2);
        case 'u': return hex(4);
        case 'U': return hex(8);
        default: --i_; return error(std::string("unknown escape '\\") + c + "'");
      }
    }
    const auto b0 = static_cast<uint8_t>(s_[i_]);
    const int n = b0 < 0x80 ? 1 : (b0 >> 5) == 6 ? 2 : (b0 >> 4) == 14 ? 3 : (b0 >> 3) == 30 ? 4 : 0;
    if (n == 0 || i_ + n > s_.size()) return error("invalid UTF-8");
    uint32_t cp = n == 1 ? b0 : b0 & (0x7F >> n);
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s_[i_ + k]) & 0x3F);
    i_ += n;
    return cp;
  }

  Result<int32_t> literal() {
    ++i_;  // '"'
    std::string bytes;
    while (true) {
      if (i_ >= s_.size() || s_[i_] == '\n') return error("unterminated string literal");
      if (s_[i_] == '"') break;
      DENSA_ASSIGN_OR_RETURN(uint32_t cp, character());
      if (cp > 0x10FFFF) return error("code point out of range");
      append_utf8(cp, bytes);
    }
    ++i_;
    return bytes.empty() ? g_.empty() : g_.literal(bytes);
  }

  Result<int32_t> char_class() {
    ++i_;  // '['
    bool negate = false;
    if (i_ < s_.size() && s_[i_] == '^') negate = true, ++i_;
    CodepointSet set;
    while (true) {
      if (i_ >= s_.size()) return error("unterminated character class");
      if (s_[i_] == ']') break;
      DENSA_ASSIGN_OR_RETURN(uint32_t lo, character());
      uint32_t hi = lo;
      if (i_ + 1 < s_.size() && s_[i_] == '-' && s_[i_ + 1] != ']') {
        ++i_;
        DENSA_ASSIGN_OR_RETURN(hi, character());
      }
      if (hi < lo || hi > 0x10FFFF) return error("bad character range");
      set.add(lo, hi);
    }
    ++i_;
    if (negate) set = set.complement();
    if (set.empty()) return error("character class matches nothing");
    return g_.codepoints(set);
  }

  Result<int32_t> count() {
    int64_t v = 0;
    const size_t start = i_;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
      v = v * 10 + (s_[i_++] - '0');
      if (v > limits_.max_repeat) return error("repetition count over " + std::to_string(limits_.max_repeat));
    }
    if (i_ == start) return error("expected a number in {m,n}");
    return static_cast<int32_t>(v);
  }

  Result<int32_t> primary(int depth) {
    const char c = s_[i_];
    if (c == '"') return literal();
    if (c == '[') return char_class();
    if (c == '.') {
      ++i_;
      return g_.codepoints(CodepointSet().complement());
    }
    if (c == '(') {
      if (depth >= limits_.max_nesting)
        return out_of_range("GBNF: groups nested deeper than " + std::to_string(limits_.max_nesting));
      ++i_;
      DENSA_ASSIGN_OR_RETURN(int32_t inner, alternation(depth + 1));
      skip_space();
      if (i_ >= s_.size() || s_[i_] != ')') return error("missing ')'");
      ++i_;
      return inner;
    }
    if (is_name_char(c)) return g_.ref(rule_id(read_name()));
    return error(std::string("unexpected character '") + c + "'");
  }

  Result<int32_t> item(int depth) {
    DENSA_ASSIGN_OR_RETURN(int32_t node, primary(depth));
    while (i_ < s_.size()) {
      const char c = s_[i_];
      int32_t lo, hi;
      if (c == '*') lo = 0, hi = kUnbounded, ++i_;
      else if (c == '+') lo = 1, hi = kUnbounded, ++i_;
      else if (c == '?') lo = 0, hi = 1, ++i_;
      else if (c == '{') {
        ++i_;
        skip_space();
        DENSA_ASSIGN_OR_RETURN(lo, count());
        skip_space();
        hi = lo;
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          skip_space();
          if (i_ < s_.size() && s_[i_] == '}') hi = kUnbounded;
          else {
            DENSA_ASSIGN_OR_RETURN(hi, count());
          }
          skip_space();
        }
        if (i_ >= s_.size() || s_[i_] != '}') return error("missing '}' in {m,n}");
        ++i_;
        if (hi != kUnbounded && hi < lo) return error("{m,n} with n < m");
      } else {
        break;
      }
      node = g_.repeat(node, lo, hi);
    }
    return node;
  }

  Result<int32_t> alternation(int depth) {
    std::vector<int32_t> choices;
    while (true) {
      std::vector<int32_t> items;
      while (true) {
        skip_space();
        if (i_ >= s_.size() || s_[i_] == '|' || s_[i_] == ')' || at_rule_start()) break;
        DENSA_ASSIGN_OR_RETURN(int32_t n, item(depth));
        items.push_back(n);
      }
      choices.push_back(items.empty() ? g_.empty() : g_.seq(std::move(items)));
      if (i_ < s_.size() && s_[i_] == '|') {
        ++i_;
        continue;
      }
      break;
    }
    if (depth == 0 && i_ < s_.size() && s_[i_] == ')') return error("unbalanced ')'");
    return g_.alt(std::move(choices));
  }

  std::string_view s_;
  const GbnfLimits& limits_;
  size_t i_ = 0;
  Grammar g_;
  std::map<std::string, int32_t> ids_;
  std::set<int32_t> defined_;
};

}  // namespace

Result<Grammar> grammar_from_gbnf(std::string_view text, const GbnfLimits& limits) {
  GbnfParser parser(text, limits);
  return parser.parse();
}

}  // namespace densa::grammar
