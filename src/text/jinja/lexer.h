#pragma once
// Jinja lexer: splits template source into text and tag tokens, applying Jinja2's whitespace
// rules as HF's environment sets them (trim_blocks, lstrip_blocks, `-` / `+` markers, no
// trailing newline kept, \r\n and \r read as \n). Comments are dropped; raw blocks become text.
#include <string>
#include <string_view>
#include <vector>

namespace densa::jinja {

enum class TokKind : uint8_t {
  kText,
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,      // value: the unescaped string
  kInt,
  kFloat,
  kOp,          // value: operator text
  kEof,
};

struct Token {
  TokKind kind;
  std::string value;
  int line = 1, column = 1;
};

// Throws Error (with line / column) on an unterminated tag, string or comment, or a stray
// character.
std::vector<Token> lex_template(std::string_view source);

}  // namespace densa::jinja
