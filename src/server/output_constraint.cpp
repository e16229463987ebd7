#include "server/output_constraint.h"

#include <algorithm>
#include <functional>
#include <iterator>
#include <map>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"

namespace densa::server {
namespace {

using grammar::CompiledGrammar;
using grammar::Grammar;
using grammar::GrammarKind;

// The end of a thinking block, for every reasoning format densa parses.
constexpr const char* kReasoningEnd = "</think>";
// Hermes / Qwen3 calls: "<tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>".
constexpr const char* kHermesOpen = "<tool_call>";

// The marker tokens of each call format densa has a grammar for (beyond hermes, whose markers
// are plain text in Qwen's vocabulary and stay so).
const std::vector<std::string>& family_markers(const std::string& parser) {
  static const std::vector<std::string> kNone;
  static const std::vector<std::string> kKimi = {"<|tool_calls_section_begin|>", "<|tool_calls_section_end|>",
                                                 "<|tool_call_begin|>", "<|tool_call_argument_begin|>",
                                                 "<|tool_call_end|>"};
  static const std::vector<std::string> kDeepSeek = {"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>",
                                                     "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"};
  static const std::vector<std::string> kGlm = {"<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>",
                                                "<arg_value>", "</arg_value>"};
  if (parser == "kimi_k2") return kKimi;
  if (parser == "deepseek_v3" || parser == "deepseek_v31") return kDeepSeek;
  if (OutputConstraints::glm_like(parser)) return kGlm;
  return kNone;
}

// A marker token's bytes in the grammar vocabulary: this prefix, then its text. 0xF8 starts no
// UTF-8 sequence and no grammar front end produces it, so such bytes match only where a call
// grammar names the marker: a marker token can never be sampled inside a JSON string or a raw
// value, and text that spells a marker out of plain tokens never stands for the marker.
constexpr char kMarkerPrefix = '\xF8';

// Grammar bytes of a call-format marker: the marker token's prefixed bytes when the vocabulary
// has it as one token, else its text.
struct MarkerBytes {
  const std::map<std::string, TokenId>* tokens;
  std::string operator()(const std::string& marker) const {
    return tokens->count(marker) ? std::string(1, kMarkerPrefix) + marker : marker;
  }
};

// Free until `trigger` appears in the text, then the grammar's matcher decides; with `repeat`
// it lets go when the grammar completes and watches for the trigger again.
class LazyGrammarConstraint : public TokenConstraint {
 public:
  LazyGrammarConstraint(ConstraintPlan plan, std::shared_ptr<const std::vector<std::string>> token_bytes)
      : plan_(std::move(plan)), token_bytes_(std::move(token_bytes)) {
    if (plan_.trigger.empty() && plan_.trigger_token < 0) matcher_.emplace(plan_.grammar);
  }

  void fill_allowed(std::span<uint64_t> mask) override {
    if (matcher_) {
      matcher_->fill_mask(mask.data(), mask.size());
      return;
    }
    const size_t vocab = token_bytes_->size();
    for (size_t w = 0; w < mask.size(); ++w) {
      const size_t begin = w * 64;
      if (begin >= vocab) break;
      const size_t n = std::min<size_t>(64, vocab - begin);
      mask[w] = n == 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1;
    }
  }

  Status accept(TokenId token) override {
    if (matcher_) {
      if (!matcher_->accept_token(token))
        return internal_error("token " + std::to_string(token) + " is outside the output grammar");
      if (plan_.repeat && matcher_->is_terminated()) {
        matcher_.reset();
        tail_.clear();
      }
      return Status::ok();
    }
    if (plan_.trigger_token >= 0) {
      // The grammar starts right after the marker token (its text is the token's alone).
      if (token == plan_.trigger_token) matcher_.emplace(plan_.grammar);
      return Status::ok();
    }
    const std::string& bytes = (*token_bytes_)[static_cast<size_t>(token)];
    tail_ += bytes;
    const size_t at = tail_.find(plan_.trigger);
    if (at == std::string::npos) {
      // Keep only what could still start the trigger.
      if (tail_.size() > plan_.trigger.size()) tail_.erase(0, tail_.size() - plan_.trigger.size());
      return Status::ok();
    }
    const std::string after = tail_.substr(at + plan_.trigger.size());
    tail_.clear();
    matcher_.emplace(plan_.grammar);
    if (!after.empty() && !matcher_->accept_bytes(after))
      return internal_error("the text after '" + plan_.trigger + "' does not fit the output grammar");
    return Status::ok();
  }

 private:
  ConstraintPlan plan_;
  std::shared_ptr<const std::vector<std::string>> token_bytes_;
  std::optional<grammar::Matcher> matcher_;
  std::string tail_;
};

// A tool's arguments grammar: its parameters schema (text order kept), else any JSON object.
Result<Grammar> json_args(const nlohmann::ordered_json& fn) {
  const std::string name = fn["name"].get<std::string>();
  if (fn.contains("parameters") && fn["parameters"].is_object()) {
    Result<Grammar> g = grammar::grammar_from_json_schema(fn["parameters"].dump());
    if (!g.is_ok()) return invalid_argument("tool '" + name + "' parameters: " + g.status().message());
    return std::move(g).value();
  }
  return grammar::grammar_json_object();
}

// The tools a call may name: all, or the named one.
std::vector<const nlohmann::ordered_json*> chosen_functions(const api::OpenAiRequest& r) {
  std::vector<const nlohmann::ordered_json*> out;
  for (const nlohmann::ordered_json& tool : r.tools) {
    if (r.tool_choice == api::ToolChoiceKind::kNamed && tool["function"]["name"] != r.tool_choice_name) continue;
    out.push_back(&tool["function"]);
  }
  return out;
}

// One hermes call's JSON object for `tool`: {"name": "NAME", "arguments": ARGS}.
Result<Grammar> hermes_call(const nlohmann::ordered_json& tool) {
  const nlohmann::ordered_json& fn = tool["function"];
  const std::string name = fn["name"].get<std::string>();
  DENSA_ASSIGN_OR_RETURN(Grammar args, json_args(fn));
  const Grammar head = grammar::literal_grammar("{\"name\": " + nlohmann::json(name).dump() + ", \"arguments\": ");
  const Grammar tail = grammar::literal_grammar("}");
  return grammar::sequence_grammar({&head, &args, &tail});
}

// "\n" CALL "\n</tool_call>" with CALL one of the allowed tools; `with_open` puts the opening
// tag in front; `parallel` lets further calls follow.
Result<Grammar> hermes_calls(const api::OpenAiRequest& r, bool with_open, bool parallel) {
  std::vector<Grammar> calls;
  for (const nlohmann::ordered_json& tool : r.tools) {
    if (r.tool_choice == api::ToolChoiceKind::kNamed && tool["function"]["name"] != r.tool_choice_name) continue;
    DENSA_ASSIGN_OR_RETURN(Grammar g, hermes_call(tool));
    calls.push_back(std::move(g));
  }
  std::vector<const Grammar*> choices;
  for (const Grammar& g : calls) choices.push_back(&g);
  const Grammar any_call = grammar::alternation_grammar(choices);
  const Grammar open = grammar::literal_grammar(std::string(with_open ? kHermesOpen : "") + "\n");
  const Grammar close = grammar::literal_grammar("\n</tool_call>");
  const Grammar one = grammar::sequence_grammar({&open, &any_call, &close});
  if (!parallel) return one;
  // one ("\n" one)*: the further calls as a repetition of a grammar that may be empty.
  Grammar more;
  const int32_t rule = more.add_rule("more");
  const int32_t sep = more.literal("\n");
  const int32_t call = more.import(one, "call_");
  more.define_rule(rule, more.star(more.seq({sep, more.ref(call)})));
  more.set_root(rule);
  return grammar::sequence_grammar({&one, &more});
}


// Kimi K2: SECTION_BEGIN (CALL_BEGIN functions.NAME:IDX ARG_BEGIN ARGS CALL_END)+ SECTION_END, IDX
// counting from 0 within the turn as K2's template numbers them; `with_section`: the section
// marker is part of the grammar (forced calls), else the trigger token already opened it.
Result<Grammar> kimi_calls(const api::OpenAiRequest& r, const MarkerBytes& mk, bool with_section, bool parallel) {
  Grammar g;
  std::vector<std::pair<std::string, int32_t>> tools;
  for (const nlohmann::ordered_json* fn : chosen_functions(r)) {
    DENSA_ASSIGN_OR_RETURN(Grammar args, json_args(*fn));
    tools.push_back({(*fn)["name"].get<std::string>(), g.import(args, "t" + std::to_string(tools.size()) + ".")});
  }
  auto call = [&](int index) {
    std::vector<int32_t> alts;
    for (const auto& [name, rule] : tools)
      alts.push_back(g.seq({g.literal(mk("<|tool_call_begin|>") + "functions." + name + ":" + std::to_string(index) +
                                      mk("<|tool_call_argument_begin|>")),
                            g.ref(rule), g.literal(mk("<|tool_call_end|>"))}));
    return g.alt(std::move(alts));
  };
  int32_t calls = -1;
  for (int k = (parallel ? OutputConstraints::kMaxNumberedCalls : 1) - 1; k >= 0; --k)
    calls = calls < 0 ? call(k) : g.seq({call(k), g.optional(calls)});
  std::vector<int32_t> body;
  if (with_section) body.push_back(g.literal(mk("<|tool_calls_section_begin|>")));
  body.push_back(calls);
  body.push_back(g.literal(mk("<|tool_calls_section_end|>")));
  const int32_t root = g.add_rule("root");
  g.define_rule(root, g.seq(std::move(body)));
  g.set_root(root);
  return g;
}

// DeepSeek V3.1: CALLS_BEGIN (CALL_BEGIN NAME SEP ARGS CALL_END)+ CALLS_END. DeepSeek V3:
// CALLS_BEGIN CALL_BEGIN function SEP NAME "\n```json\n" ARGS "\n```" CALL_END ("\n" CALL)*
// CALLS_END. Generated JSON has no newline, so the fence cannot close early.
Result<Grammar> deepseek_calls(const api::OpenAiRequest& r, const MarkerBytes& mk, bool v3_fenced, bool with_section,
                               bool parallel) {
  Grammar g;
  std::vector<int32_t> alts;
  for (const nlohmann::ordered_json* fn : chosen_functions(r)) {
    DENSA_ASSIGN_OR_RETURN(Grammar args, json_args(*fn));
    const std::string name = (*fn)["name"].get<std::string>();
    const int32_t rule = g.import(args, "t" + std::to_string(alts.size()) + ".");
    const std::string head = v3_fenced ? mk("<｜tool▁call▁begin｜>") + "function" + mk("<｜tool▁sep｜>") + name + "\n```json\n"
                                       : mk("<｜tool▁call▁begin｜>") + name + mk("<｜tool▁sep｜>");
    const std::string tail = (v3_fenced ? "\n```" : "") + mk("<｜tool▁call▁end｜>");
    alts.push_back(g.seq({g.literal(head), g.ref(rule), g.literal(tail)}));
  }
  const int32_t call = g.add_rule("call");
  g.define_rule(call, g.alt(std::move(alts)));
  std::vector<int32_t> body;
  if (with_section) body.push_back(g.literal(mk("<｜tool▁calls▁begin｜>")));
  body.push_back(g.ref(call));
  if (parallel) body.push_back(g.star(v3_fenced ? g.seq({g.byte('\n'), g.ref(call)}) : g.ref(call)));
  body.push_back(g.literal(mk("<｜tool▁calls▁end｜>")));
  const int32_t root = g.add_rule("root");
  g.define_rule(root, g.seq(std::move(body)));
  g.set_root(root);
  return g;
}

// A GLM argument value of a property whose schema type is "string": the raw text (the parser
// takes it verbatim). It never holds '<', so it cannot contain a closing tag.
Result<int32_t> glm_raw_string(Grammar& g, const std::string& tool, const std::string& key,
                               const nlohmann::ordered_json& schema) {
  static const char* const kAnnotations[] = {"type", "title", "description", "default", "examples", "$comment",
                                             "deprecated", "readOnly", "writeOnly", "minLength", "maxLength",
                                             "enum", "const"};
  for (const auto& [k, v] : schema.items()) {
    if (std::find(std::begin(kAnnotations), std::end(kAnnotations), k) == std::end(kAnnotations))
      return invalid_argument("tool '" + tool + "' argument '" + key + "': '" + k +
                              "' on a string argument is not supported in GLM's raw XML argument values");
  }
  auto literal_choice = [&](const nlohmann::ordered_json& values) -> Result<int32_t> {
    std::vector<int32_t> alts;
    for (const auto& v : values) {
      if (!v.is_string())
        return invalid_argument("tool '" + tool + "' argument '" + key + "': a non-string enum / const value on a string");
      alts.push_back(v.get<std::string>().empty() ? g.empty() : g.literal(v.get<std::string>()));
    }
    if (alts.empty()) return invalid_argument("tool '" + tool + "' argument '" + key + "': empty enum");
    return g.alt(std::move(alts));
  };
  if (schema.contains("const")) return literal_choice(nlohmann::ordered_json::array({schema["const"]}));
  if (schema.contains("enum")) {
    if (!schema["enum"].is_array()) return invalid_argument("tool '" + tool + "' argument '" + key + "': enum is not an array");
    return literal_choice(schema["enum"]);
  }
  const auto bound = [&](const char* k, int64_t fallback) -> Result<int64_t> {
    if (!schema.contains(k)) return fallback;
    if (!schema[k].is_number_unsigned() || schema[k].get<uint64_t>() > 100000)
      return invalid_argument("tool '" + tool + "' argument '" + key + "': '" + k + "' must be an integer in [0, 100000]");
    return static_cast<int64_t>(schema[k].get<uint64_t>());
  };
  DENSA_ASSIGN_OR_RETURN(int64_t lo, bound("minLength", 0));
  DENSA_ASSIGN_OR_RETURN(int64_t hi, bound("maxLength", grammar::kUnbounded));
  if (hi != grammar::kUnbounded && hi < lo)
    return invalid_argument("tool '" + tool + "' argument '" + key + "': maxLength below minLength");
  grammar::CodepointSet lt;
  lt.add('<', '<');
  return g.repeat(g.codepoints(lt.complement()), static_cast<int32_t>(lo), static_cast<int32_t>(hi));
}

// GLM-4.5+: OPEN NAME "\n" (ARG_KEY K ARG_KEY_END "\n" ARG_VALUE V ARG_VALUE_END "\n")* CLOSE per call,
// calls joined by "\n". Arguments in schema order, required ones always, others optional; a
// value is raw text for a "string" property and JSON of the property's schema otherwise, as
// the glm45 parser reads them. `with_open`: OPEN is part of the grammar (forced calls).
Result<Grammar> glm_calls(const api::OpenAiRequest& r, const MarkerBytes& mk, bool with_open, bool parallel) {
  Grammar g;
  std::vector<int32_t> alts;
  int sub = 0;
  for (const nlohmann::ordered_json* fnp : chosen_functions(r)) {
    const nlohmann::ordered_json& fn = *fnp;
    const std::string name = fn["name"].get<std::string>();
    std::vector<int32_t> parts{g.literal(name + "\n")};
    const nlohmann::ordered_json* params = fn.contains("parameters") && fn["parameters"].is_object() ? &fn["parameters"] : nullptr;
    if (params != nullptr && params->contains("properties")) {
      const nlohmann::ordered_json& props = (*params)["properties"];
      if (!props.is_object()) return invalid_argument("tool '" + name + "' parameters: 'properties' is not an object");
      std::vector<std::string> required;
      if (params->contains("required") && (*params)["required"].is_array())
        for (const auto& q : (*params)["required"])
          if (q.is_string()) required.push_back(q.get<std::string>());
      for (const auto& [key, schema] : props.items()) {
        if (key.empty() || key.find('<') != std::string::npos)
          return invalid_argument("tool '" + name + "' argument '" + key + "': a key GLM's XML tags cannot carry");
        int32_t value = -1;
        if (schema.is_object() && schema.contains("type") && schema["type"] == "string") {
          DENSA_ASSIGN_OR_RETURN(value, glm_raw_string(g, name, key, schema));
        } else {
          // The property's own schema, with the definitions its $refs may point into.
          nlohmann::ordered_json own = schema;
          for (const char* defs : {"$defs", "definitions"})
            if (own.is_object() && params->contains(defs) && !own.contains(defs)) own[defs] = (*params)[defs];
          Result<Grammar> v = grammar::grammar_from_json_schema(own.dump());
          if (!v.is_ok()) return invalid_argument("tool '" + name + "' argument '" + key + "': " + v.status().message());
          value = g.ref(g.import(v.value(), "a" + std::to_string(sub++) + "."));
        }
        const int32_t arg = g.seq({g.literal(mk("<arg_key>") + key + mk("</arg_key>") + "\n" + mk("<arg_value>")), value,
                                   g.literal(mk("</arg_value>") + "\n")});
        const bool req = std::find(required.begin(), required.end(), key) != required.end();
        parts.push_back(req ? arg : g.optional(arg));
      }
      for (const std::string& q : required)
        if (!props.contains(q)) return invalid_argument("tool '" + name + "' parameters: required '" + q + "' is not a property");
    } else if (params != nullptr && params->contains("required") && !(*params)["required"].empty()) {
      return invalid_argument("tool '" + name + "' parameters: 'required' without 'properties'");
    }
    parts.push_back(g.literal(mk("</tool_call>")));
    alts.push_back(g.seq(std::move(parts)));
  }
  const int32_t call = g.add_rule("call");
  g.define_rule(call, g.alt(std::move(alts)));
  std::vector<int32_t> body;
  if (with_open) body.push_back(g.literal(mk("<tool_call>")));
  body.push_back(g.ref(call));
  if (parallel) body.push_back(g.star(g.seq({g.literal("\n" + mk("<tool_call>")), g.ref(call)})));
  const int32_t root = g.add_rule("root");
  g.define_rule(root, g.seq(std::move(body)));
  g.set_root(root);
  return g;
}
}  // namespace

OutputConstraints::OutputConstraints(const Tokenizer& tokenizer, size_t cache_capacity,
                                     grammar::CompileLimits limits)
    : tokenizer_(tokenizer), capacity_(cache_capacity), limits_(limits) {}

bool OutputConstraints::hermes_like(const std::string& tool_parser) {
  return tool_parser == "hermes" || tool_parser == "qwen3" || tool_parser == "qwen25";
}

bool OutputConstraints::glm_like(const std::string& tool_parser) {
  return tool_parser == "glm45" || tool_parser == "glm4_moe" || tool_parser == "glm46" || tool_parser == "glm47";
}

bool OutputConstraints::has_call_grammar(const std::string& tool_parser) {
  return hermes_like(tool_parser) || glm_like(tool_parser) || tool_parser == "kimi_k2" ||
         tool_parser == "deepseek_v3" || tool_parser == "deepseek_v31";
}

Result<grammar::GrammarCache*> OutputConstraints::cache(const std::string& tool_parser) {
  std::call_once(once_, [this, &tool_parser] {
    const int n = tokenizer_.vocab_size();
    auto bytes = std::make_shared<std::vector<std::string>>(static_cast<size_t>(n));
    std::vector<char> special(static_cast<size_t>(n), 0);
    for (int id = 0; id < n; ++id) {
      (*bytes)[static_cast<size_t>(id)] = tokenizer_.token_bytes(id);
      special[static_cast<size_t>(id)] = tokenizer_.is_special(id);
    }
    // Marker tokens of the call format get bytes no text has (kMarkerPrefix); then plain
    // tokens holding such bytes (never part of UTF-8 text, so no grammar allows them anyway)
    // are left out, so that only the marker token itself matches a marker in a grammar.
    std::vector<std::string> grammar_bytes = *bytes;
    for (const std::string& m : family_markers(tool_parser)) {
      const std::optional<TokenId> id = tokenizer_.token_to_id(m);
      if (!id || *id < 0 || *id >= n || (*bytes)[static_cast<size_t>(*id)] != m) continue;
      marker_tokens_[m] = *id;
      grammar_bytes[static_cast<size_t>(*id)] = std::string(1, kMarkerPrefix) + m;
      special[static_cast<size_t>(*id)] = 0;
    }
    if (!marker_tokens_.empty()) {
      for (int id = 0; id < n; ++id) {
        const std::string& b = (*bytes)[static_cast<size_t>(id)];
        if (std::any_of(b.begin(), b.end(), [](char c) { return static_cast<uint8_t>(c) >= 0xF8; }))
          special[static_cast<size_t>(id)] = 1;
      }
      for (const auto& [m, id] : marker_tokens_) special[static_cast<size_t>(id)] = 0;
    }
    std::vector<int32_t> special_ids;
    for (int id = 0; id < n; ++id)
      if (special[static_cast<size_t>(id)]) special_ids.push_back(id);
    std::vector<int32_t> eos(tokenizer_.eos_ids().begin(), tokenizer_.eos_ids().end());
    auto vocab = grammar::Vocabulary::create(grammar_bytes, special_ids, eos);
    if (!vocab.is_ok()) {
      vocab_status_ = internal_error("the grammar vocabulary of this tokenizer: " + vocab.status().message());
      return;
    }
    token_bytes_ = std::move(bytes);
    vocab_ = std::move(vocab).value();
    cache_ = std::make_unique<grammar::GrammarCache>(vocab_, capacity_, limits_);
  });
  if (!vocab_status_.is_ok()) return vocab_status_;
  return cache_.get();
}

Result<ConstraintPlan> OutputConstraints::plan(const api::OpenAiRequest& r, const ChatFormat& format, bool reasoning_open,
                                               std::string& param) {
  ConstraintPlan plan;
  const bool tools = !r.tools.empty() && r.tool_choice != api::ToolChoiceKind::kNone;
  const bool forced_call = tools && (r.tool_choice == api::ToolChoiceKind::kRequired || r.tool_choice == api::ToolChoiceKind::kNamed);
  const api::ResponseFormat& rf = r.response_format;
  if (rf.kind != api::ResponseFormatKind::kText && tools) {
    param = "response_format";
    return invalid_argument("'response_format' and 'tools' together are not supported: give one of them");
  }
  if (rf.kind != api::ResponseFormatKind::kText) {
    param = "response_format";
    GrammarKind kind = GrammarKind::kJsonObject;
    std::string source;
    switch (rf.kind) {
      case api::ResponseFormatKind::kJsonObject: break;
      case api::ResponseFormatKind::kJsonSchema: kind = GrammarKind::kJsonSchema; source = rf.schema.dump(); break;
      case api::ResponseFormatKind::kRegex: kind = GrammarKind::kRegex; source = rf.grammar; break;
      case api::ResponseFormatKind::kEbnf: kind = GrammarKind::kGbnf; source = rf.grammar; break;
      case api::ResponseFormatKind::kText: break;
    }
    DENSA_ASSIGN_OR_RETURN(grammar::GrammarCache * grammars, cache(format.tool_parser));
    Result<std::shared_ptr<const CompiledGrammar>> g = grammars->get(kind, source);
    if (!g.is_ok()) return invalid_argument("'response_format': " + g.status().message());
    plan.grammar = std::move(g).value();
  } else if (tools) {
    param = "tools";
    const std::string& parser = format.tool_parser;
    if (!has_call_grammar(parser)) {
      if (forced_call)
        return invalid_argument("tool_choice '" + std::string(r.tool_choice == api::ToolChoiceKind::kNamed ? "named" : "required") +
                                "' needs a call grammar, which densa has for the hermes / qwen3, kimi_k2, glm45 and "
                                "deepseek_v3 / deepseek_v31 formats (this model's is " + parser + "); use tool_choice auto");
      return plan;  // auto: calls are parsed from the output, unconstrained
    }
    DENSA_ASSIGN_OR_RETURN(grammar::GrammarCache * grammars, cache(parser));
    const MarkerBytes mk{&marker_tokens_};
    // Forced: the grammar holds the whole call block from its opening marker. Auto: the
    // grammar engages after the opening marker (the marker token, or its text when the
    // vocabulary spells it in pieces) and holds the rest of the block.
    const bool with_open = forced_call;
    const bool parallel = r.parallel_tool_calls;
    std::string opener;
    std::function<Result<Grammar>()> build;
    if (hermes_like(parser)) {
      opener = kHermesOpen;
      build = [&] { return hermes_calls(r, with_open, forced_call && parallel); };
    } else if (parser == "kimi_k2") {
      opener = "<|tool_calls_section_begin|>";
      build = [&] { return kimi_calls(r, mk, with_open, parallel); };
    } else if (parser == "deepseek_v3" || parser == "deepseek_v31") {
      opener = "<｜tool▁calls▁begin｜>";
      build = [&] { return deepseek_calls(r, mk, parser == "deepseek_v3", with_open, parallel); };
    } else {
      opener = "<tool_call>";
      build = [&] { return glm_calls(r, mk, with_open, forced_call && parallel); };
    }
    const std::string key = parser + "|" + (with_open ? "forced|" : "auto|") + (parallel ? "parallel|" : "single|") +
                            r.tool_choice_name + "|" + r.tools.dump();
    Result<std::shared_ptr<const CompiledGrammar>> g = grammars->get_custom(key, build);
    if (!g.is_ok()) return invalid_argument("'tools': " + g.status().message());
    plan.grammar = std::move(g).value();
    if (!forced_call) {
      const auto token = marker_tokens_.find(opener);
      if (token != marker_tokens_.end()) plan.trigger_token = token->second;
      else plan.trigger = opener;
      // A section format holds all of a turn's calls in one block; one-call-per-block formats
      // watch for the next block when parallel calls are allowed.
      plan.repeat = (hermes_like(parser) || glm_like(parser)) && parallel;
    }
  } else {
    return plan;
  }
  // Reasoning stays free: a constraint from the start waits for the end of the thinking block.
  if (reasoning_open && plan.trigger.empty() && plan.trigger_token < 0) plan.trigger = kReasoningEnd;
  param.clear();
  return plan;
}

std::shared_ptr<TokenConstraint> OutputConstraints::make(const ConstraintPlan& plan) const {
  if (plan.grammar == nullptr) return nullptr;
  return std::make_shared<LazyGrammarConstraint>(plan, token_bytes_);
}

}  // namespace densa::server
