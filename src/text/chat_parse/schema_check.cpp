// validate_arguments: the final check of a parsed call against its tool's JSON schema subset.
#include <cmath>
#include <set>

#include "text/chat_parse/chat_parse.h"

namespace densa::toolparse {

namespace {
using nlohmann::json;

const std::set<std::string>& annotation_keywords() {
  static const std::set<std::string> k = {"title", "description", "default", "examples", "format",
                                          "$schema", "$id", "$comment", "deprecated", "readOnly",
                                          "writeOnly"};
  return k;
}

const std::set<std::string>& checked_keywords() {
  static const std::set<std::string> k = {
      "type", "properties", "required", "additionalProperties", "items", "enum", "const",
      "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength",
      "minItems", "maxItems", "anyOf", "oneOf", "allOf"};
  return k;
}

std::string at(const std::string& path) { return path.empty() ? "/" : path; }

bool has_type(const json& v, const std::string& t) {
  if (t == "string") return v.is_string();
  if (t == "number") return v.is_number();
  if (t == "integer") {
    if (v.is_number_integer() || v.is_number_unsigned()) return true;
    return v.is_number_float() && std::isfinite(v.get<double>()) && std::floor(v.get<double>()) == v.get<double>();
  }
  if (t == "boolean") return v.is_boolean();
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "null") return v.is_null();
  return false;
}

size_t utf8_length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

Status check(const json& v, const json& schema, const std::string& path);

Status check_type(const json& v, const json& type, const std::string& path) {
  static const std::set<std::string> kTypes = {"string", "number", "integer", "boolean", "object", "array", "null"};
  const json types = type.is_array() ? type : json::array({type});
  for (const auto& t : types) {
    if (!t.is_string() || !kTypes.count(t.get<std::string>())) {
      return invalid_argument("schema at " + at(path) + ": bad \"type\" " + type.dump());
    }
    if (has_type(v, t.get<std::string>())) return Status::ok();
  }
  return invalid_argument(at(path) + ": expected type " + type.dump() + ", got " + v.dump());
}

Status check_object(const json& v, const json& schema, const std::string& path) {
  const json props = schema.value("properties", json::object());
  if (!props.is_object()) return invalid_argument("schema at " + at(path) + ": \"properties\" is not an object");
  if (const auto req = schema.find("required"); req != schema.end()) {
    if (!req->is_array()) return invalid_argument("schema at " + at(path) + ": \"required\" is not an array");
    for (const auto& k : *req) {
      if (!k.is_string()) return invalid_argument("schema at " + at(path) + ": \"required\" holds a non-string");
      if (!v.contains(k.get<std::string>())) {
        return invalid_argument(at(path) + ": missing required property \"" + k.get<std::string>() + "\"");
      }
    }
  }
  const json extra = schema.value("additionalProperties", json(true));
  for (const auto& [key, value] : v.items()) {
    const std::string sub = path + "/" + key;
    if (const auto p = props.find(key); p != props.end()) {
      DENSA_RETURN_IF_ERROR(check(value, *p, sub));
    } else if (extra.is_boolean()) {
      if (!extra.get<bool>()) return invalid_argument(at(path) + ": property \"" + key + "\" is not allowed");
    } else {
      DENSA_RETURN_IF_ERROR(check(value, extra, sub));
    }
  }
  return Status::ok();
}

Status check_bounds(const json& v, const json& schema, const std::string& path) {
  auto num = [&](const char* k, double* out) {
    const auto it = schema.find(k);
    if (it == schema.end()) return false;
    *out = it->get<double>();
    return true;
  };
  double b = 0;
  if (v.is_number()) {
    const double x = v.get<double>();
    if (num("minimum", &b) && x < b) return invalid_argument(at(path) + ": " + v.dump() + " is below minimum " + schema["minimum"].dump());
    if (num("maximum", &b) && x > b) return invalid_argument(at(path) + ": " + v.dump() + " is above maximum " + schema["maximum"].dump());
    if (num("exclusiveMinimum", &b) && x <= b) return invalid_argument(at(path) + ": " + v.dump() + " is not above exclusiveMinimum " + schema["exclusiveMinimum"].dump());
    if (num("exclusiveMaximum", &b) && x >= b) return invalid_argument(at(path) + ": " + v.dump() + " is not below exclusiveMaximum " + schema["exclusiveMaximum"].dump());
  }
  if (v.is_string()) {
    const double n = static_cast<double>(utf8_length(v.get<std::string>()));
    if (num("minLength", &b) && n < b) return invalid_argument(at(path) + ": string shorter than minLength " + schema["minLength"].dump());
    if (num("maxLength", &b) && n > b) return invalid_argument(at(path) + ": string longer than maxLength " + schema["maxLength"].dump());
  }
  if (v.is_array()) {
    const double n = static_cast<double>(v.size());
    if (num("minItems", &b) && n < b) return invalid_argument(at(path) + ": fewer items than minItems " + schema["minItems"].dump());
    if (num("maxItems", &b) && n > b) return invalid_argument(at(path) + ": more items than maxItems " + schema["maxItems"].dump());
  }
  return Status::ok();
}

Status check_combinators(const json& v, const json& schema, const std::string& path) {
  for (const char* k : {"anyOf", "oneOf", "allOf"}) {
    const auto it = schema.find(k);
    if (it == schema.end()) continue;
    if (!it->is_array() || it->empty()) return invalid_argument("schema at " + at(path) + ": \"" + k + "\" is not a non-empty array");
    size_t passed = 0;
    std::string first_error;
    for (const auto& sub : *it) {
      const Status s = check(v, sub, path);
      if (s.code() == StatusCode::kUnimplemented) return s;
      if (s.is_ok()) ++passed;
      else if (first_error.empty()) first_error = s.message();
    }
    const std::string name = k;
    if (name == "allOf" && passed != it->size()) return invalid_argument(first_error);
    if (name == "anyOf" && passed == 0) return invalid_argument(at(path) + ": matches none of anyOf (" + first_error + ")");
    if (name == "oneOf" && passed != 1) {
      return invalid_argument(at(path) + ": matches " + std::to_string(passed) + " of oneOf, not exactly one");
    }
  }
  return Status::ok();
}

Status check(const json& v, const json& schema, const std::string& path) {
  if (schema.is_boolean()) {
    return schema.get<bool>() ? Status::ok() : invalid_argument(at(path) + ": no value is allowed here (schema false)");
  }
  if (!schema.is_object()) return invalid_argument("schema at " + at(path) + " is not an object");
  for (const auto& [key, _] : schema.items()) {
    if (!checked_keywords().count(key) && !annotation_keywords().count(key)) {
      return unimplemented("schema keyword \"" + key + "\" at " + at(path) + " is not supported by the argument check");
    }
  }
  for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "minItems", "maxItems"}) {
    if (schema.contains(k) && !schema[k].is_number()) return invalid_argument("schema at " + at(path) + ": \"" + k + "\" is not a number");
  }
  if (const auto t = schema.find("type"); t != schema.end()) DENSA_RETURN_IF_ERROR(check_type(v, *t, path));
  if (const auto e = schema.find("enum"); e != schema.end()) {
    if (!e->is_array()) return invalid_argument("schema at " + at(path) + ": \"enum\" is not an array");
    bool found = false;
    for (const auto& x : *e) found = found || x == v;
    if (!found) return invalid_argument(at(path) + ": " + v.dump() + " is not one of " + e->dump());
  }
  if (const auto c = schema.find("const"); c != schema.end() && *c != v) {
    return invalid_argument(at(path) + ": " + v.dump() + " is not the constant " + c->dump());
  }
  if (v.is_object()) DENSA_RETURN_IF_ERROR(check_object(v, schema, path));
  if (v.is_array()) {
    if (const auto items = schema.find("items"); items != schema.end()) {
      for (size_t i = 0; i < v.size(); ++i) DENSA_RETURN_IF_ERROR(check(v[i], *items, path + "/" + std::to_string(i)));
    }
  }
  DENSA_RETURN_IF_ERROR(check_bounds(v, schema, path));
  return check_combinators(v, schema, path);
}
}  // namespace

Status validate_arguments(const json& arguments, const json& schema) { return check(arguments, schema, ""); }

Status validate_tool_call(const ToolCall& call, const ToolSet& tools) {
  const json* params = tools.parameters(call.name);
  if (!params) return invalid_argument("tool call " + call.id + ": unknown tool '" + call.name + "'");
  const json args = json::parse(call.arguments, nullptr, false);
  if (args.is_discarded()) return invalid_argument("tool call " + call.id + " (" + call.name + "): arguments are not valid JSON");
  if (!args.is_object()) return invalid_argument("tool call " + call.id + " (" + call.name + "): arguments are not a JSON object");
  const Status s = validate_arguments(args, *params);
  if (s.is_ok()) return s;
  return Status(s.code(), "tool call " + call.id + " (" + call.name + "): " + s.message());
}

}  // namespace densa::toolparse
