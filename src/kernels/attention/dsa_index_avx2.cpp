// AVX2 lightning-indexer scoring (see kernels/internal/dsa_index_isa.h for the arithmetic
// contract), for x86-64 CPUs without the AVX-512 level. Built for baseline x86-64 with a target
// attribute; only runs when the dispatcher has checked the CPU.
//
// One lane per stored position, 8 positions per block: their FP8 keys are decoded through
// quant/fp8.h's table straight into kt[d][8], then every indexer head's dot product is one fma
// chain per lane in d order, 8 heads at a time against one load of kt[d].
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/internal/dsa_index_isa.h"
#include "kernels/internal/target.h"
#include "quant/fp8.h"

namespace densa::dsa_internal {
namespace {

constexpr int kLanes = 8;

template <int kNumHeads>
DENSA_TARGET_AVX2 inline void heads(const float* q, const float* w, int dim, const float* kt, __m256 key_scale, __m256 scale,
                                    __m256& total) {
  __m256 acc[kNumHeads];
  for (int i = 0; i < kNumHeads; ++i) acc[i] = _mm256_setzero_ps();
  for (int d = 0; d < dim; ++d) {
    const __m256 k = _mm256_loadu_ps(kt + d * kLanes);
    for (int i = 0; i < kNumHeads; ++i) acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(q[i * dim + d]), k, acc[i]);
  }
  for (int i = 0; i < kNumHeads; ++i) {
    const __m256 v = _mm256_mul_ps(_mm256_mul_ps(acc[i], key_scale), scale);
    total = _mm256_fmadd_ps(_mm256_set1_ps(w[i]), _mm256_max_ps(v, _mm256_setzero_ps()), total);
  }
}

}  // namespace

DENSA_TARGET_AVX2 void score_range_avx2(const KvView& kv, int layer, const IndexQuery& query, int seq, int32_t first,
                                        int32_t last, float* out) {
  const KvLayout& L = kv.layout;
  const int D = L.index_dim;
  const float* table = fp8_e4m3_decode_table();
  std::vector<float> kt(static_cast<size_t>(D) * kLanes);
  const __m256 scale = _mm256_set1_ps(query.scale);
  for (int32_t p0 = first; p0 <= last; p0 += kLanes) {
    const int m = static_cast<int>(std::min<int32_t>(kLanes, last - p0 + 1));
    float key_scales[kLanes] = {};
    for (int j = 0; j < kLanes; ++j) {
      if (j >= m) {
        for (int d = 0; d < D; ++d) kt[d * kLanes + j] = 0.0f;
        continue;
      }
      const int32_t p = p0 + j;
      const uint8_t* page = kv.page_ptr(kv.page_of(seq, p));
      const int slot = p % L.page_size;
      std::memcpy(&key_scales[j], page + L.index_scale_offset(layer, slot), 4);
      const uint8_t* codes = page + L.index_key_offset(layer, slot);
      for (int d = 0; d < D; ++d) kt[d * kLanes + j] = table[codes[d]];
    }
    const __m256 key_scale = _mm256_loadu_ps(key_scales);
    __m256 total = _mm256_setzero_ps();
    const int H = query.num_heads;
    int h = 0;
    for (; h + 8 <= H; h += 8) heads<8>(query.q + h * D, query.weights + h, D, kt.data(), key_scale, scale, total);
    for (; h < H; ++h) heads<1>(query.q + h * D, query.weights + h, D, kt.data(), key_scale, scale, total);
    alignas(32) float lanes[kLanes];
    _mm256_store_ps(lanes, total);
    std::copy(lanes, lanes + m, out + p0);
  }
}

}  // namespace densa::dsa_internal
