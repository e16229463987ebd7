#include "model/mla_absorb.h"

#include <algorithm>

#include "core/check.h"
#include "kernels/rows_combination.h"
#include "quant/dequantize.h"

namespace densa {
namespace {

float* grow(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// One product per head in one pass over the pool: y_h[n, rows] = x_h[n, cols] . W_h^T, W_h the
// rows [h * rows, (h + 1) * rows) of the fp32 `w`; x_h at in + h * n * cols, y_h at
// out + h * n * rows.
void per_head_products(const WeightView& w, int H, int64_t rows, int64_t cols, const float* in, int64_t n,
                       float* out, std::vector<MatmulJob>& jobs, ThreadPool* pool) {
  CHECK(w.dtype == DType::kF32 && w.rows == H * rows && w.cols == cols) << "MLA products: split kv_b shape";
  jobs.resize(static_cast<size_t>(H));
  for (int h = 0; h < H; ++h) {
    MatmulJob& j = jobs[static_cast<size_t>(h)];
    j.w = mla_f32_view(static_cast<const float*>(w.data) + h * rows * cols, rows, cols);
    j.x = in + h * n * cols;
    j.n = n;
    j.y = out + h * n * rows;
  }
  matmul_many(jobs, pool);
}

}  // namespace

WeightView mla_f32_view(const float* data, int64_t rows, int64_t cols) {
  WeightView v;
  v.dtype = DType::kF32;
  v.rows = rows;
  v.cols = cols;
  v.data = data;
  return v;
}

void mla_split_kv_b(const WeightView& kv_b, const MlaConfig& m, int H, float* uk, float* uv) {
  const int dn = m.qk_nope_head_dim, dv = m.v_head_dim, C = m.kv_lora_rank;
  CHECK(kv_b.rows == int64_t{H} * (dn + dv) && kv_b.cols == C) << "kv_b_proj is " << kv_b.rows << " x " << kv_b.cols;
  for (int h = 0; h < H; ++h) {
    for (int d = 0; d < dn + dv; ++d) {
      float* dst = d < dn ? uk + (int64_t{h} * dn + d) * C : uv + (int64_t{h} * dv + (d - dn)) * C;
      dequantize_row(kv_b, int64_t{h} * (dn + dv) + d, dst);
    }
  }
}

void mla_absorb_queries(const MlaConfig& m, const WeightView& uk, int H, const float* q, int64_t n, float* q_abs,
                        ThreadPool* pool) {
  const int dn = m.qk_nope_head_dim, dr = m.qk_rope_head_dim, C = m.kv_lora_rank;
  const int D = C + dr;
  CHECK(uk.dtype == DType::kF32 && uk.rows == int64_t{H} * dn && uk.cols == C) << "MLA absorb: split kv_b shape";
  const auto* w = static_cast<const float*>(uk.data);
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t h = begin; h < end; ++h) {
      rows_combination(w + h * dn * C, dn, C, q + h * (dn + dr), int64_t{H} * (dn + dr), n, q_abs + h * D,
                       int64_t{H} * D);
      for (int64_t t = 0; t < n; ++t) {
        std::copy_n(q + (t * H + h) * (dn + dr) + dn, dr, q_abs + (t * H + h) * D + C);
      }
    }
  };
  if (pool != nullptr && H > 1) {
    pool->parallel_for(H, run, 1);
  } else {
    run(0, H);
  }
}

void mla_expand_values(const MlaConfig& m, const WeightView& uv, int H, const float* o_lat, int64_t n, float* out,
                       MlaScratch& s, ThreadPool* pool) {
  const int dv = m.v_head_dim, C = m.kv_lora_rank;
  float* in = grow(s.in, static_cast<size_t>(H * n * C));
  float* res = grow(s.out, static_cast<size_t>(H * n * dv));
  for (int64_t t = 0; t < n; ++t) {
    for (int h = 0; h < H; ++h) std::copy_n(o_lat + (t * H + h) * C, C, in + (h * n + t) * C);
  }
  per_head_products(uv, H, dv, C, in, n, res, s.jobs, pool);
  for (int64_t t = 0; t < n; ++t) {
    for (int h = 0; h < H; ++h) std::copy_n(res + (h * n + t) * dv, dv, out + (t * H + h) * dv);
  }
}

}  // namespace densa
