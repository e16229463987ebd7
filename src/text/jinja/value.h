#pragma once
// The Jinja engine's run-time value: Python's object model reduced to what chat templates
// touch (Jinja2's Undefined, None, bool, int, float, str, list / tuple, insertion-ordered dict,
// namespace(), callables). Printing, truthiness, equality and ordering follow Python, so that
// output matches Jinja2 byte for byte. Values share heap payloads (lists and dicts are
// reference types, as in Python).
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace densa::jinja {

class Value;
struct Dict;
struct Callable;
using List = std::vector<Value>;

// A template error while rendering (or parsing). Internal: the engine unwinds with it and
// Template::parse / render turn it into a Status naming the template line and column.
class Error : public std::exception {
 public:
  // kind: what went wrong, for the Status code (template fault, raise_exception, a limit).
  enum class Kind : uint8_t { kTemplate, kRaised, kLimit };
  explicit Error(std::string message, int line = 0, int column = 0, Kind kind = Kind::kTemplate)
      : message_(std::move(message)), line_(line), column_(column), kind_(kind) {}
  Kind kind() const { return kind_; }
  const char* what() const noexcept override { return message_.c_str(); }
  const std::string& message() const { return message_; }
  int line() const { return line_; }
  int column() const { return column_; }
  void locate(int line, int column) {
    if (line_ == 0) line_ = line, column_ = column;
  }

 private:
  std::string message_;
  int line_, column_;
  Kind kind_;
};

class Value {
 public:
  enum class Kind : uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kCallable };

  Value() = default;  // Undefined
  static Value undefined(std::string hint = {}) {
    Value v;
    v.s_ = std::move(hint);
    return v;
  }
  static Value none() { return Value(Kind::kNone); }
  static Value boolean(bool b) {
    Value v(Kind::kBool);
    v.i_ = b;
    return v;
  }
  static Value integer(int64_t i) {
    Value v(Kind::kInt);
    v.i_ = i;
    return v;
  }
  static Value real(double f) {
    Value v(Kind::kFloat);
    v.f_ = f;
    return v;
  }
  static Value string(std::string s, bool markup = false) {
    Value v(Kind::kString);
    v.s_ = std::move(s);
    v.flag_ = markup;
    return v;
  }
  static Value list(List items = {}, bool tuple = false);
  static Value dict(std::shared_ptr<Dict> d);
  static Value new_dict();
  static Value new_namespace();
  static Value callable(std::shared_ptr<Callable> c);
  static Value from_json(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kList && flag_; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_callable() const { return kind_ == Kind::kCallable; }
  bool is_markup() const { return kind_ == Kind::kString && flag_; }

  bool as_bool() const { return i_ != 0; }
  int64_t as_int() const { return i_; }  // also a bool's 0 / 1
  double as_float() const { return kind_ == Kind::kFloat ? f_ : static_cast<double>(i_); }
  const std::string& str() const { return s_; }  // a string's text; an undefined's name
  const List& items() const { return *static_cast<const List*>(obj_.get()); }
  List& items_mut() { return *static_cast<List*>(obj_.get()); }
  const Dict& dict_ref() const { return *static_cast<const Dict*>(obj_.get()); }
  Dict& dict_mut() const { return *static_cast<Dict*>(obj_.get()); }
  Callable& fn() const { return *static_cast<Callable*>(obj_.get()); }
  const void* identity() const { return obj_.get(); }
  // A reference to a container that does not keep it alive (the renderer's namespace list).
  std::weak_ptr<void> weak_ref() const { return obj_; }
  // How deeply containers nest inside this value (0 for scalars).
  int depth() const { return depth_; }
  // Recomputes a dict's / namespace's depth from its entries (after filling it); fails past
  // kMaxValueDepth.
  void update_depth();

  // Python bool(x).
  bool truthy() const;
  // Python str(x) (Jinja2 prints values with str; Undefined prints empty).
  std::string to_str() const;
  // Python repr(x).
  std::string repr() const;
  // Python type names for messages ("str", "dict", "int", "Undefined", ...).
  const char* type_name() const;

 private:
  explicit Value(Kind k) : kind_(k) {}
  static Value from_json_at(const nlohmann::ordered_json& j, int level);
  Kind kind_ = Kind::kUndefined;
  bool flag_ = false;  // string: Markup (from |safe); list: tuple
  uint16_t depth_ = 0;  // container nesting (lists / dicts / namespaces built here), <= kMaxValueDepth
  union {
    int64_t i_ = 0;
    double f_;
  };
  std::string s_;
  std::shared_ptr<void> obj_;
};

// An insertion-ordered str-keyed mapping (Python dict as templates and JSON use it).
struct Dict {
  std::vector<std::pair<std::string, Value>> entries;
  const Value* find(std::string_view key) const;
  void set(std::string_view key, Value v);
};

// Values may nest this deep (deeper JSON input or template-built nesting is refused): every
// recursive walk (printing, equality, tojson, destruction) stays within the stack.
constexpr int kMaxValueDepth = 256;

// Python float repr (shortest round-trip; "1.0", "1e+16", "inf").
std::string float_repr(double f);
// Python's repr of a str (quote choice and escapes as CPython does).
std::string string_repr(std::string_view s);
// Python ==.
bool equals(const Value& a, const Value& b);

}  // namespace densa::jinja
