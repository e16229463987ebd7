#pragma once
// Helpers for engine tests: the shared MoE fixture, the single-sequence oracle, and draining
// a request stream.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <random>
#include <vector>

#include "engine/engine.h"
#include "model/model_loader.h"
#include "quality/generator.h"
#include "test_util.h"

namespace densa::testing {

inline const ModelWeights& moe_f16() {
  static const ModelWeights* w = [] {
    auto r = load_model(model_dir("tinystories-mixtral-3.6m") / "gguf" / "tinystories-mixtral-3.6m-f16.gguf");
    CHECK(r.is_ok()) << r.status().to_string();
    return new ModelWeights(std::move(r).value());
  }();
  return *w;
}

inline ThreadPool& oracle_threads() {
  static ThreadPool p(0);
  return p;
}

// The request run alone through the single-sequence generator.
inline std::vector<TokenId> oracle(const ModelWeights& w, const GenerateRequest& r, DType kv_dtype) {
  GenerateOptions o;
  o.max_new_tokens = r.max_new_tokens;
  o.sampling = r.sampling;
  o.stop_at_eos = !r.ignore_eos;
  o.kv_dtype = kv_dtype;
  return generate(w, r.prompt, o, &oracle_threads(), [](TokenId, std::span<const float>) { return true; });
}

// A golden.json's prompts as greedy requests, each as long as its greedy_ids, past eos.
inline std::vector<GenerateRequest> golden_greedy_requests(const nlohmann::json& golden) {
  std::vector<GenerateRequest> out;
  for (const auto& p : golden["prompts"]) {
    GenerateRequest r;
    r.prompt = p["prompt_ids"].get<std::vector<TokenId>>();
    r.sampling.temperature = 0.0f;
    r.max_new_tokens = static_cast<int>(p["greedy_ids"].size());
    r.ignore_eos = true;
    out.push_back(std::move(r));
  }
  return out;
}

struct Collected {
  std::vector<TokenId> tokens;
  std::vector<TokenEvent> events;
  FinishReason finish = FinishReason::kNone;
};

// Pops events until the final one (fails the test after 60 s of silence).
inline Collected drain(RequestStream& s) {
  Collected c;
  while (true) {
    std::optional<TokenEvent> e = s.next(std::chrono::milliseconds(60000));
    if (!e) {
      ADD_FAILURE() << "request " << s.id().value << " timed out";
      return c;
    }
    if (e->token) c.tokens.push_back(*e->token);
    c.finish = e->finish;
    c.events.push_back(std::move(*e));
    if (c.finish != FinishReason::kNone) return c;
  }
}

// A greedy request: BOS + `len` tokens of the validation text starting at `offset`.
inline GenerateRequest greedy_request(const std::vector<int32_t>& text, size_t offset, int len, int max_new) {
  GenerateRequest r;
  r.prompt.push_back(1);
  r.prompt.insert(r.prompt.end(), text.begin() + static_cast<int64_t>(offset),
                  text.begin() + static_cast<int64_t>(offset) + len);
  r.sampling.temperature = 0.0f;
  r.max_new_tokens = max_new;
  return r;
}

}  // namespace densa::testing
