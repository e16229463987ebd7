#include "model/hf_tensor_inventory.h"

#include <cstdio>
#include <string_view>

namespace densa {
namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// "X.weight_packed" -> "X.weight" (and the other pre-quantized siblings); "" if not one.
std::string quantized_base(std::string_view name) {
  for (std::string_view suffix : {"_packed", "_scale_inv", "_scale", "_shape"}) {
    if (name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix) {
      return std::string(name.substr(0, name.size() - suffix.size()));
    }
  }
  return "";
}

// The layer index of "<prefix>model.layers.{N}.…", or -1.
int layer_index(std::string_view name, const std::string& prefix) {
  const std::string head = prefix + "model.layers.";
  if (!starts_with(name, head)) return -1;
  std::string_view rest = name.substr(head.size());
  int n = 0;
  size_t i = 0;
  for (; i < rest.size() && rest[i] >= '0' && rest[i] <= '9' && i < 9; ++i) n = n * 10 + (rest[i] - '0');
  return i > 0 && i < rest.size() && rest[i] == '.' ? n : -1;
}

// A decoder layer's FP8 KV-cache scales ("self_attn.k_scale" / "v_scale"), which
// quality/kv_calibration.h reads for `--kv-scales checkpoint`, not the weight loader.
bool is_kv_cache_scale(std::string_view name) {
  for (std::string_view suffix : {".self_attn.k_scale", ".self_attn.v_scale"}) {
    if (name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix) return true;
  }
  return false;
}

bool is_vision(std::string_view name) {
  return starts_with(name, "vision_tower.") || starts_with(name, "multi_modal_projector.") ||
         starts_with(name, "mm_projector.");
}

std::string gb(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f GB", static_cast<double>(bytes) / 1e9);
  return buf;
}

}  // namespace

Result<SkippedTensors> classify_unread_hf_tensors(const std::vector<CheckpointTensor>& tensors,
                                                  const std::set<std::string>& read, const ModelConfig& c,
                                                  const std::string& origin) {
  SkippedTensors s;
  std::vector<std::string> unknown;
  for (const CheckpointTensor& t : tensors) {
    if (read.count(t.name) != 0) continue;
    const std::string base = quantized_base(t.name);
    if (!base.empty() && read.count(base) != 0) continue;
    if (c.has_vision_tower && is_vision(t.name)) {
      ++s.vision_tensors;
      s.vision_bytes += t.bytes;
      continue;
    }
    const int layer = layer_index(t.name, c.hf_tensor_prefix);
    if (layer >= 0 && layer < c.num_layers && is_kv_cache_scale(t.name)) continue;  // read by --kv-scales
    if (layer >= c.num_layers && layer < c.num_layers + c.num_nextn_layers) {
      ++s.nextn_tensors;
      s.nextn_bytes += t.bytes;
      continue;
    }
    unknown.push_back(t.name);
  }
  if (!unknown.empty()) {
    std::string list;
    for (size_t i = 0; i < unknown.size() && i < 5; ++i) list += (i ? ", '" : "'") + unknown[i] + "'";
    if (unknown.size() > 5) list += ", ... (" + std::to_string(unknown.size()) + " in all)";
    return invalid_argument(origin + ": unknown tensor" + (unknown.size() > 1 ? "s " : " ") + list + " for " +
                            c.architecture + " (" + std::to_string(c.num_layers) + " layers, " +
                            std::to_string(c.num_nextn_layers) + " nextn)");
  }
  return s;
}

std::vector<std::string> describe_skipped(const SkippedTensors& s, const ModelConfig& c) {
  std::vector<std::string> lines;
  if (s.vision_tensors > 0) {
    lines.push_back("skipped " + std::to_string(s.vision_tensors) + " vision tensors (" + gb(s.vision_bytes) +
                    ", vision_tower / projector): text-only serving");
  }
  if (s.nextn_tensors > 0) {
    lines.push_back("skipped " + std::to_string(s.nextn_tensors) + " tensors (" + gb(s.nextn_bytes) + ") of " +
                    std::to_string(c.num_nextn_layers) + " NextN/MTP layer" + (c.num_nextn_layers > 1 ? "s" : "") +
                    " (layer " + std::to_string(c.num_layers) +
                    (c.num_nextn_layers > 1 ? ".." + std::to_string(c.num_layers + c.num_nextn_layers - 1) : "") +
                    "): no speculative decoding");
  }
  return lines;
}

}  // namespace densa
