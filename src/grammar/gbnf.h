#pragma once
// EBNF grammars in llama.cpp's GBNF syntax:
//   root ::= "{" ws pair ("," ws pair)* "}"      # comment
//   pair ::= [a-z]+ ":" ws ("yes" | "no")
// Rules `name ::= body` (names [A-Za-z0-9_-]+, rules may span lines and refer to later
// rules); "literals" and [classes] ([^...] negated, ranges) with escapes \n \r \t \\ \" \]
// \[ \- \xHH \uHHHH \UHHHHHHHH; '.' (any character); grouping ( ); alternation |; postfix
// * + ? {m} {m,} {m,n}. The start rule is `root`. Characters are UTF-8.
#include <string_view>

#include "core/status.h"
#include "grammar/grammar.h"

namespace densa::grammar {

struct GbnfLimits {
  size_t max_source_bytes = 1 << 20;
  int max_nesting = 64;         // parenthesis depth
  int32_t max_repeat = 10000;   // m and n in {m,n}
};

Result<Grammar> grammar_from_gbnf(std::string_view text, const GbnfLimits& limits = {});

}  // namespace densa::grammar
