// Python methods of str / dict / list that templates call, and the globals of HF's
// environment (range, dict, namespace, raise_exception, strftime_now). The sandbox refuses
// methods that mutate a list or dict, as ImmutableSandboxedEnvironment does.
#include <ctime>
#include <set>

#include "text/jinja/internal.h"
#include "text/jinja/ops.h"
#include "text/jinja/unicode.h"

namespace densa::jinja {

std::string py_strip(std::string_view s, const Value& chars, char which) {
  const bool by_space = chars.is_undefined() || chars.is_none();
  if (!by_space && !chars.is_string()) throw Error("strip arg must be None or str");
  const std::vector<char32_t> set = by_space ? std::vector<char32_t>{} : to_code_points(chars.str());
  auto strip_it = [&](char32_t c) {
    if (by_space) return is_space(c);
    for (char32_t x : set)
      if (x == c) return true;
    return false;
  };
  const std::vector<char32_t> cps = to_code_points(s);
  size_t b = 0, e = cps.size();
  if (which != 'r')
    while (b < e && strip_it(cps[b])) ++b;
  if (which != 'l')
    while (e > b && strip_it(cps[e - 1])) --e;
  return from_code_points(cps, b, e);
}

std::string py_replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts `repl` before every code point and at the end.
    size_t i = 0;
    int64_t done = 0;
    while (true) {
      if (count < 0 || done < count) out += repl, ++done;
      if (i >= s.size()) break;
      const size_t start = i;
      decode_utf8(s, i);
      out += s.substr(start, i - start);
    }
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t at = s.find(old, pos);
    if (at == std::string_view::npos) break;
    out += s.substr(pos, at - pos);
    out += repl;
    pos = at + old.size();
    ++done;
  }
  out += s.substr(pos);
  return out;
}

namespace {

using Fn = NativeFn::Fn;

Value method(const std::string& name, Fn f) { return Value::callable(std::make_shared<NativeFn>(name, std::move(f))); }

const std::string& need_str(const Value& v, const char* what) {
  if (!v.is_string()) throw Error(std::string(what) + " argument must be str, not " + v.type_name());
  return v.str();
}

int64_t cp_index(const std::string& s, size_t byte_pos) {
  return static_cast<int64_t>(code_point_count(std::string_view(s).substr(0, byte_pos)));
}

List split_ws(const std::string& s, int64_t maxsplit, bool from_right) {
  const std::vector<char32_t> cps = to_code_points(s);
  std::vector<std::pair<size_t, size_t>> words;
  size_t i = 0;
  while (i < cps.size()) {
    while (i < cps.size() && is_space(cps[i])) ++i;
    if (i >= cps.size()) break;
    size_t j = i;
    while (j < cps.size() && !is_space(cps[j])) ++j;
    words.emplace_back(i, j);
    i = j;
  }
  List out;
  if (maxsplit < 0 || static_cast<size_t>(maxsplit) + 1 >= words.size()) {
    for (auto [b, e] : words) out.push_back(Value::string(from_code_points(cps, b, e)));
    return out;
  }
  const size_t m = static_cast<size_t>(maxsplit);
  if (!from_right) {
    for (size_t k = 0; k < m; ++k) out.push_back(Value::string(from_code_points(cps, words[k].first, words[k].second)));
    out.push_back(Value::string(from_code_points(cps, words[m].first, cps.size())));
  } else {
    const size_t first = words.size() - m;
    out.push_back(Value::string(from_code_points(cps, 0, words[first - 1].second)));
    for (size_t k = first; k < words.size(); ++k)
      out.push_back(Value::string(from_code_points(cps, words[k].first, words[k].second)));
  }
  return out;
}

List split_sep(const std::string& s, const std::string& sep, int64_t maxsplit, bool from_right) {
  if (sep.empty()) throw Error("empty separator");
  std::vector<std::string> parts;
  if (!from_right) {
    size_t pos = 0;
    int64_t n = 0;
    while (maxsplit < 0 || n < maxsplit) {
      const size_t at = s.find(sep, pos);
      if (at == std::string::npos) break;
      parts.push_back(s.substr(pos, at - pos));
      pos = at + sep.size();
      ++n;
    }
    parts.push_back(s.substr(pos));
  } else {
    size_t end = s.size();
    int64_t n = 0;
    std::vector<std::string> rev;
    while (maxsplit < 0 || n < maxsplit) {
      if (end < sep.size()) break;
      const size_t at = s.rfind(sep, end - sep.size());
      if (at == std::string::npos) break;
      rev.push_back(s.substr(at + sep.size(), end - at - sep.size()));
      end = at;
      ++n;
    }
    rev.push_back(s.substr(0, end));
    parts.assign(rev.rbegin(), rev.rend());
  }
  List out;
  for (auto& p : parts) out.push_back(Value::string(std::move(p)));
  return out;
}

Value split_method(const Value& self, CallArgs& a, bool from_right) {
  const Value sep = a.take(0, "sep"), maxsplit = a.take(1, "maxsplit");
  a.finish(from_right ? "str.rsplit" : "str.split");
  const int64_t m = maxsplit.is_undefined() ? -1 : maxsplit.as_int();
  if (sep.is_undefined() || sep.is_none()) return Value::list(split_ws(self.str(), m, from_right));
  return Value::list(split_sep(self.str(), need_str(sep, "split"), m, from_right));
}

Value affix_method(const Value& self, CallArgs& a, bool prefix) {
  const Value what = a.take(0, prefix ? "prefix" : "suffix");
  if (a.pos.size() > 1) throw Error("unsupported: start / end arguments to startswith / endswith");
  a.finish(prefix ? "str.startswith" : "str.endswith");
  auto test = [&](const std::string& p) {
    const std::string& s = self.str();
    return p.size() <= s.size() && (prefix ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0);
  };
  if (what.is_tuple()) {
    for (const Value& p : what.items())
      if (test(need_str(p, prefix ? "startswith" : "endswith"))) return Value::boolean(true);
    return Value::boolean(false);
  }
  return Value::boolean(test(need_str(what, prefix ? "startswith" : "endswith")));
}

template <typename Pred>
Value char_class(const Value& self, Pred pred, bool cased) {
  const std::vector<char32_t> cps = to_code_points(self.str());
  if (cps.empty()) return Value::boolean(false);
  bool any_cased = false;
  for (char32_t c : cps) {
    const int r = pred(c);  // 1 ok, 0 fail, 2 neutral (for isupper / islower: uncased chars)
    if (r == 0) return Value::boolean(false);
    any_cased = any_cased || r == 1;
  }
  return Value::boolean(!cased || any_cased);
}

Value str_method(const Value& self, std::string_view name) {
  const std::string n(name);
  auto no_args = [n](CallArgs& a) { a.finish("str." + n); };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const char which = name[0] == 's' ? 'b' : name[0];
    return method(n, [self, which, n](Interp&, CallArgs& a) {
      const Value chars = a.take(0, "chars");
      a.finish("str." + n);
      return Value::string(py_strip(self.str(), chars, which));
    });
  }
  if (name == "split" || name == "rsplit")
    return method(n, [self, n](Interp&, CallArgs& a) { return split_method(self, a, n == "rsplit"); });
  if (name == "startswith" || name == "endswith")
    return method(n, [self, n](Interp&, CallArgs& a) { return affix_method(self, a, n == "startswith"); });
  if (name == "replace")
    return method(n, [self](Interp& in, CallArgs& a) {
      const Value old = a.take(0, "old"), repl = a.take(1, "new"), count = a.take(2, "count");
      a.finish("str.replace");
      std::string out = py_replace(self.str(), need_str(old, "replace"), need_str(repl, "replace"),
                                   count.is_undefined() ? -1 : count.as_int());
      in.check_size(out.size());
      return Value::string(std::move(out));
    });
  if (name == "upper" || name == "lower")
    return method(n, [self, n, no_args](Interp&, CallArgs& a) {
      no_args(a);
      return Value::string(n == "upper" ? upper(self.str()) : lower(self.str()));
    });
  if (name == "title" || name == "capitalize")
    return method(n, [self, n, no_args](Interp&, CallArgs& a) {
      no_args(a);
      std::string out;
      bool prev_cased = false;
      const std::vector<char32_t> cps = to_code_points(self.str());
      for (size_t k = 0; k < cps.size(); ++k) {
        const char32_t c = cps[k];
        if (n == "capitalize") {
          k == 0 ? append_title(out, c) : append_lower(out, c);
          continue;
        }
        prev_cased ? append_lower(out, c) : append_title(out, c);
        prev_cased = is_upper(c) || is_lower(c) || to_lower(c) != c || to_upper(c) != c;
      }
      return Value::string(std::move(out));
    });
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count")
    return method(n, [self, n](Interp&, CallArgs& a) {
      const Value sub = a.take(0, "sub");
      a.finish("str." + n);
      const std::string& s = self.str();
      const std::string& t = need_str(sub, n.c_str());
      if (n == "count") {
        if (t.empty()) return Value::integer(static_cast<int64_t>(code_point_count(s)) + 1);
        int64_t c = 0;
        for (size_t p = s.find(t); p != std::string::npos; p = s.find(t, p + t.size())) ++c;
        return Value::integer(c);
      }
      const size_t at = n[0] == 'r' ? s.rfind(t) : s.find(t);
      if (at == std::string::npos) {
        if (n == "index" || n == "rindex") throw Error("substring not found");
        return Value::integer(-1);
      }
      return Value::integer(cp_index(s, at));
    });
  if (name == "join")
    return method(n, [self](Interp& in, CallArgs& a) {
      const Value seq = a.take(0, "iterable");
      a.finish("str.join");
      std::string out;
      bool first = true;
      for (const Value& x : iterate(seq)) {
        if (!first) out += self.str();
        first = false;
        out += need_str(x, "join");
        in.check_size(out.size());
      }
      return Value::string(std::move(out));
    });
  if (name == "isdigit" || name == "isnumeric" || name == "isdecimal")
    return method(n, [self, no_args](Interp&, CallArgs& a) { no_args(a); return char_class(self, [](char32_t c) { return is_digit(c) ? 1 : 0; }, false); });
  if (name == "isalpha")
    return method(n, [self, no_args](Interp&, CallArgs& a) { no_args(a); return char_class(self, [](char32_t c) { return is_alpha(c) ? 1 : 0; }, false); });
  if (name == "isalnum")
    return method(n, [self, no_args](Interp&, CallArgs& a) { no_args(a); return char_class(self, [](char32_t c) { return is_alpha(c) || is_digit(c) ? 1 : 0; }, false); });
  if (name == "isspace")
    return method(n, [self, no_args](Interp&, CallArgs& a) { no_args(a); return char_class(self, [](char32_t c) { return is_space(c) ? 1 : 0; }, false); });
  if (name == "isupper")
    return method(n, [self, no_args](Interp&, CallArgs& a) { no_args(a); return char_class(self, [](char32_t c) { return is_lower(c) ? 0 : is_upper(c) ? 1 : 2; }, true); });
  if (name == "islower")
    return method(n, [self, no_args](Interp&, CallArgs& a) { no_args(a); return char_class(self, [](char32_t c) { return is_upper(c) ? 0 : is_lower(c) ? 1 : 2; }, true); });
  if (name == "removeprefix" || name == "removesuffix")
    return method(n, [self, n](Interp&, CallArgs& a) {
      const Value x = a.take(0, "affix");
      a.finish("str." + n);
      const std::string& s = self.str();
      const std::string& p = need_str(x, n.c_str());
      if (n == "removeprefix") return Value::string(s.compare(0, p.size(), p) == 0 ? s.substr(p.size()) : s);
      const bool ends = p.size() <= s.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
      return Value::string(ends && !p.empty() ? s.substr(0, s.size() - p.size()) : s);
    });
  if (name == "format" || name == "format_map")
    return Value::undefined("unsupported: str.format() in templates");
  return Value::undefined();
}

Value items_of(const Value& self) {
  List out;
  for (const auto& [k, e] : self.dict_ref().entries) out.push_back(Value::list({Value::string(k), e}, true));
  return Value::list(std::move(out));
}

Value dict_method(const Value& self, std::string_view name) {
  const std::string n(name);
  if (name == "items") return method(n, [self](Interp&, CallArgs& a) { a.finish("dict.items"); return items_of(self); });
  if (name == "keys")
    return method(n, [self](Interp&, CallArgs& a) {
      a.finish("dict.keys");
      return Value::list(iterate(self));
    });
  if (name == "values")
    return method(n, [self](Interp&, CallArgs& a) {
      a.finish("dict.values");
      List out;
      for (const auto& [k, e] : self.dict_ref().entries) out.push_back(e);
      return Value::list(std::move(out));
    });
  if (name == "get")
    return method(n, [self](Interp&, CallArgs& a) {
      const Value key = a.take(0, "key"), dflt = a.take(1, "default");
      a.finish("dict.get");
      if (key.is_string())
        if (const Value* v = self.dict_ref().find(key.str())) return *v;
      return dflt.is_undefined() ? Value::none() : dflt;
    });
  static const std::set<std::string_view> kUnsafe = {"clear", "pop", "popitem", "setdefault", "update"};
  if (kUnsafe.count(name)) return Value::undefined("access to attribute '" + n + "' of 'dict' object is unsafe.");
  return Value::undefined();
}

Value list_method(const Value& self, std::string_view name) {
  const std::string n(name);
  if (name == "index" || name == "count")
    return method(n, [self, n](Interp&, CallArgs& a) {
      const Value x = a.take(0, "value");
      a.finish("list." + n);
      int64_t c = 0;
      for (size_t k = 0; k < self.items().size(); ++k) {
        if (!equals(self.items()[k], x)) continue;
        if (n == "index") return Value::integer(static_cast<int64_t>(k));
        ++c;
      }
      if (n == "index") throw Error(x.repr() + " is not in list");
      return Value::integer(c);
    });
  static const std::set<std::string_view> kUnsafe = {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"};
  if (kUnsafe.count(name) && !self.is_tuple())
    return Value::undefined("access to attribute '" + n + "' of 'list' object is unsafe.");
  return Value::undefined();
}

Value g_range(Interp& in, CallArgs& a) {
  if (!a.kw.empty() || a.pos.empty() || a.pos.size() > 3) throw Error("range expects 1 to 3 integer arguments");
  for (const Value& v : a.pos)
    if (!v.is_number() || v.is_float()) throw Error(std::string("'") + v.type_name() + "' object cannot be interpreted as an integer");
  int64_t start = 0, stop, step = 1;
  if (a.pos.size() == 1) stop = a.pos[0].as_int();
  else start = a.pos[0].as_int(), stop = a.pos[1].as_int();
  if (a.pos.size() == 3) step = a.pos[2].as_int();
  if (step == 0) throw Error("range() arg 3 must not be zero");
  List out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
    in.step();
    out.push_back(Value::integer(i));
    if (__builtin_add_overflow(i, step, &i)) break;  // the next value would pass INT64 bounds, so also stop
  }
  return Value::list(std::move(out));
}

Value g_dict(Interp&, CallArgs& a) {
  Value d = Value::new_dict();
  for (const Value& p : a.pos) {
    if (!p.is_dict()) throw Error("unsupported: dict() from a non-mapping");
    for (const auto& [k, v] : p.dict_ref().entries) d.dict_mut().set(k, v);
  }
  for (const auto& [k, v] : a.kw) d.dict_mut().set(k, v);
  d.update_depth();
  return d;
}

Value g_namespace(Interp& in, CallArgs& a) {
  Value ns = Value::new_namespace();
  in.track_namespace(ns);
  for (const Value& p : a.pos) {
    if (!p.is_dict()) throw Error("namespace() takes mappings and keyword arguments");
    for (const auto& [k, v] : p.dict_ref().entries) ns.dict_mut().set(k, v);
  }
  for (const auto& [k, v] : a.kw) ns.dict_mut().set(k, v);
  ns.update_depth();
  return ns;
}

Value g_raise(Interp&, CallArgs& a) {
  const Value msg = a.take(0, "message");
  throw Error(msg.is_string() ? msg.str() : msg.to_str(), 0, 0, Error::Kind::kRaised);
}

Value g_strftime(Interp& in, CallArgs& a) {
  const Value fmt = a.take(0, "format");
  a.finish("strftime_now");
  const std::time_t t = in.limits().now_unix ? static_cast<std::time_t>(*in.limits().now_unix) : std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[512];
  const std::string& f = need_str(fmt, "strftime_now");
  const size_t n = std::strftime(buf, sizeof buf, f.c_str(), &tm);
  if (n == 0 && !f.empty()) throw Error("strftime_now: format result too long or empty");
  return Value::string(std::string(buf, n));
}

}  // namespace

Value bound_method(const Value& self, std::string_view name) {
  switch (self.kind()) {
    case Value::Kind::kString: return str_method(self, name);
    case Value::Kind::kDict: return dict_method(self, name);
    case Value::Kind::kList: return list_method(self, name);
    default: return Value::undefined();
  }
}

Value find_global(std::string_view name) {
  static const Value kRange = method("range", g_range), kDict = method("dict", g_dict),
                     kNamespace = method("namespace", g_namespace), kRaise = method("raise_exception", g_raise),
                     kStrftime = method("strftime_now", g_strftime);
  if (name == "range") return kRange;
  if (name == "dict") return kDict;
  if (name == "namespace") return kNamespace;
  if (name == "raise_exception") return kRaise;
  if (name == "strftime_now") return kStrftime;
  if (name == "lipsum" || name == "cycler" || name == "joiner")
    return Value::undefined("unsupported: the '" + std::string(name) + "' global");
  return Value::undefined();
}

}  // namespace densa::jinja
