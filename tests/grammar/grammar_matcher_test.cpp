// Matchers over the real Qwen3 vocabulary (151K tokens): masks equal a brute-force check of
// every token, random generation under the mask gives documents ajv validates, tool-call
// grammars from pieces, lazy start, determinism across matchers and threads, the cache.
#include <cstdio>
#include <fstream>
#include <random>
#include <thread>

#include "grammar/gbnf.h"
#include "grammar/grammar_cache.h"
#include "grammar/json_schema.h"
#include "grammar/pda.h"
#include "grammar/regex.h"
#include "ajv_oracle.h"
#include "grammar_test_util.h"

namespace densa::grammar {
namespace {

using testing::qwen3_vocab;

std::shared_ptr<const CompiledGrammar> qwen_schema(const std::string& text) {
  auto g = grammar_from_json_schema(text);
  EXPECT_TRUE(g.is_ok()) << g.status().to_string();
  if (!g.is_ok()) return nullptr;
  auto c = compile(*g, qwen3_vocab().vocab);
  EXPECT_TRUE(c.is_ok()) << c.status().to_string();
  return c.is_ok() ? *c : nullptr;
}

bool bit(const std::vector<uint64_t>& m, int32_t id) { return (m[id >> 6] >> (id & 63)) & 1; }

// The k-th set bit of m (k < popcount of m).
int32_t kth_bit(const std::vector<uint64_t>& m, uint64_t k) {
  for (size_t w = 0; w < m.size(); ++w) {
    const uint64_t n = static_cast<uint64_t>(__builtin_popcountll(m[w]));
    if (k < n) {
      uint64_t bits = m[w];
      for (; k > 0; --k) bits &= bits - 1;
      return static_cast<int32_t>(w * 64 + __builtin_ctzll(bits));
    }
    k -= n;
  }
  return -1;
}

// One random token allowed by the mask; a quarter of the time from the allowed tokens that
// hold a closing character or are eos (so documents finish in reasonable length).
int32_t pick(const std::vector<uint64_t>& mask, const Vocabulary& v, std::mt19937_64& rng) {
  // Built once (thread-safe static); every caller uses the Qwen3 vocabulary.
  static const Vocabulary* const first = &v;
  static const std::vector<uint64_t> closing_set = [&] {
    std::vector<uint64_t> set(v.mask_words(), 0);
    for (int32_t id = 0; id < static_cast<int32_t>(v.size()); ++id)
      if (v.is_eos(id) || v.token_bytes(id).find_first_of("\"]},") != std::string::npos)
        set[id >> 6] |= uint64_t{1} << (id & 63);
    return set;
  }();
  CHECK(first == &v) << "pick() serves one vocabulary";
  std::vector<uint64_t> closing(mask.size());
  uint64_t n_all = 0, n_closing = 0;
  for (size_t w = 0; w < mask.size(); ++w) {
    closing[w] = mask[w] & closing_set[w];
    n_all += static_cast<uint64_t>(__builtin_popcountll(mask[w]));
    n_closing += static_cast<uint64_t>(__builtin_popcountll(closing[w]));
  }
  if (n_all == 0) return -1;
  if (n_closing > 0 && rng() % 4 == 0) return kth_bit(closing, rng() % n_closing);
  return kth_bit(mask, rng() % n_all);
}

struct Generated {
  std::string text;
  bool terminated = false;
  std::string problem;
};

Generated generate(const std::shared_ptr<const CompiledGrammar>& g, uint64_t seed, int max_tokens) {
  const Vocabulary& v = g->vocab();
  std::mt19937_64 rng(seed);
  Matcher m(g);
  Generated out;
  for (int step = 0; step < max_tokens; ++step) {
    const auto mask = m.mask();
    const int32_t id = pick(mask, v, rng);
    if (id < 0) {
      out.problem = "empty mask after '" + out.text + "'";
      return out;
    }
    if (!m.accept_token(id)) {
      out.problem = "masked token " + std::to_string(id) + " refused after '" + out.text + "'";
      return out;
    }
    if (v.is_eos(id)) {
      out.terminated = m.is_terminated();
      if (!out.terminated) out.problem = "eos accepted but not terminated";
      return out;
    }
    out.text += v.token_bytes(id);
  }
  out.problem = "no eos within " + std::to_string(max_tokens) + " tokens: '" + out.text + "'";
  return out;
}

const std::vector<std::string>& test_schemas() {
  static const std::vector<std::string> k = {
      R"({"type":"object","properties":{"location":{"type":"string","maxLength":20},
          "unit":{"enum":["celsius","fahrenheit"]},"days":{"type":"integer","minimum":1,"maximum":14}},
          "required":["location","unit"],"additionalProperties":false})",
      R"({"type":"object","properties":{
          "name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":150},
          "address":{"type":"object","properties":{"city":{"type":"string"},"zip":{"type":"string","pattern":"^[0-9]{5}$"}},
                     "required":["city"]},
          "tags":{"type":"array","items":{"type":"string","minLength":1,"maxLength":8},"maxItems":3},
          "nickname":{"anyOf":[{"type":"string"},{"type":"null"}]}},
          "required":["name","address"]})",
      R"({"$defs":{"node":{"type":"object","properties":{"value":{"type":"number"},
          "children":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["value"]}},
          "$ref":"#/$defs/node"})",
      R"({"type":"object","properties":{
          "shape":{"anyOf":[
             {"type":"object","properties":{"kind":{"const":"circle"},"r":{"type":"number","minimum":0,"maximum":100}},"required":["kind","r"]},
             {"type":"object","properties":{"kind":{"const":"rect"},"w":{"type":"integer"},"h":{"type":"integer"}},"required":["kind","w","h"]}]},
          "point":{"type":"array","prefixItems":[{"type":"integer"},{"type":"integer"}],"items":false,"minItems":2}},
          "required":["shape","point"]})",
      R"({"type":"array","items":{"type":["boolean","null","integer"]},"minItems":1,"maxItems":4})",
      R"({"type":"object","properties":{"id":{"type":"integer"},"flags":{"type":"array","items":{"enum":["a","b",1,true]}}},
          "required":["id"],"additionalProperties":{"type":"string","maxLength":6}})",
      R"({"type":"object","properties":{"q":{"type":"string","pattern":"^(yes|no|maybe)!?$"},
          "n":{"type":"integer","minimum":-50,"maximum":-3},"any":{}},"required":["q","n"]})",
  };
  return k;
}

TEST(GrammarMatcher, MaskEqualsBruteForceOverTheVocabulary) {
  ASSERT_NE(qwen3_vocab().vocab, nullptr) << "missing " << testing::qwen3_tokenizer_path();
  const Vocabulary& v = *qwen3_vocab().vocab;
  std::vector<std::shared_ptr<const CompiledGrammar>> grammars;
  for (const auto& s : test_schemas()) grammars.push_back(qwen_schema(s));
  // Small GBNF rules (inlined), a recursive rule, and a regex.
  const char* gbnf = R"g(root ::= "(" list ")"
    list ::= item ("," ws item)*
    item ::= word | num | "(" list ")"
    word ::= letter+
    letter ::= [a-zA-Z_]
    num ::= digit{1,4}
    digit ::= [0-9]
    ws ::= " "?)g";
  for (auto g : {grammar_from_gbnf(gbnf), grammar_from_regex("(the|a) [a-z]{2,6}( [a-z]+)*[.!?]")}) {
    ASSERT_TRUE(g.is_ok()) << g.status().to_string();
    auto c = compile(*g, qwen3_vocab().vocab);
    ASSERT_TRUE(c.is_ok()) << c.status().to_string();
    grammars.push_back(*c);
  }
  int checked_states = 0;
  for (size_t s = 0; s < grammars.size(); ++s) {
    const auto& g = grammars[s];
    ASSERT_NE(g, nullptr);
    std::mt19937_64 rng(100 + s);
    Matcher m(g);
    for (int step = 0; step < 40; ++step) {
      const auto mask = m.mask();
      if (step % 8 == 0) {
        for (int32_t id = 0; id < static_cast<int32_t>(v.size()); ++id) {
          Matcher probe = m;
          ASSERT_EQ(bit(mask, id), probe.accept_token(id))
              << "grammar " << s << " step " << step << " token " << id << " '" << v.token_bytes(id) << "'";
        }
        ++checked_states;
      }
      const int32_t id = pick(mask, v, rng);
      ASSERT_GE(id, 0);
      ASSERT_TRUE(m.accept_token(id));
      if (m.is_terminated()) break;
    }
  }
  EXPECT_GE(checked_states, 25);
}

TEST(GrammarMatcher, RandomGenerationValidatesWithAjv) {
  ASSERT_NE(qwen3_vocab().vocab, nullptr) << "missing " << testing::qwen3_tokenizer_path();
  const auto& schemas = test_schemas();
  std::vector<std::shared_ptr<const CompiledGrammar>> compiled;
  for (const auto& s : schemas) {
    compiled.push_back(qwen_schema(s));
    ASSERT_NE(compiled.back(), nullptr);
  }
  nlohmann::json cases = nlohmann::json::array();
  for (const auto& s : schemas) cases.push_back({{"schema", nlohmann::json::parse(s)}, {"outputs", nlohmann::json::array()}});
  constexpr int kRuns = 500;
  for (int run = 0; run < kRuns; ++run) {
    const size_t s = run % schemas.size();
    const Generated gen = generate(compiled[s], 1000 + run, 3000);
    ASSERT_TRUE(gen.terminated) << "schema " << s << " seed " << 1000 + run << ": " << gen.problem;
    ASSERT_TRUE(nlohmann::json::accept(gen.text)) << gen.text;
    cases[s]["outputs"].push_back(gen.text);
  }
  expect_all_valid_with_ajv(cases, kRuns, "densa_grammar_ajv_cases");
}

Grammar tool_call_grammar() {
  const char* weather = R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})";
  const char* sum = R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"]})";
  static Grammar tools[2] = {grammar_from_json_schema(weather).value(), grammar_from_json_schema(sum).value()};
  static Grammar pre[2] = {literal_grammar("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "),
                           literal_grammar("<tool_call>\n{\"name\": \"add\", \"arguments\": ")};
  static Grammar post = literal_grammar("}\n</tool_call>");
  Grammar calls[2] = {sequence_grammar({&pre[0], &tools[0], &post}), sequence_grammar({&pre[1], &tools[1], &post})};
  return alternation_grammar({&calls[0], &calls[1]});
}

TEST(GrammarMatcher, ToolCallGrammarFromPiecesAndLazyStart) {
  ASSERT_NE(qwen3_vocab().vocab, nullptr);
  auto c = compile(tool_call_grammar(), qwen3_vocab().vocab);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  {
    Matcher m(*c);
    EXPECT_TRUE(m.accept_bytes("<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": -2}}\n</tool_call>"));
    EXPECT_TRUE(m.is_terminated());  // nothing can follow
  }
  {
    Matcher m(*c);
    EXPECT_FALSE(m.accept_bytes("<tool_call>\n{\"name\": \"sub\""));
    EXPECT_FALSE(m.accept_bytes("<tool_call>\n{\"name\": \"add\", \"arguments\": {\"city\""));
  }
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const Generated gen = generate(*c, seed, 2000);
    ASSERT_TRUE(gen.terminated) << gen.problem;
    const std::string prefix = "<tool_call>\n";
    ASSERT_EQ(gen.text.rfind(prefix, 0), 0u) << gen.text;
    const std::string body = gen.text.substr(prefix.size(), gen.text.size() - prefix.size() - std::string("\n</tool_call>").size());
    const auto call = nlohmann::json::parse(body);
    EXPECT_TRUE(call["name"] == "add" || call["name"] == "get_weather") << body;
    if (call["name"] == "add") {
      EXPECT_TRUE(call["arguments"]["a"].is_number_integer()) << body;
    } else {
      EXPECT_TRUE(call["arguments"]["city"].is_string()) << body;
    }
  }
  // Started lazily after the opening token was already produced: feed its text as bytes.
  Matcher late(*c);
  ASSERT_TRUE(late.accept_bytes("<tool_call>"));
  const auto mask = late.mask();
  const Vocabulary& v = *qwen3_vocab().vocab;
  for (int32_t id = 0; id < static_cast<int32_t>(v.size()); ++id)
    if (bit(mask, id)) {
      EXPECT_EQ(v.token_bytes(id)[0], '\n') << v.token_bytes(id);
    }
}

TEST(GrammarMatcher, MasksAreDeterministicAcrossMatchersAndThreads) {
  ASSERT_NE(qwen3_vocab().vocab, nullptr);
  auto g = qwen_schema(test_schemas()[1]);
  ASSERT_NE(g, nullptr);
  // Reference: one matcher alone, recording its tokens and masks.
  std::vector<int32_t> tokens;
  std::vector<std::vector<uint64_t>> masks;
  {
    std::mt19937_64 rng(5);
    Matcher m(g);
    while (!m.is_terminated() && tokens.size() < 200) {
      masks.push_back(m.mask());
      tokens.push_back(pick(masks.back(), g->vocab(), rng));
      ASSERT_TRUE(m.accept_token(tokens.back()));
    }
  }
  auto replay = [&](bool* same) {
    Matcher a(g), other(g);
    std::mt19937_64 rng(9);
    *same = true;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (!other.is_terminated()) {  // a neighbour in another state, as in a batch
        const auto om = other.mask();
        other.accept_token(pick(om, g->vocab(), rng));
      }
      if (a.mask() != masks[i]) *same = false;
      a.accept_token(tokens[i]);
    }
  };
  bool results[4];
  std::vector<std::thread> threads;
  for (bool& r : results) threads.emplace_back(replay, &r);
  for (auto& t : threads) t.join();
  for (bool r : results) EXPECT_TRUE(r);
}

TEST(GrammarCache, HitsMissesAndEviction) {
  ASSERT_NE(qwen3_vocab().vocab, nullptr);
  GrammarCache cache(qwen3_vocab().vocab, 2);
  auto a = cache.get(GrammarKind::kRegex, "[ab]+");
  ASSERT_TRUE(a.is_ok());
  auto a2 = cache.get(GrammarKind::kRegex, "[ab]+");
  ASSERT_TRUE(a2.is_ok());
  EXPECT_EQ(a->get(), a2->get());
  auto gbnf = cache.get(GrammarKind::kGbnf, "[ab]+");
  EXPECT_FALSE(gbnf.is_ok());  // same source, other kind: a GBNF syntax error
  auto b = cache.get(GrammarKind::kGbnf, "root ::= [ab]+");
  ASSERT_TRUE(b.is_ok());
  EXPECT_NE(a->get(), b->get());
  auto obj = cache.get(GrammarKind::kJsonObject, "");
  ASSERT_TRUE(obj.is_ok());
  EXPECT_EQ(cache.size(), 2u);  // the regex was evicted
  auto a3 = cache.get(GrammarKind::kRegex, "[ab]+");
  ASSERT_TRUE(a3.is_ok());
  EXPECT_NE(a->get(), a3->get());
  EXPECT_EQ(cache.hits(), 1u);
  auto bad = cache.get(GrammarKind::kJsonSchema, R"({"type":"object","format":"x"})");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("format"), std::string::npos);
  auto custom = cache.get_custom("tools:v1", [] { return Result<Grammar>(tool_call_grammar()); });
  ASSERT_TRUE(custom.is_ok());
  EXPECT_EQ(cache.get_custom("tools:v1", [] { return Result<Grammar>(invalid_argument("unused")); })->get(),
            custom->get());
}

TEST(GrammarMatcher, EosOnlyWhenCompleteAndSpecialTokensNever) {
  ASSERT_NE(qwen3_vocab().vocab, nullptr);
  const Vocabulary& v = *qwen3_vocab().vocab;
  auto c = compile(grammar_from_regex("ab|abc").value(), qwen3_vocab().vocab);
  ASSERT_TRUE(c.is_ok());
  Matcher m(*c);
  const int32_t eos = qwen3_vocab().im_end;
  EXPECT_FALSE(bit(m.mask(), eos));
  EXPECT_FALSE(m.accept_token(eos));
  ASSERT_TRUE(m.accept_bytes("ab"));
  auto mask = m.mask();
  EXPECT_TRUE(bit(mask, eos));
  for (int32_t id = 0; id < static_cast<int32_t>(v.size()); ++id)
    if (bit(mask, id) && !v.is_eos(id)) {
      EXPECT_EQ(v.token_bytes(id), "c");
    }
  EXPECT_FALSE(m.is_terminated());
  ASSERT_TRUE(m.accept_token(eos));
  EXPECT_TRUE(m.is_terminated());
  mask = m.mask();
  for (uint64_t w : mask) EXPECT_EQ(w, 0u);
}

}  // namespace
}  // namespace densa::grammar

// Empty alternatives and nested optionals reach one parse position along exponentially many
// paths. A closure visits each (position, parent) once: the fuzzer's regex (groups of dozens
// of empty alternatives, `?` stacked fifty deep, repeated {4,5}) took over 12 s to compile.
// Here five groups of eight empty alternatives: 8^5 paths to the end, one stack each before.
TEST(GrammarMatcher, EmptyAlternativesDoNotMultiplyTheClosure) {
  using namespace densa::grammar;
  using namespace densa::grammar::testing;
  const std::string group = "(?:a||||||||)";
  auto c = compile(grammar_from_regex(group + group + group + group + group + "b").value(), byte_vocab());
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  Pda pda((*c)->flat());
  std::vector<int32_t> stacks;
  pda.start((*c)->flat().root, kAccept, stacks);
  // One stack per distinct place: `a` in each group that can come next, and `b`.
  EXPECT_LE(stacks.size(), 6u);
  EXPECT_LE(pda.mark(), 64u) << "nodes made by one closure";
  EXPECT_TRUE(full_match(*c, "b"));
  EXPECT_TRUE(full_match(*c, "aab"));
  EXPECT_TRUE(full_match(*c, "aaaaab"));
  EXPECT_FALSE(full_match(*c, "aaaaaab"));
}
