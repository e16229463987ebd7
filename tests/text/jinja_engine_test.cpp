// Constructs of the Jinja engine one by one, each compared byte for byte with Python Jinja2 in
// HF's environment (jinja_reference.py), plus the errors densa must give: unknown filter /
// test, unclosed blocks, syntax errors with their line, unsupported statements, and the
// recursion, step and output limits.
#include <gtest/gtest.h>

#include "jinja_test_util.h"

namespace densa {
namespace {

using jinja::RenderLimits;
using jinja::Template;

const nlohmann::ordered_json kVars = nlohmann::ordered_json::parse(R"({
  "xs": [3, 1, 2], "words": ["b", "A", "c", "a"], "s": "  Héllo, wörld  ", "n": 7, "f": 2.5, "t": true,
  "none": null, "d": {"z": 1, "a": [1, 2.0, "x"], "k": {"n": null}},
  "people": [{"name": "Ann", "age": 31, "tags": ["x"]}, {"name": "bob", "age": 25}, {"name": "Cy", "age": 31}],
  "msg": {"role": "user", "content": "hi"}, "big": 12345678901234, "e": [], "text": "a\nb\n\nc"
})");

// Templates whose output densa must reproduce exactly (one construct or a few per line).
const char* const kCases[] = {
    // output and literals, Python printing
    "{{ 1 }} {{ 1.0 }} {{ 1.5e-7 }} {{ 1e16 }} {{ 0.1 + 0.2 }} {{ -0.0 }} {{ 10 / 4 }} {{ 10 / 5 }}",
    "{{ true }} {{ none }} {{ [1, 'a', none, true, 2.50] }} {{ (1,) }} {{ (1, 2) }} {{ () }} {{ {'a': 1, 'b': [1]} }}",
    "{{ \"it's\" }} {{ ['it\\'s', \"q\\\"\", 'tab\\there', 'nl\\n', '\\u00e9', '\\x01'] }} {{ d }} {{ people[0] }}",
    "{{ undefined_var }}|{{ d.missing }}|{{ none }}|{{ xs[10] }}|{{ 'abc'[5] }}",
    "{{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 1_000 }} {{ 00 }} {{ 1_0.5 }}",
    "{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }}",
    "{{ 'a' ~ 1 ~ none ~ 2.0 ~ true }} {{ 'ab' * 3 }} {{ [1] * 2 }} {{ 'x' + 'y' }} {{ [1] + [2] }} {{ -n }} {{ +f }}",
    "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ (1, 2) == [1, 2] }}",
    "{{ 'b' in 'abc' }} {{ 2 in xs }} {{ 'z' in d }} {{ 'q' not in d }} {{ 'x' in undefined_var }} {{ not 0 }} {{ 0 or 'y' }} {{ 1 and 'z' }} {{ '' and 1 }}",
    "{{ 'yes' if t else 'no' }} {{ 'yes' if none else 'no' }} [{{ 'x' if false }}] {{ 1 if 0 else 2 if 1 else 3 }}",
    // whitespace control, trim_blocks, lstrip_blocks
    "a\n  {% if t %}\n    b\n  {% endif %}\nc\n",
    "a  {%- if t -%}  b  {%- endif -%}  c\n{{- ' d ' -}}\n e",
    "  {%+ if t %}x{% endif +%}\n  y {# comment #}\n  {# own line #}\nz {#- trim -#} w",
    "{% raw %}{{ not parsed }} {% if %}{% endraw %}|\n  {% raw -%}  x  {%- endraw %}\n",
    "line1\r\nline2\rline3\n{% if t %}\r\nwin\r\n{% endif %}\n\n",
    "{{ 'a' }}\n{{ 'b' }}\n  {{ 'c' }}\n{% for x in xs %}\n  - {{ x }}\n{% endfor %}\n",
    // control flow
    "{% if n > 10 %}big{% elif n > 5 %}mid{% else %}small{% endif %}",
    "{% for x in xs %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }};{% endfor %}",
    "{% for x in xs %}{{ loop.previtem }}<{{ x }}>{{ loop.nextitem }}|{{ loop.cycle('a', 'b') }} {% endfor %}",
    "{% for x in xs if x > 1 %}{{ x }}:{{ loop.index }}/{{ loop.length }} {% else %}none{% endfor %}{% for x in e %}x{% else %}empty{% endfor %}",
    "{% for x in xs %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 2 %}{% break %}{% endif %}{{ x }}{% endfor %}",
    "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}{% for c in 'hé' %}[{{ c }}]{% endfor %}",
    "{% for a, b in [(1, 2), [3, 4]] %}{{ a + b }}{% endfor %}{% for x in xs %}{% for y in xs %}{{ loop.index }}{% endfor %}{{ loop.index }}|{% endfor %}",
    // scoping and set
    "{% set x = 'o' %}{% for i in xs %}{{ x }}{% set x = 'i' %}{{ x }}{% endfor %}{{ x }}{% if t %}{% set x = 'if' %}{% endif %}{{ x }}",
    "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c = (3, 4) %}{% set p, q = c %}{{ p }}{{ q }}{% set l = [1, 2] %}{{ l }}",
    "{% set ns = namespace(count=0, items=[]) %}{% for x in xs %}{% set ns.count = ns.count + x %}{% endfor %}{{ ns.count }} {{ ns.items }}",
    "{% set block %}inner {{ n }}\n{% endset %}[{{ block }}]{% set up | upper %}shout{% endset %}{{ up }}",
    // macros, call blocks, filter blocks
    "{% macro m(a, b=2, c='x') %}{{ a }}-{{ b }}-{{ c }}{% endmacro %}{{ m(1) }} {{ m(1, 3) }} {{ m(1, c='y') }} {{ m() }}",
    "{% macro rec(n) %}{% if n > 0 %}{{ n }}{{ rec(n - 1) }}{% endif %}{% endmacro %}{{ rec(5) }}|{{ rec(3) | length }}",
    "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}bold {{ n }}{% endcall %}",
    "{% macro row(x) %}[{{ caller(x * 2) }}]{% endmacro %}{% call(v) row(4) %}v={{ v }}{% endcall %}",
    "{% filter upper %}shout {{ s }}{% endfilter %}|{% filter replace('a', 'o') | trim %}  banana  {% endfilter %}",
    // attribute / item access, slicing, methods
    "{{ msg.role }} {{ msg['content'] }} {{ d.k.n }} {{ d['a'][1] }} {{ xs[-1] }} {{ people[1].name }} {{ d.get('z') }} {{ d.get('q', 'dflt') }} {{ d.get('q') }}",
    "{{ xs[::-1] }} {{ xs[1:] }} {{ xs[:-1] }} {{ xs[::2] }} {{ 'héllo'[1:3] }} {{ 'abcdef'[::-2] }} {{ xs[5:] }} {{ 'abc'[-10:2] }}",
    "{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ 'xxhixx'.strip('x') }}|{{ '\\n\\nx\\n'.lstrip('\\n') }}",
    "{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ '  a b  c '.split(None, 1) }}",
    "{{ 'abc'.startswith('a') }} {{ 'abc'.endswith(('x', 'c')) }} {{ 'aXbX'.replace('X', '-') }} {{ 'aaa'.replace('a', 'b', 2) }} {{ 'abc'.upper() }} {{ 'ÀB'.lower() }}",
    "{{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }} {{ 'abcb'.find('b') }} {{ 'abcb'.rfind('b') }} {{ 'abcb'.find('z') }} {{ 'abab'.count('ab') }} {{ '-'.join(['a', 'b']) }}",
    "{{ '123'.isdigit() }} {{ '12a'.isdigit() }} {{ 'abc'.isalpha() }} {{ 'ABC'.isupper() }} {{ 'abc'.islower() }} {{ '  '.isspace() }} {{ d.keys() | list }} {{ d.values() | list | length }}",
    // tests
    "{{ x is defined }} {{ n is defined }} {{ none is none }} {{ s is string }} {{ n is number }} {{ t is number }} {{ n is integer }} {{ f is float }} {{ t is boolean }}",
    "{{ d is mapping }} {{ xs is iterable }} {{ s is iterable }} {{ u is iterable }} {{ xs is sequence }} {{ d is sequence }} {{ u is sequence }} {{ n is sequence }}",
    "{{ t is true }} {{ 1 is true }} {{ false is false }} {{ 4 is even }} {{ n is odd }} {{ 9 is divisibleby 3 }} {{ n is equalto 7 }} {{ n is eq(7) }} {{ 2 is in xs }} {{ n is not none }}",
    "{{ xs | select('odd') | list }} {{ xs | reject('odd') | list }} {{ people | selectattr('age', 'equalto', 31) | map(attribute='name') | list }} {{ people | rejectattr('tags') | map(attribute='name') | join(',') }}",
    // filters
    "{{ d | tojson }} {{ people | tojson }} {{ 'é\"\\n\\u0001' | tojson }} {{ [1.0, 1e100, none, true] | tojson }} {{ e | tojson }} {{ {} | tojson }}",
    "{{ d | tojson(indent=2) }}|{{ xs | tojson(indent=0) }}|{{ d | tojson(separators=(',', ':')) }}|{{ d | tojson(sort_keys=true) }}|{{ 'é' | tojson(ensure_ascii=true) }}",
    "{{ s | trim }}|{{ 'xxyxx' | trim('x') }}|{{ s | upper }}|{{ s | lower }}|{{ 'hello-world (x) [y]' | title }}|{{ 'hELLO wORLD' | capitalize }}",
    "{{ 'aXbX' | replace('X', '.') }} {{ s | length }} {{ xs | count }} {{ d | length }} {{ xs | first }} {{ xs | last }} {{ 'abc' | first }} {{ e | first }}",
    "{{ xs | join }} {{ xs | join(', ') }} {{ people | join('/', attribute='name') }} {{ u | default('dflt') }} {{ '' | default('e', true) }} {{ none | d('n') }} {{ 0 | default(5) }}",
    "{{ d | items | list }} {{ u | items | list }} {{ 'ab' | list }} {{ d | list }} {{ n | string }} {{ none | string }} {{ [1, 'a'] | string }}",
    "{{ '42' | int }} {{ ' 7 ' | int }} {{ '3.9' | int }} {{ 'x' | int }} {{ 'x' | int(-1) }} {{ 3.9 | int }} {{ '1.5' | float }} {{ 'q' | float }} {{ 2 | float }} {{ true | int }}",
    "{{ -3 | abs }} {{ -2.5 | abs }} {{ 2.5 | round }} {{ 3.5 | round }} {{ 2.675 | round(2) }} {{ 2.1 | round(0, 'ceil') }} {{ 2.9 | round(0, 'floor') }} {{ 7 | round }}",
    "{{ xs | map('string') | join('+') }} {{ words | map('upper') | list }} {{ people | map(attribute='age') | sum }} {{ xs | sum(start=10) }} {{ people | map(attribute='nope', default='?') | list }}",
    "{{ words | sort }} {{ words | sort(case_sensitive=true) }} {{ xs | sort(reverse=true) }} {{ people | sort(attribute='age') | map(attribute='name') | list }} {{ words | unique | list }}",
    "{{ xs | reverse | list }} {{ 'abc' | reverse }} {{ d | dictsort }} {{ {'b': 2, 'a': 3} | dictsort(by='value', reverse=true) }} {{ xs | min }} {{ xs | max }} {{ words | max }}",
    "{{ text | indent }}|{{ text | indent(2, true) }}|{{ text | indent('> ', blank=true) }}|{{ 'a b  c' | wordcount }}|{{ xs | batch(2) | list }}|{{ 'ab' | center(6) }}|",
    "{{ '<a href=\"x\">' | e }} {{ '<b>' | safe }} {{ ('<i>' | safe) + '<u>' }} {{ '<s>' + ('&' | safe) }}",
    // globals
    "{{ range(3) | list }} {{ range(1, 7, 2) | list }} {{ range(5, 0, -2) | list }} {{ dict(a=1, b='x') }} {% for i in range(2) %}{{ i }}{% endfor %}",
    "{{ strftime_now('%Y-%m-%d %H:%M') }} {{ strftime_now('%B %d, %Y') }}",
    // unicode
    "{{ 'ünï' | length }} {{ 'ünï' | upper }} {{ '日本語'[1] }} {{ '日本語'[::-1] }} {{ 'ß' | title }} {{ ['é', '\\u00a0'] }}",
};

TEST(JinjaEngine, ConstructsMatchJinja2) {
  nlohmann::ordered_json cases = nlohmann::ordered_json::array();
  for (const char* src : kCases) cases.push_back({{"template", src}, {"vars", kVars}, {"now", 1700000000}});
  const std::vector<testing::RenderOutcome> want = testing::reference_render(cases);
  ASSERT_EQ(want.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(kCases[i]);
    ASSERT_TRUE(want[i].ok) << "the reference fails on this case: " << want[i].text;
    const testing::RenderOutcome got = testing::densa_render(cases[i]);
    EXPECT_TRUE(got.ok) << got.text;
    EXPECT_EQ(got.text, want[i].text);
  }
}

// Templates on which Jinja2 fails at render time: densa must fail too.
const char* const kFailing[] = {
    "{{ undefined_var.attr }}", "{{ d.missing.attr }}", "{{ 'a' + 1 }}", "{{ 1 + 'a' }}", "{{ none + 1 }}",
    "{{ xs.append(4) }}", "{{ d.pop('z') }}", "{{ u + 'x' }}", "{{ u() }}", "{{ 1 / 0 }}", "{{ 5 // 0 }}",
    "{{ raise_exception('custom failure') }}", "{{ n | items | list }}", "{{ u | tojson }}", "{{ 1 < 'a' }}",
    "{{ n | length }}", "{% for x in n %}{% endfor %}", "{% set a, b = [1] %}", "{% set ns = 1 %}{% set ns.x = 2 %}",
    "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", "{% macro m(a) %}{% endmacro %}{{ m(b=1) }}",
    "{{ 'a' in 1 }}", "{{ 1 in 'abc' }}", "{{ namespace(a=1) | tojson }}", "{{ 'x'.split('') }}", "{{ -'a' }}",
};

TEST(JinjaEngine, FailsWhereJinja2Fails) {
  nlohmann::ordered_json cases = nlohmann::ordered_json::array();
  for (const char* src : kFailing) cases.push_back({{"template", src}, {"vars", kVars}});
  const std::vector<testing::RenderOutcome> want = testing::reference_render(cases);
  ASSERT_EQ(want.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(kFailing[i]);
    EXPECT_FALSE(want[i].ok) << "the reference renders: " << want[i].text;
    const testing::RenderOutcome got = testing::densa_render(cases[i]);
    EXPECT_FALSE(got.ok) << "densa rendered: " << got.text;
    EXPECT_NE(got.text.find("template line 1"), std::string::npos) << got.text;
  }
}

Status parse_status(std::string_view src) {
  Result<Template> t = Template::parse(src);
  return t.is_ok() ? Status::ok() : t.status();
}

Status render_status(std::string_view src, const RenderLimits& limits = {}) {
  Result<Template> t = Template::parse(src);
  if (!t.is_ok()) return t.status();
  Result<std::string> r = t->render(nlohmann::ordered_json::object(), limits);
  return r.is_ok() ? Status::ok() : r.status();
}

void expect_error(const Status& s, StatusCode code, const std::string& fragment) {
  EXPECT_EQ(s.code(), code) << s.to_string();
  EXPECT_NE(s.message().find(fragment), std::string::npos) << "'" << fragment << "' not in: " << s.message();
}

TEST(JinjaEngine, ParseErrorsNameTheConstructAndLine) {
  expect_error(parse_status("a\nb\n{{ x | nosuchfilter }}"), StatusCode::kInvalidArgument, "unknown filter 'nosuchfilter'");
  expect_error(parse_status("a\nb\n{{ x | nosuchfilter }}"), StatusCode::kInvalidArgument, "line 3, column 8");
  expect_error(parse_status("{{ x is nosuchtest }}"), StatusCode::kInvalidArgument, "unknown test 'nosuchtest'");
  expect_error(parse_status("x\n{% if t %}\nno end"), StatusCode::kInvalidArgument, "missing '{% endif %}'");
  expect_error(parse_status("{% for x in y %}{% if %}{% endfor %}"), StatusCode::kInvalidArgument, "line 1");
  expect_error(parse_status("line1\nline2\n{{ 1 + }}"), StatusCode::kInvalidArgument, "line 3");
  expect_error(parse_status("{{ 'unterminated }}"), StatusCode::kInvalidArgument, "unterminated string literal");
  expect_error(parse_status("{{ x "), StatusCode::kInvalidArgument, "missing '}}'");
  expect_error(parse_status("{# open comment"), StatusCode::kInvalidArgument, "missing end of comment tag");
  expect_error(parse_status("{% include 'x.j2' %}"), StatusCode::kInvalidArgument, "unsupported statement '{% include %}'");
  expect_error(parse_status("{% extends 'base' %}"), StatusCode::kInvalidArgument, "unsupported statement '{% extends %}'");
  expect_error(parse_status("{% generation %}x{% endgeneration %}"), StatusCode::kInvalidArgument, "unsupported statement '{% generation %}'");
  expect_error(parse_status("{% frobnicate %}"), StatusCode::kInvalidArgument, "unknown statement '{% frobnicate %}'");
  expect_error(parse_status("{% endfor %}"), StatusCode::kInvalidArgument, "unexpected '{% endfor %}'");
  expect_error(parse_status("{% break %}"), StatusCode::kInvalidArgument, "'break' outside of a loop");
  expect_error(parse_status("{% for x in y recursive %}{% endfor %}"), StatusCode::kInvalidArgument, "recursive for loops");
  expect_error(parse_status("{{ f(*args) }}"), StatusCode::kInvalidArgument, "*args");
  expect_error(parse_status("{{ (1] }}"), StatusCode::kInvalidArgument, "unexpected ']'");
  expect_error(parse_status("{{ 012 }}"), StatusCode::kInvalidArgument, "leading zeros");
  EXPECT_TRUE(parse_status("{{ x | tojson }}{% if a %}{% elif b %}{% else %}{% endif %}").is_ok());
}

// Digit runs past int64 (a fuzzer's find: they threw from std::stoll, an internal error): an
// index literal is refused by name at parse; an attribute path at render names no item, as
// Python's unbounded int names none, like Jinja2.
TEST(JinjaEngine, IndicesPastInt64) {
  expect_error(parse_status("{{ xs.99999999999999999999 }}"), StatusCode::kInvalidArgument,
               "integer index 99999999999999999999 is out of range");
  nlohmann::ordered_json cases = nlohmann::ordered_json::array();
  for (const char* src : {"{{ [[1, 2]] | map(attribute='99999999999999999999') | list | length }}",
                          "{{ [[1, 2]] | map(attribute='99999999999999999999') | select('defined') | list }}",
                          "{{ [[1, 2]] | map(attribute='1') | list }}"}) {
    cases.push_back({{"template", src}, {"vars", nlohmann::ordered_json::object()}});
  }
  const std::vector<testing::RenderOutcome> want = testing::reference_render(cases);
  ASSERT_EQ(want.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i]["template"].get<std::string>());
    ASSERT_TRUE(want[i].ok) << want[i].text;
    const testing::RenderOutcome got = testing::densa_render(cases[i]);
    EXPECT_TRUE(got.ok) << got.text;
    EXPECT_EQ(got.text, want[i].text);
  }
}

TEST(JinjaEngine, RenderErrorsCarryLineAndColumn) {
  const Status s = render_status("ok\n  {{ missing.attr }}");
  expect_error(s, StatusCode::kInvalidArgument, "'missing' is undefined");
  expect_error(s, StatusCode::kInvalidArgument, "template line 2");
  expect_error(render_status("{{ raise_exception('Roles must alternate') }}"), StatusCode::kInvalidArgument,
               "chat template raised an exception: Roles must alternate");
  expect_error(render_status("{{ 'a'.format(1) }}"), StatusCode::kInvalidArgument, "str.format");
  expect_error(render_status("{{ {}.items }}"), StatusCode::kInvalidArgument, "printing a function");
  expect_error(render_status("{{ 9223372036854775807 + 1 }}"), StatusCode::kInvalidArgument, "integer overflow");
}

TEST(JinjaEngine, RecursionHitsTheDepthLimitNotTheStack) {
  expect_error(render_status("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"), StatusCode::kResourceExhausted,
               "depth limit");
  RenderLimits shallow;
  shallow.max_depth = 20;
  expect_error(render_status("{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(30) }}", shallow),
               StatusCode::kResourceExhausted, "depth limit (20)");
  EXPECT_TRUE(render_status("{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}", shallow).is_ok());
  // Deep nesting in the source is refused by the parser.
  std::string deep = "{{ " + std::string(500, '(') + "1" + std::string(500, ')') + " }}";
  expect_error(parse_status(deep), StatusCode::kInvalidArgument, "nests deeper");
}

// `|int` of a float past 64 bits is the engine's integer overflow error, as for arithmetic;
// the conversion was undefined behaviour (Clang's UBSan, fuzz/regressions/jinja/defaults_float_to_int).
TEST(JinjaEngine, IntOfAHugeFloatIsAnOverflowError) {
  Result<Template> ok = Template::parse("{{ 1e18 | int }} {{ -2.5 | int }} {{ '1e15' | int }}");
  ASSERT_TRUE(ok.is_ok());
  Result<std::string> r = ok->render(nlohmann::ordered_json::object());
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(*r, "1000000000000000000 -2 1000000000000000");
  for (const char* src : {"{{ 1e30 | int }}", "{{ -1e19 | int }}", "{{ '9.3e18' | int }}"}) {
    const Status s = render_status(src);
    EXPECT_FALSE(s.is_ok()) << src;
    EXPECT_NE(s.message().find("integer overflow (beyond 64 bits)"), std::string::npos) << src << ": " << s.message();
  }
}

TEST(JinjaEngine, DeepValuesHitTheNestingLimit) {
  // Hostile variables: JSON nested far deeper than any conversation.
  nlohmann::ordered_json deep = 1;
  for (int i = 0; i < 100000; ++i) deep = nlohmann::ordered_json::array({std::move(deep)});
  Result<Template> t = Template::parse("{{ x | tojson }}");
  ASSERT_TRUE(t.is_ok());
  Result<std::string> r = t->render(nlohmann::ordered_json{{"x", std::move(deep)}});
  ASSERT_FALSE(r.is_ok());
  expect_error(r.status(), StatusCode::kResourceExhausted, "nest deeper than 256 levels");
  // Template-built nesting.
  expect_error(render_status("{% set ns = namespace(v=[]) %}{% for i in range(100000) %}{% set ns.v = [ns.v] %}{% endfor %}"),
               StatusCode::kResourceExhausted, "nest deeper than 256 levels");
  // A namespace holding itself prints as an error, not a stack overflow.
  expect_error(render_status("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}"), StatusCode::kInvalidArgument,
               "containing itself");
}

TEST(JinjaEngine, LoopsHitTheStepLimit) {
  RenderLimits limits;
  limits.max_steps = 10000;
  expect_error(render_status("{% for i in range(100000) %}{% endfor %}", limits), StatusCode::kResourceExhausted,
               "step limit (10000 steps)");
  expect_error(render_status("{% for i in range(200) %}{% for j in range(200) %}{{ j }}{% endfor %}{% endfor %}", limits),
               StatusCode::kResourceExhausted, "step limit");
  EXPECT_TRUE(render_status("{% for i in range(100) %}{{ i }}{% endfor %}", limits).is_ok());
}

// Sizes computed before anything is built: a product that wraps 64 bits, widths of 10**12,
// and the empty-string repeat that builds nothing but would loop 10**18 times.
TEST(JinjaEngine, HugeRepeatsAndWidthsHitTheSizeLimitBeforeAllocating) {
  expect_error(render_status("{{ 'abcd' * 4611686018427387904 }}"), StatusCode::kResourceExhausted, "size limit");
  expect_error(render_status("{% set x = range(1000) | list %}{{ (x * 4611686018427387904) | length }}"),
               StatusCode::kResourceExhausted, "size limit");
  Result<Template> empty = Template::parse("{{ ('' * 1000000000000000000) | length }}");
  ASSERT_TRUE(empty.is_ok());
  Result<std::string> r = empty->render(nlohmann::ordered_json::object());
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(*r, "0");
  for (const char* src : {"{{ 'a' | center(1000000000000) }}", "{{ 'a\nb' | indent(1000000000000) }}",
                          "{{ [1] | tojson(indent=1000000000000) }}"}) {
    expect_error(render_status(src), StatusCode::kResourceExhausted, "size limit");
  }
}

TEST(JinjaEngine, RangeNearInt64BoundsStops) {
  Result<Template> t = Template::parse(
      "{{ range(9223372036854775800, 9223372036854775807, 100) | list }} "
      "{{ range(-9223372036854775800, -9223372036854775807 - 1, -100) | list }}");
  ASSERT_TRUE(t.is_ok());
  Result<std::string> r = t->render(nlohmann::ordered_json::object());
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(*r, "[9223372036854775800] [-9223372036854775800]");
}

TEST(JinjaEngine, OutputHitsTheSizeLimit) {
  RenderLimits limits;
  limits.max_output_bytes = 1000;
  expect_error(render_status("{{ 'x' * 100000 }}", limits), StatusCode::kResourceExhausted, "size limit (1000 bytes)");
  expect_error(render_status("{% for i in range(500) %}abc{% endfor %}", limits), StatusCode::kResourceExhausted,
               "size limit");
  expect_error(render_status("{% set s = namespace(v='ab') %}{% for i in range(20) %}{% set s.v = s.v ~ s.v %}{% endfor %}",
                             limits),
               StatusCode::kResourceExhausted, "size limit");
  Result<Template> t = Template::parse("{{ 'x' * 999 }}");
  ASSERT_TRUE(t.is_ok());
  Result<std::string> r = t->render(nlohmann::ordered_json::object(), limits);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->size(), 999u);
}

TEST(JinjaEngine, ParseOnceRenderMany) {
  Result<Template> t = Template::parse("{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}{{ extra }}");
  ASSERT_TRUE(t.is_ok());
  for (int i = 0; i < 3; ++i) {
    nlohmann::ordered_json vars = {{"messages", {{{"role", "user"}, {"content", std::to_string(i)}}}}};
    if (i == 1) vars["extra"] = "!";
    Result<std::string> r = t->render(vars);
    ASSERT_TRUE(r.is_ok());
    EXPECT_EQ(*r, "[user:" + std::to_string(i) + "]" + (i == 1 ? "!" : ""));
  }
  // nlohmann::json (sorted keys) renders too.
  Result<std::string> r = t->render(nlohmann::json{{"messages", nlohmann::json::array()}, {"extra", 1.0}});
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(*r, "1.0");
  expect_error(t->render(nlohmann::ordered_json::array()).status(), StatusCode::kInvalidArgument, "JSON object");
}

}  // namespace
}  // namespace densa
