#include "disagg/kv_layout_descriptor.h"

#include <xxhash.h>

#include <cmath>
#include <sstream>

#include "disagg/disagg_error.h"

namespace densa::disagg {

uint64_t model_fingerprint(const ModelConfig& c, const Tokenizer* tokenizer) {
  std::ostringstream s;
  s << c.architecture << '|' << c.vocab_size << '|' << c.hidden_size << '|' << c.num_layers << '|' << c.num_heads
    << '|' << c.num_kv_heads << '|' << c.head_dim << '|' << c.intermediate_size << '|' << c.num_experts << '|'
    << c.num_experts_per_tok << '|' << c.rope_theta << '|' << c.rope_dim() << '|' << c.max_position_embeddings
    << '|' << c.bos_token_id << '|' << c.eos_token_id << '|' << c.qk_norm << '|' << c.attention_bias;
  if (tokenizer != nullptr) {
    for (const std::string& piece : tokenizer->vocab().pieces) s << '|' << piece;
  }
  const std::string text = s.str();
  return XXH3_64bits(text.data(), text.size());
}

KvLayoutDescriptor describe_kv(const ModelWeights& weights, const KvLayout& layout, std::vector<float> static_scales) {
  return {model_fingerprint(weights.config, weights.tokenizer.get()), layout, std::move(static_scales)};
}

namespace {

Status differs(const char* field, int64_t from, int64_t to) {
  return kv_layout_mismatch(std::string(field) + " differs: prefill has " + std::to_string(from) + ", decode has " +
                            std::to_string(to));
}

bool valid_format(const KvLayoutDescriptor& d) {
  const KvLayout& l = d.layout;
  if (l.dtype == DType::kF32 || l.dtype == DType::kBF16) return l.scale_mode == KvScaleMode::kNone;
  if (l.dtype != DType::kFP8E4M3) return false;
  if (l.scale_mode == KvScaleMode::kDynamic) return true;
  if (l.scale_mode != KvScaleMode::kStatic) return false;
  if (d.static_scales.size() != static_cast<size_t>(l.num_layers) * 2 * l.num_kv_heads) return false;
  for (float s : d.static_scales) {
    if (!std::isfinite(s) || s <= 0.0f) return false;
  }
  return true;
}

}  // namespace

Status check_compatible(const KvLayoutDescriptor& from, const KvLayoutDescriptor& to) {
  if (from.model_fingerprint != to.model_fingerprint) {
    return kv_layout_mismatch("the workers serve different models (fingerprints " +
                              std::to_string(from.model_fingerprint) + " and " + std::to_string(to.model_fingerprint) +
                              ")");
  }
  const KvLayout& a = from.layout;
  const KvLayout& b = to.layout;
  if (a.is_latent() || b.is_latent()) {
    return kv_layout_mismatch("MLA latent KV pages cannot be transferred yet (only per-head K/V pages)");
  }
  if (a.num_layers != b.num_layers) return differs("num_layers", a.num_layers, b.num_layers);
  if (a.num_kv_heads != b.num_kv_heads) return differs("num_kv_heads", a.num_kv_heads, b.num_kv_heads);
  if (a.head_dim != b.head_dim) return differs("head_dim", a.head_dim, b.head_dim);
  if (a.page_size != b.page_size) return differs("page_size", a.page_size, b.page_size);
  if (!valid_format(from)) return kv_layout_mismatch("the prefill KV format is invalid");
  if (!valid_format(to)) return kv_layout_mismatch("the decode KV format is invalid (dtype, scale mode or scales)");
  return Status::ok();
}

const char* kv_scale_mode_name(KvScaleMode mode) {
  switch (mode) {
    case KvScaleMode::kNone: return "none";
    case KvScaleMode::kStatic: return "static";
    case KvScaleMode::kDynamic: return "dynamic";
  }
  return "none";
}

Result<KvScaleMode> parse_kv_scale_mode(const std::string& name) {
  if (name == "none") return KvScaleMode::kNone;
  if (name == "static") return KvScaleMode::kStatic;
  if (name == "dynamic") return KvScaleMode::kDynamic;
  return invalid_argument("unknown KV scale mode \"" + name + "\"");
}

}  // namespace densa::disagg
