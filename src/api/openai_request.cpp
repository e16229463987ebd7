#include "api/openai_request.h"

#include <algorithm>

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

namespace densa::api {
namespace {

using nlohmann::json;

// Collects the first error; every reader returns false once it has recorded one.
struct Reader {
  const json& body;
  RequestError& error;
  const nlohmann::ordered_json* ordered = nullptr;  // the same body with its key order (chat)

  bool fail(const std::string& param, const std::string& message) {
    error.status = invalid_argument(message);
    error.param = param;
    return false;
  }
  // Present and not null.
  const json* field(const char* name) const {
    auto it = body.find(name);
    if (it == body.end() || it->is_null()) return nullptr;
    return &*it;
  }
  bool read_bool(const char* name, bool& out) {
    const json* v = field(name);
    if (!v) return true;
    if (!v->is_boolean()) return fail(name, std::string("'") + name + "' must be a boolean");
    out = v->get<bool>();
    return true;
  }
  // An integer in [lo, hi]: a JSON integer, or a float with an integral value (1.0).
  bool read_int(const char* name, int64_t lo, int64_t hi, std::optional<int64_t>& out) {
    const json* v = field(name);
    if (!v) return true;
    const auto out_of_range = [&] {
      return fail(name, std::string("'") + name + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi));
    };
    int64_t value = 0;
    if (v->is_number_unsigned()) {
      if (v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return out_of_range();
      value = static_cast<int64_t>(v->get<uint64_t>());
    } else if (v->is_number_integer()) {
      value = v->get<int64_t>();
    } else if (v->is_number_float() && std::floor(v->get<double>()) == v->get<double>()) {
      // Range first: converting a double outside int64's range (2^63 and up) is undefined.
      const double d = v->get<double>();
      if (!(d >= -0x1p63 && d < 0x1p63)) return out_of_range();
      value = static_cast<int64_t>(d);
    } else {
      return fail(name, std::string("'") + name + "' must be an integer");
    }
    if (value < lo || value > hi) return out_of_range();
    out = value;
    return true;
  }
  bool read_float(const char* name, double lo, double hi, float& out) {
    const json* v = field(name);
    if (!v) return true;
    if (!v->is_number()) return fail(name, std::string("'") + name + "' must be a number");
    const double d = v->get<double>();
    if (!(d >= lo && d <= hi))
      return fail(name, std::string("'") + name + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi));
    out = static_cast<float>(d);
    return true;
  }
};

bool is_token_array(const json& v) {
  if (!v.is_array() || v.empty()) return false;
  for (const json& t : v)
    if (!t.is_number_integer()) return false;
  return true;
}

bool read_token_ids(Reader& r, const json& v, PromptInput& out) {
  for (const json& t : v) {
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id > std::numeric_limits<int32_t>::max()) return r.fail("prompt", "token ids in 'prompt' must be non-negative");
    out.ids.push_back(static_cast<TokenId>(id));
  }
  out.is_ids = true;
  return true;
}

// prompt: "text" | [ids] | ["text", ...] | [[ids], ...]
bool read_prompts(Reader& r, OpenAiRequest& req) {
  const json* p = r.field("prompt");
  if (!p) return r.fail("prompt", "'prompt' is required");
  if (p->is_string()) {
    req.prompts.push_back({p->get<std::string>(), {}, false});
    return true;
  }
  if (!p->is_array() || p->empty())
    return r.fail("prompt", "'prompt' must be a string, an array of token ids, or a non-empty array of those");
  if (is_token_array(*p)) {
    req.prompts.emplace_back();
    return read_token_ids(r, *p, req.prompts.back());
  }
  for (const json& item : *p) {
    if (item.is_string()) {
      req.prompts.push_back({item.get<std::string>(), {}, false});
    } else if (is_token_array(item)) {
      req.prompts.emplace_back();
      if (!read_token_ids(r, item, req.prompts.back())) return false;
    } else {
      return r.fail("prompt", "each item of 'prompt' must be a string or a non-empty array of token ids");
    }
  }
  return true;
}

// content: "text" | [{"type":"text","text":...}, ...] | null (assistant turns)
bool read_messages(Reader& r, OpenAiRequest& req) {
  const json* m = r.field("messages");
  if (!m) return r.fail("messages", "'messages' is required");
  if (!m->is_array() || m->empty()) return r.fail("messages", "'messages' must be a non-empty array");
  for (size_t index = 0; index < m->size(); ++index) {
    const json& msg = (*m)[index];
    if (!msg.is_object()) return r.fail("messages", "each message must be an object");
    auto role = msg.find("role");
    if (role == msg.end() || !role->is_string()) return r.fail("messages", "each message needs a string 'role'");
    ChatMessage out{role->get<std::string>(), "", (*r.ordered)["messages"][index]};
    for (const auto& [key, value] : msg.items()) {
      if (key != "role" && key != "content" && key != "name" && key != "tool_calls" && key != "tool_call_id" &&
          key != "reasoning_content" && key != "reasoning")
        return r.fail("messages", "message field '" + key + "' is not supported");
    }
    if (auto tc = msg.find("tool_calls"); tc != msg.end() && !tc->is_null()) {
      if (out.role != "assistant") return r.fail("messages", "only assistant messages carry 'tool_calls'");
      if (!tc->is_array()) return r.fail("messages", "'tool_calls' must be an array");
      for (const json& call : *tc) {
        const json* fn = call.is_object() && call.contains("function") ? &call["function"] : nullptr;
        if (fn == nullptr || !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string())
          return r.fail("messages", "each tool call needs 'function' with a string 'name'");
        if (fn->contains("arguments") && !(*fn)["arguments"].is_string() && !(*fn)["arguments"].is_object())
          return r.fail("messages", "tool call 'function.arguments' must be a JSON string");
      }
    }
    if (out.role != "system" && out.role != "user" && out.role != "assistant" && out.role != "tool" &&
        out.role != "developer")
      return r.fail("messages", "unknown message role '" + out.role + "'");
    auto content = msg.find("content");
    if (content == msg.end() || content->is_null()) {
      if (out.role != "assistant") return r.fail("messages", "message 'content' is required");
      out.raw["content"] = nullptr;
    } else if (content->is_string()) {
      out.content = content->get<std::string>();
    } else if (content->is_array()) {
      for (const json& part : *content) {
        auto type = part.is_object() ? part.find("type") : part.end();
        auto text = part.is_object() ? part.find("text") : part.end();
        if (type == part.end() || *type != "text" || text == part.end() || !text->is_string())
          return r.fail("messages", "only text content parts ({\"type\":\"text\",\"text\":...}) are supported");
        out.content += text->get<std::string>();
      }
    } else {
      return r.fail("messages", "message 'content' must be a string or an array of text parts");
    }
    req.messages.push_back(std::move(out));
  }
  return true;
}

bool read_stop(Reader& r, OpenAiRequest& req) {
  const json* s = r.field("stop");
  if (!s) return true;
  const auto too_long = [&r](const std::string& stop) {
    if (stop.size() <= kMaxStopStringBytes) return false;
    r.fail("stop", "a 'stop' string holds at most " + std::to_string(kMaxStopStringBytes) + " bytes, not " +
                       std::to_string(stop.size()));
    return true;
  };
  if (s->is_string()) {
    if (too_long(s->get<std::string>())) return false;
    if (!s->get<std::string>().empty()) req.stop.push_back(s->get<std::string>());
    return true;
  }
  if (!s->is_array()) return r.fail("stop", "'stop' must be a string or an array of strings");
  if (s->size() > static_cast<size_t>(kMaxStopStrings))
    return r.fail("stop", "'stop' holds at most " + std::to_string(kMaxStopStrings) + " strings");
  for (const json& item : *s) {
    if (!item.is_string()) return r.fail("stop", "'stop' must be a string or an array of strings");
    if (too_long(item.get<std::string>())) return false;
    if (!item.get<std::string>().empty()) req.stop.push_back(item.get<std::string>());
  }
  return true;
}

bool read_logprobs(Reader& r, OpenAiRequest& req) {
  std::optional<int64_t> top;
  if (req.kind == ApiKind::kCompletion) {
    // Completions: "logprobs": N alternatives per token (0..20).
    if (!r.read_int("logprobs", 0, kMaxTopLogprobs, top)) return false;
    if (top) req.num_top_logprobs = static_cast<int>(*top);
    return true;
  }
  // Chat: "logprobs": bool, "top_logprobs": 0..20 (needs logprobs true).
  bool logprobs = false;
  if (!r.read_bool("logprobs", logprobs)) return false;
  if (!r.read_int("top_logprobs", 0, kMaxTopLogprobs, top)) return false;
  if (top && !logprobs) return r.fail("top_logprobs", "'top_logprobs' requires 'logprobs': true");
  if (logprobs) req.num_top_logprobs = top ? static_cast<int>(*top) : 0;
  return true;
}

// Fields accepted only at the value that changes nothing; any other value is refused by name.
bool read_default_only(Reader& r) {
  struct DefaultOnly {
    const char* name;
    json value;
  };
  const DefaultOnly fields[] = {{"presence_penalty", 0}, {"frequency_penalty", 0}, {"best_of", 1},
                                {"logit_bias", json::object()}, {"suffix", ""}, {"logprobs_mode", nullptr}};
  for (const DefaultOnly& f : fields) {
    const json* v = r.field(f.name);
    if (v == nullptr) continue;
    const bool is_default = v->is_number() && f.value.is_number() ? v->get<double>() == f.value.get<double>()
                                                                 : *v == f.value;
    if (!is_default)
      return r.fail(f.name, std::string("'") + f.name + "' is not supported (only " + f.value.dump() + ")");
  }
  return true;
}

bool read_tools(Reader& r, OpenAiRequest& req) {
  if (const json* t = r.field("tools")) {
    if (!t->is_array()) return r.fail("tools", "'tools' must be an array");
    for (const json& tool : *t) {
      if (!tool.is_object() || tool.value("type", "") != "function" || !tool.contains("function") ||
          !tool["function"].is_object())
        return r.fail("tools", "each tool must be {\"type\": \"function\", \"function\": {...}}");
      const json& fn = tool["function"];
      if (!fn.contains("name") || !fn["name"].is_string() || fn["name"].get<std::string>().empty())
        return r.fail("tools", "each tool function needs a non-empty string 'name'");
      if (fn.contains("parameters") && !fn["parameters"].is_object() && !fn["parameters"].is_null())
        return r.fail("tools", "tool function 'parameters' must be a JSON Schema object");
      for (const auto& [key, value] : fn.items())
        if (key != "name" && key != "description" && key != "parameters" && key != "strict")
          return r.fail("tools", "tool function field '" + key + "' is not supported");
    }
    req.tools = (*r.ordered)["tools"];
  }
  if (const json* c = r.field("tool_choice")) {
    if (c->is_string()) {
      const std::string s = c->get<std::string>();
      if (s == "auto") req.tool_choice = ToolChoiceKind::kAuto;
      else if (s == "none") req.tool_choice = ToolChoiceKind::kNone;
      else if (s == "required") req.tool_choice = ToolChoiceKind::kRequired;
      else return r.fail("tool_choice", "'tool_choice' must be none, auto, required or a named function");
    } else if (c->is_object() && c->value("type", "") == "function" && c->contains("function") &&
               (*c)["function"].is_object() && (*c)["function"].contains("name") &&
               (*c)["function"]["name"].is_string()) {
      req.tool_choice = ToolChoiceKind::kNamed;
      req.tool_choice_name = (*c)["function"]["name"].get<std::string>();
      bool found = false;
      for (const nlohmann::ordered_json& tool : req.tools) found = found || tool["function"]["name"] == req.tool_choice_name;
      if (!found) return r.fail("tool_choice", "'tool_choice' names '" + req.tool_choice_name + "', which is not in 'tools'");
    } else {
      return r.fail("tool_choice", "'tool_choice' must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
    if (req.tools.empty() && req.tool_choice != ToolChoiceKind::kNone)
      return r.fail("tool_choice", "'tool_choice' needs 'tools'");
  }
  return r.read_bool("parallel_tool_calls", req.parallel_tool_calls);
}

bool read_response_format(Reader& r, OpenAiRequest& req) {
  const json* f = r.field("response_format");
  if (!f) return true;
  if (!f->is_object() || !f->contains("type") || !(*f)["type"].is_string())
    return r.fail("response_format", "'response_format' must be an object with a string 'type'");
  const std::string type = (*f)["type"].get<std::string>();
  ResponseFormat& out = req.response_format;
  auto only = [&](std::initializer_list<const char*> keys) {
    for (const auto& [key, value] : f->items()) {
      bool known = false;
      for (const char* k : keys) known = known || key == k;
      if (!known) return r.fail("response_format", "'response_format' field '" + key + "' is not supported for type '" + type + "'");
    }
    return true;
  };
  if (type == "text") {
    out.kind = ResponseFormatKind::kText;
    return only({"type"});
  }
  if (type == "json_object") {
    out.kind = ResponseFormatKind::kJsonObject;
    return only({"type"});
  }
  if (type == "json_schema") {
    if (!only({"type", "json_schema"})) return false;
    const json* js = f->contains("json_schema") ? &(*f)["json_schema"] : nullptr;
    if (js == nullptr || !js->is_object() || !js->contains("schema") || !(*js)["schema"].is_object())
      return r.fail("response_format", "'response_format.json_schema' must be an object with a 'schema' object");
    for (const auto& [key, value] : js->items())
      if (key != "name" && key != "schema" && key != "strict" && key != "description")
        return r.fail("response_format", "'response_format.json_schema' field '" + key + "' is not supported");
    out.kind = ResponseFormatKind::kJsonSchema;
    out.schema = (*r.ordered)["response_format"]["json_schema"]["schema"];
    if (js->contains("name") && (*js)["name"].is_string()) out.name = (*js)["name"].get<std::string>();
    if (js->contains("strict")) {
      if (!(*js)["strict"].is_boolean()) return r.fail("response_format", "'response_format.json_schema.strict' must be a boolean");
      out.strict = (*js)["strict"].get<bool>();
    }
    return true;
  }
  // densa extensions, named as vLLM's guided decoding names them.
  if (type == "regex" || type == "ebnf" || type == "grammar") {
    const char* key = type == "regex" ? "regex" : type == "ebnf" ? "ebnf" : "grammar";
    if (!only({"type", key})) return false;
    if (!f->contains(key) || !(*f)[key].is_string() || (*f)[key].get<std::string>().empty())
      return r.fail("response_format", std::string("'response_format.") + key + "' must be a non-empty string");
    out.kind = type == "regex" ? ResponseFormatKind::kRegex : ResponseFormatKind::kEbnf;
    out.grammar = (*f)[key].get<std::string>();
    return true;
  }
  return r.fail("response_format", "'response_format.type' '" + type +
                                       "' is not supported (text, json_object, json_schema, regex, ebnf)");
}

// Every top-level field densa reads, per endpoint; anything else is refused unless ignored.
bool check_known_fields(Reader& r, ApiKind kind) {
  static const char* const kCommon[] = {
      "model", "max_tokens", "temperature", "top_p", "min_p", "top_k", "seed", "n", "stop", "logprobs",
      "stream", "stream_options", "ignore_eos", "densa_timing", "densa_kv_integrity", "densa_inject_fault", "presence_penalty",
      "frequency_penalty", "logit_bias", "skip_special_tokens", "logprobs_mode", "cache_salt", "max_completion_tokens"};
  static const char* const kCompletionOnly[] = {"prompt", "echo", "best_of", "suffix"};
  static const char* const kChatOnly[] = {"messages", "top_logprobs", "tools",
                                          "tool_choice", "parallel_tool_calls", "response_format",
                                          "chat_template_kwargs", "add_generation_prompt"};
  for (const auto& [key, value] : r.body.items()) {
    bool known = false;
    for (const char* k : kCommon) known = known || key == k;
    for (const char* k : kIgnoredFields) known = known || key == k;
    if (kind == ApiKind::kCompletion)
      for (const char* k : kCompletionOnly) known = known || key == k;
    else
      for (const char* k : kChatOnly) known = known || key == k;
    if (!known) {
      const char* where = kind == ApiKind::kChat ? "/v1/chat/completions" : "/v1/completions";
      return r.fail(key, "'" + key + "' is not supported by densa on " + where);
    }
  }
  return true;
}

bool read_fields(Reader& r, OpenAiRequest& req) {
  if (!check_known_fields(r, req.kind)) return false;
  if (!read_default_only(r)) return false;
  if (const json* m = r.field("model")) {
    if (!m->is_string()) return r.fail("model", "'model' must be a string");
    req.model = m->get<std::string>();
  }
  if (req.kind == ApiKind::kCompletion ? !read_prompts(r, req) : !read_messages(r, req)) return false;

  std::optional<int64_t> v;
  constexpr int64_t kIntMax = std::numeric_limits<int32_t>::max();
  for (const char* name : {"max_tokens", "max_completion_tokens"}) {
    v.reset();
    if (!r.read_int(name, std::numeric_limits<int64_t>::min() / 2, kIntMax, v)) return false;
    if (v && *v < 1) return r.fail(name, std::string("'") + name + "' must be at least 1");
    if (v) req.max_tokens = static_cast<int>(*v);
  }
  if (!r.read_float("temperature", 0.0, 2.0, req.sampling.temperature)) return false;
  if (!r.read_float("top_p", 0.0, 1.0, req.sampling.top_p)) return false;
  if (const json* tp = r.field("top_p"); tp && req.sampling.top_p <= 0.0f)
    return r.fail("top_p", "'top_p' must be greater than 0");
  if (!r.read_float("min_p", 0.0, 1.0, req.sampling.min_p)) return false;
  v.reset();
  if (!r.read_int("top_k", -1, kIntMax, v)) return false;
  if (v) req.sampling.top_k = static_cast<int>(*v);  // -1 and 0 both mean off
  v.reset();
  if (!r.read_int("seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), v)) return false;
  if (v) req.seed = static_cast<uint64_t>(*v);
  v.reset();
  if (!r.read_int("n", 1, kMaxChoices, v)) return false;
  if (v) req.n = static_cast<int>(*v);
  if (!read_stop(r, req)) return false;
  if (!read_logprobs(r, req)) return false;
  if (req.kind == ApiKind::kCompletion && !r.read_bool("echo", req.echo)) return false;
  if (!r.read_bool("stream", req.stream)) return false;
  if (!r.read_bool("ignore_eos", req.ignore_eos)) return false;
  if (!r.read_bool("densa_timing", req.timing)) return false;
  if (!r.read_bool("skip_special_tokens", req.skip_special_tokens)) return false;
  if (const json* salt = r.field("cache_salt")) {
    if (!salt->is_string() || salt->get<std::string>().empty() || salt->get<std::string>().size() > kMaxCacheSaltBytes)
      return r.fail("cache_salt", "'cache_salt' must be a non-empty string of at most " +
                                      std::to_string(kMaxCacheSaltBytes) + " bytes");
    req.cache_salt = salt->get<std::string>();
  }
  if (req.kind == ApiKind::kChat) {
    if (!read_tools(r, req) || !read_response_format(r, req)) return false;
    if (!r.read_bool("add_generation_prompt", req.add_generation_prompt)) return false;
    if (const json* k = r.field("chat_template_kwargs")) {
      if (!k->is_object()) return r.fail("chat_template_kwargs", "'chat_template_kwargs' must be an object");
      req.chat_template_kwargs = (*r.ordered)["chat_template_kwargs"];
    }
  }
  if (r.field("densa_kv_integrity") != nullptr) {
    bool on = false;
    if (!r.read_bool("densa_kv_integrity", on)) return false;
    req.kv_integrity = on;
  }
  if (const json* f = r.field("densa_inject_fault")) {
    const std::optional<KvFault> fault = f->is_string() ? kv_fault_from_name(f->get<std::string>()) : std::nullopt;
    if (!fault)
      return r.fail("densa_inject_fault",
                    "'densa_inject_fault' must name a KV fault: page-reuse, late-write, evict-in-use, stale-table, "
                    "off-by-one or bit-flip");
    req.inject_fault = fault;
  }
  if (const json* so = r.field("stream_options")) {
    if (!so->is_object()) return r.fail("stream_options", "'stream_options' must be an object");
    auto iu = so->find("include_usage");
    if (iu != so->end() && !iu->is_null()) {
      if (!iu->is_boolean()) return r.fail("stream_options", "'stream_options.include_usage' must be a boolean");
      req.include_usage = iu->get<bool>();
    }
  }
  return true;
}

}  // namespace

int json_nesting_depth(std::string_view body, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : body) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

std::optional<OpenAiRequest> parse_openai_request(ApiKind kind, std::string_view body, RequestError& error) {
  if (json_nesting_depth(body, kMaxRequestJsonDepth) > kMaxRequestJsonDepth) {
    error = {invalid_argument("Request body nests JSON deeper than " + std::to_string(kMaxRequestJsonDepth) +
                              " levels"),
             ""};
    return std::nullopt;
  }
  const json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    error = {invalid_argument("Request body is not valid JSON"), ""};
    return std::nullopt;
  }
  if (!doc.is_object()) {
    error = {invalid_argument("Request body must be a JSON object"), ""};
    return std::nullopt;
  }
  OpenAiRequest req;
  req.kind = kind;
  Reader r{doc, error};
  // Chat bodies are read a second time keeping key order, for the template variables.
  nlohmann::ordered_json ordered;
  if (kind == ApiKind::kChat) {
    ordered = nlohmann::ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
    r.ordered = &ordered;
  }
  if (!read_fields(r, req)) return std::nullopt;
  return req;
}

}  // namespace densa::api
