// Tool-call formats whose arguments are JSON text as the model wrote it: Kimi K2, DeepSeek V3,
// DeepSeek V3.1 (special-token sections) and Hermes / Qwen3 (<tool_call>{json}</tool_call>).
// The arguments stream verbatim; the engine checks them when the call closes.
#include "text/chat_parse/formats.h"

namespace densa::toolparse {

namespace {
constexpr size_t npos = std::string_view::npos;

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

bool plausible_name(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (is_space(c) || c == '<' || c == '>' || c == '{' || c == '}' || c == '"') return false;
  }
  return true;
}

// Raw arguments from body[from] up to `end`. Returns true (and *consumed past `end`) when it
// is there; otherwise *args is the text that cannot be part of a marker in `hold`.
bool raw_args_until(std::string_view body, size_t from, std::string_view end,
                    std::initializer_list<std::string_view> hold, bool final, std::string* args,
                    size_t* consumed) {
  const size_t q = body.find(end, from);
  if (q != npos) {
    *args = std::string(body.substr(from, q - from));
    *consumed = q + end.size();
    return true;
  }
  const std::string_view rest = body.substr(from);
  *args = std::string(rest.substr(0, rest.size() - (final ? 0 : partial_marker_suffix(rest, hold))));
  return false;
}

// <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>
// {json}<|tool_call_end|>...<|tool_calls_section_end|>; the id is the text before the arguments.
class KimiK2Format : public ToolFormat {
 public:
  std::string_view section_begin() const override { return "<|tool_calls_section_begin|>"; }
  std::string_view section_end() const override { return "<|tool_calls_section_end|>"; }
  std::string_view call_begin() const override { return "<|tool_call_begin|>"; }
  CallProgress parse_call(std::string_view body, bool final, const ToolSet&) const override {
    static constexpr std::string_view kArgs = "<|tool_call_argument_begin|>", kEnd = "<|tool_call_end|>";
    CallProgress p;
    const size_t e = body.find(kEnd);
    const size_t a = body.substr(0, e).find(kArgs);
    if (a == npos) {
      p.failed = e != npos;  // closed before its arguments began
      return p;
    }
    const std::string_view id = trim(body.substr(0, a));
    std::string_view name = id;
    if (name.substr(0, 10) == "functions.") name.remove_prefix(10);
    const size_t colon = name.rfind(':');
    if (colon != npos && colon + 1 < name.size() &&
        name.find_first_not_of("0123456789", colon + 1) == npos) {
      name = name.substr(0, colon);
    }
    if (!plausible_name(name)) {
      p.failed = true;
      return p;
    }
    p.have_name = true;
    p.id = std::string(id);
    p.name = std::string(name);
    p.done = raw_args_until(body, a + kArgs.size(), kEnd, {kEnd}, final, &p.args, &p.consumed);
    return p;
  }
};

// DeepSeek V3.1: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{json}<｜tool▁call▁end｜>
// ...<｜tool▁calls▁end｜>. DeepSeek V3: <｜tool▁call▁begin｜>TYPE<｜tool▁sep｜>NAME\n```json\n{json}
// \n```<｜tool▁call▁end｜>, calls separated by "\n".
class DeepSeekFormat : public ToolFormat {
 public:
  explicit DeepSeekFormat(bool v3_fenced) : fenced_(v3_fenced) {}
  std::string_view section_begin() const override { return "<｜tool▁calls▁begin｜>"; }
  std::string_view section_end() const override { return "<｜tool▁calls▁end｜>"; }
  std::string_view call_begin() const override { return "<｜tool▁call▁begin｜>"; }
  CallProgress parse_call(std::string_view body, bool final, const ToolSet&) const override {
    static constexpr std::string_view kSep = "<｜tool▁sep｜>", kEnd = "<｜tool▁call▁end｜>";
    CallProgress p;
    const size_t e = body.find(kEnd);
    const std::string_view head = body.substr(0, e);
    const size_t s = head.find(kSep);
    if (s == npos) {
      p.failed = e != npos;
      return p;
    }
    size_t from = s + kSep.size();
    if (!fenced_) {
      p.name = std::string(trim(head.substr(0, s)));
    } else {
      const size_t nl = head.find('\n', from);  // the name line ends the name
      if (nl == npos) {
        p.failed = e != npos;
        return p;
      }
      p.name = std::string(trim(head.substr(from, nl - from)));
      from = nl + 1;
    }
    if (!plausible_name(p.name)) {
      p = {};
      p.failed = true;
      return p;
    }
    p.have_name = true;
    std::string_view end = kEnd;
    static constexpr std::string_view kFence = "```json\n", kFencedEnd = "\n```<｜tool▁call▁end｜>";
    if (fenced_) {
      const std::string_view rest = body.substr(from);
      if (!final && is_proper_prefix_of(rest, kFence)) return p;  // fence or not: not known yet
      if (rest.substr(0, kFence.size()) == kFence) {
        from += kFence.size();
        end = kFencedEnd;
      }
    }
    // The first call-end marker ends the call, fenced or not: kFencedEnd ends in kEnd, so a
    // later fenced end cannot extend it (that would make the answer depend on how much of the
    // text has arrived). The fence is stripped only when it closes right before the marker.
    if (e != npos) {
      size_t stop = e;
      if (end != kEnd && e - from >= kFencedEnd.size() - kEnd.size() &&
          body.substr(e - (kFencedEnd.size() - kEnd.size()), kFencedEnd.size() - kEnd.size()) ==
              kFencedEnd.substr(0, kFencedEnd.size() - kEnd.size())) {
        stop = e - (kFencedEnd.size() - kEnd.size());
      }
      p.args = std::string(body.substr(from, stop - from));
      p.consumed = e + kEnd.size();
      p.done = true;
      return p;
    }
    raw_args_until(body, from, end, {end, kEnd}, final, &p.args, &p.consumed);
    return p;
  }

 private:
  bool fenced_;
};

enum class Match { kYes, kNeedMore, kNo };

// A cursor over a growing text for the name-first Hermes shape.
struct Cursor {
  std::string_view s;
  size_t i = 0;
  void ws() {
    while (i < s.size() && is_space(s[i])) ++i;
  }
  Match lit(std::string_view t) {
    if (s.substr(i, t.size()) == t) {
      i += t.size();
      return Match::kYes;
    }
    return is_proper_prefix_of(s.substr(i), t) ? Match::kNeedMore : Match::kNo;
  }
  // A JSON string starting at i; on kYes *out is its decoded value.
  Match json_string(std::string* out) {
    if (i >= s.size()) return Match::kNeedMore;
    if (s[i] != '"') return Match::kNo;
    for (size_t j = i + 1; j < s.size(); ++j) {
      if (s[j] == '\\') {
        ++j;
      } else if (s[j] == '"') {
        const auto v = nlohmann::json::parse(s.substr(i, j + 1 - i), nullptr, false);
        if (!v.is_string()) return Match::kNo;
        *out = v.get<std::string>();
        i = j + 1;
        return Match::kYes;
      }
    }
    return Match::kNeedMore;
  }
};

// <tool_call>\n{"name": NAME, "arguments": {json}}\n</tool_call>. The arguments stream when
// the object has the name first (as the templates write it); other shapes are parsed whole
// when the block closes.
class HermesFormat : public ToolFormat {
 public:
  std::string_view call_begin() const override { return "<tool_call>"; }
  void begin_call() const override { scan_ = {}; }
  CallProgress parse_call(std::string_view body, bool final, const ToolSet&) const override {
    Cursor c{body};
    std::string name;
    Match m = Match::kYes;
    auto step = [&](Match r) { if (m == Match::kYes) m = r; };
    c.ws();
    step(c.lit("{"));
    if (m == Match::kYes) c.ws();
    if (m == Match::kYes) step(c.lit("\"name\""));
    if (m == Match::kYes) c.ws();
    if (m == Match::kYes) step(c.lit(":"));
    if (m == Match::kYes) c.ws();
    if (m == Match::kYes) step(c.json_string(&name));
    if (m == Match::kNeedMore && !final) return {};
    if (m != Match::kYes || !plausible_name(name)) return parse_whole(body, final);
    CallProgress p;
    p.have_name = true;
    p.name = name;
    c.ws();
    if (c.i >= body.size()) return p;
    if (body[c.i] == '}') {  // no arguments
      p.args = "{}";
      return close_after(body, c.i + 1, final, std::move(p));
    }
    m = Match::kYes;
    step(c.lit(","));
    if (m == Match::kYes) c.ws();
    if (m == Match::kYes) step(c.lit("\"arguments\""));
    if (m == Match::kYes) c.ws();
    if (m == Match::kYes) step(c.lit(":"));
    if (m == Match::kYes) c.ws();
    if (m == Match::kYes && c.i >= body.size()) m = Match::kNeedMore;
    if (m == Match::kNeedMore && !final) return p;
    if (m != Match::kYes || body[c.i] != '{') return parse_named_whole(body, final, std::move(p));
    const std::string_view value = body.substr(c.i);
    const size_t v_end = container_end(body, c.i);
    if (v_end == npos) {
      p.args = std::string(value);
      return p;
    }
    p.args = std::string(value.substr(0, v_end));
    size_t after = c.i + v_end;
    while (after < body.size() && is_space(body[after])) ++after;
    if (after >= body.size()) return final ? close_missing(std::move(p), body.size(), "") : p;
    if (body[after] != '}') return close_after(body, after, final, std::move(p), true);
    return close_after(body, after + 1, final, std::move(p));
  }

  static constexpr std::string_view kEnd = "</tool_call>";

 private:
  // Where the JSON object or array starting at body[at] ends (one past), or npos while it is
  // open. The scan resumes where the previous call's stopped: within one call block the body
  // only grows, so a long argument is scanned once instead of once per update.
  struct Scan {
    size_t at = npos, j = 0, end = npos;
    int depth = 0;
    bool in_string = false, escape = false;
  };
  mutable Scan scan_;
  size_t container_end(std::string_view body, size_t at) const {
    if (scan_.at != at) scan_ = Scan{at};
    Scan& s = scan_;
    for (; s.end == npos && at + s.j < body.size(); ++s.j) {
      const char ch = body[at + s.j];
      if (s.escape) {
        s.escape = false;
      } else if (s.in_string) {
        if (ch == '\\') s.escape = true;
        else if (ch == '"') s.in_string = false;
      } else if (ch == '"') {
        s.in_string = true;
      } else if (ch == '{' || ch == '[') {
        ++s.depth;
      } else if ((ch == '}' || ch == ']') && --s.depth == 0) {
        s.end = s.j + 1;
      }
    }
    return s.end;
  }

  static CallProgress close_missing(CallProgress p, size_t consumed, std::string error) {
    p.done = true;
    p.consumed = consumed;
    p.error = std::move(error);
    return p;
  }

  // The arguments are complete; what follows up to </tool_call> should be whitespace (or
  // anything, noted as an error, when `junk` is already known).
  static CallProgress close_after(std::string_view body, size_t from, bool final, CallProgress p,
                                  bool junk = false) {
    const size_t q = body.find(kEnd, from);
    if (q == npos) {
      if (!final) return p;
      // A call closed by the end of the text with nothing after its object is accepted.
      const bool clean = !junk && trim(body.substr(from)).empty();
      return close_missing(std::move(p), body.size(),
                           clean ? "" : "tool call is truncated (the text ended inside it)");
    }
    const bool clean = !junk && trim(body.substr(from, q - from)).empty();
    return close_missing(std::move(p), q + kEnd.size(), clean ? "" : "unexpected text after the call's arguments");
  }

  // Name known, arguments not in the streamable shape: take them from the whole object.
  static CallProgress parse_named_whole(std::string_view body, bool final, CallProgress p) {
    const size_t q = body.find(kEnd);
    if (q == npos && !final) return p;
    const size_t stop = q == npos ? body.size() : q;
    const auto obj = nlohmann::json::parse(body.substr(0, stop), nullptr, false);
    std::string error;
    if (!obj.is_object()) {
      error = "tool call is not a valid JSON object";
    } else if (auto it = obj.find("arguments"); it == obj.end()) {
      error = "tool call has no \"arguments\"";
    } else {
      p.args = it->is_string() ? it->get<std::string>()
                               : it->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
    if (q == npos && error.empty()) error = "tool call is truncated (the text ended inside it)";
    return close_missing(std::move(p), q == npos ? body.size() : q + kEnd.size(), error);
  }

  // No name-first prefix: the block is a call only if it closes holding a JSON object with a
  // string "name".
  static CallProgress parse_whole(std::string_view body, bool final) {
    CallProgress p;
    const std::string_view t = trim(body);
    if (!t.empty() && t.front() != '{') {
      p.failed = true;
      return p;
    }
    const size_t q = body.find(kEnd);
    if (q == npos) {
      p.failed = final;
      return p;
    }
    const auto obj = nlohmann::json::parse(body.substr(0, q), nullptr, false);
    if (!obj.is_object() || !obj.contains("name") || !obj["name"].is_string() ||
        !plausible_name(obj["name"].get<std::string>())) {
      p.failed = true;
      return p;
    }
    p.have_name = true;
    p.name = obj["name"].get<std::string>();
    return parse_named_whole(body, final, std::move(p));
  }
};
}  // namespace

std::unique_ptr<ToolFormat> make_json_tool_format(std::string_view name) {
  if (name == "kimi_k2") return std::make_unique<KimiK2Format>();
  if (name == "deepseek_v3") return std::make_unique<DeepSeekFormat>(true);
  if (name == "deepseek_v31") return std::make_unique<DeepSeekFormat>(false);
  if (name == "hermes" || name == "qwen3" || name == "qwen25") return std::make_unique<HermesFormat>();
  return nullptr;
}

}  // namespace densa::toolparse
