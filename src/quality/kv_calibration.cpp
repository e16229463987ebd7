#include "quality/kv_calibration.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/check.h"
#include "exec/runner.h"
#include "io/safetensors.h"
#include "kv/contiguous_kv_cache.h"
#include "model/forward.h"

namespace densa {

std::vector<float> kv_calibration_amax(const ModelWeights& w, std::span<const TokenId> tokens,
                                       const KvCalibrationOptions& opts, ThreadPool* pool) {
  const ModelConfig& cfg = w.config;
  const int64_t total = std::min<int64_t>(static_cast<int64_t>(tokens.size()), opts.max_tokens);
  CHECK(total > 0) << "kv calibration needs tokens";
  const int window = opts.window > 0 ? opts.window : cfg.max_position_embeddings;
  CHECK(window > 0) << "kv calibration window";
  const bool latent = cfg.is_mla();
  const int H = latent ? 1 : cfg.num_kv_heads, hd = cfg.head_dim;
  std::vector<float> amax(static_cast<size_t>(cfg.num_layers) * 2 * H, 0.0f);
  const ContiguousKvCache cache(kv_layout_for(cfg, window, DType::kF32), 1);
  const KvView kv = cache.view();
  const int64_t D = kv.layout.latent_dim, C = latent ? cfg.mla.kv_lora_rank : 0;
  ForwardScratch scratch;
  std::vector<float> logits(static_cast<size_t>(cfg.vocab_size));
  std::vector<TokenId> chunk;
  std::vector<int32_t> positions, seq;
  for (int64_t begin = 0; begin < total; begin += window) {
    const int n = static_cast<int>(std::min<int64_t>(window, total - begin));
    chunk.assign(tokens.begin() + begin, tokens.begin() + begin + n);
    chunk[0] = cfg.bos_token_id;
    positions.resize(n);
    std::iota(positions.begin(), positions.end(), 0);
    seq.assign(n, 0);
    const int32_t last = n - 1;
    forward(w, ForwardBatch{chunk, positions, seq, std::span<const int32_t>(&last, 1)}, kv, scratch,
            pool, logits.data());
    const uint8_t* page = kv.page_ptr(0);
    for (int l = 0; l < cfg.num_layers; ++l) {
      if (latent) {  // rows [c_kv | k_pe] of the n tokens, contiguous
        const auto* rows = reinterpret_cast<const float*>(page + kv.layout.row_offset(l, 0, 0));
        for (int64_t t = 0; t < n; ++t) {
          for (int64_t d = 0; d < D; ++d) {
            float& a = amax[static_cast<size_t>(l) * 2 + (d < C ? 0 : 1)];
            a = std::max(a, std::fabs(rows[t * D + d]));
          }
        }
        continue;
      }
      for (int which = 0; which < 2; ++which) {
        for (int h = 0; h < H; ++h) {
          float& a = amax[(static_cast<size_t>(l) * 2 + which) * H + h];
          const float* row =
              reinterpret_cast<const float*>(page + kv.layout.data_offset(l, which, h, 0));
          for (int64_t i = 0; i < static_cast<int64_t>(n) * hd; ++i) a = std::max(a, std::fabs(row[i]));
        }
      }
    }
  }
  return amax;
}

KvScales calibrate_kv_scales(const ModelWeights& w, std::span<const TokenId> tokens,
                             const KvCalibrationOptions& opts, ThreadPool* pool) {
  const std::vector<float> amax = kv_calibration_amax(w, tokens, opts, pool);
  const int64_t used = std::min<int64_t>(static_cast<int64_t>(tokens.size()), opts.max_tokens);
  return kv_scales_from_amax(amax, w.config.num_layers, w.config.is_mla() ? 1 : w.config.num_kv_heads,
                             opts.margin, KvScaleSource::kCalibration, used);
}

std::string_view kv_calibration_builtin_text() {
  return "Once there was a small brown dog named Pip who lived at the end of a quiet street. "
         "Every morning Pip ran to the gate to wait for the mail. One day a big red kite got "
         "stuck in the old oak tree, and a girl named Mia began to cry. \"Don't be sad,\" said "
         "her brother Sam. \"We can get it down together.\" They found a long stick in the shed, "
         "but it was too short. Pip barked and pulled at Sam's sleeve, then ran to the garden "
         "where the ladder was. Sam and Mia carried the ladder to the tree, and Mia held it "
         "while Sam climbed. He reached the kite and gave it to his sister. Mia smiled and "
         "hugged Pip. \"Thank you, Pip! You are the best helper.\" That evening they flew the "
         "kite in the park until the sun went down, and the sky turned pink and orange.\n\n"
         "The next day it rained. Mia and Sam stayed inside and built a castle out of boxes and "
         "blankets. Mom made warm soup and bread. \"What should we call our castle?\" asked Mia. "
         "Sam thought for a moment. \"The Rainy Day Castle!\" They laughed, and Pip curled up "
         "by the door to guard it, just like a brave knight.\n";
}

Result<std::optional<KvScales>> read_checkpoint_kv_scales(const ModelWeights& w) {
  if (w.format != "hf") return std::optional<KvScales>();
  DENSA_ASSIGN_OR_RETURN(SafetensorsDir st, SafetensorsDir::open(w.source));
  // A tensor-parallel slice holds kv heads [tp_rank * H, (tp_rank + 1) * H) of the checkpoint's
  // H * tp (model/shard.h): per-head scales are cut the same way.
  const int L = w.config.num_layers, H = w.config.num_kv_heads, total_heads = H * w.parallel.tp;
  auto name = [](int l, int which) {
    return "model.layers." + std::to_string(l) + ".self_attn." + (which ? "v_scale" : "k_scale");
  };
  if (!st.has_tensor(name(0, 0)) && !st.has_tensor(name(0, 1))) return std::optional<KvScales>();
  KvScales s{L, H, std::vector<float>(static_cast<size_t>(L) * 2 * H), KvScaleSource::kCheckpoint, 0};
  for (int l = 0; l < L; ++l) {
    for (int which = 0; which < 2; ++which) {
      DENSA_ASSIGN_OR_RETURN(SafetensorsTensor t, st.tensor(name(l, which)));
      const int64_t n = t.numel();
      if ((n != 1 && n != total_heads) || (*t.dtype != DType::kF32 && *t.dtype != DType::kBF16)) {
        return invalid_argument(name(l, which) + ": want F32/BF16 with 1 or " + std::to_string(total_heads) +
                                " values, got " + t.dtype_name + " with " + std::to_string(n));
      }
      for (int h = 0; h < H; ++h) {
        const int64_t i = n == 1 ? 0 : int64_t{w.parallel.tp_rank} * H + h;
        float v;
        if (*t.dtype == DType::kF32) {
          std::memcpy(&v, t.data + 4 * i, 4);
        } else {
          uint16_t b;
          std::memcpy(&b, t.data + 2 * i, 2);
          v = bf16_to_f32(b);
        }
        s.values[(static_cast<size_t>(l) * 2 + which) * H + h] = v;
      }
    }
  }
  DENSA_RETURN_IF_ERROR(validate_kv_scales(s, L, H));
  return std::optional<KvScales>(std::move(s));
}

Result<KvScales> kv_scales_for_model(const ModelWeights& w, std::span<const TokenId> tokens,
                                     const KvCalibrationOptions& opts, ThreadPool* pool) {
  if (!w.config.is_mla()) {  // MLA checkpoints carry no latent-cache scales densa reads
    DENSA_ASSIGN_OR_RETURN(std::optional<KvScales> stored, read_checkpoint_kv_scales(w));
    if (stored.has_value()) return std::move(*stored);
  }
  if (!tokens.empty()) return calibrate_kv_scales(w, tokens, opts, pool);
  if (w.tokenizer == nullptr) {
    return invalid_argument("fp8 KV static scales: the checkpoint has no k_scale/v_scale, no "
                            "calibration tokens were given and the model has no tokenizer");
  }
  const std::vector<TokenId> ids = w.tokenizer->encode(kv_calibration_builtin_text(), true);
  return calibrate_kv_scales(w, ids, opts, pool);
}

}  // namespace densa
