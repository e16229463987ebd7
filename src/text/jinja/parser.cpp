// Jinja parser: tokens (lexer.h) to the trees of ast.h, following Jinja2's grammar and operator
// precedence (parser.py): conditional < or < and < not < comparison < + - < ~ < * / // % < **
// < unary - + < primary with postfix (. [] ()) and then filters / tests.
#include <charconv>
#include <set>

#include "text/jinja/ast.h"
#include "text/jinja/lexer.h"

namespace densa::jinja {
namespace {

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

  // ---- statements ----

  // Parses nodes until a block whose keyword is in `ends` (left unconsumed, positioned at its
  // name) or end of input.
  Body parse_body(const std::set<std::string_view>& ends) {
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

  NodePtr parse_statement() {
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

  // After the keyword of a closing tag: expects the tag's end.
  void close(std::string_view) { expect_block_end(); }

  NodePtr parse_if(NodePtr n) {
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

  std::vector<std::string> parse_targets() {
    std::vector<std::string> names;
    const bool paren = skip_op("(");
    do {
      if (is_name("in")) break;
      names.push_back(expect_name());
    } while (skip_op(","));
    if (paren) expect_op(")");
    return names;
  }

  NodePtr parse_for(NodePtr n) {
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

  NodePtr parse_set(NodePtr n) {
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

  void parse_params(std::vector<MacroParam>& params) {
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

  NodePtr parse_macro(NodePtr n) {
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

  NodePtr parse_call_block(NodePtr n) {
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

  NodePtr parse_filter_block(NodePtr n) {
    n->kind = NodeKind::kFilterBlock;
    n->expr = parse_filter_chain(nullptr, /*leading_pipe=*/false);
    expect_block_end();
    n->body = parse_body({"endfilter"});
    ++i_;
    close("endfilter");
    return n;
  }

  // ---- expressions ----

  // A bare tuple (`a, b`) is allowed at the top of {{ }}, set and for.
  ExprPtr parse_tuple_expr(bool with_condexpr = true) {
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

  ExprPtr parse_expr() {
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

  ExprPtr binary(ExprKind k, ExprPtr l, ExprPtr r, const Token& at, std::string op = {}) {
    ExprPtr e = node(k, at);
    e->name = std::move(op);
    e->items.push_back(std::move(l));
    e->items.push_back(std::move(r));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (is_name("or")) {
      const Token& at = t_[i_++];
      e = binary(ExprKind::kOr, std::move(e), parse_and(), at);
    }
    return e;
  }
  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (is_name("and")) {
      const Token& at = t_[i_++];
      e = binary(ExprKind::kAnd, std::move(e), parse_not(), at);
    }
    return e;
  }
  ExprPtr parse_not() {
    if (is_name("not")) {
      Depth d(*this, cur());
      ExprPtr e = node(ExprKind::kNot, t_[i_++]);
      e->items.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
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

  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& at = t_[i_++];
      e = binary(ExprKind::kBinary, std::move(e), parse_concat(), at, at.value);
    }
    return e;
  }
  ExprPtr parse_concat() {
    const Token& at = cur();
    ExprPtr e = parse_math2();
    if (!is_op("~")) return e;
    ExprPtr c = node(ExprKind::kConcat, at);
    c->items.push_back(std::move(e));
    while (skip_op("~")) c->items.push_back(parse_math2());
    return c;
  }
  ExprPtr parse_math2() {
    ExprPtr e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& at = t_[i_++];
      e = binary(ExprKind::kBinary, std::move(e), parse_pow(), at, at.value);
    }
    return e;
  }
  ExprPtr parse_pow() {
    ExprPtr e = parse_unary();
    while (is_op("**")) {
      const Token& at = t_[i_++];
      e = binary(ExprKind::kBinary, std::move(e), parse_unary(), at, "**");
    }
    return e;
  }
  ExprPtr parse_unary(bool with_filter = true) {
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

  ExprPtr parse_primary() {
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

  ExprPtr parse_paren() {
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
  ExprPtr parse_list() {
    ExprPtr e = node(ExprKind::kList, t_[i_++]);
    while (!is_op("]")) {
      if (!e->items.empty()) expect_op(",");
      if (is_op("]")) break;
      e->items.push_back(parse_expr());
    }
    expect_op("]");
    return e;
  }
  ExprPtr parse_dict() {
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

  ExprPtr parse_postfix(ExprPtr e) {
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

  ExprPtr parse_subscript(ExprPtr target, const Token& at) {
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

  void parse_call_args(Expr& e) {
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

  ExprPtr parse_call(ExprPtr callee) {
    ExprPtr e = node(ExprKind::kCall, cur());
    e->items.push_back(std::move(callee));
    parse_call_args(*e);
    return e;
  }

  // A postfix chain nests each link inside the next (evaluated and freed recursively), so its
  // length counts toward the nesting limit: 10,000 chained filters overflowed the stack.
  void check_chain(int links, const Token& at) {
    if (depth_ + links > kMaxNesting) fail("template nests deeper than " + std::to_string(kMaxNesting) + " levels", at);
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
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

  // One or more `| name(args)` applied to `operand` (null in a filter block / set block).
  ExprPtr parse_filter_chain(ExprPtr operand, bool leading_pipe = true) {
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

  ExprPtr parse_test(ExprPtr operand) {
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

  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

std::shared_ptr<const ParsedTemplate> parse_template(std::string_view source) {
  auto t = std::make_shared<ParsedTemplate>();
  t->source = std::string(source);
  t->body = Parser(lex_template(source)).parse_all();
  return t;
}

}  // namespace densa::jinja
