// Call grammars for every tool-call format densa constrains (server/output_constraint.h): under
// tool_choice required / named, random tokens drawn from the mask (Qwen3-sized vocabularies)
// always give a call block in the family's native format that the family's parser reads back
// with no error, whose arguments validate against the tool's schema (densa's checker and ajv,
// an independent validator); under auto the grammar engages at the call-opening marker token.
// Marker tokens are allowed only where the grammar names them (never inside a string).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "family_tokenizer.h"
#include "grammar/ajv_oracle.h"
#include "server/output_constraint.h"
#include "test_util.h"
#include "text/chat_parse/chat_parse.h"
#include "text/tokenizer_loader.h"

namespace densa::server {
namespace {

using nlohmann::ordered_json;

// Nested objects, arrays, enums, anyOf with null, integer ranges, booleans, numbers, optional
// properties; strings bounded so that random tokens finish them.
const char* kTools = R"([
 {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
   "city": {"type": "string", "maxLength": 6}, "days": {"type": "integer", "minimum": 1, "maximum": 14},
   "units": {"enum": ["c", "f"]}, "unit2": {"type": "string", "enum": ["kelvin", "rankine"]}},
   "required": ["city", "days"], "additionalProperties": false}}},
 {"type": "function", "function": {"name": "book", "parameters": {"type": "object", "properties": {
   "who": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 5}, "vip": {"type": "boolean"}},
           "required": ["name", "vip"], "additionalProperties": false},
   "legs": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"$ref": "#/$defs/leg"}},
   "class": {"anyOf": [{"enum": ["eco", "biz"]}, {"type": "null"}]},
   "price": {"type": "number", "minimum": 0, "maximum": 99},
   "note": {"type": ["string", "null"], "maxLength": 3}},
   "required": ["who", "legs", "class"], "additionalProperties": false,
   "$defs": {"leg": {"type": "object", "properties": {"from": {"type": "string", "maxLength": 4},
             "hops": {"type": "integer", "minimum": 0, "maximum": 3}}, "required": ["from", "hops"],
             "additionalProperties": false}}}}}
])";

struct Family {
  std::string parser;
  std::filesystem::path tokenizer;
  std::string opener;  // the marker that opens a call block
};

std::vector<Family> families() {
  return {{"kimi_k2", testing::family_tokenizer_dir("kimi_k2"), "<|tool_calls_section_begin|>"},
          {"glm45", testing::family_tokenizer_dir("glm45"), "<tool_call>"},
          {"deepseek_v3", testing::real_tokenizer_dir("deepseek_v3"), "<｜tool▁calls▁begin｜>"},
          {"deepseek_v31", testing::real_tokenizer_dir("deepseek_v3"), "<｜tool▁calls▁begin｜>"},
          {"qwen3", testing::real_tokenizer_dir("qwen3"), "<tool_call>"}};
}

const Tokenizer& tokenizer_of(const std::filesystem::path& dir) {
  static std::map<std::string, std::unique_ptr<LoadedTokenizer>> cache;
  auto& slot = cache[dir.string()];
  if (!slot) {
    Result<LoadedTokenizer> t = load_tokenizer(dir);
    EXPECT_TRUE(t.is_ok()) << dir << ": " << t.status().message();
    slot = std::make_unique<LoadedTokenizer>(std::move(t).value());
  }
  return slot->tokenizer;
}

api::OpenAiRequest request(api::ToolChoiceKind choice, bool parallel, const std::string& name = "") {
  api::OpenAiRequest r;
  r.kind = api::ApiKind::kChat;
  r.tools = ordered_json::parse(kTools);
  r.tool_choice = choice;
  r.tool_choice_name = name;
  r.parallel_tool_calls = parallel;
  return r;
}

struct Walk {
  std::vector<TokenId> ids;  // eos excluded
  bool ended = false;        // eos drawn
  std::string problem;
};

// Draws uniformly among the allowed tokens until an eos is drawn (or `steps`). Checks at each
// step that no token with a byte >= 0xF8 is allowed (those bytes mark marker tokens).
Walk walk(TokenConstraint& c, const Tokenizer& tok, uint64_t seed, int steps, const std::vector<char>& f8) {
  Walk w;
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> mask((tok.vocab_size() + 63) / 64);
  std::vector<TokenId> allowed;
  for (int s = 0; s < steps; ++s) {
    std::fill(mask.begin(), mask.end(), 0);
    c.fill_allowed(mask);
    allowed.clear();
    bool f8_allowed = false;
    for (int id = 0; id < tok.vocab_size(); ++id)
      if ((mask[id / 64] >> (id % 64)) & 1) {
        f8_allowed |= f8[id] != 0;
        allowed.push_back(id);
      }
    // (Outside a grammar, between calls under auto, everything is allowed.)
    if (f8_allowed && allowed.size() < static_cast<size_t>(tok.vocab_size()))
      w.problem = "a token with a marker byte is allowed under the grammar";
    if (allowed.empty()) {
      w.problem = "empty mask after " + std::to_string(w.ids.size()) + " tokens";
      return w;
    }
    const TokenId t = allowed[rng() % allowed.size()];
    if (tok.is_eos(t)) {
      w.ended = true;
      return w;
    }
    Status st = c.accept(t);
    if (!st.is_ok()) {
      w.problem = st.message();
      return w;
    }
    w.ids.push_back(t);
  }
  return w;
}

std::vector<char> marker_byte_tokens(const Tokenizer& tok) {
  std::vector<char> f8(tok.vocab_size(), 0);
  for (int id = 0; id < tok.vocab_size(); ++id) {
    const std::string b = tok.token_bytes(id);
    for (char ch : b)
      if (static_cast<uint8_t>(ch) >= 0xF8) f8[id] = 1;
  }
  return f8;
}

toolparse::ChatParseOptions parse_options(const std::string& parser) {
  toolparse::ChatParseOptions o;
  o.tool_parser = parser;
  o.tools = toolparse::ToolSet::from_openai(nlohmann::json::parse(kTools)).value();
  o.ids = toolparse::seeded_ids(1);
  return o;
}

// Every call of `text` closed without error, names a tool, and validates; returns the
// arguments per tool name for ajv.
void check_calls(const std::string& parser, const std::string& text, size_t min_calls, size_t max_calls,
                 const std::string& only_name, std::map<std::string, std::vector<std::string>>* args,
                 const std::string& where) {
  const toolparse::ChatParseOptions o = parse_options(parser);
  Result<toolparse::ParsedMessage> m = toolparse::parse_chat_output(text, o);
  ASSERT_TRUE(m.is_ok()) << where << m.status().message();
  EXPECT_GE(m->tool_calls.size(), min_calls) << where << text;
  EXPECT_LE(m->tool_calls.size(), max_calls) << where << text;
  for (const toolparse::ToolCall& call : m->tool_calls) {
    EXPECT_EQ(call.error, "") << where << text;
    // densa's own checker does not follow $ref (book's legs): it says so, and ajv decides.
    const Status valid = toolparse::validate_tool_call(call, o.tools);
    EXPECT_TRUE(valid.is_ok() || (call.name == "book" && valid.code() == StatusCode::kUnimplemented))
        << where << call.arguments << ": " << valid.message();
    if (!only_name.empty()) {
      EXPECT_EQ(call.name, only_name) << where;
    }
    (*args)[call.name].push_back(call.arguments);
  }
  // The streaming parser, fed one byte at a time, folds to the same calls.
  auto sp = toolparse::ChatStreamParser::create(o).value();
  for (char ch : text) sp->feed(std::string_view(&ch, 1));
  sp->finish();
  ASSERT_EQ(sp->message().tool_calls.size(), m->tool_calls.size()) << where;
  for (size_t i = 0; i < m->tool_calls.size(); ++i) {
    EXPECT_EQ(sp->message().tool_calls[i].arguments, m->tool_calls[i].arguments) << where;
    EXPECT_EQ(sp->message().tool_calls[i].id, m->tool_calls[i].id) << where;
  }
}

// Validates arguments per tool with ajv (tests/grammar/validate_with_ajv.cjs).
void validate_with_ajv(const std::map<std::string, std::vector<std::string>>& args, size_t expect) {
  nlohmann::json cases = nlohmann::json::array();
  for (const auto& t : nlohmann::json::parse(kTools)) {
    const std::string name = t["function"]["name"];
    nlohmann::json outputs = nlohmann::json::array();
    if (args.count(name))
      for (const std::string& a : args.at(name)) outputs.push_back(a);
    cases.push_back({{"schema", t["function"]["parameters"]}, {"outputs", outputs}});
  }
  expect_all_valid_with_ajv(cases, expect, "densa_call_ajv_cases");
}

TEST(OutputConstraint, ForcedCallsInEveryFamilyParseAndValidate) {
  constexpr int kSeeds = 12;
  for (const Family& f : families()) {
    const Tokenizer& tok = tokenizer_of(f.tokenizer);
    const std::vector<char> f8 = marker_byte_tokens(tok);
    OutputConstraints oc(tok);
    ChatFormat format;
    format.tool_parser = f.parser;
    std::map<std::string, std::vector<std::string>> args;
    size_t total = 0;
    struct Mode { api::ToolChoiceKind choice; bool parallel; std::string name; };
    for (const Mode& mode : {Mode{api::ToolChoiceKind::kRequired, false, ""}, Mode{api::ToolChoiceKind::kRequired, true, ""},
                             Mode{api::ToolChoiceKind::kNamed, false, "book"}}) {
      const api::OpenAiRequest r = request(mode.choice, mode.parallel, mode.name);
      std::string param;
      Result<ConstraintPlan> plan = oc.plan(r, format, false, param);
      ASSERT_TRUE(plan.is_ok()) << f.parser << ": " << plan.status().message();
      ASSERT_NE(plan->grammar, nullptr);
      for (int seed = 0; seed < kSeeds; ++seed) {
        const std::string where = f.parser + (mode.parallel ? " parallel" : "") + " " + mode.name + " seed " +
                                  std::to_string(seed) + ": ";
        std::shared_ptr<TokenConstraint> c = oc.make(*plan);
        const Walk w = walk(*c, tok, 100 + seed, 2000, f8);
        ASSERT_TRUE(w.problem.empty()) << where << w.problem;
        ASSERT_TRUE(w.ended) << where << tok.decode(w.ids, false);
        const std::string text = tok.decode(w.ids, /*skip_special=*/false);
        // The block opens with the family's marker token itself (hermes: its text, which
        // plain tokens may spell).
        ASSERT_FALSE(w.ids.empty());
        if (f.parser != "qwen3") {
          EXPECT_EQ(tok.token_bytes(w.ids[0]), f.opener) << where << text;
        }
        const size_t before = args["get_weather"].size() + args["book"].size();
        check_calls(f.parser, text, 1, mode.parallel ? 1000 : 1, mode.name, &args, where);
        total += args["get_weather"].size() + args["book"].size() - before;
      }
    }
    SCOPED_TRACE(f.parser);
    validate_with_ajv(args, total);
  }
}

TEST(OutputConstraint, AutoEngagesAtTheCallMarkerToken) {
  for (const Family& f : families()) {
    const Tokenizer& tok = tokenizer_of(f.tokenizer);
    const std::vector<char> f8 = marker_byte_tokens(tok);
    OutputConstraints oc(tok);
    ChatFormat format;
    format.tool_parser = f.parser;
    std::string param;
    Result<ConstraintPlan> plan = oc.plan(request(api::ToolChoiceKind::kAuto, true), format, false, param);
    ASSERT_TRUE(plan.is_ok()) << f.parser << ": " << plan.status().message();
    const std::optional<TokenId> opener = tok.token_to_id(f.opener);
    ASSERT_TRUE(opener.has_value()) << f.parser;
    if (f.parser != "qwen3") {
      EXPECT_EQ(plan->trigger_token, *opener) << f.parser;
    }
    std::map<std::string, std::vector<std::string>> args;
    size_t total = 0;
    for (int seed = 0; seed < 6; ++seed) {
      const std::string where = f.parser + " auto seed " + std::to_string(seed) + ": ";
      std::shared_ptr<TokenConstraint> c = oc.make(*plan);
      // Free text first: everything is allowed.
      std::vector<TokenId> ids = tok.encode("Let me check.", false);
      std::vector<uint64_t> mask((tok.vocab_size() + 63) / 64);
      c->fill_allowed(mask);
      for (int id = 0; id < tok.vocab_size(); ++id) ASSERT_TRUE((mask[id / 64] >> (id % 64)) & 1) << where << id;
      for (TokenId t : ids) ASSERT_TRUE(c->accept(t).is_ok());
      ASSERT_TRUE(c->accept(*opener).is_ok());
      ids.push_back(*opener);
      // Now the grammar holds the block; draw until it lets go (one-call formats) or eos.
      Walk w = walk(*c, tok, 500 + seed, 2000, f8);
      ASSERT_TRUE(w.problem.empty()) << where << w.problem;
      ids.insert(ids.end(), w.ids.begin(), w.ids.end());
      if (!w.ended) {
        // hermes / GLM: after a call the grammar lets go; the walk drew free tokens after it.
        ASSERT_TRUE(f.parser == "qwen3" || f.parser == "glm45") << where << tok.decode(ids, false);
      }
      const std::string text = tok.decode(ids, false);
      const size_t before = args["get_weather"].size() + args["book"].size();
      if (w.ended) {
        check_calls(f.parser, text, 1, 1000, "", &args, where);
        total += args["get_weather"].size() + args["book"].size() - before;
      }
    }
    validate_with_ajv(args, total);
  }
}

// Inside a JSON string or a raw GLM value the marker tokens are masked out, though their text
// would fit the string: only where the grammar names a marker may its token come.
TEST(OutputConstraint, MarkerTokensOnlyWhereTheGrammarNamesThem) {
  struct Case { std::string parser; std::filesystem::path tok; std::string prefix; std::vector<std::string> markers; };
  const std::vector<Case> cases = {
      {"kimi_k2", testing::family_tokenizer_dir("kimi_k2"),
       "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"a",
       {"<|tool_call_end|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>"}},
      {"deepseek_v31", testing::real_tokenizer_dir("deepseek_v3"),
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"a",
       {"<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>", "<｜tool▁sep｜>"}},
      {"glm45", testing::family_tokenizer_dir("glm45"),
       "<tool_call>book\n<arg_key>who</arg_key>\n<arg_value>{\"name\": \"a",
       {"</arg_value>", "</tool_call>", "<arg_key>"}},
  };
  for (const Case& k : cases) {
    const Tokenizer& tok = tokenizer_of(k.tok);
    OutputConstraints oc(tok);
    ChatFormat format;
    format.tool_parser = k.parser;
    std::string param;
    Result<ConstraintPlan> plan = oc.plan(request(api::ToolChoiceKind::kRequired, true), format, false, param);
    ASSERT_TRUE(plan.is_ok()) << plan.status().message();
    std::shared_ptr<TokenConstraint> c = oc.make(*plan);
    for (TokenId t : tok.encode(k.prefix, false)) ASSERT_TRUE(c->accept(t).is_ok()) << k.parser << " token " << t;
    std::vector<uint64_t> mask((tok.vocab_size() + 63) / 64);
    c->fill_allowed(mask);
    auto allowed = [&](TokenId id) { return ((mask[id / 64] >> (id % 64)) & 1) != 0; };
    for (const std::string& m : k.markers) {
      const std::optional<TokenId> id = tok.token_to_id(m);
      ASSERT_TRUE(id.has_value()) << m;
      EXPECT_FALSE(allowed(*id)) << k.parser << ": marker " << m << " allowed inside a string";
    }
    // Plain text is allowed there, '<' included.
    EXPECT_TRUE(allowed(tok.encode("<", false).at(0))) << k.parser;
    EXPECT_TRUE(allowed(tok.encode("b", false).at(0))) << k.parser;
  }
  // A raw GLM string value: no '<' (so no closing tag can appear inside), and its end marker.
  const Tokenizer& glm = tokenizer_of(testing::family_tokenizer_dir("glm45"));
  OutputConstraints oc(glm);
  ChatFormat format;
  format.tool_parser = "glm45";
  std::string param;
  Result<ConstraintPlan> plan = oc.plan(request(api::ToolChoiceKind::kRequired, false), format, false, param);
  ASSERT_TRUE(plan.is_ok());
  std::shared_ptr<TokenConstraint> c = oc.make(*plan);
  for (TokenId t : glm.encode("<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Os", false))
    ASSERT_TRUE(c->accept(t).is_ok());
  std::vector<uint64_t> mask((glm.vocab_size() + 63) / 64);
  c->fill_allowed(mask);
  auto allowed = [&](TokenId id) { return ((mask[id / 64] >> (id % 64)) & 1) != 0; };
  EXPECT_TRUE(allowed(*glm.token_to_id("</arg_value>")));
  EXPECT_FALSE(allowed(*glm.token_to_id("</tool_call>")));
  EXPECT_FALSE(allowed(glm.encode("<", false).at(0)));
  EXPECT_TRUE(allowed(glm.encode("lo", false).at(0)));
}

TEST(OutputConstraint, RefusalsNameTheProblem) {
  const Tokenizer& glm = tokenizer_of(testing::family_tokenizer_dir("glm45"));
  OutputConstraints oc(glm);
  ChatFormat format;
  format.tool_parser = "glm45";
  api::OpenAiRequest r = request(api::ToolChoiceKind::kRequired, false);
  r.tools = ordered_json::parse(R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
      "properties": {"code": {"type": "string", "pattern": "^[a-z]+$"}}}}}])");
  std::string param;
  Result<ConstraintPlan> plan = oc.plan(r, format, false, param);
  ASSERT_FALSE(plan.is_ok());
  EXPECT_EQ(param, "tools");
  EXPECT_NE(plan.status().message().find("'pattern'"), std::string::npos) << plan.status().message();
  EXPECT_NE(plan.status().message().find("'code'"), std::string::npos) << plan.status().message();

  format.tool_parser = "qwen3_coder";
  plan = oc.plan(request(api::ToolChoiceKind::kRequired, false), format, false, param);
  ASSERT_FALSE(plan.is_ok());
  EXPECT_NE(plan.status().message().find("qwen3_coder"), std::string::npos) << plan.status().message();
  // response_format and tools together are refused, naming response_format.
  api::OpenAiRequest both = request(api::ToolChoiceKind::kAuto, false);
  both.response_format.kind = api::ResponseFormatKind::kJsonObject;
  plan = oc.plan(both, format, false, param);
  ASSERT_FALSE(plan.is_ok());
  EXPECT_EQ(param, "response_format");
  EXPECT_NE(plan.status().message().find("'response_format' and 'tools' together"), std::string::npos);
  // auto on a format without a call grammar: unconstrained, parsed from the output.
  plan = oc.plan(request(api::ToolChoiceKind::kAuto, false), format, false, param);
  ASSERT_TRUE(plan.is_ok());
  EXPECT_EQ(plan->grammar, nullptr);
}

}  // namespace
}  // namespace densa::server
