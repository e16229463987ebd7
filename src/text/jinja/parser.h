#pragma once
// Jinja parser: tokens (lexer.h) to the trees of ast.h, following Jinja2's grammar (parser.py).
// One class over two files: statements and blocks (parser.cpp), expressions with their operator
// precedence (parser_expr.cpp). Internal to the engine; callers use parse_template (ast.h).
#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/lexer.h"

namespace densa::jinja {

constexpr int kMaxNesting = 200;  // expression / block nesting the parser accepts

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

  Body parse_all() {
    Body body = parse_body({});
    if (cur().kind != TokKind::kEof) fail("unexpected tag", cur());
    return body;
  }

 private:
  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  [[noreturn]] void fail(const std::string& msg, const Token& at) { throw Error(msg, at.line, at.column); }
  bool is_op(std::string_view op) const { return cur().kind == TokKind::kOp && cur().value == op; }
  bool is_name(std::string_view n) const { return cur().kind == TokKind::kName && cur().value == n; }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    ++i_;
    return true;
  }
  bool skip_name(std::string_view n) {
    if (!is_name(n)) return false;
    ++i_;
    return true;
  }
  void expect_op(std::string_view op) {
    if (!skip_op(op)) fail("expected '" + std::string(op) + "', got " + describe(cur()), cur());
  }
  std::string expect_name() {
    if (cur().kind != TokKind::kName) fail("expected a name, got " + describe(cur()), cur());
    return t_[i_++].value;
  }
  void expect_block_end() {
    if (cur().kind != TokKind::kBlockEnd) fail("expected end of statement block '%}', got " + describe(cur()), cur());
    ++i_;
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case TokKind::kEof: return "end of template";
      case TokKind::kBlockEnd: return "'%}'";
      case TokKind::kVarEnd: return "'}}'";
      case TokKind::kString: return "a string";
      case TokKind::kText: return "text";
      default: return "'" + t.value + "'";
    }
  }

  struct Depth {
    Depth(Parser& p, const Token& at) : p(p) {
      if (++p.depth_ > kMaxNesting) p.fail("template nests deeper than " + std::to_string(kMaxNesting) + " levels", at);
    }
    ~Depth() { --p.depth_; }
    Parser& p;
  };

  ExprPtr node(ExprKind k, const Token& at) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = at.line;
    e->column = at.column;
    return e;
  }

  // ---- statements (parser.cpp) ----

  // Parses nodes until a block whose keyword is in `ends` (left unconsumed, positioned at its
  // name) or end of input.
  Body parse_body(const std::set<std::string_view>& ends);
  // At a statement's keyword, after `{%`: the statement through its closing tag.
  NodePtr parse_statement();
  // After the keyword of a closing tag: expects the tag's end.
  void close(std::string_view) { expect_block_end(); }
  NodePtr parse_if(NodePtr n);
  std::vector<std::string> parse_targets();
  NodePtr parse_for(NodePtr n);
  NodePtr parse_set(NodePtr n);
  void parse_params(std::vector<MacroParam>& params);
  NodePtr parse_macro(NodePtr n);
  NodePtr parse_call_block(NodePtr n);
  NodePtr parse_filter_block(NodePtr n);

  // ---- expressions (parser_expr.cpp) ----

  // A bare tuple (`a, b`) is allowed at the top of {{ }}, set and for.
  ExprPtr parse_tuple_expr(bool with_condexpr = true);
  ExprPtr parse_expr();
  ExprPtr binary(ExprKind k, ExprPtr l, ExprPtr r, const Token& at, std::string op = {});
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter = true);
  ExprPtr parse_primary();
  ExprPtr parse_paren();
  ExprPtr parse_list();
  ExprPtr parse_dict();
  ExprPtr parse_postfix(ExprPtr e);
  ExprPtr parse_subscript(ExprPtr target, const Token& at);
  void parse_call_args(Expr& e);
  ExprPtr parse_call(ExprPtr callee);
  // A postfix chain nests each link inside the next (evaluated and freed recursively), so its
  // length counts toward the nesting limit: 10,000 chained filters overflowed the stack.
  void check_chain(int links, const Token& at);
  ExprPtr parse_filter_expr(ExprPtr e);
  // One or more `| name(args)` applied to `operand` (null in a filter block / set block).
  ExprPtr parse_filter_chain(ExprPtr operand, bool leading_pipe = true);
  ExprPtr parse_test(ExprPtr operand);

  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace densa::jinja
