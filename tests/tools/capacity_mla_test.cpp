// densa capacity on MLA models (DeepSeek-V3, Kimi K2): its KV arithmetic is the runtime's
// page layout (kv_layout_for of the parsed config, what the engine's PagePool allocates), and
// the Kimi K2 numbers on one 8 x H200 node (docs/performance/capacity.md, "Kimi K2 (MLA)").
#include <gtest/gtest.h>

#include "exec/runner.h"
#include "io/model_config.h"
#include "tools/capacity/capacity.h"

namespace densa {
namespace {

namespace fs = std::filesystem;

fs::path config(const std::string& name) { return fs::path(DENSA_SOURCE_DIR) / "tests/data/configs" / name; }

CapacityReport plan(const CapacityModel& m, WeightFormat wf, DType kv_dtype, int64_t context) {
  CapacityRequest req;
  req.memory_bytes = 1128'000'000'000;  // 8 x 141 GB
  req.weight_format = wf;
  req.kv.dtype = kv_dtype;
  req.kv.scale_mode = kv_dtype == DType::kFP8E4M3 ? KvScaleMode::kDynamic : KvScaleMode::kNone;
  req.kv.page_size = 16;
  req.context_tokens = context;
  Result<CapacityReport> r = plan_capacity(m, req);
  CHECK(r.is_ok()) << r.status().to_string();
  return std::move(r).value();
}

TEST(CapacityMla, PageBytesAreTheRuntimeLayout) {
  for (const char* name : {"kimi-k2.json", "deepseek-v3.json"}) {
    Result<CapacityModel> m = load_capacity_model(config(name));
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    Result<ModelConfig> c = parse_hf_config(config(name));
    ASSERT_TRUE(c.is_ok()) << c.status().to_string();
    ASSERT_TRUE(c->is_mla());
    for (DType dt : {DType::kBF16, DType::kFP8E4M3}) {
      const KvLayout runtime = kv_layout_for(*c, 16, dt);
      const CapacityReport r = plan(*m, WeightFormat::kFP8, dt, 8192);
      EXPECT_EQ(r.page_bytes, runtime.page_bytes()) << name << " " << dtype_name(dt);
      // (kv_lora_rank + qk_rope_head_dim) x layers x dtype bytes (+ one f32 scale per layer).
      EXPECT_EQ(r.kv_token_bytes.data, (512 + 64) * 61 * (dt == DType::kBF16 ? 2 : 1));
      EXPECT_EQ(r.kv_token_bytes.scales, dt == DType::kBF16 ? 0 : 61 * 4);
    }
  }
}

// Static FP8 latent scales: no per-token scale bytes, two f32 scales per layer in total.
TEST(CapacityMla, StaticFp8LatentScales) {
  Result<CapacityModel> m = load_capacity_model(config("kimi-k2.json"));
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  const KvTokenBytes b = kv_bytes_per_token(*m, KvFormat{DType::kFP8E4M3, KvScaleMode::kStatic, 16});
  EXPECT_EQ(b.data, (512 + 64) * 61);
  EXPECT_EQ(b.scales, 0);
  EXPECT_EQ(b.static_scales, 61 * 2 * 4);
}

TEST(CapacityMla, KimiK2On8xH200) {
  Result<CapacityModel> m = load_capacity_model(config("kimi-k2.json"));
  ASSERT_TRUE(m.is_ok());
  // BF16 weights (~2 TB) do not fit the node.
  CapacityRequest bf16;
  bf16.memory_bytes = 1128'000'000'000;
  bf16.context_tokens = 8192;
  EXPECT_EQ(plan_capacity(*m, bf16).status().code(), StatusCode::kResourceExhausted);
  for (WeightFormat wf : {WeightFormat::kFP8, WeightFormat::kINT4}) {
    const CapacityReport b = plan(*m, wf, DType::kBF16, 8192);
    const CapacityReport f = plan(*m, wf, DType::kFP8E4M3, 8192);
    // FP8 latent: half the data bytes; the dynamic scales (244 of 35,380 B) cost < 1%.
    EXPECT_GT(f.num_tokens, 1.98 * b.num_tokens);
    EXPECT_LE(f.num_tokens, 2 * b.num_tokens);
    EXPECT_EQ(f.num_requests, f.num_pages / (8192 / 16));
    EXPECT_GT(f.num_requests, 1.9 * b.num_requests);
  }
  // INT4 weights leave ~5x the KV budget of FP8 weights.
  EXPECT_GT(plan(*m, WeightFormat::kINT4, DType::kBF16, 8192).num_tokens,
            5 * plan(*m, WeightFormat::kFP8, DType::kBF16, 8192).num_tokens);
}

}  // namespace
}  // namespace densa
