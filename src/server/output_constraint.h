#pragma once
// Grammar-constrained output for chat requests (grammar/, sample/token_constraint.h):
// response_format json_object / json_schema / regex / ebnf, and tool calls: under
// tool_choice `required` or a named function the answer is the model family's call format
// (hermes / qwen3, Kimi K2, GLM-4.5+ XML arguments, DeepSeek V3 / V3.1) with each tool's
// argument schema; under `auto` the call grammar engages at the text that
// opens a call and lets go when the call closes. When the prompt opened a thinking block, a
// constraint engages only after the block's end marker, so reasoning stays free.
//
// The vocabulary (token bytes of the server's tokenizer) and the compiled grammars (by kind and
// source) are built once per server and shared by every request; a request's constraint is
// its own matcher over them. Masks depend only on the grammar and the request's tokens.
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "api/openai_request.h"
#include "core/status.h"
#include "grammar/grammar_cache.h"
#include "sample/token_constraint.h"
#include "server/chat_prompt.h"
#include "text/tokenizer.h"

namespace densa::server {

// What one request's constraint is made of; `grammar` null: unconstrained.
struct ConstraintPlan {
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  std::string trigger;     // engage at this text ("" = from the first token)
  TokenId trigger_token = -1;  // or right after this token (a call format's marker token)
  bool repeat = false;     // after the grammar completes, wait for the trigger again (auto tools)
};

class OutputConstraints {
 public:
  // `limits` bound every grammar compiled here (--grammar-max-elements, --grammar-max-positions).
  explicit OutputConstraints(const Tokenizer& tokenizer, size_t cache_capacity = 64,
                             grammar::CompileLimits limits = {});

  // The plan for a chat request. Errors (invalid_argument, param in `param`): a schema,
  // pattern or grammar densa cannot compile, or a tool-call format with no grammar here.
  Result<ConstraintPlan> plan(const api::OpenAiRequest& request, const ChatFormat& format, bool reasoning_open,
                              std::string& param);
  // A fresh per-choice constraint for `plan` (null when plan.grammar is null).
  std::shared_ptr<TokenConstraint> make(const ConstraintPlan& plan) const;

  // With parallel_tool_calls a Kimi K2 turn's grammar numbers its calls functions.NAME:0, :1, ...
  // as K2's template does, up to this many calls in the section.
  static constexpr int kMaxNumberedCalls = 8;

  // Parser names: the hermes / qwen3 format; the GLM-4.5+ XML-argument format; any format
  // with a call grammar here (hermes, kimi_k2, glm45 and aliases, deepseek_v3, deepseek_v31).
  static bool hermes_like(const std::string& tool_parser);
  static bool glm_like(const std::string& tool_parser);
  static bool has_call_grammar(const std::string& tool_parser);

 private:
  // Built at the first constrained request; an error if the vocabulary cannot be built. The
  // server's tool parser decides which marker tokens the vocabulary treats as markers.
  Result<grammar::GrammarCache*> cache(const std::string& tool_parser);

  const Tokenizer& tokenizer_;
  size_t capacity_;
  grammar::CompileLimits limits_;
  std::once_flag once_;
  Status vocab_status_;
  std::shared_ptr<const grammar::Vocabulary> vocab_;
  std::unique_ptr<grammar::GrammarCache> cache_;
  // [vocab] token bytes for the lazy trigger; shared with the constraints, which may outlive
  // this object in requests the engine is still finishing.
  std::shared_ptr<const std::vector<std::string>> token_bytes_;
  // The call format's markers that are single tokens, by text (set once in cache()).
  std::map<std::string, TokenId> marker_tokens_;
};

}  // namespace densa::server
