// model/mla_absorb: the absorbed MLA products on kv_b split at load, against their reference
// twin (kv_b dequantized, then the products summed in double, as the formulas read), for kv_b
// stored as fp32, BF16, FP8 block-scaled and INT4 g32; and batch invariance (a token's result is
// the same bits alone or among others, on any thread count).
#include <gtest/gtest.h>

#include <cmath>

#include "model/mla_absorb.h"
#include "quant/quantize_matrix.h"
#include "test_util.h"

namespace densa {
namespace {

MlaConfig shape() {
  MlaConfig m;
  m.kv_lora_rank = 64;
  m.qk_nope_head_dim = 32;
  m.qk_rope_head_dim = 8;
  m.v_head_dim = 24;
  return m;
}
constexpr int kHeads = 3;

struct Case {
  const char* name;
  DType dtype;
};

class MlaAbsorb : public ::testing::TestWithParam<Case> {};

TEST_P(MlaAbsorb, ProductsMatchTheReferenceAndAreBatchInvariant) {
  const MlaConfig m = shape();
  const int H = kHeads, dn = m.qk_nope_head_dim, dr = m.qk_rope_head_dim, dv = m.v_head_dim, C = m.kv_lora_rank;
  const int64_t rows = int64_t{H} * (dn + dv);
  const std::vector<float> src = testing::normal_floats(static_cast<size_t>(rows * C), 7);
  QuantizedMatrix stored;
  WeightView kv_b = mla_f32_view(src.data(), rows, C);
  if (GetParam().dtype != DType::kF32) {
    stored = quantize_matrix(src.data(), rows, C, WeightQuantSpec{GetParam().dtype, 32});
    kv_b = stored.view;
  }
  const std::vector<float> dq = dequantize_matrix(kv_b);  // what the products must use
  std::vector<float> uk(static_cast<size_t>(H * dn * C)), uv_t(static_cast<size_t>(H * C * dv));
  mla_split_kv_b(kv_b, m, H, uk.data(), uv_t.data());
  const WeightView uk_view = mla_f32_view(uk.data(), int64_t{H} * dn, C);
  const WeightView uv_view = mla_f32_view(uv_t.data(), int64_t{H} * C, dv);

  const int64_t n = 5;
  const std::vector<float> q = testing::normal_floats(static_cast<size_t>(n * H * (dn + dr)), 11);
  const std::vector<float> o_lat = testing::normal_floats(static_cast<size_t>(n * H * C), 13);
  ThreadPool pool(2);
  std::vector<float> q_abs(static_cast<size_t>(n * H * (C + dr))), out(static_cast<size_t>(n * H * dv));
  mla_absorb_queries(m, uk_view, H, q.data(), n, q_abs.data(), &pool);
  mla_expand_values(m, uv_view, H, o_lat.data(), n, out.data(), &pool);

  double worst_abs = 0, worst_exp = 0;
  for (int64_t t = 0; t < n; ++t) {
    for (int h = 0; h < H; ++h) {
      const float* qh = q.data() + (t * H + h) * (dn + dr);
      const float* got = q_abs.data() + (t * H + h) * (C + dr);
      for (int c = 0; c < C; ++c) {
        double ref = 0, mag = 0;
        for (int d = 0; d < dn; ++d) {
          const double wv = dq[static_cast<size_t>((int64_t{h} * (dn + dv) + d) * C + c)];
          ref += wv * qh[d];
          mag += std::fabs(wv * qh[d]);
        }
        worst_abs = std::max(worst_abs, std::fabs(got[c] - ref) / (mag + 1e-30));
      }
      for (int k = 0; k < dr; ++k) EXPECT_EQ(got[C + k], qh[dn + k]) << "q_pe is copied";
      const float* lat = o_lat.data() + (t * H + h) * C;
      for (int j = 0; j < dv; ++j) {
        double ref = 0, mag = 0;
        for (int c = 0; c < C; ++c) {
          const double wv = dq[static_cast<size_t>((int64_t{h} * (dn + dv) + dn + j) * C + c)];
          ref += wv * lat[c];
          mag += std::fabs(wv * lat[c]);
        }
        worst_exp = std::max(worst_exp, std::fabs(out[static_cast<size_t>((t * H + h) * dv + j)] - ref) / (mag + 1e-30));
      }
    }
  }
  // fp32 sums of 32 / 64 products: error relative to the sum of magnitudes stays ~1e-7.
  EXPECT_LT(worst_abs, 1e-5) << "absorb";
  EXPECT_LT(worst_exp, 1e-5) << "expand";

  // Each token alone, one thread: the same bits as in the batch of five on two threads.
  for (int64_t t = 0; t < n; ++t) {
    std::vector<float> one_abs(static_cast<size_t>(H * (C + dr))), one_out(static_cast<size_t>(H * dv));
    mla_absorb_queries(m, uk_view, H, q.data() + t * H * (dn + dr), 1, one_abs.data(), nullptr);
    mla_expand_values(m, uv_view, H, o_lat.data() + t * H * C, 1, one_out.data(), nullptr);
    for (size_t i = 0; i < one_abs.size(); ++i) {
      ASSERT_EQ(one_abs[i], q_abs[static_cast<size_t>(t * H * (C + dr)) + i]) << "token " << t << " element " << i;
    }
    for (size_t i = 0; i < one_out.size(); ++i) {
      ASSERT_EQ(one_out[i], out[static_cast<size_t>(t * H * dv) + i]) << "token " << t << " element " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(KvBDtypes, MlaAbsorb,
                         ::testing::Values(Case{"F32", DType::kF32}, Case{"BF16", DType::kBF16},
                                           Case{"FP8", DType::kFP8E4M3}, Case{"INT4", DType::kI4}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace densa
