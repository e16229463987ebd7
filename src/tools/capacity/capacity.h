#pragma once
// Capacity planning: given a model, a memory budget and precision choices, how many KV tokens
// and concurrent requests fit. Pure arithmetic over CapacityModel; `densa capacity` prints it.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/dtype.h"
#include "core/status.h"
#include "kernels/kv_view.h"
#include "tools/capacity/capacity_model.h"

namespace densa {

enum class WeightFormat : uint8_t {
  kBF16,
  kFP8,   // e4m3, one f32 scale per 128x128 block
  kINT4,  // symmetric, groups of 32 along the input dim, one bf16 scale per group
};

struct WeightEstimate {
  int64_t num_params = 0;
  int64_t num_linear_params = 0;  // linear layers: stored in the chosen format
  int64_t data_bytes = 0;            // element bytes of every tensor
  int64_t scale_bytes = 0;           // FP8 block scales / INT4 group scales
  int64_t bytes() const { return data_bytes + scale_bytes; }
};

// The body's linear layers in `format`; embeddings, norms and routers BF16. The output
// projection stays BF16 unless `lm_head` names its format, as `serve --lm-head-dtype` does.
// A tied head (no lm_head / output.weight tensor) then gets its own copy in that format, next
// to the BF16 embeddings; a tied head kept BF16 costs nothing extra.
// Tensor / expert parallelism, in one of two layouts:
//  kEpWithinTp (SGLang / vLLM style, the production system's): `tp` ranks share every layer
//    (attention heads, dense and shared FFN widths, the vocab of embeddings and lm_head split
//    by TP; norms, routers and MLA's latent projections q_a / kv_a replicated); routed experts
//    are split over `ep` ranks (ceil(experts / ep) each) and each expert's width over tp / ep.
//    ep divides tp; tp ranks in all.
//  kTpTimesEp (how `densa serve --tp T --ep E` runs, model/shard.h): tp x ep ranks; attention
//    heads, dense / shared FFN widths and the vocabulary of the embeddings and lm_head (when
//    tp divides it) split by tp; norms and routers replicated; routed experts split over ep groups (ceil(experts / ep) each), each expert's
//    width over tp. The shared expert lives in group 0, whose ranks are the ones reported.
//    MLA: query heads split, latent projections and latent KV replicated.
enum class ParallelLayoutKind : uint8_t { kEpWithinTp, kTpTimesEp };
struct Parallelism {
  int tp = 1;
  int ep = 1;
  ParallelLayoutKind layout = ParallelLayoutKind::kEpWithinTp;
};
Status check_parallelism(const Parallelism& p);

// The part of `g` one rank holds under `p` (NextN groups included as they come).
WeightGroup weight_group_per_rank(const WeightGroup& g, const Parallelism& p);

// Bytes of the loaded weights on one rank (all of them when p is {1, 1}); NextN / MTP groups
// are not loaded and not counted (see checkpoint_weight_bytes).
WeightEstimate estimate_weight_bytes(const CapacityModel& model, WeightFormat format,
                                     std::optional<WeightFormat> lm_head = std::nullopt,
                                     const Parallelism& p = {});
// The whole checkpoint in `format`: loaded weights plus the NextN / MTP layers.
WeightEstimate checkpoint_weight_bytes(const CapacityModel& model, WeightFormat format,
                                       std::optional<WeightFormat> lm_head = std::nullopt);

struct KvFormat {
  DType dtype = DType::kBF16;                   // kBF16 or kFP8E4M3
  KvScaleMode scale_mode = KvScaleMode::kNone;  // kNone for bf16; kStatic / kDynamic for fp8
  int32_t page_size = 16;
};

struct KvTokenBytes {
  int64_t data = 0;          // K+V (GQA) or latent (MLA) bytes per token, all layers
  int64_t scales = 0;        // dynamic scale bytes per token, all layers
  int64_t static_scales = 0; // static scale bytes in total (per layer, k|v, kv head)
};

// The KvLayout a PagePool for `model` would use (GQA: K/V per kv head; MLA: one latent row of
// kv_lora_rank + qk_rope_head_dim per token per layer). Capacity is computed from it, so the
// numbers are the runtime's page bytes.
KvLayout capacity_kv_layout(const CapacityModel& model, const KvFormat& kv);
// Under TP a rank holds ceil(kv_heads / tp) GQA heads; MLA's latent row (and DSA's index key)
// is replicated on every attention-TP rank.
KvLayout capacity_kv_layout(const CapacityModel& model, const KvFormat& kv, const Parallelism& p);
// GQA: layers * 2 * kv_heads * head_dim elements; dynamic scales one f32 per (layer, k|v,
// kv_head). MLA: layers * (kv_lora_rank + qk_rope_head_dim); dynamic: one f32 per layer.
// MLA+DSA adds the indexer key: layers * (index_head_dim FP8 + one f32 scale), in `data`.
// Per rank under `p`.
KvTokenBytes kv_bytes_per_token(const CapacityModel& model, const KvFormat& kv, const Parallelism& p = {});

struct CapacityRequest {
  int64_t memory_bytes = 0;     // whole budget; weights are taken out of it
  int64_t kv_memory_bytes = 0;  // > 0: the KV budget directly (weights not subtracted)
  WeightFormat weight_format = WeightFormat::kBF16;
  std::optional<WeightFormat> lm_head_format;  // nullopt: as stored (BF16)
  KvFormat kv;
  int64_t context_tokens = 0;   // tokens per request; 0 = the model's max_position_embeddings
  Parallelism parallel;         // memory_bytes / kv_memory_bytes are then per rank
};

struct CapacityReport {
  std::string source;
  std::string architecture;
  KvAttention attention = KvAttention::kGqa;
  bool dsa = false;             // MLA+DSA: the KV rows carry the indexer keys too
  WeightFormat weight_format = WeightFormat::kBF16;
  std::optional<WeightFormat> lm_head_format;
  WeightEstimate weights;       // per rank
  WeightEstimate checkpoint;    // the whole checkpoint in weight_format, NextN layers included
  Parallelism parallel;
  int64_t num_nextn_layers = 0;
  int64_t memory_bytes = 0;
  int64_t kv_budget_bytes = 0;  // memory - weights (or --kv-memory)
  KvFormat kv;
  KvTokenBytes kv_token_bytes;
  int64_t page_bytes = 0;       // page_size * (data + scales) per token
  int64_t num_pages = 0;        // (kv_budget - static scales) / page_bytes
  int64_t num_tokens = 0;       // num_pages * page_size
  int64_t num_tokens_data_only = 0;  // tokens if scales took no memory (the 2x comparison)
  int64_t context_tokens = 0;
  int64_t pages_per_request = 0;
  int64_t num_requests = 0;     // num_pages / pages_per_request
};

// Fails (kResourceExhausted) when the weights alone exceed the memory budget.
Result<CapacityReport> plan_capacity(const CapacityModel& model, const CapacityRequest& request);

std::string_view weight_format_name(WeightFormat f);

std::string format_capacity_text(const CapacityReport& report);
std::string format_capacity_json(const CapacityReport& report);

}  // namespace densa
