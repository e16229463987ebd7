#include "server/output_constraint.h"

#include <algorithm>

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

// Free until `trigger` appears in the text, then the grammar's matcher decides; with `repeat`
// it lets go when the grammar completes and watches for the trigger again.
class LazyGrammarConstraint : public TokenConstraint {
 public:
  LazyGrammarConstraint(ConstraintPlan plan, std::shared_ptr<const std::vector<std::string>> token_bytes)
      : plan_(std::move(plan)), token_bytes_(std::move(token_bytes)) {
    if (plan_.trigger.empty()) matcher_.emplace(plan_.grammar);
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

// One hermes call's JSON object for `tool`: {"name": "NAME", "arguments": ARGS}.
Result<Grammar> hermes_call(const nlohmann::ordered_json& tool) {
  const nlohmann::ordered_json& fn = tool["function"];
  const std::string name = fn["name"].get<std::string>();
  Grammar args;
  if (fn.contains("parameters") && fn["parameters"].is_object()) {
    Result<Grammar> g = grammar::grammar_from_json_schema(fn["parameters"].dump());
    if (!g.is_ok()) return invalid_argument("tool '" + name + "' parameters: " + g.status().message());
    args = std::move(g).value();
  } else {
    args = grammar::grammar_json_object();
  }
  const Grammar head = grammar::literal_grammar("{\"name\": " + nlohmann::json(name).dump() + ", \"arguments\": ");
  const Grammar tail = grammar::literal_grammar("}");
  return grammar::sequence_grammar({&head, &args, &tail});
}

// "\n" CALL "\n</tool_call>" with CALL one of the allowed tools; `with_open` puts the opening
// tag in front; `parallel` lets further calls follow.
Result<Grammar> hermes_calls(const OpenAiRequest& r, bool with_open, bool parallel) {
  std::vector<Grammar> calls;
  for (const nlohmann::ordered_json& tool : r.tools) {
    if (r.tool_choice == ToolChoiceKind::kNamed && tool["function"]["name"] != r.tool_choice_name) continue;
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

}  // namespace

OutputConstraints::OutputConstraints(const Tokenizer& tokenizer, size_t cache_capacity,
                                     grammar::CompileLimits limits)
    : tokenizer_(tokenizer), capacity_(cache_capacity), limits_(limits) {}

bool OutputConstraints::hermes_like(const std::string& tool_parser) {
  return tool_parser == "hermes" || tool_parser == "qwen3";
}

Result<grammar::GrammarCache*> OutputConstraints::cache() {
  std::call_once(once_, [this] {
    const int n = tokenizer_.vocab_size();
    auto bytes = std::make_shared<std::vector<std::string>>(static_cast<size_t>(n));
    std::vector<int32_t> special;
    for (int id = 0; id < n; ++id) {
      (*bytes)[static_cast<size_t>(id)] = tokenizer_.token_bytes(id);
      if (tokenizer_.is_special(id)) special.push_back(id);
    }
    std::vector<int32_t> eos(tokenizer_.eos_ids().begin(), tokenizer_.eos_ids().end());
    auto vocab = grammar::Vocabulary::create(*bytes, special, eos);
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

Result<ConstraintPlan> OutputConstraints::plan(const OpenAiRequest& r, const ChatFormat& format, bool reasoning_open,
                                               std::string& param) {
  ConstraintPlan plan;
  const bool tools = !r.tools.empty() && r.tool_choice != ToolChoiceKind::kNone;
  const bool forced_call = tools && (r.tool_choice == ToolChoiceKind::kRequired || r.tool_choice == ToolChoiceKind::kNamed);
  const ResponseFormat& rf = r.response_format;
  if (rf.kind != ResponseFormatKind::kText && tools) {
    param = "response_format";
    return invalid_argument("'response_format' and 'tools' together are not supported: give one of them");
  }
  if (rf.kind != ResponseFormatKind::kText) {
    param = "response_format";
    GrammarKind kind = GrammarKind::kJsonObject;
    std::string source;
    switch (rf.kind) {
      case ResponseFormatKind::kJsonObject: break;
      case ResponseFormatKind::kJsonSchema: kind = GrammarKind::kJsonSchema; source = rf.schema.dump(); break;
      case ResponseFormatKind::kRegex: kind = GrammarKind::kRegex; source = rf.grammar; break;
      case ResponseFormatKind::kEbnf: kind = GrammarKind::kGbnf; source = rf.grammar; break;
      case ResponseFormatKind::kText: break;
    }
    DENSA_ASSIGN_OR_RETURN(grammar::GrammarCache * grammars, cache());
    Result<std::shared_ptr<const CompiledGrammar>> g = grammars->get(kind, source);
    if (!g.is_ok()) return invalid_argument("'response_format': " + g.status().message());
    plan.grammar = std::move(g).value();
  } else if (tools) {
    param = "tools";
    if (!hermes_like(format.tool_parser)) {
      if (forced_call)
        return invalid_argument("tool_choice '" + std::string(r.tool_choice == ToolChoiceKind::kNamed ? "named" : "required") +
                                "' needs a call grammar, which densa has for the hermes / qwen3 format only (this "
                                "model's is " + format.tool_parser + "); use tool_choice auto");
      return plan;  // auto: calls are parsed from the output, unconstrained
    }
    const bool with_open = forced_call;
    const std::string key = std::string("hermes|") + (with_open ? "forced|" : "auto|") +
                            (r.parallel_tool_calls ? "parallel|" : "single|") + r.tool_choice_name + "|" + r.tools.dump();
    DENSA_ASSIGN_OR_RETURN(grammar::GrammarCache * grammars, cache());
    Result<std::shared_ptr<const CompiledGrammar>> g =
        grammars->get_custom(key, [&] { return hermes_calls(r, with_open, forced_call && r.parallel_tool_calls); });
    if (!g.is_ok()) return invalid_argument("'tools': " + g.status().message());
    plan.grammar = std::move(g).value();
    if (!forced_call) {
      plan.trigger = kHermesOpen;
      plan.repeat = r.parallel_tool_calls;
    }
  } else {
    return plan;
  }
  // Reasoning stays free: a constraint from the start waits for the end of the thinking block.
  if (reasoning_open && plan.trigger.empty()) plan.trigger = kReasoningEnd;
  param.clear();
  return plan;
}

std::shared_ptr<TokenConstraint> OutputConstraints::make(const ConstraintPlan& plan) const {
  if (plan.grammar == nullptr) return nullptr;
  return std::make_shared<LazyGrammarConstraint>(plan, token_bytes_);
}

}  // namespace densa::server
