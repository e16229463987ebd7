// Constrained-decoding grammars (src/grammar): byte 0 picks the front end (0 JSON Schema,
// 1 regex, 2 GBNF), byte 1 seeds the token choices, the rest is the grammar source. Any
// source compiles or gives an error (a size limit included). A grammar that compiles is
// compiled against a small vocabulary (single bytes, multi-byte UTF-8, JSON-ish words, an
// eos) and walked for a few tokens by a Matcher, checking the mask it promises: every token
// the mask allows is accepted, a token it refuses is refused and leaves the state unchanged,
// eos is allowed exactly when the text so far can end, and only eos once nothing extends it.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "grammar/compiled_grammar.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/regex.h"

namespace {

using namespace densa::grammar;

std::shared_ptr<const Vocabulary> small_vocab() {
  std::vector<std::string> tokens;
  for (int c = 0x20; c < 0x7f; ++c) tokens.emplace_back(1, static_cast<char>(c));
  for (const char* t : {"\n", "\t", "\\", "\"", "{\"", "\":", "\": ", "\", \"", "\"}", "true", "false", "null", "12",
                        "-0.5e3", "[]", "{}", "ab", "abc", "  ", "\xc3\xa9", "\xc3", "\xa9", "\xe4\xbd\xa0",
                        "\xf0\x9f\x98\x80", "\xff", "\\u00e9", "\\n", "::=", "root"}) {
    tokens.emplace_back(t);
  }
  tokens.emplace_back("</s>");  // the eos, a special token
  const int32_t eos = static_cast<int32_t>(tokens.size()) - 1;
  auto v = Vocabulary::create(std::move(tokens), {eos}, {eos});
  FUZZ_ASSERT(v.is_ok());
  return *v;
}

bool allowed(const std::vector<uint64_t>& mask, int32_t id) { return (mask[id / 64] >> (id % 64)) & 1; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace densa;
  static const std::shared_ptr<const Vocabulary> vocab = small_vocab();
  if (size < 2) return 0;
  const std::string_view source(reinterpret_cast<const char*>(data + 2), size - 2);
  Result<Grammar> g = [&]() -> Result<Grammar> {
    switch (data[0] % 3) {
      case 0: return grammar_from_json_schema(source);
      case 1: return grammar_from_regex(source);
      default: return grammar_from_gbnf(source);
    }
  }();
  if (fuzz::verbose()) std::fprintf(stderr, "grammar: %s\n", g.status().to_string().c_str());
  if (!g.is_ok()) {
    FUZZ_ASSERT(!g.status().message().empty());
    return 0;
  }
  CompileLimits limits;
  limits.max_positions = 2000;  // small, so one input stays fast; the limit itself is exercised
  auto compiled = compile(*g, vocab, limits);
  if (fuzz::verbose()) std::fprintf(stderr, "compile: %s\n", compiled.status().to_string().c_str());
  if (!compiled.is_ok()) {
    FUZZ_ASSERT(!compiled.status().message().empty());
    return 0;
  }
  Matcher m(*compiled);
  const int32_t eos = vocab->eos_ids()[0];
  uint32_t seed = data[1];
  for (int step = 0; step < 24; ++step) {
    const std::vector<uint64_t> mask = m.mask();
    FUZZ_ASSERT(allowed(mask, eos) == m.can_end());  // (no eos accepted yet: the loop ends there)
    std::vector<int32_t> yes, no;
    for (int32_t id = 0; id < static_cast<int32_t>(vocab->size()); ++id) (allowed(mask, id) ? yes : no).push_back(id);
    if (m.is_terminated()) FUZZ_ASSERT(yes.size() == 1 && yes[0] == eos);  // complete, nothing extends it
    seed = seed * 1103515245u + 12345u;
    if (!no.empty()) {
      const int32_t bad = no[(seed >> 8) % no.size()];
      FUZZ_ASSERT(!m.accept_token(bad));
      FUZZ_ASSERT(m.mask() == mask);  // a refused token leaves the state as it was
    }
    if (yes.empty()) break;
    const int32_t pick = yes[(seed >> 16) % yes.size()];
    FUZZ_ASSERT(m.accept_token(pick));
    if (pick == eos) {
      FUZZ_ASSERT(m.is_terminated());
      break;
    }
  }
  return 0;
}
