// Jinja2's `is` tests (jinja2/tests.py), with Python's type model: bool is a number, Undefined
// is iterable and a sequence (it has __len__, __iter__ and __getitem__).
#include <map>

#include "text/jinja/internal.h"
#include "text/jinja/ops.h"
#include "text/jinja/unicode.h"

namespace densa::jinja {

Value CallArgs::take(size_t index, std::string_view name) {
  if (used.size() < pos.size() + kw.size()) used.assign(pos.size() + kw.size(), false);
  if (index < pos.size()) {
    used[index] = true;
    return pos[index];
  }
  for (size_t k = 0; k < kw.size(); ++k) {
    if (kw[k].first == name) {
      used[pos.size() + k] = true;
      return kw[k].second;
    }
  }
  return Value::undefined();
}

bool CallArgs::has(size_t index, std::string_view name) const {
  if (index < pos.size()) return true;
  for (const auto& [k, v] : kw)
    if (k == name) return true;
  return false;
}

void CallArgs::finish(std::string_view what) {
  if (used.size() < pos.size() + kw.size()) used.resize(pos.size() + kw.size(), false);
  for (size_t k = 0; k < pos.size(); ++k)
    if (!used[k]) throw Error(std::string(what) + " got too many positional arguments");
  for (size_t k = 0; k < kw.size(); ++k)
    if (!used[pos.size() + k]) throw Error(std::string(what) + " got an unexpected keyword argument '" + kw[k].first + "'");
}

namespace {

Value arg(CallArgs& a, size_t i, std::string_view name, const char* test) {
  if (!a.has(i, name)) throw Error(std::string("test '") + test + "' needs an argument");
  return a.take(i, name);
}

bool t_defined(Interp&, const Value& v, CallArgs& a) { a.finish("test 'defined'"); return !v.is_undefined(); }
bool t_undefined(Interp&, const Value& v, CallArgs& a) { a.finish("test 'undefined'"); return v.is_undefined(); }
bool t_none(Interp&, const Value& v, CallArgs& a) { a.finish("test 'none'"); return v.is_none(); }
bool t_string(Interp&, const Value& v, CallArgs& a) { a.finish("test 'string'"); return v.is_string(); }
bool t_number(Interp&, const Value& v, CallArgs& a) { a.finish("test 'number'"); return v.is_number(); }
bool t_integer(Interp&, const Value& v, CallArgs& a) { a.finish("test 'integer'"); return v.is_int(); }
bool t_float(Interp&, const Value& v, CallArgs& a) { a.finish("test 'float'"); return v.is_float(); }
bool t_boolean(Interp&, const Value& v, CallArgs& a) { a.finish("test 'boolean'"); return v.is_bool(); }
bool t_true(Interp&, const Value& v, CallArgs& a) { a.finish("test 'true'"); return v.is_bool() && v.as_bool(); }
bool t_false(Interp&, const Value& v, CallArgs& a) { a.finish("test 'false'"); return v.is_bool() && !v.as_bool(); }
bool t_mapping(Interp&, const Value& v, CallArgs& a) { a.finish("test 'mapping'"); return v.is_dict(); }
bool t_callable(Interp&, const Value& v, CallArgs& a) { a.finish("test 'callable'"); return v.is_callable(); }
bool t_iterable(Interp&, const Value& v, CallArgs& a) {
  a.finish("test 'iterable'");
  return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
}
bool t_sequence(Interp&, const Value& v, CallArgs& a) {
  a.finish("test 'sequence'");
  return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
}
int64_t int_of(const Value& v, const char* test) {
  if (v.is_undefined()) fail_undefined(v);
  if (!v.is_number() || v.is_float()) throw Error(std::string("test '") + test + "' needs an integer, not " + v.type_name());
  return v.as_int();
}
bool t_even(Interp&, const Value& v, CallArgs& a) { a.finish("test 'even'"); return int_of(v, "even") % 2 == 0; }
bool t_odd(Interp&, const Value& v, CallArgs& a) { a.finish("test 'odd'"); return int_of(v, "odd") % 2 != 0; }
bool t_divisibleby(Interp&, const Value& v, CallArgs& a) {
  const int64_t d = int_of(arg(a, 0, "num", "divisibleby"), "divisibleby");
  a.finish("test 'divisibleby'");
  if (d == 0) throw Error("integer division or modulo by zero");
  return int_of(v, "divisibleby") % d == 0;
}
bool t_eq(Interp&, const Value& v, CallArgs& a) {
  const Value o = arg(a, 0, "other", "eq");
  a.finish("test 'eq'");
  return equals(v, o);
}
bool t_ne(Interp&, const Value& v, CallArgs& a) {
  const Value o = arg(a, 0, "other", "ne");
  a.finish("test 'ne'");
  return !equals(v, o);
}
bool t_lt(Interp&, const Value& v, CallArgs& a) {
  const Value o = arg(a, 0, "other", "lt");
  a.finish("test 'lt'");
  return less_than(v, o);
}
bool t_le(Interp&, const Value& v, CallArgs& a) {
  const Value o = arg(a, 0, "other", "le");
  a.finish("test 'le'");
  return less_than(v, o) || equals(v, o);
}
bool t_gt(Interp&, const Value& v, CallArgs& a) {
  const Value o = arg(a, 0, "other", "gt");
  a.finish("test 'gt'");
  return less_than(o, v);
}
bool t_ge(Interp&, const Value& v, CallArgs& a) {
  const Value o = arg(a, 0, "other", "ge");
  a.finish("test 'ge'");
  return less_than(o, v) || equals(v, o);
}
bool t_in(Interp&, const Value& v, CallArgs& a) {
  const Value seq = arg(a, 0, "seq", "in");
  a.finish("test 'in'");
  return contains(seq, v);
}
bool t_sameas(Interp&, const Value& v, CallArgs& a) {
  const Value o = arg(a, 0, "other", "sameas");
  a.finish("test 'sameas'");
  if (v.kind() != o.kind()) return false;
  switch (v.kind()) {
    case Value::Kind::kNone:
    case Value::Kind::kUndefined: return true;
    case Value::Kind::kBool: return v.as_bool() == o.as_bool();
    case Value::Kind::kList:
    case Value::Kind::kDict:
    case Value::Kind::kNamespace:
    case Value::Kind::kCallable: return v.identity() == o.identity();
    default: throw Error("unsupported: 'sameas' on numbers or strings (identity is a CPython detail)");
  }
}
bool t_lower(Interp&, const Value& v, CallArgs& a) {
  a.finish("test 'lower'");
  if (!v.is_string()) return lower(v.to_str()) == v.to_str();
  return lower(v.str()) == v.str();
}
bool t_upper(Interp&, const Value& v, CallArgs& a) {
  a.finish("test 'upper'");
  if (!v.is_string()) return upper(v.to_str()) == v.to_str();
  return upper(v.str()) == v.str();
}
bool t_escaped(Interp&, const Value& v, CallArgs& a) { a.finish("test 'escaped'"); return v.is_markup(); }
bool t_filter(Interp&, const Value& v, CallArgs& a) {
  a.finish("test 'filter'");
  return v.is_string() && find_filter(v.str()) != nullptr;
}
bool t_test(Interp&, const Value& v, CallArgs& a) {
  a.finish("test 'test'");
  return v.is_string() && find_test(v.str()) != nullptr;
}

}  // namespace

TestFn find_test(std::string_view name) {
  static const std::map<std::string_view, TestFn> kTests = {
      {"defined", t_defined}, {"undefined", t_undefined}, {"none", t_none}, {"string", t_string},
      {"number", t_number}, {"integer", t_integer}, {"float", t_float}, {"boolean", t_boolean},
      {"true", t_true}, {"false", t_false}, {"mapping", t_mapping}, {"callable", t_callable},
      {"iterable", t_iterable}, {"sequence", t_sequence}, {"even", t_even}, {"odd", t_odd},
      {"divisibleby", t_divisibleby}, {"eq", t_eq}, {"equalto", t_eq}, {"==", t_eq}, {"ne", t_ne},
      {"!=", t_ne}, {"lt", t_lt}, {"lessthan", t_lt}, {"<", t_lt}, {"le", t_le}, {"<=", t_le},
      {"gt", t_gt}, {"greaterthan", t_gt}, {">", t_gt}, {"ge", t_ge}, {">=", t_ge}, {"in", t_in},
      {"sameas", t_sameas}, {"lower", t_lower}, {"upper", t_upper}, {"escaped", t_escaped},
      {"filter", t_filter}, {"test", t_test}};
  auto it = kTests.find(name);
  return it == kTests.end() ? nullptr : it->second;
}

bool Interp::run_test(std::string_view name, const Value& v, CallArgs& args) {
  TestFn t = find_test(name);
  if (!t) throw Error("no test named '" + std::string(name) + "'");
  return t(*this, v, args);
}

}  // namespace densa::jinja
