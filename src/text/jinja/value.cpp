#include "text/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "text/jinja/unicode.h"

namespace densa::jinja {

namespace {
uint16_t depth_over(const List& xs) {
  int d = 0;
  for (const Value& x : xs) d = std::max(d, x.depth());
  if (d + 1 > kMaxValueDepth) throw Error("values nest deeper than " + std::to_string(kMaxValueDepth) + " levels", 0, 0, Error::Kind::kLimit);
  return static_cast<uint16_t>(d + 1);
}
}  // namespace

void Value::update_depth() {
  int d = 0;
  for (const auto& [k, x] : dict_ref().entries) d = std::max(d, x.depth());
  if (d + 1 > kMaxValueDepth) throw Error("values nest deeper than " + std::to_string(kMaxValueDepth) + " levels", 0, 0, Error::Kind::kLimit);
  depth_ = static_cast<uint16_t>(d + 1);
}

Value Value::list(List items, bool tuple) {
  Value v(Kind::kList);
  v.depth_ = depth_over(items);
  v.obj_ = std::make_shared<List>(std::move(items));
  v.flag_ = tuple;
  return v;
}

Value Value::dict(std::shared_ptr<Dict> d) {
  Value v(Kind::kDict);
  v.obj_ = std::move(d);
  return v;
}

Value Value::new_dict() { return dict(std::make_shared<Dict>()); }

Value Value::new_namespace() {
  Value v(Kind::kNamespace);
  v.obj_ = std::make_shared<Dict>();
  return v;
}

Value Value::callable(std::shared_ptr<Callable> c) {
  Value v(Kind::kCallable);
  v.obj_ = std::move(c);
  return v;
}

Value Value::from_json(const nlohmann::ordered_json& j) { return from_json_at(j, 0); }

Value Value::from_json_at(const nlohmann::ordered_json& j, int level) {
  if (level > kMaxValueDepth)
    throw Error("template variables nest deeper than " + std::to_string(kMaxValueDepth) + " levels", 0, 0, Error::Kind::kLimit);
  using T = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case T::null: return none();
    case T::boolean: return boolean(j.get<bool>());
    case T::number_integer: return integer(j.get<int64_t>());
    case T::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) throw Error("integer " + std::to_string(u) + " is out of the engine's 64-bit range");
      return integer(static_cast<int64_t>(u));
    }
    case T::number_float: return real(j.get<double>());
    case T::string: return string(j.get<std::string>());
    case T::array: {
      List items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json_at(e, level + 1));
      return list(std::move(items));
    }
    case T::object: {
      auto d = std::make_shared<Dict>();
      d->entries.reserve(j.size());
      for (const auto& [k, e] : j.items()) d->entries.emplace_back(k, from_json_at(e, level + 1));
      Value v = dict(std::move(d));
      v.update_depth();
      return v;
    }
    case T::binary:
    case T::discarded: break;
  }
  throw Error("unsupported JSON value (binary) in template variables");
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : entries)
    if (k == key) return &v;
  return nullptr;
}

void Dict::set(std::string_view key, Value v) {
  for (auto& [k, e] : entries) {
    if (k == key) {
      e = std::move(v);
      return;
    }
  }
  entries.emplace_back(std::string(key), std::move(v));
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool:
    case Kind::kInt: return i_ != 0;
    case Kind::kFloat: return f_ != 0.0;
    case Kind::kString: return !s_.empty();
    case Kind::kList: return !items().empty();
    case Kind::kDict: return !dict_ref().entries.empty();
    case Kind::kNamespace:
    case Kind::kCallable: return true;
  }
  return false;
}

const char* Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return flag_ ? "tuple" : "list";
    case Kind::kDict: return "dict";
    case Kind::kNamespace: return "Namespace";
    case Kind::kCallable: return "function";
  }
  return "?";
}

std::string float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  // sci is "[-]d[.ddd]e[+-]XX": split into sign, digits and the decimal exponent.
  std::string out;
  size_t pos = 0;
  if (sci[0] == '-') out += '-', pos = 1;
  const size_t e_at = sci.find('e');
  std::string digits;
  for (size_t i = pos; i < e_at; ++i)
    if (sci[i] != '.') digits += sci[i];
  const int exp = std::atoi(sci.c_str() + e_at + 1);
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      std::string int_part = digits.substr(0, std::min<size_t>(digits.size(), exp + 1));
      while (static_cast<int>(int_part.size()) < exp + 1) int_part += '0';
      std::string frac = digits.size() > static_cast<size_t>(exp + 1) ? digits.substr(exp + 1) : "0";
      out.append(int_part).append(".").append(frac);
    } else {
      out.append("0.").append(static_cast<size_t>(-exp - 1), '0').append(digits);
    }
  } else {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out.append(".").append(digits, 1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += eb;
  }
  return out;
}

std::string string_repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  size_t i = 0;
  while (i < s.size()) {
    const size_t start = i;
    const char32_t cp = decode_utf8(s, i);
    char buf[16];
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp < 0x20 || cp == 0x7f) {
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(cp));
      out += buf;
    } else if (cp < 0x7f || is_printable(cp)) {
      out.append(s.substr(start, i - start));
    } else {
      if (cp < 0x100) std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(cp));
      else if (cp < 0x10000) std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
      else std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(cp));
      out += buf;
    }
  }
  out += quote;
  return out;
}

namespace {

void append_repr(const Value& v, std::string& out);

void append_sequence(const Value& v, std::string& out) {
  const List& xs = v.items();
  out += v.is_tuple() ? '(' : '[';
  for (size_t k = 0; k < xs.size(); ++k) {
    if (k) out += ", ";
    append_repr(xs[k], out);
  }
  if (v.is_tuple() && xs.size() == 1) out += ',';
  out += v.is_tuple() ? ')' : ']';
}

void append_mapping(const Dict& d, std::string& out) {
  out += '{';
  bool first = true;
  for (const auto& [k, e] : d.entries) {
    if (!first) out += ", ";
    first = false;
    out += string_repr(k);
    out += ": ";
    append_repr(e, out);
  }
  out += '}';
}

thread_local int repr_depth = 0;  // nesting of the repr walk on this thread

struct ReprGuard {
  ReprGuard() {
    if (++repr_depth > kMaxValueDepth) {
      repr_depth = 0;
      throw Error("printing a value nested deeper than " + std::to_string(kMaxValueDepth) + " levels (or containing itself)");
    }
  }
  ~ReprGuard() { if (repr_depth > 0) --repr_depth; }
};

void append_repr(const Value& v, std::string& out) {
  ReprGuard guard;
  switch (v.kind()) {
    case Value::Kind::kUndefined: out += "Undefined"; return;
    case Value::Kind::kString: out += string_repr(v.str()); return;
    case Value::Kind::kList: append_sequence(v, out); return;
    case Value::Kind::kDict: append_mapping(v.dict_ref(), out); return;
    default: out += v.to_str(); return;
  }
}

}  // namespace

std::string Value::repr() const {
  std::string out;
  append_repr(*this, out);
  return out;
}

std::string Value::to_str() const {
  switch (kind_) {
    case Kind::kUndefined: return {};
    case Kind::kNone: return "None";
    case Kind::kBool: return i_ ? "True" : "False";
    case Kind::kInt: return std::to_string(i_);
    case Kind::kFloat: return float_repr(f_);
    case Kind::kString: return s_;
    case Kind::kList:
    case Kind::kDict: return repr();
    case Kind::kNamespace: {
      ReprGuard guard;
      std::string out = "<Namespace ";
      append_mapping(dict_ref(), out);
      return out + ">";
    }
    case Kind::kCallable:
      throw Error("printing a function or method is not supported (Python would print its address)");
  }
  return {};
}

bool equals(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::kUndefined:
    case K::kNone: return true;
    case K::kString: return a.str() == b.str();
    case K::kList: {
      if (a.is_tuple() != b.is_tuple()) return false;
      const List &x = a.items(), &y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!equals(x[i], y[i])) return false;
      return true;
    }
    case K::kDict: {
      const Dict &x = a.dict_ref(), &y = b.dict_ref();
      if (x.entries.size() != y.entries.size()) return false;
      for (const auto& [k, v] : x.entries) {
        const Value* o = y.find(k);
        if (!o || !equals(v, *o)) return false;
      }
      return true;
    }
    default: return a.identity() == b.identity();
  }
}

}  // namespace densa::jinja
