#include "kv/kv_scales.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/check.h"
#include "quant/fp8.h"

namespace densa {

Status validate_kv_scales(const KvScales& s, int num_layers, int num_kv_heads) {
  if (num_kv_heads <= 0) {
    return invalid_argument("static KV scales are per (layer, k|v, kv head); this KV cache has no KV heads "
                            "(an MLA latent cache takes 1: its c_kv and k_pe scales)");
  }
  const size_t want = static_cast<size_t>(num_layers) * 2 * num_kv_heads;
  if (s.num_layers != num_layers || s.num_kv_heads != num_kv_heads || s.values.size() != want) {
    return invalid_argument("kv scales: shape " + std::to_string(s.num_layers) + "x2x" +
                            std::to_string(s.num_kv_heads) + " (" + std::to_string(s.values.size()) +
                            " values), model needs " + std::to_string(num_layers) + "x2x" +
                            std::to_string(num_kv_heads));
  }
  for (size_t i = 0; i < want; ++i) {
    if (!std::isfinite(s.values[i]) || !(s.values[i] > 0.0f)) {
      return invalid_argument("kv scales: entry " + std::to_string(i) + " is " +
                              std::to_string(s.values[i]) + " (must be finite and > 0)");
    }
  }
  return Status::ok();
}

KvScales kv_scales_from_amax(std::span<const float> amax, int num_layers, int num_kv_heads,
                             float margin, KvScaleSource source, int64_t calibration_tokens) {
  CHECK(amax.size() == static_cast<size_t>(num_layers) * 2 * num_kv_heads) << "amax size " << amax.size();
  CHECK(margin > 0.0f && std::isfinite(margin)) << "margin " << margin;
  KvScales s{num_layers, num_kv_heads, {}, source, calibration_tokens};
  s.values.reserve(amax.size());
  for (float a : amax) {
    CHECK(std::isfinite(a)) << "non-finite K/V maximum";
    s.values.push_back(std::max(a, kKvMinAmax) * margin / kFp8E4M3Max);
  }
  return s;
}

namespace {

const char* source_name(KvScaleSource s) {
  switch (s) {
    case KvScaleSource::kCheckpoint: return "the checkpoint";
    case KvScaleSource::kCalibration: return "calibration";
    case KvScaleSource::kGiven: return "the caller";
  }
  return "?";
}

}  // namespace

std::string kv_cache_mode_line(DType dtype, KvScaleMode mode, const KvScales* scales) {
  std::string line = "kv cache: " + std::string(dtype_name(dtype));
  switch (mode) {
    case KvScaleMode::kNone:
      return line;
    case KvScaleMode::kDynamic:
      return line + ", dynamic per-token scales (one per token per kv head, amax/448)";
    case KvScaleMode::kStatic:
      break;
  }
  CHECK(scales != nullptr) << "static kv scale mode without scales";
  line += ", static scales from " + std::string(source_name(scales->source));
  if (scales->source == KvScaleSource::kCalibration)
    line += " on " + std::to_string(scales->calibration_tokens) + " tokens";
  float lo[2] = {INFINITY, INFINITY}, hi[2] = {0, 0};
  for (int l = 0; l < scales->num_layers; ++l)
    for (int kv = 0; kv < 2; ++kv)
      for (int h = 0; h < scales->num_kv_heads; ++h) {
        lo[kv] = std::min(lo[kv], scales->at(l, kv, h));
        hi[kv] = std::max(hi[kv], scales->at(l, kv, h));
      }
  char buf[128];
  std::snprintf(buf, sizeof(buf), " (k %.3g..%.3g, v %.3g..%.3g)", lo[0], hi[0], lo[1], hi[1]);
  return line + buf;
}

}  // namespace densa
