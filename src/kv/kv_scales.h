#pragma once
// KvScales: static FP8 KV-cache scales, one per (layer, k|v, kv head), so that a stored value
// is fp8 * scale. A latent (MLA) cache has two per layer with num_kv_heads 1: entry 0 for the
// c_kv part of the row (kv_lora_rank values), entry 1 for the k_pe part. They come from the
// checkpoint (k_scale / v_scale tensors) or from a calibration pass (quality/kv_calibration.h);
// where they came from travels with them so the start-up log can say which mode is in force.
// Never defaulted to 1.0.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "kernels/kv_view.h"

namespace densa {

enum class KvScaleSource : uint8_t { kCheckpoint, kCalibration, kGiven };

struct KvScales {
  int num_layers = 0;
  int num_kv_heads = 0;
  std::vector<float> values;  // [num_layers][k=0|v=1][num_kv_heads] (latent: [num_layers][c_kv|k_pe]);
                              // each finite and > 0
  KvScaleSource source = KvScaleSource::kGiven;
  int64_t calibration_tokens = 0;  // kCalibration: tokens the maxima were taken over

  float at(int layer, int kv, int head) const {
    return values[(static_cast<size_t>(layer) * 2 + kv) * num_kv_heads + head];
  }
};

// The num_kv_heads of a layout's static scales: its kv heads, or 1 for a latent layout.
inline int kv_scale_heads(const KvLayout& l) { return l.is_latent() ? 1 : l.num_kv_heads; }

// ok if `s` has the given shape and every scale is finite and > 0.
Status validate_kv_scales(const KvScales& s, int num_layers, int num_kv_heads);

// scale = max(amax, kKvMinAmax) * margin / 448 per entry; amax: [layer][k|v][kv_head] of
// |K| (after RoPE) and |V|. margin >= 1 leaves headroom above the observed maximum.
inline constexpr float kKvMinAmax = 1e-6f;
KvScales kv_scales_from_amax(std::span<const float> amax, int num_layers, int num_kv_heads,
                             float margin, KvScaleSource source, int64_t calibration_tokens);

// One line for start-up logs, e.g. "kv cache: fp8_e4m3, static scales from calibration on
// 2048 tokens (k 0.0031..0.0123, v 0.0009..0.0044)", "kv cache: fp8_e4m3, dynamic per-token
// scales", "kv cache: bf16". scales may be null unless mode is kStatic.
std::string kv_cache_mode_line(DType dtype, KvScaleMode mode, const KvScales* scales);

}  // namespace densa
