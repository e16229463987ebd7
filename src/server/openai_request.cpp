#include "server/openai_request.h"

#include <algorithm>

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

namespace densa::server {
namespace {

using nlohmann::json;

// Collects the first error; every reader returns false once it has recorded one.
struct Reader {
  const json& body;
  RequestError& error;

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
  for (const json& msg : *m) {
    if (!msg.is_object()) return r.fail("messages", "each message must be an object");
    auto role = msg.find("role");
    if (role == msg.end() || !role->is_string()) return r.fail("messages", "each message needs a string 'role'");
    ChatMessage out{role->get<std::string>(), ""};
    if (out.role != "system" && out.role != "user" && out.role != "assistant" && out.role != "tool" &&
        out.role != "developer")
      return r.fail("messages", "unknown message role '" + out.role + "'");
    auto content = msg.find("content");
    if (content == msg.end() || content->is_null()) {
      if (out.role != "assistant") return r.fail("messages", "message 'content' is required");
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
  if (s->is_string()) {
    if (!s->get<std::string>().empty()) req.stop.push_back(s->get<std::string>());
    return true;
  }
  if (!s->is_array()) return r.fail("stop", "'stop' must be a string or an array of strings");
  if (s->size() > static_cast<size_t>(kMaxStopStrings))
    return r.fail("stop", "'stop' holds at most " + std::to_string(kMaxStopStrings) + " strings");
  for (const json& item : *s) {
    if (!item.is_string()) return r.fail("stop", "'stop' must be a string or an array of strings");
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

bool read_fields(Reader& r, OpenAiRequest& req) {
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
  if (r.field("densa_kv_integrity") != nullptr) {
    bool on = false;
    if (!r.read_bool("densa_kv_integrity", on)) return false;
    req.kv_integrity = on;
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
  if (!read_fields(r, req)) return std::nullopt;
  return req;
}

}  // namespace densa::server
