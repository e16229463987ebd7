#pragma once
// The parsed form of a Jinja template: expression and statement trees, built once by the parser
// and only read while rendering (a parsed template is shared by concurrent renders).
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/jinja/value.h"

namespace densa::jinja {

class Interp;
struct Expr;
using ExprPtr = std::unique_ptr<Expr>;
struct CallArgs;

// A filter or test implementation, resolved by name at parse time.
using FilterFn = Value (*)(Interp& in, const Value& operand, CallArgs& args);
using TestFn = bool (*)(Interp& in, const Value& operand, CallArgs& args);

enum class ExprKind : uint8_t {
  kLiteral,   // literal
  kName,      // name
  kList,      // items: elements
  kTuple,     // items: elements
  kDict,      // items: key, value, key, value, ...
  kGetAttr,   // items[0] . name
  kGetItem,   // items[0] [ items[1] ]
  kSlice,     // items[0] [ items[1] : items[2] : items[3] ] (absent bounds are null)
  kCall,      // items[0] ( items[1..], kwargs )
  kFilter,    // items[0] | name(items[1..], kwargs); items[0] is null in a filter block
  kTest,      // items[0] is [not] name(items[1..], kwargs)
  kNot,       // not items[0]
  kNeg,       // - items[0]
  kPos,       // + items[0]
  kBinary,    // items[0] op items[1]  (+ - * / // % **)
  kAnd,
  kOr,
  kCompare,   // items[0] ops[0] items[1] ops[1] items[2] ... (chained, as in Python)
  kConcat,    // items joined with ~
  kCondExpr,  // items[1] if items[0] else items[2] (items[2] null: undefined)
};

struct Expr {
  ExprKind kind;
  int line = 0, column = 0;
  Value literal;
  std::string name;  // name, attribute, filter / test name, or operator
  std::vector<ExprPtr> items;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // kCompare
  FilterFn filter = nullptr;
  TestFn test = nullptr;
  bool negated = false;  // kTest: `is not`
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

enum class NodeKind : uint8_t {
  kText,         // text
  kOutput,       // {{ expr }}
  kIf,           // branches: (cond, body)...; else_body
  kFor,          // targets in expr [if cond]: body [else else_body]
  kSet,          // targets (or ns.attr) = expr
  kSetBlock,     // {% set target %}body{% endset %} (filter: optional chain applied to the body)
  kMacro,        // {% macro name(params) %}body
  kCallBlock,    // {% call(params) expr %}body
  kFilterBlock,  // {% filter chain %}body
  kBreak,
  kContinue,
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null: no default (Undefined when not passed)
};

struct Node {
  NodeKind kind;
  int line = 0, column = 0;
  std::string text;
  ExprPtr expr;   // output / for iterable / set value / call expression / filter chain
  ExprPtr cond;   // for: loop filter
  std::vector<std::pair<ExprPtr, Body>> branches;  // if / elif
  Body body, else_body;
  std::vector<std::string> targets;  // for / set names; set ns.attr: {ns, attr} with attr_target
  bool attr_target = false;
  std::string name;                  // macro name
  std::vector<MacroParam> params;    // macro / call-block parameters
};

struct ParsedTemplate {
  Body body;
  std::string source;
};

// Parses Jinja source (Jinja2 syntax, HF's trim_blocks / lstrip_blocks). Throws Error with
// the line and column of the offending construct.
std::shared_ptr<const ParsedTemplate> parse_template(std::string_view source);

// The filter / test tables (filters.cpp, tests.cpp); nullptr when unknown.
FilterFn find_filter(std::string_view name);
TestFn find_test(std::string_view name);

}  // namespace densa::jinja
