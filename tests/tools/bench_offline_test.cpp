// bench offline on the trained fixtures: the report's counts agree with what was asked for
// and with each other (no timing asserts: the machine is shared).
#include "tools/bench/bench_offline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "core/cpu_features.h"
#include "kernels/matmul.h"
#include "model/model_loader.h"
#include "test_util.h"

namespace densa::bench {
namespace {

// A short single-threaded run: `batch` requests of `prompt_len` tokens, `gen_len` generated,
// `repeats` measured runs.
BenchOfflineConfig small_run(int batch, int prompt_len, int gen_len, int repeats) {
  BenchOfflineConfig c;
  c.batch = batch;
  c.prompt_len = prompt_len;
  c.gen_len = gen_len;
  c.repeats = repeats;
  c.num_threads = 1;
  return c;
}

ModelWeights load(const std::string& model, const std::string& file) {
  Result<ModelWeights> w = load_model(testing::model_dir(model) / "gguf" / file);
  EXPECT_TRUE(w.is_ok()) << w.status().message();
  return std::move(w.value());
}

void expect_consistent_runs(const BenchOfflineReport& r, const BenchOfflineConfig& c) {
  ASSERT_EQ(static_cast<int>(r.runs.size()), c.repeats);
  EXPECT_EQ(r.prompt_tokens, int64_t{c.batch} * c.prompt_len);
  for (const BenchOfflineRun& run : r.runs) {
    EXPECT_EQ(run.generated_tokens, int64_t{c.batch} * c.gen_len);
    // Decode counts what comes after the batch's last first token. Usually the whole batch
    // prefills in one step and every request decodes gen_len - 1 tokens after it; requests are
    // submitted one by one, though, so under load the engine may prefill an early one alone and
    // some of its tokens land before that point. The last request always decodes gen_len - 1.
    EXPECT_LE(run.decode_tokens, int64_t{c.batch} * (c.gen_len - 1));
    EXPECT_GE(run.decode_tokens, int64_t{c.gen_len - 1});
    EXPECT_EQ(run.decode_steps, c.gen_len - 1);
    EXPECT_GT(run.prefill_s, 0);
    EXPECT_GT(run.decode_s, 0);
    EXPECT_NEAR(run.prefill_tok_s * run.prefill_s, static_cast<double>(r.prompt_tokens), 1e-6 * r.prompt_tokens);
    EXPECT_NEAR(run.decode_tok_s * run.decode_s, static_cast<double>(run.decode_tokens), 1e-6 * run.decode_tokens);
    EXPECT_NEAR(run.wall_s, run.prefill_s + run.decode_s, 1e-9);
    EXPECT_GT(run.cpu_s, 0);
    EXPECT_NEAR(run.cpu_share * run.wall_s * c.num_threads, run.cpu_s, 1e-9);
  }
  EXPECT_EQ(r.num_threads, c.num_threads);
  EXPECT_GT(r.decode_step_ms, 0);
  EXPECT_GT(r.weight_gbs, 0);
  EXPECT_NEAR(r.weight_gbs * r.decode_step_ms * 1e-3 * 1e9, r.weight_bytes_per_step, 1e-6 * r.weight_bytes_per_step);
  EXPECT_GT(r.total_gbs, r.weight_gbs);
}

TEST(BenchOffline, MoeReportCountsRoutedExperts) {
  const ModelWeights w = load("tinystories-mixtral-3.6m", "tinystories-mixtral-3.6m-f16.gguf");
  const ModelConfig& m = w.config;
  const BenchOfflineConfig c = small_run(3, 20, 6, 2);
  Result<BenchOfflineReport> r = run_bench_offline(w, c);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  expect_consistent_runs(*r, c);
  EXPECT_EQ(r->total_params, 3'609'728);
  EXPECT_EQ(r->weight_dtype, "f16");
  EXPECT_TRUE(r->routing_measured);
  // 3 tokens x top-2 per step: between 2 and min(6, 8) distinct experts per layer.
  EXPECT_GE(r->experts_per_layer_step, 2.0);
  EXPECT_LE(r->experts_per_layer_step, 6.0);
  // Experts are 3 F16 matrices of 256 x 128 each; a step reads fewer than all 8.
  const double expert = 3.0 * 256 * 128 * 2;
  const double all_experts = expert * m.num_experts * m.num_layers;
  EXPECT_LT(r->weight_bytes_per_step, static_cast<double>(r->weight_bytes_all) - expert * m.num_layers);
  EXPECT_GT(r->weight_bytes_per_step, static_cast<double>(r->weight_bytes_all) - all_experts);
  EXPECT_NEAR(r->weight_bytes_per_step - (r->weight_bytes_all - all_experts - (m.vocab_size - c.batch) * 128 * 2),
              r->experts_per_layer_step * m.num_layers * expert, 1.0);
  // KV: 4 layers x K,V x 4 heads x 16 dims x 2 bytes per token, average context 20 + 2 + 1.
  EXPECT_DOUBLE_EQ(r->kv_bytes_per_step, 23.0 * c.batch * 4 * 2 * 4 * 16 * 2);

  const nlohmann::json j = nlohmann::json::parse(bench_offline_json(*r));
  EXPECT_EQ(j["batch"], 3);
  EXPECT_EQ(j["runs"].size(), 2u);
  EXPECT_EQ(j["runs"][0]["generated_tokens"], 18);
  EXPECT_EQ(j["kv_dtype"], "bf16");
  // The kernels that ran: the ISA level, "+amx" where FP8 runs on AMX tiles in this process.
  EXPECT_EQ(j["kernels"], std::string(cpu_isa_name(cpu_isa())) + (matmul_fp8_on_amx() ? "+amx" : ""));
  EXPECT_DOUBLE_EQ(j["decode_tok_s"].get<double>(), r->decode_tok_s);
  EXPECT_NE(bench_offline_summary(*r).find("decode:"), std::string::npos);
}

TEST(BenchOffline, DenseReadsEveryMatrixOncePerStep) {
  const ModelWeights w = load("tinystories-llama-1m", "tinystories-llama-1m-f32.gguf");
  BenchOfflineConfig c = small_run(2, 12, 4, 1);
  c.kv_dtype = DType::kFP8E4M3;
  Result<BenchOfflineReport> r = run_bench_offline(w, c);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  expect_consistent_runs(*r, c);
  EXPECT_FALSE(r->routing_measured);
  EXPECT_EQ(r->experts_per_layer_step, 0);
  // All weights but the embedding table, of which only the batch's 2 rows (F32, hidden 128).
  EXPECT_DOUBLE_EQ(r->weight_bytes_per_step, static_cast<double>(r->weight_bytes_all) - (1024 - 2) * 128 * 4);
  // FP8 KV: 1 byte per element plus a 4-byte scale per (layer, K|V, head, token).
  EXPECT_DOUBLE_EQ(r->kv_bytes_per_step, (12 + 1 + 1) * 2.0 * (4 * 2 * 4 * 16 + 4 * 2 * 4 * 4));
}

// An MLA model whose first layer is dense (DeepSeek-V3's first_k_dense_replace): the dense
// layer has no experts to count (batch 1 read expert 0 of it and crashed; a batch replayed its
// routing record's -1 as an expert index and corrupted the heap). KV is one latent row per
// token per layer, and the step reads the MLA projections and the split kv_b_proj.
TEST(BenchOffline, MlaModelWithADenseFirstLayer) {
  Result<ModelWeights> loaded = load_model(std::filesystem::path(DENSA_SOURCE_DIR) / "tests/data/reference/deepseek_v3");
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
  const ModelWeights& w = *loaded;
  const ModelConfig& m = w.config;
  ASSERT_TRUE(m.is_mla());
  ASSERT_FALSE(m.is_moe_layer(0));
  for (int batch : {1, 3}) {
    const BenchOfflineConfig c = small_run(batch, 16, 6, 1);
    Result<BenchOfflineReport> r = run_bench_offline(w, c);
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    expect_consistent_runs(*r, c);
    EXPECT_TRUE(r->routing_measured);
    EXPECT_GE(r->experts_per_layer_step, 2.0) << "per MoE layer: top-2 at least";
    EXPECT_LE(r->experts_per_layer_step, std::min(2.0 * batch, 8.0));
    // KV: 3 layers x (kv_lora_rank 32 + rope 8) x 2 bytes per token, average context 16 + 2 + 1.
    EXPECT_DOUBLE_EQ(r->kv_bytes_per_step, 19.0 * batch * 3 * (32 + 8) * 2);
    // Weights: every matrix a step reads, kv_b_proj as the split the kernels read.
    double mla = 0, experts_all = 0, expert = 0;
    for (const LayerWeights& l : w.layers) {
      for (const WeightView* v : {&l.q_a, &l.q_b, &l.kv_a, &l.mla_uk, &l.mla_uv_t, &l.wo}) mla += static_cast<double>(v->bytes());
      for (size_t e = 0; e < l.expert_gate.size(); ++e) {
        const double b = static_cast<double>(l.expert_gate[e].bytes() + l.expert_up[e].bytes() + l.expert_down[e].bytes());
        experts_all += b;
        expert = b;
      }
    }
    EXPECT_GT(mla, 0.0);
    // The MLA projections are part of what the report counts.
    EXPECT_GE(static_cast<double>(r->weight_bytes_all),
              mla + experts_all + static_cast<double>(w.tok_embeddings.bytes() + w.lm_head.bytes()));
    const double embed_row = static_cast<double>(w.tok_embeddings.bytes()) / w.tok_embeddings.rows;
    EXPECT_NEAR(r->weight_bytes_per_step,
                static_cast<double>(r->weight_bytes_all) - experts_all - (m.vocab_size - batch) * embed_row +
                    r->experts_per_layer_step * 2 * expert,
                1.0)
        << "2 MoE layers";
    EXPECT_GT(r->weight_bytes_per_step, mla);
  }
}

// --lm-head-dtype shows in the report and in the bytes a decode step streams: an INT4 g32
// head reads 0.5 bytes per weight plus a 2-byte (bf16) scale per 32 instead of F32's 4.
TEST(BenchOffline, QuantizedLmHeadShrinksTheBytesPerStep) {
  const auto path = testing::model_dir("tinystories-llama-1m") / "gguf" / "tinystories-llama-1m-f32.gguf";
  const BenchOfflineConfig c = small_run(1, 8, 3, 1);
  Result<ModelWeights> stored_head = load_model(path, LoadOptions{DType::kI4, 32});
  Result<ModelWeights> int4_head = load_model(path, LoadOptions{DType::kI4, 32, WeightQuantSpec{DType::kI4, 32}});
  ASSERT_TRUE(stored_head.is_ok() && int4_head.is_ok());
  Result<BenchOfflineReport> a = run_bench_offline(*stored_head, c);
  Result<BenchOfflineReport> b = run_bench_offline(*int4_head, c);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_EQ(a->weight_dtype, "int4");
  EXPECT_EQ(a->lm_head_dtype, "f32");
  EXPECT_EQ(b->lm_head_dtype, "int4");
  const double f32_head = 1024.0 * 128 * 4, int4_head_bytes = 1024.0 * 128 / 2 + 1024.0 * (128 / 32) * 2;
  EXPECT_DOUBLE_EQ(a->weight_bytes_per_step - b->weight_bytes_per_step, f32_head - int4_head_bytes);
  EXPECT_EQ(nlohmann::json::parse(bench_offline_json(*b))["lm_head_dtype"], "int4");
  EXPECT_NE(bench_offline_summary(*b).find("weights int4, lm_head int4"), std::string::npos) << bench_offline_summary(*b);
}

// INT4 g32 (quantize-on-load of the F32 dense fixture): each quantized matrix counts 4.5 bits
// per weight (4-bit codes + one bf16 scale per 32 weights), everything else as stored; a dense
// step reads all of it but the embedding table.
TEST(BenchOffline, Int4CountsBf16GroupScales) {
  const std::filesystem::path hf = testing::model_dir("tinystories-llama-1m") / "hf";
  Result<ModelWeights> f32 = load_model(hf);
  Result<ModelWeights> int4 = load_model(hf, LoadOptions{DType::kI4, 32});
  ASSERT_TRUE(f32.is_ok() && int4.is_ok());
  const BenchOfflineConfig c = small_run(1, 4, 2, 1);
  Result<BenchOfflineReport> a = run_bench_offline(*f32, c);
  Result<BenchOfflineReport> b = run_bench_offline(*int4, c);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  // Per layer q, o [128, 128], k, v [64, 128], gate, up [384, 128], down [128, 384].
  const int64_t quantized = 4 * (2 * 128 * 128 + 2 * 64 * 128 + 3 * 384 * 128);
  EXPECT_EQ(b->weight_bytes_all, a->weight_bytes_all - quantized * 4 + quantized * 9 / 16);
  EXPECT_EQ(b->weight_bytes_all, int4->weight_bytes());
  EXPECT_DOUBLE_EQ(b->weight_bytes_per_step, static_cast<double>(b->weight_bytes_all) - (1024 - 1) * 128 * 4);
}

TEST(BenchOffline, RejectsPromptsBeyondTheContext) {
  const ModelWeights w = load("tinystories-llama-1m", "tinystories-llama-1m-f32.gguf");
  BenchOfflineConfig c;
  c.prompt_len = 250;
  c.gen_len = 10;
  Result<BenchOfflineReport> r = run_bench_offline(w, c);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("context"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace densa::bench
