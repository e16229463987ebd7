#pragma once
// KvLayoutDescriptor: what two workers compare before any KV moves between them — which
// model (a fingerprint of its architecture and vocabulary, independent of weight precision),
// the KV shape, the page size and the storage format (dtype + scale mode, and the static
// scales when the format has them). The sender converts from its format to the receiver's;
// the shape, page size and model must match exactly, or the transfer is refused.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"
#include "text/tokenizer.h"
#include "kernels/kv_view.h"
#include "model/model_weights.h"

namespace densa::disagg {

struct KvLayoutDescriptor {
  uint64_t model_fingerprint = 0;
  KvLayout layout;
  std::vector<float> static_scales;  // [layer][k|v][kv_head] when layout is fp8 static; else empty
};

// xxh3 over the model's architecture fields (not its weight dtypes) and tokenizer pieces.
uint64_t model_fingerprint(const ModelConfig& config, const Tokenizer* tokenizer);

KvLayoutDescriptor describe_kv(const ModelWeights& weights, const KvLayout& layout,
                               std::vector<float> static_scales);

// ok when KV written as `from` can be converted into `to`; else kv_layout_mismatch naming
// the first field that differs.
Status check_compatible(const KvLayoutDescriptor& from, const KvLayoutDescriptor& to);

// The descriptor as JSON (GET /disagg/v1/layout; the "layout" of a prefill order):
//   {"model_fingerprint":"<16 hex digits>","num_layers","num_kv_heads","head_dim","page_size",
//    "latent_dim","index_dim","dtype","scale_mode","page_bytes"[,"static_scales":[..]]}
// (latent_dim: MLA's latent row, index_dim: DSA's index key; 0 or absent for per-head K / V.)
// descriptor_from_json reads what another worker sent: invalid_argument naming the field when
// one is missing, of the wrong type or out of range (never an exception), kv_layout_mismatch
// for a dtype or scale mode this build does not know. page_bytes is informational (derived).
nlohmann::json descriptor_to_json(const KvLayoutDescriptor& d);
Result<KvLayoutDescriptor> descriptor_from_json(const nlohmann::json& j);
// "fp8_e4m3" / "bf16" / "f32" and "none" / "static" / "dynamic", and back.
const char* kv_scale_mode_name(KvScaleMode mode);
Result<KvScaleMode> parse_kv_scale_mode(const std::string& name);

}  // namespace densa::disagg
