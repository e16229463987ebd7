// MLA's absorbed products per layer and step (model/mla_absorb.h) at DeepSeek-V3 and Kimi K2
// shapes: the old path (every step dequantized the whole kv_b_proj to fp32 on
// one thread, then ran the products as plain loops over the pool) against the products on
// kv_b split once at load (both products: rows_combination per head, heads split over the
// pool).
// Both run in turn in this process, `rounds` times; prints median ms per layer-step of each,
// their ratio, the model-step total at the model's layer count, and the largest difference of
// the two results relative to the largest output. A plain main(), not a timed test.
//
//   ./build/mla_absorb_bench [--threads N] [--rounds N] [--tokens N]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "model/mla_absorb.h"
#include "quant/dequantize.h"
#include "quant/quantize_matrix.h"

namespace densa {
namespace {

using Clock = std::chrono::steady_clock;

struct Shape {
  const char* name;
  int heads, layers;
  MlaConfig m;
};

MlaConfig mla(int C, int dn, int dr, int dv) {
  MlaConfig m;
  m.kv_lora_rank = C;
  m.qk_nope_head_dim = dn;
  m.qk_rope_head_dim = dr;
  m.v_head_dim = dv;
  return m;
}

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The path before: kv_b dequantized every step, then the two products as loops.
struct PerStepPath {
  std::vector<float> kv_b;
  void run(const MlaConfig& m, const WeightView& stored, int H, const float* q, const float* o_lat, int64_t n,
           float* q_abs, float* out, ThreadPool* pool) {
    const int dn = m.qk_nope_head_dim, dr = m.qk_rope_head_dim, dv = m.v_head_dim, C = m.kv_lora_rank;
    const int D = C + dr;
    const int64_t rows = int64_t{H} * (dn + dv);
    kv_b.resize(static_cast<size_t>(rows * C));
    for (int64_t r = 0; r < rows; ++r) dequantize_row(stored, r, kv_b.data() + r * C);
    const float* w = kv_b.data();
    pool->parallel_for(
        n * H,
        [&](int64_t begin, int64_t end) {
          for (int64_t item = begin; item < end; ++item) {
            const int h = static_cast<int>(item % H);
            const float* qh = q + item * (dn + dr);
            float* o = q_abs + item * D;
            std::fill_n(o, C, 0.0f);
            for (int d = 0; d < dn; ++d) {
              const float* row = w + (static_cast<int64_t>(h) * (dn + dv) + d) * C;
              const float qd = qh[d];
              for (int c = 0; c < C; ++c) o[c] += qd * row[c];
            }
            std::copy_n(qh + dn, dr, o + C);
          }
        },
        4);
    pool->parallel_for(
        n * H,
        [&](int64_t begin, int64_t end) {
          for (int64_t item = begin; item < end; ++item) {
            const int h = static_cast<int>(item % H);
            const float* lat = o_lat + item * C;
            for (int j = 0; j < dv; ++j) {
              const float* row = w + (static_cast<int64_t>(h) * (dn + dv) + dn + j) * C;
              float acc = 0.0f;
              for (int c = 0; c < C; ++c) acc += row[c] * lat[c];
              out[item * dv + j] = acc;
            }
          }
        },
        4);
  }
};

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, mag = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
    mag = std::max(mag, static_cast<double>(std::fabs(b[i])));
  }
  return diff / mag;
}

int run(int argc, char** argv) {
  int threads = 2, rounds = 7;
  int64_t tokens = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--threads") threads = std::atoi(argv[i + 1]);
    else if (a == "--rounds") rounds = std::atoi(argv[i + 1]);
    else if (a == "--tokens") tokens = std::atoll(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: %s [--threads N] [--rounds N] [--tokens N]\n", argv[0]);
      return 2;
    }
  }
  ThreadPool pool(threads);
  const Shape shapes[] = {{"deepseek-v3", 128, 61, mla(512, 128, 64, 128)}, {"kimi-k2", 64, 61, mla(512, 128, 64, 128)}};
  std::printf("%d threads, %lld token(s) per step, %d rounds, medians (ms per layer-step)\n", threads,
              static_cast<long long>(tokens), rounds);
  std::printf("%-12s %-5s %10s %10s %8s %14s %14s %10s\n", "shape", "kv_b", "per-step", "split", "ratio",
              "model per-step", "model split", "max diff");
  for (const Shape& sh : shapes) {
    const MlaConfig& m = sh.m;
    const int H = sh.heads, dn = m.qk_nope_head_dim, dr = m.qk_rope_head_dim, dv = m.v_head_dim, C = m.kv_lora_rank;
    const int64_t rows = int64_t{H} * (dn + dv);
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.0f, 0.02f);
    std::vector<float> src(static_cast<size_t>(rows * C));
    for (float& x : src) x = nd(rng);
    std::vector<float> q(static_cast<size_t>(tokens * H * (dn + dr))), o_lat(static_cast<size_t>(tokens * H * C));
    for (float& x : q) x = nd(rng) * 50;
    for (float& x : o_lat) x = nd(rng) * 50;
    for (DType dtype : {DType::kBF16, DType::kFP8E4M3}) {
      const QuantizedMatrix stored = quantize_matrix(src.data(), rows, C, WeightQuantSpec{dtype, 128});
      std::vector<float> uk(static_cast<size_t>(H * dn * C)), uv_t(static_cast<size_t>(H * C * dv));
      mla_split_kv_b(stored.view, m, H, uk.data(), uv_t.data());
      const WeightView uk_view = mla_f32_view(uk.data(), int64_t{H} * dn, C);
      const WeightView uv_view = mla_f32_view(uv_t.data(), int64_t{H} * C, dv);
      std::vector<float> a_abs(static_cast<size_t>(tokens * H * (C + dr))), a_out(static_cast<size_t>(tokens * H * dv));
      std::vector<float> b_abs(a_abs.size()), b_out(a_out.size());
      PerStepPath old;
      std::vector<double> t_old, t_new;
      for (int r = 0; r < rounds + 1; ++r) {  // round 0 warms up
        Clock::time_point t0 = Clock::now();
        old.run(m, stored.view, H, q.data(), o_lat.data(), tokens, a_abs.data(), a_out.data(), &pool);
        const double o = ms_since(t0);
        t0 = Clock::now();
        mla_absorb_queries(m, uk_view, H, q.data(), tokens, b_abs.data(), &pool);
        mla_expand_values(m, uv_view, H, o_lat.data(), tokens, b_out.data(), &pool);
        const double n = ms_since(t0);
        if (r == 0) continue;
        t_old.push_back(o);
        t_new.push_back(n);
      }
      const double mo = median(t_old), mn = median(t_new);
      const double diff = std::max(max_rel_diff(b_abs, a_abs), max_rel_diff(b_out, a_out));
      std::printf("%-12s %-5s %10.3f %10.3f %7.1fx %12.1f ms %12.1f ms %10.2e\n", sh.name, std::string(dtype_name(dtype)).c_str(), mo, mn,
                  mo / mn, mo * sh.layers, mn * sh.layers, diff);
    }
  }
  return 0;
}

}  // namespace
}  // namespace densa

int main(int argc, char** argv) { return densa::run(argc, argv); }
