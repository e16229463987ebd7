// Jinja parser, statements and blocks: the template body, if / for / set / macro / call /
// filter blocks and their closing tags (expressions: parser_expr.cpp).
#include <set>

#include "text/jinja/parser.h"

namespace densa::jinja {

Body Parser::parse_body(const std::set<std::string_view>& ends) {
  Body body;
  while (true) {
    const Token& t = cur();
    if (t.kind == TokKind::kEof) {
      if (!ends.empty()) fail("unexpected end of template: missing '{% " + std::string(*ends.rbegin()) + " %}'", t);
      return body;
    }
    if (t.kind == TokKind::kText) {
      auto n = std::make_unique<Node>();
      n->kind = NodeKind::kText;
      n->line = t.line;
      n->text = t.value;
      body.push_back(std::move(n));
      ++i_;
    } else if (t.kind == TokKind::kVarBegin) {
      auto n = std::make_unique<Node>();
      n->kind = NodeKind::kOutput;
      n->line = t.line;
      n->column = t.column;
      ++i_;
      n->expr = parse_tuple_expr();
      if (cur().kind != TokKind::kVarEnd) fail("expected end of print statement '}}', got " + describe(cur()), cur());
      ++i_;
      body.push_back(std::move(n));
    } else if (t.kind == TokKind::kBlockBegin) {
      const Token& kw = peek();
      if (kw.kind == TokKind::kName && ends.count(kw.value)) {
        ++i_;
        return body;
      }
      ++i_;
      body.push_back(parse_statement());
    } else {
      fail("unexpected " + describe(t), t);
    }
  }
}

NodePtr Parser::parse_statement() {
  const Token& kw = cur();
  Depth d(*this, kw);
  if (kw.kind != TokKind::kName) fail("expected a statement keyword, got " + describe(kw), kw);
  auto n = std::make_unique<Node>();
  n->line = kw.line;
  n->column = kw.column;
  const std::string k = kw.value;
  ++i_;
  if (k == "if") return parse_if(std::move(n));
  if (k == "for") return parse_for(std::move(n));
  if (k == "set") return parse_set(std::move(n));
  if (k == "macro") return parse_macro(std::move(n));
  if (k == "call") return parse_call_block(std::move(n));
  if (k == "filter") return parse_filter_block(std::move(n));
  if (k == "break" || k == "continue") {
    if (loop_depth_ == 0) fail("'" + k + "' outside of a loop", kw);
    n->kind = k == "break" ? NodeKind::kBreak : NodeKind::kContinue;
    expect_block_end();
    return n;
  }
  if (k.rfind("end", 0) == 0 || k == "elif" || k == "else") fail("unexpected '{% " + k + " %}'", kw);
  static const std::set<std::string_view> kKnownUnsupported = {
      "include", "import", "from", "extends", "block", "with", "do", "autoescape", "trans", "generation", "endgeneration"};
  if (kKnownUnsupported.count(k)) fail("unsupported statement '{% " + k + " %}'", kw);
  fail("unknown statement '{% " + k + " %}'", kw);
}


NodePtr Parser::parse_if(NodePtr n) {
  n->kind = NodeKind::kIf;
  ExprPtr cond = parse_tuple_expr();
  expect_block_end();
  while (true) {
    Body body = parse_body({"elif", "else", "endif"});
    n->branches.emplace_back(std::move(cond), std::move(body));
    const std::string kw = t_[i_++].value;
    if (kw == "elif") {
      cond = parse_tuple_expr();
      expect_block_end();
      continue;
    }
    if (kw == "else") {
      expect_block_end();
      n->else_body = parse_body({"endif"});
      ++i_;
    }
    close("endif");
    return n;
  }
}

std::vector<std::string> Parser::parse_targets() {
  std::vector<std::string> names;
  const bool paren = skip_op("(");
  do {
    if (is_name("in")) break;
    names.push_back(expect_name());
  } while (skip_op(","));
  if (paren) expect_op(")");
  return names;
}

NodePtr Parser::parse_for(NodePtr n) {
  n->kind = NodeKind::kFor;
  n->targets = parse_targets();
  if (n->targets.empty()) fail("expected a loop variable", cur());
  if (!skip_name("in")) fail("expected 'in' in for loop, got " + describe(cur()), cur());
  n->expr = parse_tuple_expr(/*with_condexpr=*/false);
  if (skip_name("if")) n->cond = parse_expr();
  if (is_name("recursive")) fail("unsupported: recursive for loops", cur());
  expect_block_end();
  ++loop_depth_;
  n->body = parse_body({"else", "endfor"});
  --loop_depth_;
  if (t_[i_++].value == "else") {
    expect_block_end();
    n->else_body = parse_body({"endfor"});
    ++i_;
  }
  close("endfor");
  return n;
}

NodePtr Parser::parse_set(NodePtr n) {
  const Token& at = cur();
  std::string first = expect_name();
  if (skip_op(".")) {
    n->attr_target = true;
    n->targets = {first, expect_name()};
  } else {
    n->targets = {first};
    while (skip_op(",")) n->targets.push_back(expect_name());
  }
  if (skip_op("=")) {
    n->kind = NodeKind::kSet;
    n->expr = parse_tuple_expr();
    expect_block_end();
    return n;
  }
  if (n->targets.size() != 1 || n->attr_target) fail("a set block takes one plain name", at);
  n->kind = NodeKind::kSetBlock;
  if (is_op("|")) n->expr = parse_filter_chain(nullptr);
  expect_block_end();
  n->body = parse_body({"endset"});
  ++i_;
  close("endset");
  return n;
}

void Parser::parse_params(std::vector<MacroParam>& params) {
  expect_op("(");
  while (!is_op(")")) {
    if (!params.empty()) expect_op(",");
    if (is_op(")")) break;
    MacroParam p;
    p.name = expect_name();
    if (skip_op("=")) p.default_value = parse_expr();
    params.push_back(std::move(p));
  }
  expect_op(")");
}

NodePtr Parser::parse_macro(NodePtr n) {
  n->kind = NodeKind::kMacro;
  n->name = expect_name();
  parse_params(n->params);
  expect_block_end();
  const int saved = loop_depth_;
  loop_depth_ = 0;
  n->body = parse_body({"endmacro"});
  loop_depth_ = saved;
  ++i_;
  if (cur().kind == TokKind::kName) ++i_;  // {% endmacro name %}
  close("endmacro");
  return n;
}

NodePtr Parser::parse_call_block(NodePtr n) {
  n->kind = NodeKind::kCallBlock;
  if (is_op("(")) parse_params(n->params);
  n->expr = parse_expr();
  if (n->expr->kind != ExprKind::kCall) fail("expected a call expression in '{% call %}'", cur());
  expect_block_end();
  n->body = parse_body({"endcall"});
  ++i_;
  close("endcall");
  return n;
}

NodePtr Parser::parse_filter_block(NodePtr n) {
  n->kind = NodeKind::kFilterBlock;
  n->expr = parse_filter_chain(nullptr, /*leading_pipe=*/false);
  expect_block_end();
  n->body = parse_body({"endfilter"});
  ++i_;
  close("endfilter");
  return n;
}

std::shared_ptr<const ParsedTemplate> parse_template(std::string_view source) {
  auto t = std::make_shared<ParsedTemplate>();
  t->source = std::string(source);
  t->body = Parser(lex_template(source)).parse_all();
  return t;
}

}  // namespace densa::jinja
