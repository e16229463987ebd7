// Front ends at the string level (byte vocabulary): regex against std::regex (ECMAScript) on
// random strings, GBNF and JSON Schema on hand-written accepted / rejected strings, and the
// clear errors for malformed or unsupported input and size limits.
#include <random>
#include <regex>

#include "grammar/flat_grammar.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "grammar_test_util.h"

namespace densa::grammar {
namespace {

using testing::byte_vocab;
using testing::full_match;

std::shared_ptr<const CompiledGrammar> must_compile(Result<Grammar> g) {
  EXPECT_TRUE(g.is_ok()) << g.status().to_string();
  if (!g.is_ok()) return nullptr;
  auto c = compile(*g, byte_vocab());
  EXPECT_TRUE(c.is_ok()) << c.status().to_string();
  return c.is_ok() ? *c : nullptr;
}

TEST(GrammarRegex, AgreesWithStdRegexOnRandomStrings) {
  const std::vector<std::string> patterns = {
      "abc",         "a|b|cd",        "a*b+c?",     "(ab)*",        "[a-c]{2,3}",
      "[^a]b",       "a{2}",          "a{1,}c",     "(a|bc)+d?",    "\\d+",
      "[\\da]*",     "x(?:ab|c){0,2}y", "a.c",      "\\.+",         "[a\\-c]+",
      "^ab$",        "(a|)b",         "\\w\\W",     "a??b",
  };
  std::mt19937 rng(7);
  const std::string alphabet = "abcdxy1.-_ ]";
  for (const auto& p : patterns) {
    auto g = must_compile(grammar_from_regex(p));
    ASSERT_NE(g, nullptr) << p;
    const std::regex oracle(p, std::regex::ECMAScript);
    int matched = 0;
    for (int t = 0; t < 400; ++t) {
      const size_t len = rng() % 6;
      std::string s;
      for (size_t k = 0; k < len; ++k) s.push_back(alphabet[rng() % alphabet.size()]);
      const bool want = std::regex_match(s, oracle);
      matched += want;
      EXPECT_EQ(full_match(g, s), want) << "/" << p << "/ on '" << s << "'";
    }
    // Strings the oracle accepts, to be sure each pattern is exercised on both sides.
    for (const std::string s : {"abc", "a", "b", "cd", "ab", "abab", "bb", "aa", "aac", "1", "x", "xy",
                                "xaby", "a.c", "..", "a-c", "ba", "a_", "]", "ab", "bcd", "ac"}) {
      const bool want = std::regex_match(s, oracle);
      matched += want;
      EXPECT_EQ(full_match(g, s), want) << "/" << p << "/ on '" << s << "'";
    }
    EXPECT_GT(matched, 0) << p;
  }
}

TEST(GrammarRegex, Utf8AndEscapes) {
  auto g = must_compile(grammar_from_regex("[é-ê]\\u00e9\\x41."));
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(full_match(g, "éé" "A" "€"));
  EXPECT_TRUE(full_match(g, "êéAz"));
  EXPECT_FALSE(full_match(g, "eéAz"));
  EXPECT_FALSE(full_match(g, "éé" "A" "\n"));  // '.' excludes line terminators
  EXPECT_FALSE(full_match(g, "éé" "A" "\xff"));  // not UTF-8
}

// A literal character must be a well-formed UTF-8 scalar value: a 4-byte sequence past
// U+10FFFF (lead F6) once reached Grammar::codepoints() with no encoding and aborted.
TEST(GrammarRegex, RefusesLiteralsThatAreNotScalarValues) {
  for (const std::string p : {"a\xf6\x9c\x9f\x9f", "[\xf4\x90\x80\x80]", "\xed\xa0\x80",
                               "[a-\xf7\xbf\xbf\xbf]", "\xc0\xaf", "\xe0\x80\xaf", "\\\xf5\x80\x80\x80"}) {
    auto g = grammar_from_regex(p);
    ASSERT_FALSE(g.is_ok()) << p;
    EXPECT_NE(g.status().message().find("invalid UTF-8"), std::string::npos) << g.status().message();
  }
  auto top = must_compile(grammar_from_regex("[\xf4\x8f\xbf\xbf]"));  // U+10FFFF itself is fine
  ASSERT_NE(top, nullptr);
  EXPECT_TRUE(full_match(top, "\xf4\x8f\xbf\xbf"));
}

TEST(GrammarRegex, RefusesUnsupportedConstructsByName) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"(a)\\1", "backreference"}, {"a(?=b)", "lookaround"}, {"\\bfoo", "word boundary"},
      {"\\p{L}", "property"},      {"(?i)a", "inline flags"}, {"a*+", "possessive"},
      {"a^b", "anchor"},           {"(ab", "missing ')'"},   {"ab)", "unbalanced"},
      {"[a-", "unterminated"},     {"*a", "nothing to repeat"}, {"a{3,1}", "n < m"},
      {"[z-a]", "out of order"},   {"a{99999}", "repetition count"}, {"\\q", "unknown escape"}};
  for (const auto& [p, what] : cases) {
    auto g = grammar_from_regex(p);
    ASSERT_FALSE(g.is_ok()) << p;
    EXPECT_NE(g.status().message().find(what), std::string::npos) << p << ": " << g.status().message();
  }
  RegexLimits tight;
  tight.max_nesting = 3;
  auto deep = grammar_from_regex("((((a))))", tight);
  ASSERT_FALSE(deep.is_ok());
  EXPECT_NE(deep.status().message().find("nested deeper"), std::string::npos);
}

TEST(GrammarGbnf, AcceptsAndRejects) {
  const char* text = R"(
    # a tiny key/value list
    root ::= "{" pair ("," ws pair)* "}"
    pair ::= key ":" ws value
    key  ::= [a-z_]+
    value ::= ("yes" | "no") | num
    num ::= "-"? [0-9]{1,3}
    ws ::= [ \t]?
  )";
  auto g = must_compile(grammar_from_gbnf(text));
  ASSERT_NE(g, nullptr);
  for (const char* ok : {"{a:yes}", "{a: no,b_c:\t12}", "{x:-999}", "{k:1, k:2,\tz:no}"})
    EXPECT_TRUE(full_match(g, ok)) << ok;
  for (const char* bad : {"{}", "{a:yes,}", "{A:yes}", "{a:1234}", "{a:maybe}", "{a:  yes}", "{a:yes"})
    EXPECT_FALSE(full_match(g, bad)) << bad;
}

TEST(GrammarGbnf, EscapesClassesAndDot) {
  auto g = must_compile(grammar_from_gbnf(
      "root ::= \"\\x41\\n\" [^\\]a] . \"\\u00e9\" [\\u0100-\\U0001F600]{2}"));
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(full_match(g, "A\nbz\xc3\xa9\xc4\x80\xf0\x9f\x98\x80"));
  EXPECT_FALSE(full_match(g, "A\n]z\xc3\xa9\xc4\x80\xc4\x80"));
  EXPECT_FALSE(full_match(g, "A\naz\xc3\xa9\xc4\x80\xc4\x80"));
  EXPECT_TRUE(full_match(g, "A\nb\xe2\x82\xac\xc3\xa9\xc4\x80\xc4\x80"));
}

TEST(GrammarGbnf, RefusesMalformedGrammarsClearly) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"rot ::= \"a\"", "no 'root' rule"},
      {"root ::= foo", "'foo' is used but not defined"},
      {"root ::= \"a\"\nroot ::= \"b\"", "defined twice"},
      {"root ::= \"abc", "unterminated string"},
      {"root ::= [a-", "unterminated character class"},
      {"root ::= (\"a\"", "missing ')'"},
      {"root ::= \"a\" )", "unbalanced"},
      {"root \"a\"", "expected '::='"},
      {"root ::= \"\\q\"", "unknown escape"},
      {"root ::= \"a\"{2,1}", "n < m"},
      {"root ::= root \"a\"", "left-recursive"},
      {"root ::= (\"a\"?)*", "left-recursive"},
  };
  for (const auto& [text, what] : cases) {
    Result<Grammar> g = grammar_from_gbnf(text);
    Status st = g.is_ok() ? compile(*g, byte_vocab()).status() : g.status();
    ASSERT_FALSE(st.is_ok()) << text;
    EXPECT_NE(st.message().find(what), std::string::npos) << text << ": " << st.message();
  }
}

TEST(GrammarSize, LimitsAreClearErrors) {
  auto big = grammar_from_gbnf("root ::= (\"ab\"{1000}){1000}");
  ASSERT_TRUE(big.is_ok());
  auto c = compile(*big, byte_vocab());
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.status().message().find("grammar too large"), std::string::npos) << c.status().message();
  auto long_string = grammar_from_json_schema(R"({"type":"string","maxLength":1000})");
  ASSERT_TRUE(long_string.is_ok());
  auto lc = compile(*long_string, byte_vocab());
  ASSERT_FALSE(lc.is_ok());
  EXPECT_NE(lc.status().message().find("token-mask positions"), std::string::npos) << lc.status().message();
  GbnfLimits tight;
  tight.max_nesting = 2;
  auto deep = grammar_from_gbnf("root ::= (((\"a\")))", tight);
  ASSERT_FALSE(deep.is_ok());
  EXPECT_NE(deep.status().message().find("nested deeper"), std::string::npos);
  JsonSchemaLimits schema_limits;
  schema_limits.max_depth = 3;
  auto nested = grammar_from_json_schema(
      R"({"type":"array","items":{"type":"array","items":{"type":"array","items":{"type":"array","items":{"type":"integer"}}}}})",
      schema_limits);
  ASSERT_FALSE(nested.is_ok());
  EXPECT_NE(nested.status().message().find("nested deeper than 3"), std::string::npos) << nested.status().message();
  schema_limits.max_source_bytes = 10;
  auto long_text = grammar_from_json_schema(R"({"type":"string"})", schema_limits);
  ASSERT_FALSE(long_text.is_ok());
  EXPECT_NE(long_text.status().message().find("too large"), std::string::npos);
}

// Lowering walks a grammar's items without recursion: a long sequence of alternatives (each
// spawning a continuation rule) once recursed once per item, and 60,000 of them, a 600 KB
// EBNF source under the 1 MiB limit, overflowed the stack (SIGSEGV in a Release build, a
// crash of the server compiling a request's response_format). Now it is a size error, and a
// sequence that fits lowers and matches what it should.
TEST(GrammarSize, LongSequencesOfAlternativesLowerWithoutRecursion) {
  auto source = [](int n) {
    std::string s = "root ::=";
    for (int i = 0; i < n; ++i) s += " (\"a\" | \"b\")";
    return s;
  };
  auto huge = grammar_from_gbnf(source(60000));
  ASSERT_TRUE(huge.is_ok()) << huge.status().message();
  auto lowered = lower_grammar(*huge, 200000);
  ASSERT_FALSE(lowered.is_ok());
  EXPECT_NE(lowered.status().message().find("grammar too large"), std::string::npos) << lowered.status().message();
  // 2,000 in a row fit: the lowered grammar takes exactly 2,000 of a / b.
  auto fits = grammar_from_gbnf(source(2000));
  ASSERT_TRUE(fits.is_ok());
  auto c = compile(*fits, byte_vocab());
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  std::string text;
  for (int i = 0; i < 2000; ++i) text += (i * 7 % 3 == 0) ? 'a' : 'b';
  EXPECT_TRUE(full_match(*c, text));
  EXPECT_FALSE(full_match(*c, text.substr(1)));
  EXPECT_FALSE(full_match(*c, text + "a"));
  EXPECT_FALSE(full_match(*c, "c" + text.substr(1)));
}

}  // namespace
}  // namespace densa::grammar

namespace densa::grammar {
namespace {

// A long output makes the parser compact its stack arena; the state must survive it.
TEST(GrammarMatcherArena, LongOutputsKeepWorkingAfterCompaction) {
  auto g = compile(grammar_from_json_schema(R"({"type":"array","items":{"type":"string"}})").value(),
                   testing::byte_vocab());
  ASSERT_TRUE(g.is_ok());
  Matcher m(*g);
  ASSERT_TRUE(m.accept_bytes("[\"x\",\""));
  const std::string chunk(1000, 'a');
  for (int i = 0; i < 300; ++i) ASSERT_TRUE(m.accept_bytes(chunk)) << i;
  const auto mask = m.mask();
  auto allowed = [&](char c) { return (mask[static_cast<uint8_t>(c) >> 6] >> (static_cast<uint8_t>(c) & 63)) & 1; };
  EXPECT_TRUE(allowed('"'));
  EXPECT_TRUE(allowed('b'));
  EXPECT_FALSE(allowed('\n'));
  EXPECT_FALSE(m.can_end());
  EXPECT_FALSE(m.accept_bytes("\"}"));
  ASSERT_TRUE(m.accept_bytes("\", \"\"]"));
  EXPECT_TRUE(m.can_end());
  EXPECT_TRUE(m.is_terminated());
}

}  // namespace
}  // namespace densa::grammar
