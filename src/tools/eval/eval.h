#pragma once
// `densa eval`: the accuracy cost of precision choices. For every (weights, KV) combination it
// computes perplexity (the llama-perplexity windowing of quality/perplexity.h) and, against a
// baseline combination, per-token KL divergence over the full vocabulary, same-top-1 rate and
// delta perplexity with a paired per-window bootstrap CI, overall and by context position.
//
// Memory: the baseline's log-softmax rows ([ctx, vocab] float per window) go to an unnamed
// temporary file in one pass; each candidate then streams window by window against it, so
// only one model and one window of logits are resident at a time.
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/ids.h"
#include "core/status.h"
#include "core/thread_pool.h"

namespace densa {

// One precision choice by name: weights "f32"/"native" (as stored), "bf16", "fp8", "int4"
// (group 128), "int4-g32", "int4-g128", "q8_0" or "q4_0" for the body matrices, optionally
// followed by "+head-" and one of the same quantized names for lm_head ("int4-g32+head-fp8";
// without it lm_head stays as stored), and either may end in "+x-f32": BF16 / F16 matrices keep fp32
// activations on the exact kernels for that run (LoadOptions::bf16_f32_activations; without it they take
// AMX tiles with x rounded to bf16 where the CPU grants AMX); KV "f32", "bf16", "fp8" (static per-(layer, k|v, head)
// scales from the checkpoint or a calibration pass on the built-in passage), "fp8-dynamic"
// (per token). Weights "file:PATH" load another checkpoint of the same model as stored (a GGUF
// quantized by llama-quantize against its F16 source, say): same vocabulary, other file.
struct EvalCombo {
  std::string weights;
  std::string kv;
  std::string name() const { return weights + "/" + kv; }
};

struct EvalConfig {
  std::string model_path;
  std::vector<std::string> weights = {"bf16"};
  std::vector<std::string> kv = {"bf16"};
  EvalCombo baseline = {"bf16+x-f32", "bf16"};  // BF16 weights, fp32 activations
  int ctx = 256;
  int max_windows = 0;             // 0 = every full window
  int bootstrap_resamples = 2000;  // for the delta-perplexity CI
  uint64_t seed = 0;
};

// Distribution of per-token KL(P_baseline || P_candidate) in nats, and the top-1 agreement.
struct KlStats {
  int64_t num_tokens = 0;
  double mean = 0, median = 0, p99 = 0, p999 = 0, max = 0;
  double same_top1 = 0;  // fraction of positions whose argmax equals the baseline's
};

// Scored positions [pos_lo, pos_hi] (0-based position of the predicting token in the window).
struct EvalBucket {
  int pos_lo = 0, pos_hi = 0;
  int64_t num_tokens = 0;
  double ppl = 0, ppl_baseline = 0;
  double delta_ppl = 0, delta_ppl_lo = 0, delta_ppl_hi = 0;  // candidate - baseline, 95% CI
  KlStats kl;
};

struct EvalComboResult {
  EvalCombo combo;
  bool is_baseline = false;
  std::string error;           // non-empty: the combination could not run (e.g. unimplemented)
  double ppl = 0;              // all positions (ctx-1 predictions per window)
  double ppl_second_half = 0;  // llama-perplexity's number
  int64_t num_tokens = 0;
  double delta_ppl = 0, delta_ppl_lo = 0, delta_ppl_hi = 0;
  KlStats kl;
  std::vector<EvalBucket> buckets;
  double seconds = 0;
};

struct EvalReport {
  std::string model_path;
  EvalCombo baseline;
  int ctx = 0, num_windows = 0, vocab = 0;
  int bootstrap_resamples = 0;
  std::vector<EvalComboResult> results;  // baseline first, then in weights x kv order
};

// Position buckets for a window of ctx: [0, ctx/8), [ctx/8, ctx/4), [ctx/4, ctx/2),
// [ctx/2, ctx-1) (for ctx 256: 0-31, 32-63, 64-127, 128-254); fewer for tiny ctx.
std::vector<std::pair<int, int>> eval_buckets(int ctx);

// Summary of per-token KL values (unsorted input) and a top-1 agreement count.
KlStats summarize_kl(std::vector<double> kl, int64_t num_same_top1);


// Paired per-window bootstrap of exp(sum cand / n) - exp(sum base / n): windows are resampled
// with replacement; returns {lo, hi} of the 95% percentile interval. Inputs: per-window NLL
// sums [windows] and the per-window token count.
std::pair<double, double> delta_ppl_ci(std::span<const double> base_nll, std::span<const double> cand_nll,
                                       int64_t tokens_per_window, int num_resamples, uint64_t seed);

// Runs every combination. ids: the whole token stream (BOS first). log gets progress lines.
Result<EvalReport> run_eval(const EvalConfig& config, std::span<const TokenId> ids, ThreadPool* pool,
                            const std::function<void(const std::string&)>& log);

// Reads token ids: a .u16.bin file (uint16 LE) or a text file tokenized with the model's
// tokenizer (one trailing newline removed, BOS prepended, as llama-perplexity -f does).
Result<std::vector<TokenId>> eval_load_ids(const std::string& model_path, const std::string& text_path,
                                           const std::string& ids_path);

nlohmann::json eval_json(const EvalReport& r);
std::string eval_markdown(const EvalReport& r);
std::string eval_table(const EvalReport& r);  // fixed-width text for the terminal

}  // namespace densa
