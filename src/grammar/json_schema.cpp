#include "grammar/json_schema.h"

#include <cmath>
#include <map>
#include <set>

#include "grammar/json_value_rules.h"
#include "grammar/regex.h"

namespace densa::grammar {

namespace {

using ojson = nlohmann::ordered_json;

const std::set<std::string>& annotations() {
  static const std::set<std::string> k = {"title",   "description", "default",  "examples",
                                          "$schema", "$id",         "$comment", "deprecated",
                                          "readOnly", "writeOnly"};
  return k;
}
const std::set<std::string>& supported() {
  static const std::set<std::string> k = {
      "type",      "properties", "required",  "additionalProperties", "items",
      "prefixItems", "minItems", "maxItems",  "minLength",  "maxLength",  "pattern",
      "minimum",   "maximum",    "exclusiveMinimum", "exclusiveMaximum", "enum", "const",
      "anyOf",     "oneOf",      "allOf",     "$ref",       "$defs",      "definitions"};
  return k;
}

const std::set<std::string> kObjectWords = {"properties", "required", "additionalProperties"};
const std::set<std::string> kArrayWords = {"items", "prefixItems", "minItems", "maxItems"};
const std::set<std::string> kStringWords = {"minLength", "maxLength", "pattern"};
const std::set<std::string> kNumberWords = {"minimum", "maximum", "exclusiveMinimum",
                                            "exclusiveMaximum"};

class Converter {
 public:
  Converter(const ojson& root, const JsonSchemaLimits& limits)
      : root_(root), limits_(limits), rules_(g_) {}

  Result<Grammar> run() {
    const int32_t root = g_.add_rule("root");
    DENSA_ASSIGN_OR_RETURN(int32_t body, convert(root_, "#", 0));
    g_.define_rule(root, body);
    g_.set_root(root);
    return std::move(g_);
  }

 private:
  static Status error(const std::string& path, const std::string& what) {
    return invalid_argument("JSON Schema at " + path + ": " + what);
  }

  // The keywords of s other than annotations and definition containers.
  static std::vector<std::string> constraint_keys(const ojson& s) {
    std::vector<std::string> keys;
    for (auto it = s.begin(); it != s.end(); ++it)
      if (!annotations().count(it.key()) && it.key() != "$defs" && it.key() != "definitions")
        keys.push_back(it.key());
    return keys;
  }

  Result<int32_t> convert(const ojson& s, const std::string& path, int depth) {
    if (depth > limits_.max_depth)
      return out_of_range("JSON Schema at " + path + ": nested deeper than " +
                          std::to_string(limits_.max_depth) + " levels");
    if (s.is_boolean()) {
      if (s.get<bool>()) return g_.ref(rules_.value());
      return error(path, "schema 'false' matches nothing");
    }
    if (!s.is_object()) return error(path, "a schema must be an object or a boolean");
    for (auto it = s.begin(); it != s.end(); ++it)
      if (!annotations().count(it.key()) && !supported().count(it.key()))
        return unimplemented("JSON Schema at " + path + ": unsupported keyword '" + it.key() + "'");
    for (const char* defs : {"$defs", "definitions"})
      if (s.contains(defs) && !s[defs].is_object()) return error(path, std::string("'") + defs + "' must be an object");
    const auto keys = constraint_keys(s);
    for (const char* solo : {"$ref", "anyOf", "oneOf", "allOf"}) {
      if (!s.contains(solo)) continue;
      for (const auto& k : keys)
        if (k != solo)
          return unimplemented("JSON Schema at " + path + ": '" + solo + "' combined with '" + k +
                               "' is unsupported");
    }
    if (s.contains("$ref")) return ref_node(s["$ref"], path);
    if (s.contains("allOf")) {
      const auto& all = s["allOf"];
      if (!all.is_array() || all.size() != 1)
        return unimplemented("JSON Schema at " + path + ": 'allOf' is supported with exactly one schema");
      return convert(all[0], path + "/allOf/0", depth + 1);
    }
    for (const char* any : {"anyOf", "oneOf"}) {
      if (!s.contains(any)) continue;
      const auto& list = s[any];
      if (!list.is_array() || list.empty()) return error(path, std::string("'") + any + "' must be a non-empty array");
      std::vector<int32_t> choices;
      for (size_t i = 0; i < list.size(); ++i) {
        DENSA_ASSIGN_OR_RETURN(int32_t c, convert(list[i], path + "/" + any + "/" + std::to_string(i), depth + 1));
        choices.push_back(c);
      }
      return g_.alt(std::move(choices));
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      const auto& t = s["type"];
      if (t.is_string()) types.push_back(t.get<std::string>());
      else if (t.is_array() && !t.empty()) {
        for (const auto& e : t) {
          if (!e.is_string()) return error(path, "'type' entries must be strings");
          types.push_back(e.get<std::string>());
        }
      } else {
        return error(path, "'type' must be a string or a non-empty array of strings");
      }
    }
    if (s.contains("enum") || s.contains("const")) return enum_node(s, types, keys, path);
    if (types.empty()) {
      DENSA_ASSIGN_OR_RETURN(std::string t, infer_type(s, path));
      if (t.empty()) return g_.ref(rules_.value());
      types.push_back(t);
    }
    std::vector<int32_t> choices;
    for (const auto& t : types) {
      DENSA_ASSIGN_OR_RETURN(int32_t c, typed(s, t, path, depth));
      choices.push_back(c);
    }
    return g_.alt(std::move(choices));
  }

  Result<std::string> infer_type(const ojson& s, const std::string& path) {
    std::vector<std::string> found;
    auto any_of = [&](const std::set<std::string>& words, const char* type) {
      for (const auto& w : words)
        if (s.contains(w)) {
          found.push_back(type);
          return;
        }
    };
    any_of(kObjectWords, "object");
    any_of(kArrayWords, "array");
    any_of(kStringWords, "string");
    any_of(kNumberWords, "number");
    if (found.size() > 1)
      return unimplemented("JSON Schema at " + path + ": no 'type' and keywords of both " +
                           found[0] + " and " + found[1]);
    return found.empty() ? std::string() : found[0];
  }

  Result<int32_t> typed(const ojson& s, const std::string& t, const std::string& path, int depth) {
    if (t == "string") return string_node(s, path);
    if (t == "integer") return integer_node(s, path);
    if (t == "number") return number_node(s, path);
    if (t == "boolean") return g_.alt({g_.literal("true"), g_.literal("false")});
    if (t == "null") return g_.literal("null");
    if (t == "object") return object_node(s, path, depth);
    if (t == "array") return array_node(s, path, depth);
    return error(path, "unknown type '" + t + "'");
  }

  Result<int32_t> enum_node(const ojson& s, const std::vector<std::string>& types,
                            const std::vector<std::string>& keys, const std::string& path) {
    for (const auto& k : keys)
      if (k != "enum" && k != "const" && k != "type")
        return unimplemented("JSON Schema at " + path + ": 'enum'/'const' combined with '" + k +
                             "' is unsupported");
    std::vector<ojson> values;
    if (s.contains("const")) values.push_back(s["const"]);
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty()) return error(path, "'enum' must be a non-empty array");
      if (s.contains("const")) return unimplemented("JSON Schema at " + path + ": 'enum' with 'const' is unsupported");
      for (const auto& v : s["enum"]) values.push_back(v);
    }
    std::vector<int32_t> choices;
    for (const auto& v : values) {
      if (!types.empty() && !value_has_type(v, types)) continue;
      std::string text;
      try {
        text = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
      } catch (const std::exception& e) {
        return error(path, std::string("enum value cannot be serialized: ") + e.what());
      }
      choices.push_back(g_.literal(text));
    }
    if (choices.empty()) return error(path, "no 'enum'/'const' value has the schema's 'type'");
    return g_.alt(std::move(choices));
  }

  static bool value_has_type(const ojson& v, const std::vector<std::string>& types) {
    for (const auto& t : types) {
      if ((t == "string" && v.is_string()) || (t == "boolean" && v.is_boolean()) ||
          (t == "null" && v.is_null()) || (t == "object" && v.is_object()) ||
          (t == "array" && v.is_array()) || (t == "number" && v.is_number()) ||
          (t == "integer" && (v.is_number_integer() ||
                              (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>()))))
        return true;
    }
    return false;
  }

  Result<int32_t> ref_node(const ojson& ref, const std::string& path) {
    if (!ref.is_string()) return error(path, "'$ref' must be a string");
    const std::string r = ref.get<std::string>();
    auto it = refs_.find(r);
    if (it != refs_.end()) return g_.ref(it->second);
    if (r.empty() || r[0] != '#')
      return unimplemented("JSON Schema at " + path + ": only local '$ref' (starting with '#') is supported, not '" + r + "'");
    const ojson* target = nullptr;
    try {
      const ojson::json_pointer ptr(r.substr(1));
      if (root_.contains(ptr)) target = &root_.at(ptr);
    } catch (const std::exception& e) {
      return error(path, "bad '$ref' '" + r + "': " + e.what());
    }
    if (!target) return error(path, "'$ref' '" + r + "' points to nothing");
    const int32_t rule = g_.add_rule("ref:" + r);
    refs_.emplace(r, rule);
    DENSA_ASSIGN_OR_RETURN(int32_t body, convert(*target, r, 0));
    g_.define_rule(rule, body);
    return g_.ref(rule);
  }

  Result<int64_t> count_keyword(const ojson& s, const char* key, const std::string& path, int64_t fallback) {
    if (!s.contains(key)) return fallback;
    const auto& v = s[key];
    if (!v.is_number_integer() && !(v.is_number_float() && std::floor(v.get<double>()) == v.get<double>()))
      return error(path, std::string("'") + key + "' must be a non-negative integer");
    const double d = v.get<double>();
    if (d < 0) return error(path, std::string("'") + key + "' must be a non-negative integer");
    if (d > 100000) return out_of_range("JSON Schema at " + path + ": '" + key + "' over 100000 is unsupported");
    return static_cast<int64_t>(d);
  }

  Result<int32_t> string_node(const ojson& s, const std::string& path) {
    const bool has_len = s.contains("minLength") || s.contains("maxLength");
    if (s.contains("pattern")) {
      if (has_len)
        return unimplemented("JSON Schema at " + path + ": 'pattern' with 'minLength'/'maxLength' is unsupported");
      if (!s["pattern"].is_string()) return error(path, "'pattern' must be a string");
      DENSA_ASSIGN_OR_RETURN(RegexNode re, parse_regex_into(s["pattern"].get<std::string>(), g_,
                                                            RegexEncoding::kJsonString));
      std::vector<int32_t> parts = {g_.byte('"')};
      if (!re.anchored_start) parts.push_back(g_.star(json_string_char(g_)));
      parts.push_back(re.node);
      if (!re.anchored_end) parts.push_back(g_.star(json_string_char(g_)));
      parts.push_back(g_.byte('"'));
      return g_.seq(std::move(parts));
    }
    if (!has_len) return g_.ref(rules_.string());
    DENSA_ASSIGN_OR_RETURN(int64_t lo, count_keyword(s, "minLength", path, 0));
    DENSA_ASSIGN_OR_RETURN(int64_t hi, count_keyword(s, "maxLength", path, -1));
    if (hi >= 0 && hi < lo) return error(path, "'maxLength' below 'minLength'");
    return g_.seq({g_.byte('"'),
                   g_.repeat(json_string_char(g_), static_cast<int32_t>(lo),
                             hi < 0 ? kUnbounded : static_cast<int32_t>(hi)),
                   g_.byte('"')});
  }

  Result<int32_t> integer_node(const ojson& s, const std::string& path) {
    int64_t lo = -kIntegerLimit, hi = kIntegerLimit;
    bool bounded = false;
    for (const auto& w : kNumberWords) {
      if (!s.contains(w)) continue;
      if (!s[w].is_number()) return error(path, "'" + w + "' must be a number");
      const double d = s[w].get<double>();
      bounded = true;
      const double clamped = std::max(-1e18, std::min(1e18, d));
      if (w == "minimum") lo = std::max(lo, static_cast<int64_t>(std::ceil(clamped)));
      if (w == "exclusiveMinimum") lo = std::max(lo, static_cast<int64_t>(std::floor(clamped)) + 1);
      if (w == "maximum") hi = std::min(hi, static_cast<int64_t>(std::floor(clamped)));
      if (w == "exclusiveMaximum") hi = std::min(hi, static_cast<int64_t>(std::ceil(clamped)) - 1);
    }
    if (!bounded) return g_.ref(rules_.integer());
    lo = std::max(lo, -kIntegerLimit);
    hi = std::min(hi, kIntegerLimit);
    if (lo > hi) return error(path, "no integer within the schema's bounds (of magnitude under 1e18)");
    return integer_range(g_, lo, hi);
  }

  // Numbers with inclusive integer bounds become decimals (no exponent) in the range.
  Result<int32_t> number_node(const ojson& s, const std::string& path) {
    int64_t lo = -kIntegerLimit, hi = kIntegerLimit;
    bool bounded = false;
    for (const auto& w : kNumberWords) {
      if (!s.contains(w)) continue;
      if (w == "exclusiveMinimum" || w == "exclusiveMaximum")
        return unimplemented("JSON Schema at " + path + ": '" + w +
                             "' on type 'number' is unsupported (use minimum/maximum, or 'integer')");
      if (!s[w].is_number()) return error(path, "'" + w + "' must be a number");
      const double d = s[w].get<double>();
      if (std::floor(d) != d)
        return unimplemented("JSON Schema at " + path + ": '" + w + "' " + s[w].dump() +
                             " on type 'number': only integer bounds are supported");
      const auto v = static_cast<int64_t>(std::max(-1e18, std::min(1e18, d)));
      if (w == "minimum") lo = std::max(lo, v);
      else hi = std::min(hi, v);
      bounded = true;
    }
    if (!bounded) return g_.ref(rules_.number());
    lo = std::max(lo, -kIntegerLimit);
    hi = std::min(hi, kIntegerLimit);
    if (lo > hi) return error(path, "no number within the schema's bounds");
    return decimal_range(g_, lo, hi);
  }

  Result<int32_t> object_node(const ojson& s, const std::string& path, int depth);
  Result<int32_t> array_node(const ojson& s, const std::string& path, int depth);
  // A rule holding a sub-schema (so shared continuations do not copy it).
  Result<int32_t> sub_rule(const ojson& s, const std::string& path, int depth) {
    const int32_t rule = g_.add_rule(path);
    DENSA_ASSIGN_OR_RETURN(int32_t body, convert(s, path, depth));
    g_.define_rule(rule, body);
    return rule;
  }

  Grammar g_;
  const ojson& root_;
  const JsonSchemaLimits& limits_;
  JsonValueRules rules_;
  std::map<std::string, int32_t> refs_;
};

Result<int32_t> Converter::object_node(const ojson& s, const std::string& path, int depth) {
  struct Prop {
    std::string key;  // serialized, quotes included
    int32_t value_rule;
    bool required;
  };
  std::vector<Prop> props;
  std::vector<std::string> names;
  if (s.contains("properties")) {
    if (!s["properties"].is_object()) return error(path, "'properties' must be an object");
    for (auto it = s["properties"].begin(); it != s["properties"].end(); ++it) {
      DENSA_ASSIGN_OR_RETURN(int32_t r, sub_rule(it.value(), path + "/properties/" + it.key(), depth + 1));
      props.push_back(Prop{ojson(it.key()).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), r, false});
      names.push_back(it.key());
    }
  }
  if (s.contains("required")) {
    if (!s["required"].is_array()) return error(path, "'required' must be an array");
    for (const auto& r : s["required"]) {
      if (!r.is_string()) return error(path, "'required' entries must be strings");
      bool found = false;
      for (size_t i = 0; i < names.size(); ++i)
        if (names[i] == r.get<std::string>()) props[i].required = found = true;
      if (!found)
        return unimplemented("JSON Schema at " + path + ": required property '" + r.get<std::string>() +
                             "' is not in 'properties'");
    }
  }
  // additionalProperties: absent means none when properties are listed (output stays valid,
  // as in OpenAI strict mode), any otherwise.
  int32_t extra_value = -1;
  if (s.contains("additionalProperties")) {
    const auto& a = s["additionalProperties"];
    if (!(a.is_boolean() && !a.get<bool>())) {
      DENSA_ASSIGN_OR_RETURN(extra_value, sub_rule(a, path + "/additionalProperties", depth + 1));
    }
  } else if (props.empty()) {
    extra_value = rules_.value();
  }
  const int32_t close = g_.byte('}');
  auto kv = [&](int32_t key, int32_t value_rule) {
    return g_.seq({key, g_.byte(':'), rules_.ws(), g_.ref(value_rule)});
  };
  const size_t n = props.size();
  std::vector<int32_t> first(n + 1), rest(n + 1);
  for (size_t i = 0; i <= n; ++i) {
    first[i] = g_.add_rule(path + "#first" + std::to_string(i));
    rest[i] = g_.add_rule(path + "#rest" + std::to_string(i));
  }
  if (extra_value >= 0) {
    const int32_t key = g_.seq({g_.byte('"'), g_.ref(rules_.key_not_in(names))});
    g_.define_rule(rest[n], g_.alt({g_.seq({rules_.comma(), kv(key, extra_value), g_.ref(rest[n])}), close}));
    g_.define_rule(first[n], g_.alt({g_.seq({kv(key, extra_value), g_.ref(rest[n])}), close}));
  } else {
    g_.define_rule(rest[n], close);
    g_.define_rule(first[n], close);
  }
  for (size_t i = n; i-- > 0;) {
    const int32_t key = g_.literal(props[i].key);
    std::vector<int32_t> r = {g_.seq({rules_.comma(), kv(key, props[i].value_rule), g_.ref(rest[i + 1])})};
    std::vector<int32_t> f = {g_.seq({kv(key, props[i].value_rule), g_.ref(rest[i + 1])})};
    if (!props[i].required) {
      r.push_back(g_.ref(rest[i + 1]));
      f.push_back(g_.ref(first[i + 1]));
    }
    g_.define_rule(rest[i], g_.alt(std::move(r)));
    g_.define_rule(first[i], g_.alt(std::move(f)));
  }
  return g_.seq({g_.byte('{'), g_.ref(first[0])});
}

Result<int32_t> Converter::array_node(const ojson& s, const std::string& path, int depth) {
  std::vector<int32_t> prefix;
  if (s.contains("prefixItems")) {
    if (!s["prefixItems"].is_array()) return error(path, "'prefixItems' must be an array");
    for (size_t i = 0; i < s["prefixItems"].size(); ++i) {
      DENSA_ASSIGN_OR_RETURN(int32_t r, sub_rule(s["prefixItems"][i], path + "/prefixItems/" + std::to_string(i), depth + 1));
      prefix.push_back(r);
    }
  }
  int32_t item = -1;  // -1: no items past the prefix
  if (!s.contains("items")) {
    item = rules_.value();
  } else if (!(s["items"].is_boolean() && !s["items"].get<bool>())) {
    DENSA_ASSIGN_OR_RETURN(item, sub_rule(s["items"], path + "/items", depth + 1));
  }
  DENSA_ASSIGN_OR_RETURN(int64_t min, count_keyword(s, "minItems", path, 0));
  DENSA_ASSIGN_OR_RETURN(int64_t max, count_keyword(s, "maxItems", path, -1));
  const int64_t p = static_cast<int64_t>(prefix.size());
  if (item < 0 && (max < 0 || max > p)) max = p;
  if (max >= 0 && max < min) return error(path, "no array length satisfies minItems/maxItems/items");
  auto elem = [&](int64_t i) { return i < p ? prefix[i] : item; };
  // after[i]: what may follow i >= 1 elements. Past cap every state is alike, so an unbounded
  // array loops on after[cap].
  const int64_t cap = std::max(p, min) + 1;
  const int64_t last = max < 0 ? cap : max;
  std::vector<int32_t> after(static_cast<size_t>(last + 1), -1);
  for (int64_t i = 1; i <= last; ++i) after[i] = g_.add_rule(path + "#after" + std::to_string(i));
  for (int64_t i = 1; i <= last; ++i) {
    std::vector<int32_t> choices;
    if (i >= min) choices.push_back(g_.byte(']'));
    if (max < 0 || i < max) {
      const int32_t next = (max < 0 && i == cap) ? after[cap] : after[i + 1];
      choices.push_back(g_.seq({rules_.comma(), g_.ref(elem(i)), g_.ref(next)}));
    }
    g_.define_rule(after[i], g_.alt(std::move(choices)));
  }
  std::vector<int32_t> start;
  if (min == 0) start.push_back(g_.byte(']'));
  if (max != 0) start.push_back(g_.seq({g_.ref(elem(0)), g_.ref(after[1])}));
  return g_.seq({g_.byte('['), g_.alt(std::move(start))});
}

}  // namespace

Result<Grammar> grammar_from_json_schema(std::string_view schema_text, const JsonSchemaLimits& limits) {
  if (schema_text.size() > limits.max_source_bytes)
    return out_of_range("JSON Schema too large: " + std::to_string(schema_text.size()) +
                        " bytes (limit " + std::to_string(limits.max_source_bytes) + ")");
  ojson schema;
  try {
    schema = ojson::parse(schema_text);
  } catch (const std::exception& e) {
    return invalid_argument(std::string("JSON Schema is not valid JSON: ") + e.what());
  }
  Converter c(schema, limits);
  return c.run();
}

Result<Grammar> grammar_from_json_schema_value(const nlohmann::json& schema, const JsonSchemaLimits& limits) {
  const std::string text = schema.dump();
  return grammar_from_json_schema(std::string_view(text), limits);
}

Grammar grammar_json_object() {
  Grammar g;
  JsonValueRules rules(g);
  const int32_t root = g.add_rule("root");
  g.define_rule(root, g.ref(rules.object()));
  g.set_root(root);
  return g;
}

Grammar grammar_json_value() {
  Grammar g;
  JsonValueRules rules(g);
  const int32_t root = g.add_rule("root");
  g.define_rule(root, g.ref(rules.value()));
  g.set_root(root);
  return g;
}

}  // namespace densa::grammar
