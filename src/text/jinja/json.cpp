// json.dumps as Hugging Face's tojson filter calls it: ensure_ascii=False by default, Python's
// separators (", " / ": " on one line; "," / ": " with indent), floats as Python repr with
// Infinity / NaN, key order as inserted unless sort_keys.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "text/jinja/internal.h"
#include "text/jinja/unicode.h"

namespace densa::jinja {
namespace {

void append_json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  char buf[16];
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t start = i;
      const char32_t cp = decode_utf8(s, i);
      if (!ensure_ascii) {
        out.append(s.substr(start, i - start));
      } else if (cp < 0x10000) {
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
        out += buf;
      } else {
        const unsigned v = static_cast<unsigned>(cp) - 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
        out += buf;
      }
      continue;
    }
    ++i;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20 || (ensure_ascii && c == 0x7f)) {
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

struct JsonWriter {
  Interp& in;
  const std::string* indent;
  bool ensure_ascii;
  std::string item_sep, key_sep;
  bool sort_keys;
  std::string out;

  void newline(int level) {
    out += '\n';
    for (int k = 0; k < level; ++k) out += *indent;
  }

  void write(const Value& v, int level) {
    in.step();
    in.check_size(out.size());
    switch (v.kind()) {
      case Value::Kind::kNone: out += "null"; return;
      case Value::Kind::kBool: out += v.as_bool() ? "true" : "false"; return;
      case Value::Kind::kInt: out += std::to_string(v.as_int()); return;
      case Value::Kind::kFloat: {
        const double f = v.as_float();
        if (std::isnan(f)) out += "NaN";
        else if (std::isinf(f)) out += f < 0 ? "-Infinity" : "Infinity";
        else out += float_repr(f);
        return;
      }
      case Value::Kind::kString: append_json_string(out, v.str(), ensure_ascii); return;
      case Value::Kind::kList: {
        const List& xs = v.items();
        if (xs.empty()) {
          out += "[]";
          return;
        }
        out += '[';
        if (indent) newline(level + 1);
        for (size_t k = 0; k < xs.size(); ++k) {
          if (k) {
            out += item_sep;
            if (indent) newline(level + 1);
          }
          write(xs[k], level + 1);
        }
        if (indent) newline(level);
        out += ']';
        return;
      }
      case Value::Kind::kDict: {
        std::vector<const std::pair<std::string, Value>*> entries;
        for (const auto& e : v.dict_ref().entries) entries.push_back(&e);
        if (entries.empty()) {
          out += "{}";
          return;
        }
        if (sort_keys)
          std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
        out += '{';
        if (indent) newline(level + 1);
        for (size_t k = 0; k < entries.size(); ++k) {
          if (k) {
            out += item_sep;
            if (indent) newline(level + 1);
          }
          append_json_string(out, entries[k]->first, ensure_ascii);
          out += key_sep;
          write(entries[k]->second, level + 1);
        }
        if (indent) newline(level);
        out += '}';
        return;
      }
      default:
        throw Error(std::string("Object of type ") + (v.is_namespace() ? "Namespace" : v.type_name()) +
                    " is not JSON serializable");
    }
  }
};

}  // namespace

std::string to_json(Interp& in, const Value& v, const std::string* indent, bool ensure_ascii,
                    const std::string* item_sep, const std::string* key_sep, bool sort_keys) {
  Interp::DepthGuard guard(in);
  JsonWriter w{in, indent, ensure_ascii, item_sep ? *item_sep : (indent ? "," : ", "), key_sep ? *key_sep : ": ",
               sort_keys, {}};
  w.write(v, 0);
  return std::move(w.out);
}

}  // namespace densa::jinja
