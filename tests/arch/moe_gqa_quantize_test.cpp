// `densa quantize` on the qwen3_moe / qwen2_moe / glm4_moe reference checkpoints: every
// non-matrix tensor (biases, q/k norms, routers, correction bias, shared-expert gate) is
// copied under its HF name, every matrix (attention, dense FFN, experts, shared expert) is
// written quantized, and loading the output gives the same logits, bit for bit, as
// quantize-on-load of the original.
#include <gtest/gtest.h>

#include <numeric>

#include "io/safetensors.h"
#include "kv/contiguous_kv_cache.h"
#include "model/forward.h"
#include "model/model_loader.h"
#include "test_util.h"
#include "tools/model_files/quantize.h"

namespace densa {
namespace {

std::filesystem::path ref_dir(const std::string& arch) {
  return std::filesystem::path(DENSA_SOURCE_DIR) / "tests" / "data" / "reference" / arch;
}

std::vector<float> all_logits(const ModelWeights& w, const std::vector<TokenId>& tokens) {
  const int n = static_cast<int>(tokens.size());
  std::vector<int32_t> pos(n), seq(n, 0), rows(n);
  std::iota(pos.begin(), pos.end(), 0);
  std::iota(rows.begin(), rows.end(), 0);
  ContiguousKvCache cache(w.config.num_layers, w.config.num_kv_heads, w.config.head_dim, n, 1, DType::kF32);
  ForwardScratch scratch;
  std::vector<float> logits(static_cast<size_t>(n) * w.config.vocab_size);
  forward(w, ForwardBatch{tokens, pos, seq, rows}, cache.view(), scratch, nullptr, logits.data());
  return logits;
}

TEST(MoeGqaQuantize, QuantizedCheckpointLoadsLikeQuantizeOnLoad) {
  for (const char* arch : {"qwen3_moe", "qwen2_moe", "glm4_moe"}) {
    auto in = SafetensorsFile::open(ref_dir(arch) / "model.safetensors");
    ASSERT_TRUE(in.is_ok()) << in.status().to_string();
    const auto golden = testing::read_json(ref_dir(arch) / "golden.json");
    const auto tokens = golden["prompts"][0]["prompt_ids"].get<std::vector<TokenId>>();
    for (const auto& [to, dtype] : {std::pair{"fp8", DType::kFP8E4M3}, std::pair{"int4", DType::kI4}}) {
      const auto out = std::filesystem::path(::testing::TempDir()) / (std::string("densa_q_") + arch + "_" + to);
      QuantizeOptions opts{ref_dir(arch), out, to, 32};
      auto report = quantize_checkpoint(opts);
      ASSERT_TRUE(report.is_ok()) << arch << " " << to << ": " << report.status().to_string();
      EXPECT_EQ(report->num_kept + report->num_quantized, static_cast<int>(in->tensors().size())) << arch;
      auto loaded = load_model(out);
      ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
      auto direct = load_model(ref_dir(arch), LoadOptions{dtype, 32});
      ASSERT_TRUE(direct.is_ok()) << direct.status().to_string();
      EXPECT_EQ(loaded->layers.back().expert_up[3].dtype, dtype) << arch;
      EXPECT_EQ(all_logits(*loaded, tokens), all_logits(*direct, tokens)) << arch << " " << to;
      std::filesystem::remove_all(out);
    }
  }
}

}  // namespace
}  // namespace densa
