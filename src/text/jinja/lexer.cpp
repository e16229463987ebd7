#include "text/jinja/lexer.h"

#include <cstring>

#include "text/jinja/unicode.h"
#include "text/jinja/value.h"

namespace densa::jinja {
namespace {

// Jinja2 reads \r\n and \r as \n and drops one trailing newline (keep_trailing_newline=False).
std::string normalize_newlines(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\r') {
      out += '\n';
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
    } else {
      out += src[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// Python str.rstrip() (all whitespace), in place.
void rstrip_all(std::string& s) {
  while (!s.empty()) {
    size_t end = s.size(), start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t i = start;
    if (!is_space(decode_utf8(s, i))) break;
    s.resize(start);
  }
}

// True when s is non-empty and all whitespace (Python `\s+` fullmatch).
bool all_space(std::string_view s) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size();)
    if (!is_space(decode_utf8(s, i))) return false;
  return true;
}

class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      const size_t tag = find_tag(pos_);
      std::string text = src_.substr(pos_, tag - pos_);
      if (tag == src_.size()) {
        push_text(std::move(text), pos_);
        pos_ = tag;
        break;
      }
      const char type = src_[tag + 1];  // '{', '%' or '#'
      const char sign = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      if (sign == '-') {
        rstrip_all(text);
      } else if (sign != '+' && type != '{') {
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        if ((l_pos > 0 || line_starting_) && all_space(std::string_view(text).substr(l_pos))) text.resize(l_pos);
      }
      push_text(std::move(text), pos_);
      advance_to(tag);
      const size_t body = tag + 2 + (sign == '-' || sign == '+' ? 1 : 0);
      if (type == '#') lex_comment(body);
      else if (type == '%' && is_raw(body)) lex_raw(body);
      else lex_tag(type, body);
    }
    Token eof{TokKind::kEof, {}, line_, col_};
    out_.push_back(eof);
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail(const std::string& msg, size_t at) {
    advance_to(at);
    throw Error(msg, line_, col_);
  }

  // Moves the line / column cursor to byte offset `to`.
  void advance_to(size_t to) {
    for (; cursor_ < to && cursor_ < src_.size(); ++cursor_) {
      if (src_[cursor_] == '\n') ++line_, col_ = 1;
      else if ((static_cast<unsigned char>(src_[cursor_]) & 0xC0) != 0x80) ++col_;
    }
  }

  size_t find_tag(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return src_.size();
  }

  void push_text(std::string text, size_t at) {
    if (text.empty()) return;
    advance_to(at);
    out_.push_back(Token{TokKind::kText, std::move(text), line_, col_});
  }

  // After a block / comment end: `-` eats all following whitespace, plain eats one newline.
  size_t after_end(size_t p, bool minus, bool plus, bool trims) {
    if (minus) {
      while (p < src_.size() && is_ws(src_[p])) ++p;
    } else if (!plus && trims && p < src_.size() && src_[p] == '\n') {
      ++p;
    }
    line_starting_ = p > 0 && src_[p - 1] == '\n';
    return p;
  }

  void lex_comment(size_t body) {
    const size_t end = src_.find("#}", body);
    if (end == std::string::npos) fail("missing end of comment tag", body);
    const bool minus = end > body && src_[end - 1] == '-';
    const bool plus = end > body && src_[end - 1] == '+';
    pos_ = after_end(end + 2, minus, plus, true);
  }

  bool is_raw(size_t body) const {
    size_t p = body;
    while (p < src_.size() && is_ws(src_[p])) ++p;
    if (src_.compare(p, 3, "raw") != 0) return false;
    p += 3;
    while (p < src_.size() && is_ws(src_[p])) ++p;
    return src_.compare(p, 2, "%}") == 0 || src_.compare(p, 3, "-%}") == 0;
  }

  void lex_raw(size_t body) {
    size_t p = src_.find("%}", body);
    const bool open_minus = src_[p - 1] == '-';
    p += 2;
    if (open_minus) while (p < src_.size() && is_ws(src_[p])) ++p;
    // Find `{%[-+]? endraw [-+]?%}`.
    size_t search = p;
    while (true) {
      const size_t open = src_.find("{%", search);
      if (open == std::string::npos) fail("missing end of raw directive", body);
      size_t q = open + 2;
      const char sign = q < src_.size() ? src_[q] : '\0';
      if (sign == '-' || sign == '+') ++q;
      while (q < src_.size() && is_ws(src_[q])) ++q;
      if (src_.compare(q, 6, "endraw") != 0) {
        search = open + 2;
        continue;
      }
      q += 6;
      while (q < src_.size() && is_ws(src_[q])) ++q;
      bool minus = false, plus = false;
      if (q < src_.size() && src_[q] == '-') minus = true, ++q;
      else if (q < src_.size() && src_[q] == '+') plus = true, ++q;
      if (src_.compare(q, 2, "%}") != 0) fail("malformed endraw tag", q);
      std::string text = src_.substr(p, open - p);
      if (sign == '-') {
        rstrip_all(text);
      } else if (sign != '+') {
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        if (l_pos > 0 && all_space(std::string_view(text).substr(l_pos))) text.resize(l_pos);
      }
      push_text(std::move(text), p);
      pos_ = after_end(q + 2, minus, plus, true);
      return;
    }
  }

  void lex_tag(char type, size_t body) {
    advance_to(body - 2 - ((src_[body - 1] == '-' || src_[body - 1] == '+') ? 1 : 0));
    out_.push_back(Token{type == '{' ? TokKind::kVarBegin : TokKind::kBlockBegin, {}, line_, col_});
    std::vector<char> brackets;
    size_t p = body;
    while (true) {
      while (p < src_.size() && is_ws(src_[p])) ++p;
      if (p >= src_.size()) fail(type == '{' ? "unexpected end of template: missing '}}'" : "unexpected end of template: missing '%}'", body);
      if (brackets.empty()) {
        const char* end = type == '{' ? "}}" : "%}";
        const bool minus = src_[p] == '-' && src_.compare(p + 1, 2, end) == 0;
        const bool plus = type == '%' && src_[p] == '+' && src_.compare(p + 1, 2, end) == 0;
        if (minus || plus || src_.compare(p, 2, end) == 0) {
          advance_to(p);
          out_.push_back(Token{type == '{' ? TokKind::kVarEnd : TokKind::kBlockEnd, {}, line_, col_});
          pos_ = after_end(p + 2 + (minus || plus ? 1 : 0), minus, plus, type == '%');
          if (type == '{' && !minus) line_starting_ = false;
          return;
        }
      }
      p = lex_one(p, brackets);
    }
  }

  size_t lex_one(size_t p, std::vector<char>& brackets) {
    advance_to(p);
    const char c = src_[p];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t q = p;
      while (q < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[q])) || src_[q] == '_')) ++q;
      out_.push_back(Token{TokKind::kName, src_.substr(p, q - p), line_, col_});
      return q;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) return lex_number(p);
    if (c == '\'' || c == '"') return lex_string(p);
    static const char* const kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "/", "*", "%", "~", "[", "]", "(",
                                       ")", "{", "}", "<", ">", "=", ".", ":", "|", ",", ";"};
    for (const char* op : kOps) {
      const size_t n = std::strlen(op);
      if (src_.compare(p, n, op) != 0) continue;
      if (n == 1 && (c == '(' || c == '[' || c == '{')) brackets.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
      if (n == 1 && (c == ')' || c == ']' || c == '}')) {
        if (brackets.empty()) fail(std::string("unexpected '") + c + "'", p);
        if (brackets.back() != c) fail(std::string("unexpected '") + c + "', expected '" + brackets.back() + "'", p);
        brackets.pop_back();
      }
      out_.push_back(Token{TokKind::kOp, op, line_, col_});
      return p + n;
    }
    fail(std::string("unexpected character '") + c + "'", p);
  }

  size_t lex_number(size_t p) {
    if (src_[p] == '0' && p + 1 < src_.size() && std::strchr("xXoObB", src_[p + 1])) return lex_radix(p);
    size_t q = p;
    auto digits = [&] {
      while (q < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[q])) || src_[q] == '_')) ++q;
    };
    digits();
    bool is_float = false;
    if (q + 1 < src_.size() && src_[q] == '.' && std::isdigit(static_cast<unsigned char>(src_[q + 1]))) {
      ++q;
      digits();
      is_float = true;
    }
    if (q < src_.size() && (src_[q] == 'e' || src_[q] == 'E')) {
      size_t r = q + 1;
      if (r < src_.size() && (src_[r] == '+' || src_[r] == '-')) ++r;
      if (r < src_.size() && std::isdigit(static_cast<unsigned char>(src_[r]))) {
        q = r;
        digits();
        is_float = true;
      }
    }
    std::string text;
    for (size_t i = p; i < q; ++i)
      if (src_[i] != '_') text += src_[i];
    if (!is_float && text.size() > 1 && text[0] == '0' && text.find_first_not_of('0') != std::string::npos)
      fail("malformed number literal '" + src_.substr(p, q - p) + "' (leading zeros)", p);
    out_.push_back(Token{is_float ? TokKind::kFloat : TokKind::kInt, text, line_, col_});
    return q;
  }

  // 0x / 0o / 0b integer literals (digits may be separated by single underscores).
  size_t lex_radix(size_t p) {
    const char kind = static_cast<char>(std::tolower(static_cast<unsigned char>(src_[p + 1])));
    const int base = kind == 'x' ? 16 : kind == 'o' ? 8 : 2;
    size_t q = p + 2;
    unsigned __int128 v = 0;
    bool any = false;
    for (; q < src_.size(); ++q) {
      const char c = src_[q];
      if (c == '_') continue;
      const int d = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
                    : std::isxdigit(static_cast<unsigned char>(c)) ? std::tolower(c) - 'a' + 10 : 99;
      if (d >= base) break;
      v = v * base + d;
      if (v > static_cast<unsigned __int128>(INT64_MAX)) fail("integer literal out of the 64-bit range", p);
      any = true;
    }
    if (!any) fail("malformed number literal", p);
    out_.push_back(Token{TokKind::kInt, std::to_string(static_cast<int64_t>(v)), line_, col_});
    return q;
  }

  size_t lex_string(size_t p) {
    const char quote = src_[p];
    std::string out;
    size_t q = p + 1;
    while (true) {
      if (q >= src_.size()) fail("unterminated string literal", p);
      const char c = src_[q];
      if (c == quote) break;
      if (c != '\\') {
        out += c;
        ++q;
        continue;
      }
      if (q + 1 >= src_.size()) fail("unterminated string literal", p);
      q = unescape(q, out);
    }
    out_.push_back(Token{TokKind::kString, std::move(out), line_, col_});
    return q + 1;
  }

  // Python "unicode-escape" decoding of one escape at src_[q] == '\\'.
  size_t unescape(size_t q, std::string& out) {
    const char e = src_[q + 1];
    auto hex = [&](size_t at, int n) -> char32_t {
      char32_t v = 0;
      for (int k = 0; k < n; ++k) {
        const char h = at + k < src_.size() ? src_[at + k] : '\0';
        if (!std::isxdigit(static_cast<unsigned char>(h))) fail("truncated \\x / \\u escape in string literal", q);
        v = v * 16 + static_cast<char32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
      }
      return v;
    };
    switch (e) {
      case 'n': out += '\n'; return q + 2;
      case 't': out += '\t'; return q + 2;
      case 'r': out += '\r'; return q + 2;
      case '\\': out += '\\'; return q + 2;
      case '\'': out += '\''; return q + 2;
      case '"': out += '"'; return q + 2;
      case 'a': out += '\a'; return q + 2;
      case 'b': out += '\b'; return q + 2;
      case 'f': out += '\f'; return q + 2;
      case 'v': out += '\v'; return q + 2;
      case '\n': return q + 2;  // line continuation
      case 'x': append_utf8(out, hex(q + 2, 2)); return q + 4;
      case 'u': append_utf8(out, hex(q + 2, 4)); return q + 6;
      case 'U': append_utf8(out, hex(q + 2, 8)); return q + 10;
      case 'N': fail("\\N{...} escapes in string literals are not supported", q);
      default:
        if (e >= '0' && e <= '7') {
          char32_t v = 0;
          size_t r = q + 1;
          for (int k = 0; k < 3 && r < src_.size() && src_[r] >= '0' && src_[r] <= '7'; ++k, ++r) v = v * 8 + (src_[r] - '0');
          append_utf8(out, v);
          return r;
        }
        out += '\\';  // Python keeps unknown escapes as written
        return q + 1;
    }
  }

  std::string src_;
  size_t pos_ = 0, cursor_ = 0;
  int line_ = 1, col_ = 1;
  bool line_starting_ = true;
  std::vector<Token> out_;
};

}  // namespace

std::vector<Token> lex_template(std::string_view source) { return Lexer(normalize_newlines(source)).run(); }

}  // namespace densa::jinja
