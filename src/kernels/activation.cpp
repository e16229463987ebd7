#include "kernels/activation.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/thread_pool.h"
#include "kernels/internal/activation_isa.h"

namespace densa {
namespace activation_internal {

void silu_mul_scalar(float* gate, const float* up, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void silu_mul_with_isa(CpuIsa isa, float* gate, const float* up, int64_t count) {
  CHECK(static_cast<int>(isa) <= static_cast<int>(cpu_isa_hardware())) << "silu_mul: isa " << cpu_isa_name(isa);
  if (isa == CpuIsa::kAvx512Bf16) return silu_mul_avx512(gate, up, count);
  if (isa == CpuIsa::kAvx2) return silu_mul_avx2(gate, up, count);
  silu_mul_scalar(gate, up, count);
}

}  // namespace activation_internal

void silu_mul(float* gate, const float* up, int64_t count) {
  activation_internal::silu_mul_with_isa(cpu_isa(), gate, up, count);
}

void silu_mul(float* gate, const float* up, int64_t count, ThreadPool* pool) {
  constexpr int64_t kBlock = 64;  // chunks split on whole vectors
  parallel_for_elems(pool, (count + kBlock - 1) / kBlock, kBlock, [&](int64_t b, int64_t e) {
    const int64_t begin = b * kBlock, end = std::min(count, e * kBlock);
    silu_mul(gate + begin, up + begin, end - begin);
  });
}

void add_into(float* x, const float* y, int64_t count, ThreadPool* pool) {
  parallel_for_elems(pool, count, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) x[i] += y[i];
  });
}

// fp32 exponentials; the normalizing sum is accumulated in double.
void softmax(float* x, int64_t count) {
  if (count <= 0) return;
  float m = x[0];
  for (int64_t i = 1; i < count; ++i) m = x[i] > m ? x[i] : m;
  double sum = 0.0;
  for (int64_t i = 0; i < count; ++i) {
    x[i] = std::exp(x[i] - m);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < count; ++i) x[i] *= inv;
}

}  // namespace densa
