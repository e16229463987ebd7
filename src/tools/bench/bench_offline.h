#pragma once
// `densa bench offline`: prefill and decode speed of the real serving path (Engine: scheduler,
// paged KV, runner, sampler) in process, without HTTP, on token ids (no tokenizer needed).
//
// One run submits `batch` requests of `prompt_len` random token ids (distinct per request and
// repeat, so the prefix cache never hits) with max_new_tokens = gen_len and ignore_eos, all at
// once, and reads the event timestamps:
//   prefill: batch * prompt_len tokens over [submit, last request's first token];
//   decode:  tokens emitted after that moment over [that moment, last token] (aggregate over
//            the batch; decode steps = the most tokens one request emitted in that window).
// Each run also records the process CPU time, so a run on a busy machine states how much of
// its cores it actually got (cpu_share).
// The report gives the median over repeats, and the bytes one decode step must read: active
// weights (for MoE only the experts the step routed to, from the routing model::forward
// records in ForwardScratch::selected_experts, replayed over the generated sequences) and the
// KV cache at the step's context; achieved GB/s = bytes per step / seconds per step.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/engine.h"
#include "model/model_weights.h"

namespace densa::bench {

struct BenchOfflineConfig {
  int batch = 1;
  int prompt_len = 128;
  int gen_len = 32;
  int repeats = 3;
  DType kv_dtype = DType::kBF16;
  int num_threads = 0;            // 0 = all cores
  int page_size = 16;             // tokens per KV page (EngineConfig::page_size)
  uint64_t seed = 0;
  bool routing_replay = true;     // MoE, batch > 1: replay the sequences to count routed experts
  int max_step_tokens = 0;        // 0: batch * prompt_len, at least 1024 and at most 16384
  // Tensor / expert parallel: this is world rank 0 of the group (not owned). The other ranks
  // run run_engine_follower with bench_offline_engine_config. The routing replay (a forward
  // pass outside the engine) cannot run a slice alone, so expert bytes per step are then the
  // experts this rank holds, assumed all read.
  const ParallelComms* parallel = nullptr;
};

struct BenchOfflineRun {
  double prefill_s = 0;
  double prefill_tok_s = 0;
  double decode_s = 0;
  int64_t decode_tokens = 0;      // tokens emitted after the last first token
  int64_t decode_steps = 0;
  double decode_tok_s = 0;        // aggregate over the batch
  int64_t generated_tokens = 0;   // all tokens emitted (= batch * gen_len)
  double wall_s = 0;              // submit to last token
  double cpu_s = 0;               // process CPU time over the same span (all threads)
  double comm_s = 0;              // tensor / expert parallel: rank 0's time inside collectives
  // cpu_s / (wall_s * threads): the share of its cores the run got. On a machine shared with
  // other work it is < 1 and wall-clock rates understate the code's speed.
  double cpu_share = 0;
};

struct BenchOfflineReport {
  BenchOfflineConfig config;
  std::string model;
  std::string weight_dtype;       // dtype of the attention matrices ("q4_0", "int4", ...)
  std::string lm_head_dtype;      // dtype of lm_head (--lm-head-dtype), same names
  int64_t total_params = 0;
  int64_t prompt_tokens = 0;      // per repeat
  std::vector<BenchOfflineRun> runs;
  double prefill_tok_s = 0;       // medians
  double decode_tok_s = 0;
  double decode_step_ms = 0;
  int num_threads = 0;            // kernel threads the engine ran (config.num_threads resolved)
  std::string kernels;            // the CPU kernel level that ran: "avx512_bf16", "+amx" where FP8 ran on AMX
  std::string bf16_activations;   // BF16 / F16 matrices' x: "bf16" (AMX tiles, matmul_bf16_on_amx) or "f32"
  double cpu_share = 0;           // median over repeats (see BenchOfflineRun)
  // Tensor / expert parallel: layout, and rank 0's time inside collectives (the batch sent to
  // the followers, the sums after attention and FFNs, waiting for the slowest rank included)
  // over wall time, median over repeats.
  int tp = 1;
  int ep = 1;
  double comm_share = 0;
  // Bytes one decode step reads (averaged over the measured steps of the last repeat).
  int64_t weight_bytes_all = 0;       // every matrix and norm as stored
  double weight_bytes_per_step = 0;   // active: routed experts only, embeddings of the batch
  double experts_per_layer_step = 0;  // MoE: distinct experts a step reads per MoE layer (avg)
  double kv_bytes_per_step = 0;       // K and V of every context token of every sequence
  double weight_gbs = 0;              // weight_bytes_per_step / decode_step seconds
  double total_gbs = 0;               // (weights + KV) per step / decode_step seconds
  bool routing_measured = false;      // false: MoE expert bytes assume every expert
};

// The engine the benchmark runs (pool sized for the batch, no prefix cache); the follower
// ranks of a parallel run start theirs from the same config.
EngineConfig bench_offline_engine_config(const ModelWeights& w, const BenchOfflineConfig& cfg);

Result<BenchOfflineReport> run_bench_offline(const ModelWeights& weights, const BenchOfflineConfig& config);

// The report as JSON text (stable keys) and as a short human summary.
std::string bench_offline_json(const BenchOfflineReport& r);
std::string bench_offline_summary(const BenchOfflineReport& r);

}  // namespace densa::bench
