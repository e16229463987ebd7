// Tool-call formats that spell arguments as XML-ish key / value pairs, which the parser turns
// into a JSON object typed by the tool's schema:
//   GLM-4.5/4.6/4.7: <tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>\n...</tool_call>
//   Qwen3-Coder:     <tool_call>\n<function=NAME>\n<parameter=K>\nV\n</parameter>\n...</function>\n</tool_call>
// A value whose schema type is "string" is the raw text (streamed as it arrives); any other
// value is JSON when it parses as JSON (and, for Qwen3-Coder, Python's True / False / None
// when the schema allows boolean / null), else a string.
#include "text/chat_parse/formats.h"

namespace densa::toolparse {

namespace {
constexpr size_t npos = std::string_view::npos;

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

struct XmlStyle {
  std::string_view name_open;   // before the name ("" for GLM: the name follows <tool_call>)
  std::string_view name_close;  // ends the name
  std::string_view key_open, key_close, value_open, value_close;
  std::string_view trailer;     // after the last argument, before </tool_call> ("" for none)
  bool strip_newlines;          // one leading and one trailing '\n' around a value
  bool python_literals;         // True / False / None
};

bool type_allows(const nlohmann::json& type, std::string_view t) {
  if (type.is_string()) return type.get<std::string>() == t;
  if (type.is_array()) {
    for (const auto& x : type) {
      if (x.is_string() && x.get<std::string>() == t) return true;
    }
  }
  return false;
}

bool json_matches_type(const nlohmann::json& v, const nlohmann::json& type) {
  if (type.is_null()) return true;  // the schema does not say
  if (v.is_object()) return type_allows(type, "object");
  if (v.is_array()) return type_allows(type, "array");
  if (v.is_boolean()) return type_allows(type, "boolean");
  if (v.is_null()) return type_allows(type, "null");
  if (v.is_number_integer() || v.is_number_unsigned()) return type_allows(type, "integer") || type_allows(type, "number");
  if (v.is_number()) return type_allows(type, "number");
  return type_allows(type, "string");
}

std::string json_quoted(std::string_view raw) {
  std::string out(1, '"');
  out += json_escape(raw);
  out += '"';
  return out;
}

// The JSON text for one complete value.
std::string convert_value(std::string_view raw, const nlohmann::json& type, bool python_literals) {
  if (type.is_string() && type.get<std::string>() == "string") return json_quoted(raw);
  const std::string_view t = trim(raw);
  if (python_literals) {
    if ((t == "True" || t == "False") && type_allows(type, "boolean")) return t == "True" ? "true" : "false";
    if (t == "None" && type_allows(type, "null")) return "null";
  }
  const auto v = nlohmann::json::parse(t, nullptr, false);
  if (!v.is_discarded() && json_matches_type(v, type)) return std::string(t);
  return json_quoted(raw);
}

class XmlArgsFormat : public ToolFormat {
 public:
  explicit XmlArgsFormat(XmlStyle style) : st_(style) {}
  std::string_view call_begin() const override { return "<tool_call>"; }
  CallProgress parse_call(std::string_view body, bool final, const ToolSet& tools) const override;

 private:
  // One argument starting at region[*i] (just past the key-open marker). Appends its JSON to
  // p->args when complete (returns kDone) or, for a string value still arriving, the committed
  // part (returns kPartial); kBad when the text cannot be an argument.
  enum class Arg { kDone, kPartial, kBad };
  Arg parse_arg(std::string_view region, size_t* i, bool final, bool first, const ToolSet& tools,
                CallProgress* p) const;
  XmlStyle st_;
};

CallProgress XmlArgsFormat::parse_call(std::string_view body, bool final, const ToolSet& tools) const {
  static constexpr std::string_view kEnd = "</tool_call>";
  CallProgress p;
  const size_t e = body.find(kEnd);
  const bool closed = e != npos;
  const std::string_view region = body.substr(0, e);
  size_t i = 0;
  if (!st_.name_open.empty()) {
    while (i < region.size() && is_space(region[i])) ++i;
    const std::string_view rest = region.substr(i);
    if (!starts_with(rest, st_.name_open)) {
      p.failed = closed || !(rest.size() < st_.name_open.size() && starts_with(st_.name_open, rest));
      return p;
    }
    i += st_.name_open.size();
  }
  size_t name_end = region.find(st_.name_close, i);
  if (st_.name_open.empty()) name_end = std::min(name_end, region.find(st_.key_open, i));
  if (name_end == npos) {
    if (!closed) return p;
    name_end = region.size();  // a call with no arguments and no newline after its name
  }
  const std::string_view name = trim(region.substr(i, name_end - i));
  if (name.empty() || name.find_first_of(" \t\n<>{}\"=") != npos) {
    p.failed = true;
    return p;
  }
  p.have_name = true;
  p.name = std::string(name);
  p.args = "{";
  i = name_end < region.size() && starts_with(region.substr(name_end), st_.name_close)
          ? name_end + st_.name_close.size() : name_end;
  bool first = true, after_trailer = false;  // no arguments after the trailer
  for (;;) {
    while (i < region.size() && is_space(region[i])) ++i;
    const std::string_view rest = region.substr(i);
    if (rest.empty()) {
      if (!closed) return p;  // more arguments or the end may follow
      if (!st_.trailer.empty() && !after_trailer) p.error = "missing " + std::string(st_.trailer);
      break;
    }
    if (!after_trailer && starts_with(rest, st_.key_open)) {
      i += st_.key_open.size();
      const Arg r = parse_arg(region, &i, final || closed, first, tools, &p);
      if (r == Arg::kPartial) return p;
      if (r == Arg::kBad) {
        p.error = "malformed argument";
        break;
      }
      first = false;
      continue;
    }
    if (!after_trailer && !st_.trailer.empty() && starts_with(rest, st_.trailer)) {
      i += st_.trailer.size();
      after_trailer = true;
      continue;
    }
    if (!closed) return p;  // a marker may be arriving; anything else is judged at the close
    p.error = "unexpected text in the tool call: '" + std::string(rest.substr(0, 40)) + "'";
    break;
  }
  if (!closed) return p;  // the text ended inside the call: the engine reports it truncated
  p.args += "}";
  p.done = true;
  p.consumed = e + kEnd.size();
  return p;
}

XmlArgsFormat::Arg XmlArgsFormat::parse_arg(std::string_view region, size_t* i, bool final, bool first,
                                            const ToolSet& tools, CallProgress* p) const {
  const size_t key_end = region.find(st_.key_close, *i);
  if (key_end == npos) return final ? Arg::kBad : Arg::kPartial;
  const std::string key(trim(region.substr(*i, key_end - *i)));
  size_t v = key_end + st_.key_close.size();
  if (!st_.value_open.empty()) {
    while (v < region.size() && is_space(region[v])) ++v;
    const std::string_view rest = region.substr(v);
    if (!starts_with(rest, st_.value_open)) {
      if (!final && is_proper_prefix_of(rest, st_.value_open)) return Arg::kPartial;
      return final || !rest.empty() ? Arg::kBad : Arg::kPartial;
    }
    v += st_.value_open.size();
  }
  if (st_.strip_newlines) {
    if (v >= region.size()) return final ? Arg::kBad : Arg::kPartial;
    if (region[v] == '\n') ++v;
  }
  const nlohmann::json type = tools.property_type(p->name, key);
  const std::string prefix = (first ? "" : ", ") + json_quoted(key) + ": ";
  const size_t value_end = region.find(st_.value_close, v);
  if (value_end == npos) {
    // A string value streams as it arrives; any other waits for its closing marker. At the
    // end (or when the call closed first) a streamed string is closed as it stands.
    const bool is_string = type.is_string() && type.get<std::string>() == "string";
    if (!is_string) return final ? Arg::kBad : Arg::kPartial;
    std::string_view part = region.substr(v);
    if (!final) {
      const std::string nl_close = "\n" + std::string(st_.value_close);
      size_t hold = partial_marker_suffix(part, {st_.value_close, std::string_view("</tool_call>")});
      if (st_.strip_newlines) hold = std::max(hold, partial_marker_suffix(part, nl_close));
      part.remove_suffix(hold);
      part.remove_suffix(incomplete_utf8_tail(part));
    }
    p->args += prefix + "\"" + json_escape(part);
    if (!final) return Arg::kPartial;
    p->args += "\"";
    return Arg::kBad;
  }
  std::string_view raw = region.substr(v, value_end - v);
  if (st_.strip_newlines && !raw.empty() && raw.back() == '\n') raw.remove_suffix(1);
  p->args += prefix + convert_value(raw, type, st_.python_literals);
  *i = value_end + st_.value_close.size();
  return Arg::kDone;
}
}  // namespace

std::unique_ptr<ToolFormat> make_xml_tool_format(std::string_view name) {
  if (name == "glm45" || name == "glm4_moe" || name == "glm46" || name == "glm47") {
    return std::make_unique<XmlArgsFormat>(XmlStyle{"", "\n", "<arg_key>", "</arg_key>", "<arg_value>",
                                                    "</arg_value>", "", false, false});
  }
  if (name == "qwen3_coder") {
    return std::make_unique<XmlArgsFormat>(XmlStyle{"<function=", ">", "<parameter=", ">", "",
                                                    "</parameter>", "</function>", true, true});
  }
  return nullptr;
}

}  // namespace densa::toolparse
