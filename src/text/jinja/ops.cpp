// Python operator semantics on engine values: arithmetic, ordering, membership, iteration,
// len() and slicing, with Python's error messages for type errors.
#include <cmath>
#include <cstdint>

#include "text/jinja/internal.h"
#include "text/jinja/ops.h"
#include "text/jinja/unicode.h"

namespace densa::jinja {

[[noreturn]] void fail_undefined(const Value& v) {
  throw Error(v.str().empty() ? std::string("value is undefined") : v.str());
}

namespace {

[[noreturn]] void type_error(std::string_view op, const Value& a, const Value& b) {
  throw Error("unsupported operand type(s) for " + std::string(op) + ": '" + a.type_name() + "' and '" +
              b.type_name() + "'");
}

// Python ints are unbounded; densa's are 64-bit and refuse to wrap.
template <typename Op>
int64_t checked(Op op, int64_t x, int64_t y) {
  int64_t r = 0;
  if (op(x, y, &r)) throw Error("integer overflow (beyond 64 bits)");
  return r;
}
bool add_ov(int64_t x, int64_t y, int64_t* r) { return __builtin_add_overflow(x, y, r); }
bool sub_ov(int64_t x, int64_t y, int64_t* r) { return __builtin_sub_overflow(x, y, r); }
bool mul_ov(int64_t x, int64_t y, int64_t* r) { return __builtin_mul_overflow(x, y, r); }

// a * b * c, saturated at SIZE_MAX (so a product that wraps still fails the size check).
size_t saturating_product(size_t a, size_t b, size_t c = 1) {
  size_t r = 0;
  if (__builtin_mul_overflow(a, b, &r) || __builtin_mul_overflow(r, c, &r)) return SIZE_MAX;
  return r;
}

Value repeat(Interp& in, const Value& seq, int64_t n) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    // Checked before any byte is built: 'abcd' * 2**62 is 2**64 bytes, which wraps to 0.
    in.check_size(saturating_product(seq.str().size(), static_cast<size_t>(n)));
    if (seq.str().empty()) return Value::string("");  // '' * 10**18 would loop 10**18 times
    std::string out;
    out.reserve(seq.str().size() * static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) out += seq.str();
    return Value::string(std::move(out));
  }
  in.check_size(saturating_product(seq.items().size(), static_cast<size_t>(n), sizeof(Value)));
  List out;
  for (int64_t k = 0; k < n; ++k) {
    in.step();
    out.insert(out.end(), seq.items().begin(), seq.items().end());
  }
  return Value::list(std::move(out), seq.is_tuple());
}

double floor_mod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

}  // namespace

Value binary_op(Interp& in, std::string_view op, const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  const bool nums = a.is_number() && b.is_number();
  const bool ints = nums && !a.is_float() && !b.is_float();
  if (op == "+") {
    if (ints) return Value::integer(checked(add_ov, a.as_int(), b.as_int()));
    if (nums) return Value::real(a.as_float() + b.as_float());
    if (a.is_string() && b.is_string()) {
      in.check_size(a.str().size() + b.str().size());
      // Markup (|safe) + str escapes the plain side, as markupsafe does.
      if (a.is_markup() != b.is_markup())
        return Value::string(a.is_markup() ? a.str() + escape_html(b.str()) : escape_html(a.str()) + b.str(), true);
      return Value::string(a.str() + b.str(), a.is_markup());
    }
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
      List out = a.items();
      out.insert(out.end(), b.items().begin(), b.items().end());
      in.check_size(out.size() * sizeof(Value));
      return Value::list(std::move(out), a.is_tuple());
    }
    if (a.is_string()) throw Error(std::string("can only concatenate str (not \"") + b.type_name() + "\") to str");
    if (a.is_list() && !a.is_tuple())
      throw Error(std::string("can only concatenate list (not \"") + b.type_name() + "\") to list");
    type_error("+", a, b);
  }
  if (op == "-") {
    if (ints) return Value::integer(checked(sub_ov, a.as_int(), b.as_int()));
    if (nums) return Value::real(a.as_float() - b.as_float());
    type_error("-", a, b);
  }
  if (op == "*") {
    if (ints) return Value::integer(checked(mul_ov, a.as_int(), b.as_int()));
    if (nums) return Value::real(a.as_float() * b.as_float());
    if ((a.is_string() || a.is_list()) && b.is_number() && !b.is_float()) return repeat(in, a, b.as_int());
    if ((b.is_string() || b.is_list()) && a.is_number() && !a.is_float()) return repeat(in, b, a.as_int());
    type_error("*", a, b);
  }
  if (!nums) {
    if (op == "%" && a.is_string()) throw Error("unsupported: printf-style string formatting with '%'");
    type_error(op, a, b);
  }
  if (op == "/") {
    if (b.as_float() == 0) throw Error("division by zero");
    return Value::real(a.as_float() / b.as_float());
  }
  if (op == "//" || op == "%") {
    if (ints) {
      if (b.as_int() == 0) throw Error("integer division or modulo by zero");
      const int64_t x = a.as_int(), y = b.as_int();
      if (x == INT64_MIN && y == -1) throw Error("integer overflow (beyond 64 bits)");
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) --q, m += y;
      return Value::integer(op == "//" ? q : m);
    }
    if (b.as_float() == 0) throw Error("float floor division or modulo by zero");
    if (op == "//") return Value::real(std::floor(a.as_float() / b.as_float()));
    return Value::real(floor_mod(a.as_float(), b.as_float()));
  }
  if (op == "**") {
    if (ints && b.as_int() >= 0) {
      int64_t base = a.as_int(), e = b.as_int(), acc = 1;
      while (e > 0) {
        if (e & 1) acc = checked(mul_ov, acc, base);
        e >>= 1;
        if (e > 0) base = checked(mul_ov, base, base);
      }
      return Value::integer(acc);
    }
    if (a.as_float() == 0 && b.as_float() < 0) throw Error("0.0 cannot be raised to a negative power");
    return Value::real(std::pow(a.as_float(), b.as_float()));
  }
  throw Error("unknown operator '" + std::string(op) + "'");
}

bool less_than(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (!a.is_float() && !b.is_float()) return a.as_int() < b.as_int();
    return a.as_float() < b.as_float();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 byte order is code point order
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const List &x = a.items(), &y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals(x[i], y[i])) continue;
      return less_than(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  throw Error(std::string("'<' not supported between instances of '") + a.type_name() + "' and '" + b.type_name() + "'");
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined: return false;
    case Value::Kind::kString:
      if (!item.is_string())
        throw Error(std::string("'in <string>' requires string as left operand, not ") + item.type_name());
      return container.str().find(item.str()) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& v : container.items())
        if (equals(v, item)) return true;
      return false;
    case Value::Kind::kDict: return item.is_string() && container.dict_ref().find(item.str()) != nullptr;
    default: throw Error(std::string("argument of type '") + container.type_name() + "' is not iterable");
  }
}

List iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return {};
    case Value::Kind::kList: return v.items();
    case Value::Kind::kDict: {
      List keys;
      keys.reserve(v.dict_ref().entries.size());
      for (const auto& [k, e] : v.dict_ref().entries) keys.push_back(Value::string(k));
      return keys;
    }
    case Value::Kind::kString: {
      List chars;
      const std::string& s = v.str();
      for (size_t i = 0; i < s.size();) {
        const size_t start = i;
        decode_utf8(s, i);
        chars.push_back(Value::string(s.substr(start, i - start)));
      }
      return chars;
    }
    default: throw Error(std::string("'") + v.type_name() + "' object is not iterable");
  }
}

int64_t py_len(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return 0;
    case Value::Kind::kString: return static_cast<int64_t>(is_ascii(v.str()) ? v.str().size() : code_point_count(v.str()));
    case Value::Kind::kList: return static_cast<int64_t>(v.items().size());
    case Value::Kind::kDict: return static_cast<int64_t>(v.dict_ref().entries.size());
    default: throw Error(std::string("object of type '") + v.type_name() + "' has no len()");
  }
}

namespace {

int64_t slice_index(const Value& v, const char* what) {
  if (v.is_number() && !v.is_float()) return v.as_int();
  throw Error(std::string("slice ") + what + " must be an integer or None, not " + v.type_name());
}

// Python's slice.indices(): the positions a slice selects from a sequence of length n.
std::vector<int64_t> slice_positions(int64_t n, const Value& start, const Value& stop, const Value& step) {
  const bool no_start = start.is_undefined() || start.is_none();
  const bool no_stop = stop.is_undefined() || stop.is_none();
  const int64_t st = step.is_undefined() || step.is_none() ? 1 : slice_index(step, "step");
  if (st == 0) throw Error("slice step cannot be zero");
  auto clamp = [&](int64_t i, bool neg_step) {
    if (i < 0) i += n;
    if (i < 0) i = neg_step ? -1 : 0;
    if (i >= n) i = neg_step ? n - 1 : n;
    return i;
  };
  int64_t b = no_start ? (st > 0 ? 0 : n - 1) : clamp(slice_index(start, "start"), st < 0);
  int64_t e = no_stop ? (st > 0 ? n : -1) : clamp(slice_index(stop, "stop"), st < 0);
  std::vector<int64_t> pos;
  if (st > 0)
    for (int64_t i = b; i < e; i += st) pos.push_back(i);
  else
    for (int64_t i = b; i > e; i += st) pos.push_back(i);
  return pos;
}

}  // namespace

Value slice_value(const Value& v, const Value& start, const Value& stop, const Value& step) {
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_list()) {
    List out;
    for (int64_t i : slice_positions(static_cast<int64_t>(v.items().size()), start, stop, step)) out.push_back(v.items()[i]);
    return Value::list(std::move(out), v.is_tuple());
  }
  if (v.is_string()) {
    std::string out;
    if (is_ascii(v.str())) {
      for (int64_t i : slice_positions(static_cast<int64_t>(v.str().size()), start, stop, step)) out += v.str()[i];
    } else {
      const std::vector<char32_t> cps = to_code_points(v.str());
      for (int64_t i : slice_positions(static_cast<int64_t>(cps.size()), start, stop, step)) append_utf8(out, cps[i]);
    }
    return Value::string(std::move(out));
  }
  throw Error(std::string("'") + v.type_name() + "' object is not subscriptable");
}

std::string escape_html(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '\'': out += "&#39;"; break;
      case '"': out += "&#34;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace densa::jinja
