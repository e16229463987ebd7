#include "tools/capacity/capacity.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

namespace densa {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

constexpr int64_t kFp8BlockRows = 128;
constexpr int64_t kFp8BlockCols = 128;
constexpr int64_t kInt4GroupSize = 32;

// 1234567 -> "1,234,567"
std::string group_digits(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

std::string bytes_str(int64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), " B (%.2f GiB, %.2f GB)", static_cast<double>(bytes) / (1LL << 30),
                static_cast<double>(bytes) / 1e9);
  return group_digits(bytes) + buf;
}

const char* scale_mode_name(KvScaleMode mode) {
  switch (mode) {
    case KvScaleMode::kNone: return "none";
    case KvScaleMode::kStatic: return "static";
    case KvScaleMode::kDynamic: return "dynamic";
  }
  return "?";
}

const char* attention_name(const CapacityReport& r) {
  switch (r.attention) {
    case KvAttention::kGqa: return "gqa";
    case KvAttention::kMla: return r.dsa ? "mla+dsa" : "mla";
  }
  return "?";
}

}  // namespace

std::string_view weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::kBF16: return "bf16";
    case WeightFormat::kFP8: return "fp8";
    case WeightFormat::kINT4: return "int4";
  }
  return "?";
}

namespace {

// `count` [rows, cols] matrices stored in `format`.
void add_matrix_bytes(WeightEstimate& e, int64_t rows, int64_t cols, int64_t count, WeightFormat format) {
  switch (format) {
    case WeightFormat::kBF16:
      e.data_bytes += 2 * rows * cols * count;
      return;
    case WeightFormat::kFP8:
      e.data_bytes += rows * cols * count;
      e.scale_bytes += count * ceil_div(rows, kFp8BlockRows) * ceil_div(cols, kFp8BlockCols) * 4;
      return;
    case WeightFormat::kINT4:
      e.data_bytes += count * rows * ceil_div(cols, 2);
      e.scale_bytes += count * rows * ceil_div(cols, kInt4GroupSize) * 2;
      return;
  }
}

bool is_lm_head(const WeightGroup& g) { return g.name == "lm_head" || g.name == "output.weight"; }
bool is_embedding(const WeightGroup& g) { return g.name == "embed_tokens" || g.name == "token_embd.weight"; }

}  // namespace

Status check_parallelism(const Parallelism& p) {
  if (p.tp < 1 || p.ep < 1) return invalid_argument("--tp and --ep must be at least 1");
  if (p.layout == ParallelLayoutKind::kEpWithinTp && p.tp % p.ep != 0) {
    return invalid_argument("--ep " + std::to_string(p.ep) + " must divide --tp " + std::to_string(p.tp) +
                            " (experts are split over ep ranks, each expert over tp / ep)");
  }
  return Status::ok();
}

WeightGroup weight_group_per_rank(const WeightGroup& g, const Parallelism& p) {
  WeightGroup r = g;
  // A dim of `size` holding `heads` heads (0: no head structure) split `ways` ways.
  auto split = [](int64_t size, int64_t heads, int64_t ways) {
    if (heads > 0) return ceil_div(heads, ways) * (size / heads);
    return ceil_div(size, ways);
  };
  if (p.layout == ParallelLayoutKind::kTpTimesEp) {
    switch (g.shard) {
      case WeightShard::kReplicated: break;
      case WeightShard::kTpRows:
        // The vocabulary of the embeddings and lm_head split when it divides evenly (model/shard.h).
        if ((is_embedding(g) || is_lm_head(g)) && g.rows % p.tp != 0) break;
        r.rows = split(g.rows, g.heads, p.tp);
        break;
      case WeightShard::kTpCols: r.cols = split(g.cols, g.heads, p.tp); break;
      case WeightShard::kExpertRows:
      case WeightShard::kExpertCols: {
        const int64_t per_layer = g.experts > 0 ? g.experts : 1;
        r.count = g.count / per_layer * ceil_div(per_layer, p.ep);
        if (g.shard == WeightShard::kExpertRows) r.rows = ceil_div(g.rows, p.tp);
        else r.cols = ceil_div(g.cols, p.tp);
        break;
      }
    }
    return r;
  }
  const int64_t inner = p.tp / p.ep;  // ranks sharing one expert
  switch (g.shard) {
    case WeightShard::kReplicated: break;
    case WeightShard::kTpRows: r.rows = split(g.rows, g.heads, p.tp); break;
    case WeightShard::kTpCols: r.cols = split(g.cols, g.heads, p.tp); break;
    case WeightShard::kExpertRows:
    case WeightShard::kExpertCols: {
      const int64_t per_layer = g.experts > 0 ? g.experts : 1;
      r.count = g.count / per_layer * ceil_div(per_layer, p.ep);
      if (g.shard == WeightShard::kExpertRows) r.rows = ceil_div(g.rows, inner);
      else r.cols = ceil_div(g.cols, inner);
      break;
    }
  }
  return r;
}

namespace {

WeightEstimate estimate_groups(const CapacityModel& model, WeightFormat format, std::optional<WeightFormat> lm_head,
                               const Parallelism& p, bool with_nextn) {
  WeightEstimate e;
  bool has_head = false;
  std::optional<WeightGroup> embedding;
  for (const WeightGroup& whole : model.weights) {
    if (whole.nextn && !with_nextn) continue;
    const WeightGroup g = weight_group_per_rank(whole, p);
    const int64_t n = g.num_params();
    e.num_params += n;
    if (g.quantizable) e.num_linear_params += n;
    if (is_embedding(g)) embedding = g;
    if (is_lm_head(g)) {
      has_head = true;
      add_matrix_bytes(e, g.rows, g.cols, g.count, lm_head.value_or(WeightFormat::kBF16));
      continue;
    }
    add_matrix_bytes(e, g.rows, g.cols, g.count, g.quantizable ? format : WeightFormat::kBF16);
  }
  if (!has_head && embedding && lm_head.has_value() && *lm_head != WeightFormat::kBF16) {
    add_matrix_bytes(e, embedding->rows, embedding->cols, embedding->count, *lm_head);  // the tied head's copy
  }
  return e;
}

}  // namespace

WeightEstimate estimate_weight_bytes(const CapacityModel& model, WeightFormat format,
                                     std::optional<WeightFormat> lm_head, const Parallelism& p) {
  return estimate_groups(model, format, lm_head, p, /*with_nextn=*/false);
}

WeightEstimate checkpoint_weight_bytes(const CapacityModel& model, WeightFormat format,
                                       std::optional<WeightFormat> lm_head) {
  return estimate_groups(model, format, lm_head, Parallelism{}, /*with_nextn=*/true);
}

KvLayout capacity_kv_layout(const CapacityModel& model, const KvFormat& kv) {
  return capacity_kv_layout(model, kv, Parallelism{});
}

KvLayout capacity_kv_layout(const CapacityModel& model, const KvFormat& kv, const Parallelism& p) {
  KvLayout l;
  l.num_layers = static_cast<int>(model.num_layers);
  l.page_size = kv.page_size;
  l.dtype = kv.dtype;
  l.scale_mode = kv.dtype == DType::kFP8E4M3 ? kv.scale_mode : KvScaleMode::kNone;
  switch (model.attention) {
    case KvAttention::kGqa:
      l.num_kv_heads = static_cast<int>(ceil_div(model.num_kv_heads, p.tp));
      l.head_dim = static_cast<int>(model.head_dim);
      break;
    case KvAttention::kMla:
      l.latent_dim = static_cast<int>(model.kv_lora_rank + model.qk_rope_head_dim);
      l.index_dim = static_cast<int>(model.index_head_dim);
      break;
  }
  return l;
}

KvTokenBytes kv_bytes_per_token(const CapacityModel& model, const KvFormat& kv, const Parallelism& p) {
  // The page layout the runtime's PagePool uses, one token per page.
  KvFormat one = kv;
  one.page_size = 1;
  const KvLayout l = capacity_kv_layout(model, one, p);
  KvTokenBytes b;
  b.data = l.data_bytes_per_page() + l.index_bytes_per_page();
  b.scales = l.scale_bytes_per_page();
  if (l.dtype == DType::kFP8E4M3 && l.scale_mode == KvScaleMode::kStatic) {
    // Per (layer, k|v, kv head); a latent cache has two per layer (c_kv, k_pe).
    b.static_scales = static_cast<int64_t>(l.num_layers) * (l.is_latent() ? 2 : l.rows_per_layer()) * 4;
  }
  return b;
}

Result<CapacityReport> plan_capacity(const CapacityModel& model, const CapacityRequest& request) {
  CapacityReport r;
  r.source = model.source;
  r.architecture = model.architecture;
  r.attention = model.attention;
  r.dsa = model.index_head_dim > 0;
  r.weight_format = request.weight_format;
  r.lm_head_format = request.lm_head_format;
  DENSA_RETURN_IF_ERROR(check_parallelism(request.parallel));
  r.parallel = request.parallel;
  r.num_nextn_layers = model.num_nextn_layers;
  r.weights = estimate_weight_bytes(model, request.weight_format, request.lm_head_format, request.parallel);
  r.checkpoint = checkpoint_weight_bytes(model, request.weight_format, request.lm_head_format);
  r.memory_bytes = request.memory_bytes;
  r.kv = request.kv;
  if (r.kv.dtype != DType::kFP8E4M3) r.kv.scale_mode = KvScaleMode::kNone;
  if (r.kv.dtype == DType::kFP8E4M3 && r.kv.scale_mode == KvScaleMode::kNone) {
    return invalid_argument("fp8 KV needs static or dynamic scales");
  }
  const int64_t page_size = r.kv.page_size;
  if (page_size <= 0) return invalid_argument("page size must be positive");
  r.context_tokens = request.context_tokens > 0 ? request.context_tokens : model.max_position_embeddings;
  if (r.context_tokens <= 0) return invalid_argument("no --context given and the model states no context length");

  if (request.kv_memory_bytes > 0) {
    r.kv_budget_bytes = request.kv_memory_bytes;
  } else {
    r.kv_budget_bytes = request.memory_bytes - r.weights.bytes();
    if (r.kv_budget_bytes <= 0) {
      return resource_exhausted("weights (" + bytes_str(r.weights.bytes()) + ") do not fit in " +
                                bytes_str(request.memory_bytes));
    }
  }
  r.kv_token_bytes = kv_bytes_per_token(model, r.kv, r.parallel);
  if (r.kv_token_bytes.data <= 0) return invalid_argument(model.source + ": model has no KV shape");
  r.page_bytes = capacity_kv_layout(model, r.kv, r.parallel).page_bytes();  // = page_size * (data + scales)
  const int64_t page_budget = r.kv_budget_bytes - r.kv_token_bytes.static_scales;
  r.num_pages = page_budget > 0 ? page_budget / r.page_bytes : 0;
  r.num_tokens = r.num_pages * page_size;
  r.num_tokens_data_only = r.kv_budget_bytes / (page_size * r.kv_token_bytes.data) * page_size;
  r.pages_per_request = ceil_div(r.context_tokens, page_size);
  r.num_requests = r.num_pages / r.pages_per_request;
  return r;
}

std::string format_capacity_text(const CapacityReport& r) {
  std::string out;
  auto line = [&](const char* key, const std::string& value) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%-16s", key);
    out += buf + value + "\n";
  };
  const KvTokenBytes& t = r.kv_token_bytes;
  line("model", r.source + " (" + r.architecture + ", " + attention_name(r) + ")");
  line("parameters", group_digits(r.weights.num_params) + " (" +
                         group_digits(r.weights.num_linear_params) + " in linear layers)");
  line("weights", std::string(weight_format_name(r.weight_format)) +
                      (r.lm_head_format ? ", lm_head " + std::string(weight_format_name(*r.lm_head_format)) : "") +
                      ": " + bytes_str(r.weights.bytes()) + ", of which scales " +
                      group_digits(r.weights.scale_bytes) + " B");
  if (r.parallel.tp > 1 || r.parallel.ep > 1) {
    const bool densa = r.parallel.layout == ParallelLayoutKind::kTpTimesEp;
    line("parallel", "tp " + std::to_string(r.parallel.tp) + ", ep " + std::to_string(r.parallel.ep) +
                         (densa ? " (layout densa: " + std::to_string(r.parallel.tp * r.parallel.ep) + " ranks)"
                                : " (layout sglang: " + std::to_string(r.parallel.tp) + " ranks)") +
                         ": weights, memory and KV below are per rank");
  }
  line("checkpoint", std::string(weight_format_name(r.weight_format)) + ": " + bytes_str(r.checkpoint.bytes()) +
                         (r.num_nextn_layers > 0 ? ", with " + std::to_string(r.num_nextn_layers) +
                                                       " NextN/MTP layer(s) not loaded"
                                                 : ""));
  if (r.memory_bytes > 0) line("memory", bytes_str(r.memory_bytes));
  line("kv budget", bytes_str(r.kv_budget_bytes));
  line("kv cache", std::string(dtype_name(r.kv.dtype)) + ", scales " + scale_mode_name(r.kv.scale_mode) +
                       ", page " + std::to_string(r.kv.page_size) + " tokens");
  line("kv bytes/token", "data " + group_digits(t.data) + " + scales " + group_digits(t.scales) + " = " +
                             group_digits(t.data + t.scales));
  if (t.static_scales > 0) line("static scales", group_digits(t.static_scales) + " B in total");
  line("page bytes", group_digits(r.page_bytes));
  line("pages", group_digits(r.num_pages));
  line("tokens", group_digits(r.num_tokens) + " (data only " + group_digits(r.num_tokens_data_only) +
                     "; scales cost " + group_digits(r.num_tokens_data_only - r.num_tokens) + ")");
  line("requests", group_digits(r.num_requests) + " at context " + group_digits(r.context_tokens) + " (" +
                       group_digits(r.pages_per_request) + " pages each)");
  return out;
}

std::string format_capacity_json(const CapacityReport& r) {
  nlohmann::ordered_json j;
  j["model"] = r.source;
  j["architecture"] = r.architecture;
  j["attention"] = attention_name(r);
  j["num_params"] = r.weights.num_params;
  j["weight_dtype"] = weight_format_name(r.weight_format);
  j["lm_head_dtype"] = r.lm_head_format ? weight_format_name(*r.lm_head_format) : "bf16";
  j["tp"] = r.parallel.tp;
  j["ep"] = r.parallel.ep;
  j["layout"] = r.parallel.layout == ParallelLayoutKind::kTpTimesEp ? "densa" : "sglang";
  j["num_nextn_layers"] = r.num_nextn_layers;
  j["checkpoint_bytes"] = r.checkpoint.bytes();
  j["weight_bytes"] = r.weights.bytes();
  j["weight_scale_bytes"] = r.weights.scale_bytes;
  j["memory_bytes"] = r.memory_bytes;
  j["kv_budget_bytes"] = r.kv_budget_bytes;
  j["kv_dtype"] = dtype_name(r.kv.dtype);
  j["kv_scales"] = scale_mode_name(r.kv.scale_mode);
  j["page_size"] = r.kv.page_size;
  j["kv_data_bytes_per_token"] = r.kv_token_bytes.data;
  j["kv_scale_bytes_per_token"] = r.kv_token_bytes.scales;
  j["kv_static_scale_bytes"] = r.kv_token_bytes.static_scales;
  j["page_bytes"] = r.page_bytes;
  j["num_pages"] = r.num_pages;
  j["num_tokens"] = r.num_tokens;
  j["num_tokens_data_only"] = r.num_tokens_data_only;
  j["context_tokens"] = r.context_tokens;
  j["pages_per_request"] = r.pages_per_request;
  j["num_requests"] = r.num_requests;
  return j.dump(2) + "\n";
}

}  // namespace densa
