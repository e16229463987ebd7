// Jinja parser, expressions, with Jinja2's operator precedence (parser.py): conditional < or <
// and < not < comparison < + - < ~ < * / // % < ** < unary - + < primary with postfix (. [] ())
// and then filters / tests. Filters and tests are resolved here, at parse time.
#include <charconv>
#include <cstdlib>

#include "text/jinja/parser.h"

namespace densa::jinja {

ExprPtr Parser::parse_tuple_expr(bool with_condexpr) {
  const Token& at = cur();
  ExprPtr first = with_condexpr ? parse_expr() : parse_or();
  if (!is_op(",")) return first;
  ExprPtr tup = node(ExprKind::kTuple, at);
  tup->items.push_back(std::move(first));
  while (skip_op(",")) {
    if (cur().kind == TokKind::kBlockEnd || cur().kind == TokKind::kVarEnd || is_name("if")) break;
    tup->items.push_back(with_condexpr ? parse_expr() : parse_or());
  }
  return tup;
}

ExprPtr Parser::parse_expr() {
  Depth d(*this, cur());
  ExprPtr e = parse_or();
  while (is_name("if")) {
    const Token& at = cur();
    ++i_;
    ExprPtr cond = parse_or();
    ExprPtr c = node(ExprKind::kCondExpr, at);
    c->items.push_back(std::move(cond));
    c->items.push_back(std::move(e));
    c->items.push_back(skip_name("else") ? parse_expr() : nullptr);
    e = std::move(c);
  }
  return e;
}

ExprPtr Parser::binary(ExprKind k, ExprPtr l, ExprPtr r, const Token& at, std::string op) {
  ExprPtr e = node(k, at);
  e->name = std::move(op);
  e->items.push_back(std::move(l));
  e->items.push_back(std::move(r));
  return e;
}

ExprPtr Parser::parse_or() {
  ExprPtr e = parse_and();
  while (is_name("or")) {
    const Token& at = t_[i_++];
    e = binary(ExprKind::kOr, std::move(e), parse_and(), at);
  }
  return e;
}

ExprPtr Parser::parse_and() {
  ExprPtr e = parse_not();
  while (is_name("and")) {
    const Token& at = t_[i_++];
    e = binary(ExprKind::kAnd, std::move(e), parse_not(), at);
  }
  return e;
}

ExprPtr Parser::parse_not() {
  if (is_name("not")) {
    Depth d(*this, cur());
    ExprPtr e = node(ExprKind::kNot, t_[i_++]);
    e->items.push_back(parse_not());
    return e;
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  const Token& at = cur();
  ExprPtr first = parse_math1();
  ExprPtr cmp;
  while (true) {
    std::string op;
    if (cur().kind == TokKind::kOp &&
        (is_op("==") || is_op("!=") || is_op("<") || is_op("<=") || is_op(">") || is_op(">="))) {
      op = t_[i_++].value;
    } else if (is_name("in")) {
      ++i_;
      op = "in";
    } else if (is_name("not") && peek().kind == TokKind::kName && peek().value == "in") {
      i_ += 2;
      op = "notin";
    } else {
      break;
    }
    if (!cmp) {
      cmp = node(ExprKind::kCompare, at);
      cmp->items.push_back(std::move(first));
    }
    cmp->ops.push_back(op);
    cmp->items.push_back(parse_math1());
  }
  return cmp ? std::move(cmp) : std::move(first);
}

ExprPtr Parser::parse_math1() {
  ExprPtr e = parse_concat();
  while (is_op("+") || is_op("-")) {
    const Token& at = t_[i_++];
    e = binary(ExprKind::kBinary, std::move(e), parse_concat(), at, at.value);
  }
  return e;
}

ExprPtr Parser::parse_concat() {
  const Token& at = cur();
  ExprPtr e = parse_math2();
  if (!is_op("~")) return e;
  ExprPtr c = node(ExprKind::kConcat, at);
  c->items.push_back(std::move(e));
  while (skip_op("~")) c->items.push_back(parse_math2());
  return c;
}

ExprPtr Parser::parse_math2() {
  ExprPtr e = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    const Token& at = t_[i_++];
    e = binary(ExprKind::kBinary, std::move(e), parse_pow(), at, at.value);
  }
  return e;
}

ExprPtr Parser::parse_pow() {
  ExprPtr e = parse_unary();
  while (is_op("**")) {
    const Token& at = t_[i_++];
    e = binary(ExprKind::kBinary, std::move(e), parse_unary(), at, "**");
  }
  return e;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  Depth d(*this, cur());
  ExprPtr e;
  if (is_op("-") || is_op("+")) {
    const Token& at = t_[i_++];
    e = node(at.value == "-" ? ExprKind::kNeg : ExprKind::kPos, at);
    e->items.push_back(parse_unary(false));
  } else {
    e = parse_postfix(parse_primary());
  }
  return with_filter ? parse_filter_expr(std::move(e)) : std::move(e);
}

ExprPtr Parser::parse_primary() {
  const Token& t = cur();
  switch (t.kind) {
    case TokKind::kName: {
      ++i_;
      ExprPtr e = node(ExprKind::kLiteral, t);
      if (t.value == "true" || t.value == "True") e->literal = Value::boolean(true);
      else if (t.value == "false" || t.value == "False") e->literal = Value::boolean(false);
      else if (t.value == "none" || t.value == "None") e->literal = Value::none();
      else e->kind = ExprKind::kName, e->name = t.value;
      return e;
    }
    case TokKind::kString: {
      std::string s;
      while (cur().kind == TokKind::kString) s += t_[i_++].value;
      ExprPtr e = node(ExprKind::kLiteral, t);
      e->literal = Value::string(std::move(s));
      return e;
    }
    case TokKind::kInt: {
      ++i_;
      int64_t v = 0;
      auto r = std::from_chars(t.value.data(), t.value.data() + t.value.size(), v);
      if (r.ec != std::errc()) fail("integer literal " + t.value + " is out of range", t);
      ExprPtr e = node(ExprKind::kLiteral, t);
      e->literal = Value::integer(v);
      return e;
    }
    case TokKind::kFloat: {
      ++i_;
      ExprPtr e = node(ExprKind::kLiteral, t);
      e->literal = Value::real(std::strtod(t.value.c_str(), nullptr));
      return e;
    }
    case TokKind::kOp:
      if (t.value == "(") return parse_paren();
      if (t.value == "[") return parse_list();
      if (t.value == "{") return parse_dict();
      break;
    default: break;
  }
  fail("unexpected " + describe(t) + " in expression", t);
}

ExprPtr Parser::parse_paren() {
  const Token& at = t_[i_++];
  if (skip_op(")")) return node(ExprKind::kTuple, at);
  ExprPtr first = parse_expr();
  if (skip_op(")")) return first;
  ExprPtr tup = node(ExprKind::kTuple, at);
  tup->items.push_back(std::move(first));
  while (skip_op(",")) {
    if (is_op(")")) break;
    tup->items.push_back(parse_expr());
  }
  expect_op(")");
  return tup;
}

ExprPtr Parser::parse_list() {
  ExprPtr e = node(ExprKind::kList, t_[i_++]);
  while (!is_op("]")) {
    if (!e->items.empty()) expect_op(",");
    if (is_op("]")) break;
    e->items.push_back(parse_expr());
  }
  expect_op("]");
  return e;
}

ExprPtr Parser::parse_dict() {
  ExprPtr e = node(ExprKind::kDict, t_[i_++]);
  while (!is_op("}")) {
    if (!e->items.empty()) expect_op(",");
    if (is_op("}")) break;
    e->items.push_back(parse_expr());
    expect_op(":");
    e->items.push_back(parse_expr());
  }
  expect_op("}");
  return e;
}

ExprPtr Parser::parse_postfix(ExprPtr e) {
  while (true) {
    const Token& at = cur();
    if (is_op(".")) {
      ++i_;
      ExprPtr g = node(ExprKind::kGetAttr, at);
      if (cur().kind == TokKind::kName) {
        g->name = t_[i_++].value;
      } else if (cur().kind == TokKind::kInt) {
        g->kind = ExprKind::kGetItem;
        ExprPtr idx = node(ExprKind::kLiteral, cur());
        int64_t v = 0;
        const std::string& digits = t_[i_].value;
        const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), v);
        if (r.ec != std::errc()) fail("integer index " + digits + " is out of range", cur());
        ++i_;
        idx->literal = Value::integer(v);
        g->items.push_back(std::move(e));
        g->items.push_back(std::move(idx));
        e = std::move(g);
        continue;
      } else {
        fail("expected an attribute name after '.', got " + describe(cur()), cur());
      }
      g->items.push_back(std::move(e));
      e = std::move(g);
    } else if (is_op("[")) {
      ++i_;
      e = parse_subscript(std::move(e), at);
    } else if (is_op("(")) {
      e = parse_call(std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr target, const Token& at) {
  ExprPtr parts[3];
  bool slice = false;
  int k = 0;
  while (true) {
    if (is_op(":")) {
      ++i_;
      slice = true;
      if (++k > 2) fail("too many ':' in slice", cur());
      continue;
    }
    if (is_op("]")) break;
    if (parts[k]) fail("expected ']' or ':' in subscript, got " + describe(cur()), cur());
    parts[k] = parse_expr();
    if (!slice && is_op(",")) fail("unsupported: tuple subscripts", cur());
  }
  expect_op("]");
  ExprPtr e = node(slice ? ExprKind::kSlice : ExprKind::kGetItem, at);
  e->items.push_back(std::move(target));
  if (!slice) {
    if (!parts[0]) fail("empty subscript", at);
    e->items.push_back(std::move(parts[0]));
  } else {
    for (auto& p : parts) e->items.push_back(std::move(p));
  }
  return e;
}

void Parser::parse_call_args(Expr& e) {
  expect_op("(");
  bool first = true;
  while (!is_op(")")) {
    if (!first) expect_op(",");
    first = false;
    if (is_op(")")) break;
    if (is_op("*") || is_op("**")) fail("unsupported: *args / **kwargs in calls", cur());
    if (cur().kind == TokKind::kName && peek().kind == TokKind::kOp && peek().value == "=") {
      std::string key = t_[i_].value;
      i_ += 2;
      e.kwargs.emplace_back(std::move(key), parse_expr());
    } else {
      if (!e.kwargs.empty()) fail("positional argument after keyword argument", cur());
      e.items.push_back(parse_expr());
    }
  }
  expect_op(")");
}

ExprPtr Parser::parse_call(ExprPtr callee) {
  ExprPtr e = node(ExprKind::kCall, cur());
  e->items.push_back(std::move(callee));
  parse_call_args(*e);
  return e;
}

void Parser::check_chain(int links, const Token& at) {
  if (depth_ + links > kMaxNesting) fail("template nests deeper than " + std::to_string(kMaxNesting) + " levels", at);
}

ExprPtr Parser::parse_filter_expr(ExprPtr e) {
  for (int links = 1;; ++links) {
    check_chain(links, cur());
    if (is_op("|")) {
      e = parse_filter_chain(std::move(e));
    } else if (is_name("is")) {
      e = parse_test(std::move(e));
    } else if (is_op("(")) {
      e = parse_call(std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr Parser::parse_filter_chain(ExprPtr operand, bool leading_pipe) {
  bool first = true;
  int links = 0;
  while (first ? (!leading_pipe || is_op("|")) : is_op("|")) {
    if (leading_pipe || !first) expect_op("|");
    first = false;
    const Token& at = cur();
    check_chain(++links, at);
    std::string name = expect_name();
    while (skip_op(".")) name.append(".").append(expect_name());
    ExprPtr f = node(ExprKind::kFilter, at);
    f->name = name;
    f->filter = find_filter(name);
    if (!f->filter) fail("unknown filter '" + name + "'", at);
    f->items.push_back(std::move(operand));
    if (is_op("(")) parse_call_args(*f);
    operand = std::move(f);
  }
  return operand;
}

ExprPtr Parser::parse_test(ExprPtr operand) {
  const Token& at = t_[i_++];  // 'is'
  ExprPtr e = node(ExprKind::kTest, at);
  e->negated = skip_name("not");
  const Token& name_tok = cur();
  std::string name = expect_name();
  while (skip_op(".")) name.append(".").append(expect_name());
  e->name = name;
  e->test = find_test(name);
  if (!e->test) fail("unknown test '" + name + "'", name_tok);
  e->items.push_back(std::move(operand));
  if (is_op("(")) {
    parse_call_args(*e);
  } else if ((cur().kind == TokKind::kName || cur().kind == TokKind::kString || cur().kind == TokKind::kInt ||
              cur().kind == TokKind::kFloat || is_op("[") || is_op("{")) &&
             !is_name("else") && !is_name("or") && !is_name("and")) {
    if (is_name("is")) fail("you cannot chain multiple tests with 'is'", cur());
    e->items.push_back(parse_postfix(parse_primary()));
  }
  return e;
}

}  // namespace densa::jinja
