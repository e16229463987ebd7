#include "disagg/kv_layout_descriptor.h"

#include <xxhash.h>

#include <cmath>
#include <cstdio>
#include <limits>

#include <nlohmann/json.hpp>
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
  // [layer][k|v][kv head] (GQA) or [layer][c_kv|k_pe] (latent).
  if (d.static_scales.size() != static_cast<size_t>(l.num_layers) * 2 * (l.is_latent() ? 1 : l.num_kv_heads)) return false;
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
  if (a.latent_dim != b.latent_dim) return differs("latent_dim", a.latent_dim, b.latent_dim);
  if (a.index_dim != b.index_dim) return differs("index_dim", a.index_dim, b.index_dim);
  if (a.is_latent() && (a.scale_mode == KvScaleMode::kStatic || b.scale_mode == KvScaleMode::kStatic) &&
      !(a.dtype == b.dtype && a.scale_mode == b.scale_mode && from.static_scales == to.static_scales)) {
    return kv_layout_mismatch("latent (MLA) KV with static fp8 scales moves only to the same format");
  }
  if (a.num_layers != b.num_layers) return differs("num_layers", a.num_layers, b.num_layers);
  if (a.num_kv_heads != b.num_kv_heads) return differs("num_kv_heads", a.num_kv_heads, b.num_kv_heads);
  if (a.head_dim != b.head_dim) return differs("head_dim", a.head_dim, b.head_dim);
  if (a.page_size != b.page_size) return differs("page_size", a.page_size, b.page_size);
  if (!valid_format(from)) return kv_layout_mismatch("the prefill KV format is invalid");
  if (!valid_format(to)) return kv_layout_mismatch("the decode KV format is invalid (dtype, scale mode or scales)");
  return Status::ok();
}

namespace {

using nlohmann::json;

// A non-negative int field (the layout's dimensions); false with `error` set otherwise.
bool read_dim(const json& j, const char* key, int& out, Status& error) {
  const auto it = j.find(key);
  // get<int64_t> of an unsigned above INT64_MAX wraps negative, so the range check refuses it.
  if (it == j.end() || !it->is_number_integer() || it->get<int64_t>() < 0 ||
      it->get<int64_t>() > std::numeric_limits<int32_t>::max()) {
    error = invalid_argument(std::string("KV layout descriptor: '") + key + "' must be a non-negative 32-bit integer");
    return false;
  }
  out = static_cast<int>(it->get<int64_t>());
  return true;
}

const json* string_field(const json& j, const char* key, Status& error) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_string()) {
    error = invalid_argument(std::string("KV layout descriptor: '") + key + "' must be a string");
    return nullptr;
  }
  return &*it;
}

// Exactly 16 lowercase or uppercase hex digits, as descriptor_to_json writes them.
bool parse_fingerprint(const std::string& s, uint64_t& out) {
  if (s.size() != 16) return false;
  out = 0;
  for (char c : s) {
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return false;
    out = out << 4 | static_cast<uint64_t>(d);
  }
  return true;
}

}  // namespace

json descriptor_to_json(const KvLayoutDescriptor& d) {
  char fp[24];
  std::snprintf(fp, sizeof(fp), "%016llx", static_cast<unsigned long long>(d.model_fingerprint));
  json j = {{"model_fingerprint", fp},
            {"num_layers", d.layout.num_layers},
            {"num_kv_heads", d.layout.num_kv_heads},
            {"head_dim", d.layout.head_dim},
            {"page_size", d.layout.page_size},
            {"latent_dim", d.layout.latent_dim},
            {"index_dim", d.layout.index_dim},
            {"dtype", std::string(dtype_name(d.layout.dtype))},
            {"scale_mode", kv_scale_mode_name(d.layout.scale_mode)},
            {"page_bytes", d.layout.page_bytes()}};
  if (d.layout.scale_mode == KvScaleMode::kStatic) j["static_scales"] = d.static_scales;
  return j;
}

Result<KvLayoutDescriptor> descriptor_from_json(const json& j) {
  if (!j.is_object()) return invalid_argument("KV layout descriptor must be a JSON object");
  KvLayoutDescriptor d;
  Status error;
  const json* fp = string_field(j, "model_fingerprint", error);
  if (fp == nullptr) return error;
  if (!parse_fingerprint(fp->get<std::string>(), d.model_fingerprint)) {
    return invalid_argument("KV layout descriptor: 'model_fingerprint' must be 16 hex digits");
  }
  if (!read_dim(j, "num_layers", d.layout.num_layers, error) ||
      !read_dim(j, "num_kv_heads", d.layout.num_kv_heads, error) || !read_dim(j, "head_dim", d.layout.head_dim, error) ||
      !read_dim(j, "page_size", d.layout.page_size, error)) {
    return error;
  }
  // MLA's latent row width and DSA's index key width: absent means 0 (per-head K / V pages).
  for (const char* key : {"latent_dim", "index_dim"}) {
    if (j.contains(key) && !read_dim(j, key, std::string(key) == "latent_dim" ? d.layout.latent_dim : d.layout.index_dim, error)) {
      return error;
    }
  }
  const json* dtype = string_field(j, "dtype", error);
  if (dtype == nullptr) return error;
  const std::optional<DType> t = dtype_from_name(dtype->get<std::string>());
  if (!t) return kv_layout_mismatch("unknown KV dtype \"" + dtype->get<std::string>() + "\"");
  d.layout.dtype = *t;
  const json* mode_name = string_field(j, "scale_mode", error);
  if (mode_name == nullptr) return error;
  Result<KvScaleMode> mode = parse_kv_scale_mode(mode_name->get<std::string>());
  if (!mode.is_ok()) return kv_layout_mismatch(mode.status().message());
  d.layout.scale_mode = *mode;
  if (const auto it = j.find("static_scales"); it != j.end()) {
    if (!it->is_array()) return invalid_argument("KV layout descriptor: 'static_scales' must be an array of numbers");
    for (const json& v : *it) {
      if (!v.is_number()) return invalid_argument("KV layout descriptor: 'static_scales' must be an array of numbers");
      d.static_scales.push_back(static_cast<float>(v.get<double>()));
    }
  }
  return d;
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
