#include "kernels/rope.h"

#include <cmath>

#include "core/check.h"
#include "core/thread_pool.h"

namespace densa {

// Angles are formed in double (pos * inv_freq loses ~pos * 2^-24 rad in fp32) and each
// (token, pair) cos/sin is computed once and applied to every head.
void rope_table_build(RopeTable& t, const int32_t* positions, int64_t n, int head_dim, float theta,
                      int rotary_dim) {
  const int rot = rotary_dim == 0 ? head_dim : rotary_dim;
  CHECK(head_dim > 0 && rot % 2 == 0 && rot > 0 && rot <= head_dim)
      << "rope: head_dim " << head_dim << " rotary_dim " << rotary_dim;
  const int half = rot / 2;
  t.head_dim = head_dim;
  t.half = half;
  t.n = n;
  t.cos.resize(static_cast<size_t>(n * half));
  t.sin.resize(static_cast<size_t>(n * half));
  std::vector<double> inv_freq(static_cast<size_t>(half));
  for (int k = 0; k < half; ++k) {
    inv_freq[k] = std::pow(static_cast<double>(theta), -2.0 * k / rot);
  }
  for (int64_t i = 0; i < n; ++i) {
    float* c = t.cos.data() + i * half;
    float* s = t.sin.data() + i * half;
    for (int k = 0; k < half; ++k) {
      const double angle = static_cast<double>(positions[i]) * inv_freq[k];
      c[k] = static_cast<float>(std::cos(angle));
      s[k] = static_cast<float>(std::sin(angle));
    }
  }
}

namespace {

// Tokens [i0, i1) of x.
void rope_neox_rows(float* x, const RopeTable& t, int num_heads, int64_t i0, int64_t i1) {
  const int half = t.half;
  for (int64_t i = i0; i < i1; ++i) {
    const float* cos_v = t.cos.data() + i * half;
    const float* sin_v = t.sin.data() + i * half;
    for (int h = 0; h < num_heads; ++h) {
      float* v = x + (i * num_heads + h) * static_cast<int64_t>(t.head_dim);
      for (int k = 0; k < half; ++k) {
        const float a = v[k], b = v[k + half];
        v[k] = a * cos_v[k] - b * sin_v[k];
        v[k + half] = b * cos_v[k] + a * sin_v[k];
      }
    }
  }
}

}  // namespace

void rope_neox_apply(float* x, const RopeTable& t, int num_heads) { rope_neox_rows(x, t, num_heads, 0, t.n); }

void rope_neox_apply(float* x, const RopeTable& t, int num_heads, ThreadPool* pool) {
  parallel_for_elems(pool, t.n, static_cast<int64_t>(num_heads) * t.head_dim,
                     [&](int64_t i0, int64_t i1) { rope_neox_rows(x, t, num_heads, i0, i1); });
}

void rope_neox(float* x, const int32_t* positions, int64_t n, int num_heads, int head_dim,
               float theta, int rotary_dim) {
  RopeTable t;
  rope_table_build(t, positions, n, head_dim, theta, rotary_dim);
  rope_neox_apply(x, t, num_heads);
}

}  // namespace densa
