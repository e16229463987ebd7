#pragma once
// ServingContext: what every HTTP handler of one server shares. Borrowed references (the
// engine and the weights outlive the server) plus the server's own metrics.
#include <atomic>
#include <memory>
#include <string>

#include "engine/engine.h"
#include "text/tokenizer.h"
#include "model/model_weights.h"
#include "server/chat_prompt.h"
#include "server/output_constraint.h"
#include "server/disagg_worker.h"
#include "server/metrics.h"
#include "server/request_log.h"

namespace densa::server {

struct ServingContext {
  Engine& engine;
  const ModelWeights& weights;
  const Tokenizer& tokenizer;
  std::string served_model_name;
  int page_size = 16;           // EngineConfig::page_size, for the pool's token capacity
  ChatFormat chat;              // the model's chat template (or the plain fallback) and parsers
  Metrics metrics;
  std::atomic<bool> stopping{false};  // set on shutdown: handlers stop waiting
  DisaggWorker* disagg = nullptr;     // decode role: imports prompt KV; null otherwise
  bool prefill_only = false;          // prefill role: OpenAI requests are refused
  DisaggMetrics disagg_metrics;
  RequestLog* request_log = nullptr;  // structured request log; null: off. Owned by HttpServer.
  bool allow_fault_injection = false;  // --test-allow-fault-injection: densa_inject_fault is served

  // Grammars for structured outputs and tool calls over this tokenizer's vocabulary.
  std::unique_ptr<OutputConstraints> constraints;

  int context_tokens() const { return weights.config.max_position_embeddings; }
};

}  // namespace densa::server
