#include "model/mla_absorb.h"

#include <algorithm>
#include <vector>

#include "core/check.h"
#include "kernels/rows_combination.h"
#include "quant/dequantize.h"

namespace densa {

WeightView mla_f32_view(const float* data, int64_t rows, int64_t cols) {
  WeightView v;
  v.dtype = DType::kF32;
  v.rows = rows;
  v.cols = cols;
  v.data = data;
  return v;
}

void mla_split_kv_b(const WeightView& kv_b, const MlaConfig& m, int H, float* uk, float* uv_t) {
  const int dn = m.qk_nope_head_dim, dv = m.v_head_dim, C = m.kv_lora_rank;
  CHECK(kv_b.rows == int64_t{H} * (dn + dv) && kv_b.cols == C) << "kv_b_proj is " << kv_b.rows << " x " << kv_b.cols;
  std::vector<float> row(static_cast<size_t>(C));
  for (int h = 0; h < H; ++h) {
    for (int d = 0; d < dn; ++d) dequantize_row(kv_b, int64_t{h} * (dn + dv) + d, uk + (int64_t{h} * dn + d) * C);
    for (int j = 0; j < dv; ++j) {  // row j of W_UV_h is column j of W_UV_h^T
      dequantize_row(kv_b, int64_t{h} * (dn + dv) + dn + j, row.data());
      float* dst = uv_t + int64_t{h} * C * dv + j;
      for (int c = 0; c < C; ++c) dst[int64_t{c} * dv] = row[c];
    }
  }
}

namespace {

// Runs fn(h) for every head, heads split over the pool.
template <typename Fn>
void for_each_head(int H, ThreadPool* pool, Fn fn) {
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t h = begin; h < end; ++h) fn(h);
  };
  if (pool != nullptr && H > 1) {
    pool->parallel_for(H, run, 1);
  } else {
    run(0, H);
  }
}

}  // namespace

void mla_absorb_queries(const MlaConfig& m, const WeightView& uk, int H, const float* q, int64_t n, float* q_abs,
                        ThreadPool* pool) {
  const int dn = m.qk_nope_head_dim, dr = m.qk_rope_head_dim, C = m.kv_lora_rank;
  const int D = C + dr;
  CHECK(uk.dtype == DType::kF32 && uk.rows == int64_t{H} * dn && uk.cols == C) << "MLA absorb: split kv_b shape";
  const auto* w = static_cast<const float*>(uk.data);
  for_each_head(H, pool, [&](int64_t h) {
    rows_combination(w + h * dn * C, dn, C, q + h * (dn + dr), int64_t{H} * (dn + dr), n, q_abs + h * D,
                     int64_t{H} * D);
    for (int64_t t = 0; t < n; ++t) std::copy_n(q + (t * H + h) * (dn + dr) + dn, dr, q_abs + (t * H + h) * D + C);
  });
}

void mla_expand_values(const MlaConfig& m, const WeightView& uv_t, int H, const float* o_lat, int64_t n, float* out,
                       ThreadPool* pool) {
  const int dv = m.v_head_dim, C = m.kv_lora_rank;
  CHECK(uv_t.dtype == DType::kF32 && uv_t.rows == int64_t{H} * C && uv_t.cols == dv) << "MLA expand: split kv_b shape";
  const auto* w = static_cast<const float*>(uv_t.data);
  for_each_head(H, pool, [&](int64_t h) {
    rows_combination(w + h * C * dv, C, dv, o_lat + h * C, int64_t{H} * C, n, out + h * dv, int64_t{H} * dv);
  });
}

}  // namespace densa
