// Jinja2's filters (jinja2/filters.py) as chat templates use them, plus HF's tojson override
// (json.dumps with ensure_ascii=False, indent / separators / sort_keys passed through).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>

#include "text/jinja/internal.h"
#include "text/jinja/ops.h"
#include "text/jinja/unicode.h"

namespace densa::jinja {
namespace {

// n spaces (none for n <= 0); a width past the output limit fails before allocating.
std::string spaces(Interp& in, int64_t n) {
  if (n <= 0) return {};
  in.check_size(static_cast<size_t>(n));
  return std::string(static_cast<size_t>(n), ' ');
}

std::string soft_str(const Value& v) { return v.is_string() ? v.str() : v.to_str(); }
bool given(const Value& v) { return !v.is_undefined(); }

Value f_tojson(Interp& in, const Value& v, CallArgs& a) {
  const Value ensure_ascii = a.take(0, "ensure_ascii"), indent = a.take(1, "indent");
  const Value separators = a.take(2, "separators"), sort_keys = a.take(3, "sort_keys");
  a.finish("filter 'tojson'");
  std::string ind, item_sep, key_sep;
  const std::string* ind_p = nullptr;
  if (given(indent) && !indent.is_none()) {
    if (indent.is_string()) ind = indent.str();
    else if (indent.is_int()) ind = spaces(in, indent.as_int());
    else throw Error("tojson: indent must be an int or a string");
    ind_p = &ind;
  }
  const std::string *item_p = nullptr, *key_p = nullptr;
  if (given(separators) && !separators.is_none()) {
    if (!separators.is_list() || separators.items().size() != 2 || !separators.items()[0].is_string() ||
        !separators.items()[1].is_string())
      throw Error("tojson: separators must be a pair of strings");
    item_sep = separators.items()[0].str(), key_sep = separators.items()[1].str();
    item_p = &item_sep, key_p = &key_sep;
  }
  return Value::string(to_json(in, v, ind_p, given(ensure_ascii) && ensure_ascii.truthy(), item_p, key_p,
                               given(sort_keys) && sort_keys.truthy()));
}

Value f_trim(Interp&, const Value& v, CallArgs& a) {
  const Value chars = a.take(0, "chars");
  a.finish("filter 'trim'");
  return Value::string(py_strip(soft_str(v), chars, 'b'));
}
Value f_upper(Interp&, const Value& v, CallArgs& a) { a.finish("filter 'upper'"); return Value::string(upper(soft_str(v))); }
Value f_lower(Interp&, const Value& v, CallArgs& a) { a.finish("filter 'lower'"); return Value::string(lower(soft_str(v))); }

Value f_capitalize(Interp&, const Value& v, CallArgs& a) {
  a.finish("filter 'capitalize'");
  const std::vector<char32_t> cps = to_code_points(soft_str(v));
  std::string out;
  for (size_t k = 0; k < cps.size(); ++k) k == 0 ? append_title(out, cps[k]) : append_lower(out, cps[k]);
  return Value::string(std::move(out));
}

// Jinja2's title: words begin after runs of whitespace or any of - ( { [ <.
Value f_title(Interp&, const Value& v, CallArgs& a) {
  a.finish("filter 'title'");
  const std::vector<char32_t> cps = to_code_points(soft_str(v));
  std::string out;
  bool start = true;
  for (char32_t c : cps) {
    const bool sep = is_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (sep) append_utf8(out, c);
    else if (start) append_upper(out, c);
    else append_lower(out, c);
    start = sep;
  }
  return Value::string(std::move(out));
}

Value f_replace(Interp& in, const Value& v, CallArgs& a) {
  const Value old = a.take(0, "old"), repl = a.take(1, "new"), count = a.take(2, "count");
  a.finish("filter 'replace'");
  if (!given(old) || !given(repl)) throw Error("filter 'replace' needs old and new strings");
  const int64_t n = given(count) && !count.is_none() ? count.as_int() : -1;
  std::string out = py_replace(soft_str(v), soft_str(old), soft_str(repl), n);
  in.check_size(out.size());
  return Value::string(std::move(out));
}

Value f_length(Interp&, const Value& v, CallArgs& a) { a.finish("filter 'length'"); return Value::integer(py_len(v)); }

Value f_first(Interp&, const Value& v, CallArgs& a) {
  a.finish("filter 'first'");
  const List xs = iterate(v);
  return xs.empty() ? Value::undefined("No first item, sequence was empty.") : xs.front();
}
Value f_last(Interp&, const Value& v, CallArgs& a) {
  a.finish("filter 'last'");
  const List xs = iterate(v);
  return xs.empty() ? Value::undefined("No last item, sequence was empty.") : xs.back();
}

// Looks up a dotted attribute path ("a.b", "0") on an item as Jinja2's make_attrgetter does.
Value attr_path(Interp& in, const Value& item, const Value& attribute) {
  if (!attribute.is_string()) return in.getitem(item, attribute);
  Value cur = item;
  std::string_view path = attribute.str();
  while (true) {
    const size_t dot = path.find('.');
    std::string part(path.substr(0, dot));
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    int64_t index = 0;
    if (digits && std::from_chars(part.data(), part.data() + part.size(), index).ec != std::errc()) {
      // Python's int has no bound: an index past int64 names no item of any list.
      cur = Value::undefined("index " + part + " is out of range");
    } else {
      cur = in.getitem(cur, digits ? Value::integer(index) : Value::string(part));
    }
    if (dot == std::string_view::npos) return cur;
    path.remove_prefix(dot + 1);
  }
}

Value f_join(Interp& in, const Value& v, CallArgs& a) {
  const Value d = a.take(0, "d"), attribute = a.take(1, "attribute");
  a.finish("filter 'join'");
  const std::string sep = given(d) ? soft_str(d) : "";
  std::string out;
  bool first = true;
  for (const Value& x : iterate(v)) {
    if (!first) out += sep;
    first = false;
    const Value item = given(attribute) ? attr_path(in, x, attribute) : x;
    out += soft_str(item);
    in.check_size(out.size());
  }
  return Value::string(std::move(out));
}

Value f_default(Interp&, const Value& v, CallArgs& a) {
  const Value dv = a.take(0, "default_value"), boolean = a.take(1, "boolean");
  a.finish("filter 'default'");
  const bool use_default = v.is_undefined() || (given(boolean) && boolean.truthy() && !v.truthy());
  if (!use_default) return v;
  return given(dv) ? dv : Value::string("");
}

Value f_items(Interp&, const Value& v, CallArgs& a) {
  a.finish("filter 'items'");
  if (v.is_undefined()) return Value::list({});
  if (!v.is_dict()) throw Error("Can only get item pairs from a mapping.");
  List out;
  for (const auto& [k, e] : v.dict_ref().entries) out.push_back(Value::list({Value::string(k), e}, true));
  return Value::list(std::move(out));
}

Value f_list(Interp&, const Value& v, CallArgs& a) { a.finish("filter 'list'"); return Value::list(iterate(v)); }
Value f_string(Interp&, const Value& v, CallArgs& a) {
  a.finish("filter 'string'");
  return v.is_string() ? v : Value::string(v.to_str());
}

// Python int() of a str: optional sign, digits with single underscores, surrounding whitespace.
bool parse_int(const std::string& s, int64_t base, int64_t& out) {
  std::string t = py_strip(s, Value(), 'b');
  if (t.empty()) return false;
  size_t i = 0;
  bool neg = false;
  if (t[0] == '+' || t[0] == '-') neg = t[0] == '-', i = 1;
  if (i >= t.size()) return false;
  __int128 acc = 0;
  bool prev_digit = false;
  for (; i < t.size(); ++i) {
    const char c = t[i];
    if (c == '_' && prev_digit && i + 1 < t.size()) {
      prev_digit = false;
      continue;
    }
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'z' ? c - 'a' + 10 : c >= 'A' && c <= 'Z' ? c - 'A' + 10 : 99;
    if (d >= base) return false;
    acc = acc * base + d;
    if (acc > static_cast<__int128>(INT64_MAX) + 1) throw Error("integer overflow (beyond 64 bits)");
    prev_digit = true;
  }
  if (!prev_digit) return false;
  out = static_cast<int64_t>(neg ? -acc : acc);
  return true;
}

bool parse_float(const std::string& s, double& out) {
  std::string t = py_strip(s, Value(), 'b');
  std::string clean;
  for (char c : t)
    if (c != '_') clean += c;
  if (clean.empty()) return false;
  char* end = nullptr;
  out = std::strtod(clean.c_str(), &end);
  return end == clean.c_str() + clean.size() && clean.find_first_of("xXpP") == std::string::npos;
}

// Python's int() of a finite float; an integer past 64 bits is an error here, as everywhere
// in this engine (converting it would be undefined behaviour, not a wrap).
int64_t float_to_int(double f) {
  const double t = std::trunc(f);
  if (!(t >= -9223372036854775808.0 && t < 9223372036854775808.0)) throw Error("integer overflow (beyond 64 bits)");
  return static_cast<int64_t>(t);
}

Value f_int(Interp&, const Value& v, CallArgs& a) {
  const Value dflt = a.take(0, "default"), base = a.take(1, "base");
  a.finish("filter 'int'");
  const Value fallback = given(dflt) ? dflt : Value::integer(0);
  if (v.is_number()) {
    if (!v.is_float()) return Value::integer(v.as_int());
    if (!std::isfinite(v.as_float())) return fallback;
    return Value::integer(float_to_int(v.as_float()));
  }
  if (v.is_string()) {
    int64_t i;
    if (parse_int(v.str(), given(base) ? base.as_int() : 10, i)) return Value::integer(i);
    double f;
    if (parse_float(v.str(), f) && std::isfinite(f)) return Value::integer(float_to_int(f));
  }
  return fallback;
}

Value f_float(Interp&, const Value& v, CallArgs& a) {
  const Value dflt = a.take(0, "default");
  a.finish("filter 'float'");
  if (v.is_number()) return Value::real(v.as_float());
  double f;
  if (v.is_string() && parse_float(v.str(), f)) return Value::real(f);
  return given(dflt) ? dflt : Value::real(0.0);
}

Value f_abs(Interp&, const Value& v, CallArgs& a) {
  a.finish("filter 'abs'");
  if (v.is_float()) return Value::real(std::fabs(v.as_float()));
  if (v.is_number()) return Value::integer(v.as_int() < 0 ? -v.as_int() : v.as_int());
  throw Error(std::string("bad operand type for abs(): '") + v.type_name() + "'");
}

Value f_round(Interp&, const Value& v, CallArgs& a) {
  const Value precision = a.take(0, "precision"), method = a.take(1, "method");
  a.finish("filter 'round'");
  const int64_t p = given(precision) ? precision.as_int() : 0;
  const std::string m = given(method) ? soft_str(method) : "common";
  if (!v.is_number()) throw Error(std::string("filter 'round' needs a number, not ") + v.type_name());
  if (m == "common") {
    if (!v.is_float()) return Value::integer(v.as_int());
    if (p < 0 || p > 30) throw Error("unsupported: round precision outside 0..30");
    char buf[400];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(p), v.as_float());  // correctly rounded, ties to even
    return Value::real(std::strtod(buf, nullptr));
  }
  if (m != "ceil" && m != "floor") throw Error("method must be 'common', 'ceil' or 'floor'");
  const double scale = std::pow(10.0, static_cast<double>(p));
  const double x = v.as_float() * scale;
  return Value::real((m == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value f_safe(Interp&, const Value& v, CallArgs& a) { a.finish("filter 'safe'"); return Value::string(soft_str(v), true); }
Value f_escape(Interp&, const Value& v, CallArgs& a) {
  a.finish("filter 'escape'");
  if (v.is_markup()) return v;
  return Value::string(escape_html(soft_str(v)), true);
}

Value f_attr(Interp& in, const Value& v, CallArgs& a) {
  const Value name = a.take(0, "name");
  a.finish("filter 'attr'");
  return in.getattr(v, soft_str(name));
}

// map / select / reject / selectattr / rejectattr: positional args after the name go to the
// test or filter they name.
CallArgs rest_args(CallArgs& a, size_t from) {
  CallArgs r;
  for (size_t k = from; k < a.pos.size(); ++k) r.pos.push_back(a.pos[k]);
  return r;
}

Value f_map(Interp& in, const Value& v, CallArgs& a) {
  List out;
  if (a.pos.empty()) {
    const Value attribute = a.take(99, "attribute"), dflt = a.take(99, "default");
    a.finish("filter 'map'");
    if (!given(attribute)) throw Error("filter 'map' needs a filter name or attribute=");
    for (const Value& x : iterate(v)) {
      Value r = attr_path(in, x, attribute);
      out.push_back(r.is_undefined() && given(dflt) ? dflt : r);
    }
    return Value::list(std::move(out));
  }
  const std::string name = soft_str(a.pos[0]);
  for (const Value& x : iterate(v)) {
    in.step();
    CallArgs fa = rest_args(a, 1);
    fa.kw = a.kw;
    out.push_back(in.run_filter(name, x, fa));
  }
  return Value::list(std::move(out));
}

Value select_impl(Interp& in, const Value& v, CallArgs& a, bool by_attr, bool keep) {
  if (!a.kw.empty()) throw Error("unsupported: keyword arguments to select / reject filters");
  size_t at = 0;
  Value attribute;
  if (by_attr) {
    if (a.pos.empty()) throw Error("selectattr / rejectattr need an attribute name");
    attribute = a.pos[at++];
  }
  const bool has_test = at < a.pos.size();
  const std::string test = has_test ? soft_str(a.pos[at]) : "";
  List out;
  for (const Value& x : iterate(v)) {
    in.step();
    const Value subject = by_attr ? attr_path(in, x, attribute) : x;
    bool ok;
    if (has_test) {
      CallArgs ta = rest_args(a, at + 1);
      ok = in.run_test(test, subject, ta);
    } else {
      ok = subject.truthy();
    }
    if (ok == keep) out.push_back(x);
  }
  return Value::list(std::move(out));
}
Value f_select(Interp& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, false, true); }
Value f_reject(Interp& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, false, false); }
Value f_selectattr(Interp& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, true, true); }
Value f_rejectattr(Interp& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, true, false); }

Value sort_key(const Value& v, bool case_sensitive) {
  return v.is_string() && !case_sensitive ? Value::string(lower(v.str())) : v;
}

Value f_sort(Interp& in, const Value& v, CallArgs& a) {
  const Value reverse = a.take(0, "reverse"), cs = a.take(1, "case_sensitive"), attribute = a.take(2, "attribute");
  a.finish("filter 'sort'");
  const bool case_sensitive = given(cs) && cs.truthy();
  List xs = iterate(v);
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value& x : xs) keyed.emplace_back(sort_key(given(attribute) ? attr_path(in, x, attribute) : x, case_sensitive), x);
  const bool rev = given(reverse) && reverse.truthy();
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& p, const auto& q) {
    return rev ? less_than(q.first, p.first) : less_than(p.first, q.first);
  });
  List out;
  for (auto& [k, x] : keyed) out.push_back(std::move(x));
  return Value::list(std::move(out));
}

Value f_unique(Interp& in, const Value& v, CallArgs& a) {
  const Value cs = a.take(0, "case_sensitive"), attribute = a.take(1, "attribute");
  a.finish("filter 'unique'");
  const bool case_sensitive = given(cs) && cs.truthy();
  List out, seen;
  for (const Value& x : iterate(v)) {
    in.step();
    Value key = sort_key(given(attribute) ? attr_path(in, x, attribute) : x, case_sensitive);
    bool dup = false;
    for (const Value& s : seen) dup = dup || equals(s, key);
    if (dup) continue;
    seen.push_back(std::move(key));
    out.push_back(x);
  }
  return Value::list(std::move(out));
}

Value f_reverse(Interp&, const Value& v, CallArgs& a) {
  a.finish("filter 'reverse'");
  if (v.is_string()) return slice_value(v, Value(), Value(), Value::integer(-1));
  List xs = iterate(v);
  std::reverse(xs.begin(), xs.end());
  return Value::list(std::move(xs));
}

Value f_dictsort(Interp&, const Value& v, CallArgs& a) {
  const Value cs = a.take(0, "case_sensitive"), by = a.take(1, "by"), reverse = a.take(2, "reverse");
  a.finish("filter 'dictsort'");
  if (!v.is_dict()) throw Error("You can only sort by either 'key' or 'value'");
  const bool by_value = given(by) && soft_str(by) == "value";
  if (given(by) && !by_value && soft_str(by) != "key") throw Error("You can only sort by either 'key' or 'value'");
  const bool case_sensitive = given(cs) && cs.truthy(), rev = given(reverse) && reverse.truthy();
  List pairs;
  for (const auto& [k, e] : v.dict_ref().entries) pairs.push_back(Value::list({Value::string(k), e}, true));
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& p, const Value& q) {
    const Value kp = sort_key(p.items()[by_value ? 1 : 0], case_sensitive);
    const Value kq = sort_key(q.items()[by_value ? 1 : 0], case_sensitive);
    return rev ? less_than(kq, kp) : less_than(kp, kq);
  });
  return Value::list(std::move(pairs));
}

// Python str.splitlines() for \n, \r\n and \r.
std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines;
  std::string cur;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\n' || s[i] == '\r') {
      lines.push_back(cur);
      cur.clear();
      if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      cur += s[i];
    }
  }
  if (!cur.empty()) lines.push_back(cur);
  return lines;
}

Value f_indent(Interp& in, const Value& v, CallArgs& a) {
  const Value width = a.take(0, "width"), first = a.take(1, "first"), blank = a.take(2, "blank");
  a.finish("filter 'indent'");
  const std::string ind = !given(width) ? "    " : width.is_string() ? width.str() : spaces(in, width.as_int());
  const std::vector<std::string> lines = split_lines(soft_str(v) + "\n");
  std::string rv;
  if (given(blank) && blank.truthy()) {
    for (size_t k = 0; k < lines.size(); ++k) {
      if (k) rv += '\n', rv += ind;
      rv += lines[k];
    }
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t k = 1; k < lines.size(); ++k) {
      rv += '\n';
      if (!lines[k].empty()) rv += ind, rv += lines[k];
    }
  }
  if (given(first) && first.truthy()) rv = ind + rv;
  in.check_size(rv.size());
  return Value::string(std::move(rv), v.is_markup());
}

Value f_wordcount(Interp&, const Value& v, CallArgs& a) {
  a.finish("filter 'wordcount'");
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : to_code_points(soft_str(v))) {
    const bool w = c == '_' || is_alpha(c) || is_digit(c);
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::integer(n);
}

Value f_batch(Interp&, const Value& v, CallArgs& a) {
  const Value count = a.take(0, "linecount"), fill = a.take(1, "fill_with");
  a.finish("filter 'batch'");
  if (!count.is_int() || count.as_int() <= 0) throw Error("filter 'batch' needs a positive line count");
  const size_t n = static_cast<size_t>(count.as_int());
  List out, cur;
  for (const Value& x : iterate(v)) {
    cur.push_back(x);
    if (cur.size() == n) out.push_back(Value::list(std::move(cur))), cur.clear();
  }
  if (!cur.empty()) {
    if (given(fill) && !fill.is_none())
      while (cur.size() < n) cur.push_back(fill);
    out.push_back(Value::list(std::move(cur)));
  }
  return Value::list(std::move(out));
}

Value f_sum(Interp& in, const Value& v, CallArgs& a) {
  const Value attribute = a.take(0, "attribute"), start = a.take(1, "start");
  a.finish("filter 'sum'");
  Value acc = given(start) ? start : Value::integer(0);
  for (const Value& x : iterate(v)) acc = binary_op(in, "+", acc, given(attribute) ? attr_path(in, x, attribute) : x);
  return acc;
}

Value min_max(Interp& in, const Value& v, CallArgs& a, bool want_max) {
  const Value cs = a.take(0, "case_sensitive"), attribute = a.take(1, "attribute");
  a.finish(want_max ? "filter 'max'" : "filter 'min'");
  const bool case_sensitive = given(cs) && cs.truthy();
  const List xs = iterate(v);
  if (xs.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key;
  for (size_t k = 0; k < xs.size(); ++k) {
    Value key = sort_key(given(attribute) ? attr_path(in, xs[k], attribute) : xs[k], case_sensitive);
    if (k == 0 || (want_max ? less_than(best_key, key) : less_than(key, best_key))) best = k, best_key = std::move(key);
  }
  return xs[best];
}
Value f_min(Interp& in, const Value& v, CallArgs& a) { return min_max(in, v, a, false); }
Value f_max(Interp& in, const Value& v, CallArgs& a) { return min_max(in, v, a, true); }

Value f_center(Interp& in, const Value& v, CallArgs& a) {
  const Value width = a.take(0, "width");
  a.finish("filter 'center'");
  const std::string s = soft_str(v);
  const int64_t w = given(width) ? width.as_int() : 80, n = static_cast<int64_t>(code_point_count(s));
  if (w <= n) return Value::string(s);
  in.check_size(static_cast<size_t>(w - n) + s.size());  // center(10**12) must not allocate first
  const int64_t marg = w - n, left = marg / 2 + (marg & w & 1);
  return Value::string(std::string(static_cast<size_t>(left), ' ') + s + std::string(static_cast<size_t>(marg - left), ' '));
}

}  // namespace

FilterFn find_filter(std::string_view name) {
  static const std::map<std::string_view, FilterFn> kFilters = {
      {"tojson", f_tojson}, {"trim", f_trim}, {"upper", f_upper}, {"lower", f_lower}, {"title", f_title},
      {"capitalize", f_capitalize}, {"replace", f_replace}, {"length", f_length}, {"count", f_length},
      {"first", f_first}, {"last", f_last}, {"join", f_join}, {"default", f_default}, {"d", f_default},
      {"items", f_items}, {"list", f_list}, {"string", f_string}, {"int", f_int}, {"float", f_float},
      {"abs", f_abs}, {"round", f_round}, {"safe", f_safe}, {"e", f_escape}, {"escape", f_escape},
      {"attr", f_attr}, {"map", f_map}, {"select", f_select}, {"reject", f_reject},
      {"selectattr", f_selectattr}, {"rejectattr", f_rejectattr}, {"sort", f_sort}, {"unique", f_unique},
      {"reverse", f_reverse}, {"dictsort", f_dictsort}, {"indent", f_indent}, {"wordcount", f_wordcount},
      {"batch", f_batch}, {"sum", f_sum}, {"min", f_min}, {"max", f_max}, {"center", f_center}};
  auto it = kFilters.find(name);
  return it == kFilters.end() ? nullptr : it->second;
}

Value Interp::run_filter(std::string_view name, const Value& v, CallArgs& args) {
  FilterFn f = find_filter(name);
  if (!f) throw Error("no filter named '" + std::string(name) + "'");
  return f(*this, v, args);
}

}  // namespace densa::jinja
