// JSON Schema front end at the string level (byte vocabulary): accepted and rejected documents
// per keyword, integer ranges against plain arithmetic, and errors naming what is unsupported.
#include <cstdlib>

#include "grammar/json_schema.h"
#include "grammar_test_util.h"

namespace densa::grammar {
namespace {

using testing::byte_vocab;
using testing::full_match;

std::shared_ptr<const CompiledGrammar> schema(const std::string& text) {
  auto g = grammar_from_json_schema(text);
  EXPECT_TRUE(g.is_ok()) << text << ": " << g.status().to_string();
  if (!g.is_ok()) return nullptr;
  auto c = compile(*g, byte_vocab());
  EXPECT_TRUE(c.is_ok()) << c.status().to_string();
  return c.is_ok() ? *c : nullptr;
}

void expect_matches(const std::string& s, const std::vector<std::string>& ok,
                    const std::vector<std::string>& bad) {
  auto g = schema(s);
  ASSERT_NE(g, nullptr);
  for (const auto& t : ok) EXPECT_TRUE(full_match(g, t)) << s << " should accept " << t;
  for (const auto& t : bad) EXPECT_FALSE(full_match(g, t)) << s << " should reject " << t;
}

TEST(GrammarJsonSchema, ObjectPropertiesRequiredOrderAndWhitespace) {
  expect_matches(
      R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"boolean"}},"required":["a","c"]})",
      {R"({"a":1,"c":true})", R"({"a": -5, "b": "x", "c": false})", R"({"a":0,"b":"","c":true})"},
      {R"({"c":true})", R"({"a":1})", R"({"c":true,"a":1})", R"({ "a":1,"c":true})",
       R"({"a":  1,"c":true})", R"({"a":1,"c":true,"d":1})", R"({"a":01,"c":true})", R"({"a":1,"c":true} )",
       R"({"a":1,,"c":true})", R"({"a":1,"c":true)"});
}

TEST(GrammarJsonSchema, AdditionalPropertiesNeverRepeatDeclaredNames) {
  const std::string s =
      R"({"type":"object","properties":{"ab":{"type":"integer"}},"additionalProperties":{"type":"boolean"}})";
  expect_matches(s, {R"({"ab":1,"zz":true})", R"({"a":false})", R"({"abc":true})", R"({})", R"({"":true})",
                     R"({"ab":2})", R"({"x\n":true})"},
                 {R"({"ab":1,"ab":true})", R"({"ab":true})", R"({"zz":1})", R"({"a\u0062":true})"});
  expect_matches(R"({"type":"object"})", {R"({})", R"({"k":[1,{"x":null}],"j":"s"})"}, {R"([])", R"({"k"})"});
}

TEST(GrammarJsonSchema, ScalarsEnumConstAnyOfTypeLists) {
  expect_matches(R"({"enum":["red","green",3,null,{"a":[1]}]})",
                 {R"("red")", R"("green")", "3", "null", R"({"a":[1]})"}, {R"("blue")", "4", R"({"a":[2]})"});
  expect_matches(R"({"type":"string","enum":["a",1]})", {R"("a")"}, {"1"});
  expect_matches(R"({"const":"x"})", {R"("x")"}, {R"("y")"});
  expect_matches(R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":2}]})",
                 {"12", R"("ab")"}, {R"("abc")", "1.5"});
  expect_matches(R"({"type":["string","null"]})", {R"("q")", "null"}, {"1", "true"});
  expect_matches(R"({"type":"number"})", {"0", "-1.25", "3e7", "1E+2", "0.5e-10"},
                 {"01", "1.", ".5", "+1", "1e", "--1", "1e123"});
  expect_matches(R"({"type":"boolean"})", {"true", "false"}, {"True", "1"});
  expect_matches(R"({"type":"string"})", {R"("")", R"("a\"b\\c\u00e9\n")", "\"\xc3\xa9\xe2\x82\xac\""},
                 {R"("a"b")", "\"a\nb\"", R"("\x")", R"("\ud800")", "\"\xff\""});
}

TEST(GrammarJsonSchema, StringLengthAndPattern) {
  expect_matches(R"({"type":"string","minLength":2,"maxLength":3})",
                 {R"("ab")", R"("abc")", "\"\xc3\xa9\xc3\xa9\"", R"("\n\t")"}, {R"("a")", R"("abcd")"});
  expect_matches(R"({"type":"string","pattern":"^[a-z]+-\\d{2}$"})", {R"("ab-12")"},
                 {R"("ab-1")", R"("Ab-12")", R"("1ab-12")", R"("ab-123")"});
  // Unanchored patterns match anywhere (JSON Schema 'pattern' is a search).
  expect_matches(R"({"type":"string","pattern":"ab"})", {R"("ab")", R"("xxaby")"}, {R"("a")", R"("ba")"});
  // A pattern character that must be escaped inside JSON.
  expect_matches(R"({"type":"string","pattern":"^a\"b$"})", {R"("a\"b")"}, {R"("a"b")"});
}

TEST(GrammarJsonSchema, ArraysItemsPrefixItemsAndCounts) {
  expect_matches(R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})",
                 {"[1]", "[1,2]", "[1, 2, 3]"}, {"[]", "[1,2,3,4]", "[1,]", "[\"a\"]", "[ 1]"});
  expect_matches(R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false})",
                 {"[]", R"(["a"])", R"(["a",1])"}, {R"([1])", R"(["a",1,2])"});
  expect_matches(R"({"type":"array"})", {"[]", R"([1,"a",[null]])"}, {"[", "{}"});
}

TEST(GrammarJsonSchema, RefsAndRecursion) {
  const std::string tree = R"({
    "$defs": {"node": {"type":"object","properties":{"v":{"type":"integer"},
                        "kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"]}},
    "$ref": "#/$defs/node"})";
  expect_matches(tree, {R"({"v":1})", R"({"v":1,"kids":[{"v":2,"kids":[{"v":3}]},{"v":4}]})"},
                 {R"({"v":1,"kids":[{}]})", R"({"kids":[]})"});
  expect_matches(R"({"definitions":{"x":{"type":"null"}},"type":"object","properties":{"a":{"$ref":"#/definitions/x"}}})",
                 {R"({"a":null})", R"({})"}, {R"({"a":1})"});
  expect_matches(R"({"type":"object","properties":{"self":{"$ref":"#"}}})", {R"({"self":{"self":{}}})"}, {R"({"self":1})"});
}

TEST(GrammarJsonSchema, IntegerRangesAgreeWithArithmetic) {
  const std::vector<std::pair<int64_t, int64_t>> ranges = {
      {0, 0}, {-7, 7}, {3, 1234}, {-1005, -998}, {10, 99}, {-100, 100}, {19, 201}, {1, 1}};
  for (auto [lo, hi] : ranges) {
    const std::string s = R"({"type":"integer","minimum":)" + std::to_string(lo) + R"(,"maximum":)" +
                          std::to_string(hi) + "}";
    auto g = schema(s);
    ASSERT_NE(g, nullptr);
    for (int64_t x = lo - 60; x <= hi + 60; ++x)
      EXPECT_EQ(full_match(g, std::to_string(x)), x >= lo && x <= hi) << s << " on " << x;
    EXPECT_FALSE(full_match(g, "-0")) << s;
    std::string leading_zero = "0";
    leading_zero += std::to_string(std::max<int64_t>(lo, 1));
    EXPECT_FALSE(full_match(g, leading_zero)) << s;
  }
  expect_matches(R"({"type":"integer","exclusiveMinimum":2,"exclusiveMaximum":5.5})", {"3", "4", "5"}, {"2", "6"});
  expect_matches(R"({"type":"integer","minimum":0})", {"0", "999999999999999999"}, {"-1", "1000000000000000000"});
}

TEST(GrammarJsonSchema, NumberRangesAgreeWithArithmetic) {
  const std::vector<std::pair<int64_t, int64_t>> ranges = {{-2, 3}, {0, 1}, {5, 5}, {-10, -7}, {-1, 0}, {0, 100}};
  for (auto [lo, hi] : ranges) {
    const std::string s = R"({"type":"number","minimum":)" + std::to_string(lo) + R"(,"maximum":)" +
                          std::to_string(hi) + "}";
    auto g = schema(s);
    ASSERT_NE(g, nullptr);
    for (int64_t i = lo - 3; i <= hi + 3; ++i) {
      for (const char* frac : {"", ".0", ".00", ".5", ".25", ".001", ".999"}) {
        for (bool neg : {false, true}) {
          std::string text = neg ? "-" : "";
          text += std::to_string(i < 0 ? -i : i);
          text += frac;
          if (neg == (i < 0) || i == 0) {
            const double v = std::strtod(text.c_str(), nullptr);
            // Zero is written unsigned when negatives are out of range.
            const bool want = v >= lo && v <= hi && !(neg && v == 0 && lo >= 0);
            EXPECT_EQ(full_match(g, text), want) << s << " on " << text;
          }
        }
      }
    }
    EXPECT_FALSE(full_match(g, "1e0")) << s;
  }
}

TEST(GrammarJsonSchema, JsonObjectMode) {
  auto c = compile(grammar_json_object(), byte_vocab());
  ASSERT_TRUE(c.is_ok());
  for (const char* ok : {"{}", R"({"a":1})", R"({"a": [1, {"b": null}], "c": "d"})"})
    EXPECT_TRUE(full_match(*c, ok)) << ok;
  for (const char* bad : {"[]", "1", R"({"a":1,})", "{ }", R"({"a" :1})"}) EXPECT_FALSE(full_match(*c, bad)) << bad;
}

TEST(GrammarJsonSchema, UnsupportedAndMalformedSchemasNameTheProblem) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"type":"string","format":"email"})", "unsupported keyword 'format'"},
      {R"({"type":"object","patternProperties":{}})", "unsupported keyword 'patternProperties'"},
      {R"({"type":"array","uniqueItems":true})", "unsupported keyword 'uniqueItems'"},
      {R"({"not":{}})", "unsupported keyword 'not'"},
      {R"({"type":"number","minimum":0.5})", "only integer bounds"},
      {R"({"type":"number","exclusiveMaximum":1})", "'exclusiveMaximum' on type 'number'"},
      {R"({"type":"strin"})", "unknown type 'strin'"},
      {R"({"type":"object"})" "x", "not valid JSON"},
      {R"({"$ref":"#/$defs/missing"})", "points to nothing"},
      {R"({"$ref":"http://x/y.json"})", "only local '$ref'"},
      {R"({"$ref":"#/$defs/a","type":"object","$defs":{"a":{}}})", "'$ref' combined with 'type'"},
      {R"({"allOf":[{},{}]})", "'allOf' is supported with exactly one schema"},
      {R"({"type":"object","properties":{"a":{}},"required":["b"]})", "required property 'b'"},
      {R"({"type":"array","minItems":"2"})", "'minItems' must be a non-negative integer"},
      {R"({"type":"integer","minimum":5,"maximum":4})", "no integer within"},
      {R"({"type":"string","minLength":3,"maxLength":2})", "'maxLength' below 'minLength'"},
      {R"({"type":"string","pattern":"(a"})", "regex"},
      {R"({"enum":[]})", "non-empty array"},
      {R"(false)", "matches nothing"},
      {R"({"properties":{"a":{"type":7}}})", "'type' must be a string"},
  };
  for (const auto& [text, what] : cases) {
    auto g = grammar_from_json_schema(text);
    ASSERT_FALSE(g.is_ok()) << text;
    EXPECT_NE(g.status().message().find(what), std::string::npos) << text << ": " << g.status().message();
  }
}

}  // namespace
}  // namespace densa::grammar
