// shard_weights (model/shard.h) on the trained fixtures: each rank's slice is exactly the
// rows / columns of the whole tensor it should hold, the config describes the slice, and
// layouts the model cannot take are refused by name. (The sharded forward pass over real
// MPI ranks: tests/mpi.)
#include <gtest/gtest.h>

#include <algorithm>

#include "model/model_loader.h"
#include "quant/quantize_matrix.h"
#include "test_util.h"

namespace densa {
namespace {

using testing::model_dir;

std::filesystem::path gguf(const std::string& model) { return model_dir(model) / "gguf" / (model + "-f16.gguf"); }

Result<ModelWeights> load_at(const std::string& model, ParallelLayout layout) {
  LoadOptions o;
  o.parallel = layout;
  return load_model(gguf(model), o);
}

TEST(Shard, TensorParallelSliceIsTheRowsAndColumnsOfTheWhole) {
  auto whole = load_model(gguf("tinystories-llama-1m"));
  ASSERT_TRUE(whole.is_ok()) << whole.status().to_string();
  auto part = load_at("tinystories-llama-1m", ParallelLayout{2, 1, 1, 0});
  ASSERT_TRUE(part.is_ok()) << part.status().to_string();
  const ModelConfig& wc = whole->config;
  const ModelConfig& pc = part->config;
  EXPECT_EQ(pc.num_heads, wc.num_heads / 2);
  EXPECT_EQ(pc.num_kv_heads, wc.num_kv_heads / 2);
  EXPECT_EQ(pc.intermediate_size, wc.intermediate_size / 2);
  EXPECT_EQ(pc.head_dim, wc.head_dim);
  EXPECT_EQ(part->parallel.tp_rank, 1);
  for (int l = 0; l < wc.num_layers; ++l) {
    const LayerWeights& w = whole->layers[l];
    const LayerWeights& p = part->layers[l];
    const std::vector<float> wq = dequantize_matrix(w.wq), pq = dequantize_matrix(p.wq);
    const std::vector<float> wo = dequantize_matrix(w.wo), po = dequantize_matrix(p.wo);
    const std::vector<float> wd = dequantize_matrix(w.w_down), pd = dequantize_matrix(p.w_down);
    const int64_t H = wc.hidden_size, q = pc.num_heads * pc.head_dim, I = pc.intermediate_size;
    ASSERT_EQ(p.wq.rows, q);
    ASSERT_EQ(p.wo.cols, q);
    ASSERT_EQ(p.w_down.cols, I);
    // Rank 1 holds the second half: query rows [q, 2q), output / down columns likewise.
    for (int64_t r = 0; r < q; ++r)
      for (int64_t c = 0; c < H; ++c) ASSERT_EQ(pq[r * H + c], wq[(q + r) * H + c]) << "layer " << l;
    for (int64_t r = 0; r < H; ++r) {
      for (int64_t c = 0; c < q; ++c) ASSERT_EQ(po[r * q + c], wo[r * 2 * q + q + c]) << "layer " << l;
      for (int64_t c = 0; c < I; ++c) ASSERT_EQ(pd[r * I + c], wd[r * 2 * I + I + c]) << "layer " << l;
    }
  }
}

// MLA: rank 1 of 2 holds query heads 2-3: their rows of q_b and kv_b, their columns of o_proj;
// the latent projections whole.
TEST(Shard, MlaSplitsQueryHeadsAndKeepsTheLatentWhole) {
  const auto dir = std::filesystem::path(DENSA_SOURCE_DIR) / "tests/data/reference/deepseek_v3";
  LoadOptions whole_opts, part_opts;
  whole_opts.prepare_for_kernels = part_opts.prepare_for_kernels = false;  // kv_b as stored
  part_opts.parallel = ParallelLayout{2, 1, 1, 0};
  auto whole = load_model(dir, whole_opts);
  auto part = load_model(dir, part_opts);
  ASSERT_TRUE(whole.is_ok() && part.is_ok()) << part.status().to_string();
  const MlaConfig& m = whole->config.mla;
  EXPECT_EQ(part->config.num_heads, whole->config.num_heads / 2);
  const int64_t qk = m.qk_nope_head_dim + m.qk_rope_head_dim, kvb = m.qk_nope_head_dim + m.v_head_dim;
  const int64_t heads = part->config.num_heads;
  for (size_t l = 0; l < whole->layers.size(); ++l) {
    const LayerWeights& w = whole->layers[l];
    const LayerWeights& p = part->layers[l];
    EXPECT_EQ(dequantize_matrix(p.q_a), dequantize_matrix(w.q_a)) << l;
    EXPECT_EQ(dequantize_matrix(p.kv_a), dequantize_matrix(w.kv_a)) << l;
    const std::vector<float> wqb = dequantize_matrix(w.q_b), pqb = dequantize_matrix(p.q_b);
    const std::vector<float> wkvb = dequantize_matrix(w.kv_b), pkvb = dequantize_matrix(p.kv_b);
    const std::vector<float> wo = dequantize_matrix(w.wo), po = dequantize_matrix(p.wo);
    ASSERT_EQ(p.q_b.rows, heads * qk);
    ASSERT_EQ(p.kv_b.rows, heads * kvb);
    ASSERT_EQ(p.wo.cols, heads * m.v_head_dim);
    const int64_t qcols = w.q_b.cols, kcols = w.kv_b.cols;
    EXPECT_TRUE(std::equal(pqb.begin(), pqb.end(), wqb.begin() + heads * qk * qcols)) << l;
    EXPECT_TRUE(std::equal(pkvb.begin(), pkvb.end(), wkvb.begin() + heads * kvb * kcols)) << l;
    const int64_t vo = heads * m.v_head_dim;
    for (int64_t r = 0; r < w.wo.rows; ++r) {
      for (int64_t c = 0; c < vo; ++c) ASSERT_EQ(po[r * vo + c], wo[r * 2 * vo + vo + c]) << l;
    }
  }
}

TEST(Shard, ExpertParallelKeepsOnlyTheGroupsExperts) {
  auto part = load_at("tinystories-mixtral-3.6m", ParallelLayout{1, 2, 0, 1});
  ASSERT_TRUE(part.is_ok()) << part.status().to_string();
  const int E = part->config.num_experts;
  for (const LayerWeights& l : part->layers) {
    for (int e = 0; e < E; ++e) {
      EXPECT_EQ(l.expert_gate[e].empty(), e < E / 2) << "expert " << e;
      EXPECT_EQ(l.expert_down[e].empty(), e < E / 2) << "expert " << e;
    }
    EXPECT_FALSE(l.wq.empty());  // attention replicated across expert groups
    EXPECT_EQ(l.wq.rows, part->config.num_heads * part->config.head_dim);
  }
  EXPECT_EQ(part->config.num_experts, E);  // routing still sees every expert
}

TEST(Shard, LayoutsTheModelCannotTakeAreRefusedByName) {
  auto bad_heads = load_at("tinystories-llama-1m", ParallelLayout{3, 1, 0, 0});
  ASSERT_FALSE(bad_heads.is_ok());
  EXPECT_NE(bad_heads.status().message().find("not divisible by --tp 3"), std::string::npos)
      << bad_heads.status().message();
  auto dense_ep = load_at("tinystories-llama-1m", ParallelLayout{1, 2, 0, 0});
  ASSERT_FALSE(dense_ep.is_ok());
  EXPECT_NE(dense_ep.status().message().find("needs a mixture-of-experts model"), std::string::npos);
  LoadOptions mla_tp;
  mla_tp.parallel = ParallelLayout{3, 1, 0, 0};
  auto mla = load_model(std::filesystem::path(DENSA_SOURCE_DIR) / "tests/data/reference/deepseek_v3", mla_tp);
  ASSERT_FALSE(mla.is_ok());
  EXPECT_NE(mla.status().message().find("attention heads (4) is not divisible by --tp 3"), std::string::npos)
      << mla.status().message();
  auto bad_experts = load_at("tinystories-mixtral-3.6m", ParallelLayout{1, 3, 0, 0});
  ASSERT_FALSE(bad_experts.is_ok());
  EXPECT_NE(bad_experts.status().message().find("routed experts (8) is not divisible by --ep 3"), std::string::npos)
      << bad_experts.status().message();
}

}  // namespace
}  // namespace densa
