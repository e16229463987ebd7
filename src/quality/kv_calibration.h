#pragma once
// Static FP8 KV scales for a model: read from the checkpoint when it ships k_scale / v_scale,
// otherwise measured by a calibration pass that runs the model over text with an F32 cache
// and takes the maximum |K| (after RoPE) and |V| per (layer, k|v, kv head); for an MLA latent
// cache the maximum |c_kv| and |k_pe| (after RoPE) of the latent rows per layer.
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "kv/kv_scales.h"
#include "model/model_weights.h"

namespace densa {

struct KvCalibrationOptions {
  int max_tokens = 2048;  // calibration tokens used (a prefix of the given ones)
  int window = 0;         // tokens per fresh-cache window; 0 = the model's context length
  float margin = 1.0f;    // scale = amax * margin / 448
};

// Maxima [layer][k|v][kv_head] (MLA: [layer][c_kv|k_pe]) over `tokens` (first max_tokens), run
// in windows that each start at position 0 with a fresh cache and BOS in place of their first
// token.
std::vector<float> kv_calibration_amax(const ModelWeights& w, std::span<const TokenId> tokens,
                                       const KvCalibrationOptions& opts, ThreadPool* pool);

// kv_scales_from_amax over kv_calibration_amax (source kCalibration).
KvScales calibrate_kv_scales(const ModelWeights& w, std::span<const TokenId> tokens,
                             const KvCalibrationOptions& opts, ThreadPool* pool);

// A short English passage the binary ships for calibration when the caller gives no text.
std::string_view kv_calibration_builtin_text();

// Static scales stored in a Hugging Face checkpoint (w.source, format "hf"):
// model.layers.{i}.self_attn.k_scale / v_scale, F32 / BF16, one value per layer (shape [] or
// [1], broadcast to every kv head) or one per kv head. nullopt when the checkpoint has none
// (or is GGUF); an error when only some layers have them or they are malformed. For a
// tensor-parallel slice (w.parallel), the scales of the slice's own kv heads.
Result<std::optional<KvScales>> read_checkpoint_kv_scales(const ModelWeights& w);

// The scales to serve with: the checkpoint's (read_checkpoint_kv_scales) when present (never
// for MLA: checkpoints carry no latent-cache scales densa reads), else a calibration pass
// over `tokens`, or over the built-in passage when `tokens` is empty (needs the model's
// tokenizer).
Result<KvScales> kv_scales_for_model(const ModelWeights& w, std::span<const TokenId> tokens,
                                     const KvCalibrationOptions& opts, ThreadPool* pool);

}  // namespace densa
