#pragma once
// Single-sequence generation over a contiguous KV cache: prefill the prompt, then decode one
// token at a time. Used by `densa generate` and the golden-output tests.
#include <functional>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "kv/kv_scales.h"
#include "model/forward.h"
#include "model/model_weights.h"
#include "sample/sampler.h"

namespace densa {

struct GenerateOptions {
  int max_new_tokens = 64;
  SamplingParams sampling;     // temperature 0 = greedy
  bool stop_at_eos = true;
  DType kv_dtype = DType::kF32;
  // kFP8E4M3 needs kStatic (with kv_scales) or kDynamic; other dtypes take kNone.
  KvScaleMode kv_scale_mode = KvScaleMode::kNone;
  const KvScales* kv_scales = nullptr;  // borrowed; required for kStatic
};

// Calls on_token(id, logits) for each generated token (logits of the step that produced it);
// returning false stops early. Returns the generated ids.
std::vector<TokenId> generate(const ModelWeights& w, std::span<const TokenId> prompt,
                              const GenerateOptions& opts, ThreadPool* pool,
                              const std::function<bool(TokenId, std::span<const float>)>& on_token);

// Logits of every position of `tokens`, [tokens.size(), vocab] row-major, computed in one
// prefill pass (no generation).
std::vector<float> prompt_logits(const ModelWeights& w, std::span<const TokenId> tokens,
                                 DType kv_dtype, ThreadPool* pool,
                                 KvScaleMode kv_scale_mode = KvScaleMode::kNone,
                                 const KvScales* kv_scales = nullptr);

}  // namespace densa
