#include "model/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "kernels/activation.h"

namespace densa {
namespace {

// Index of the largest v[i] among i not yet in taken (ties to the lower index).
int argmax_excluding(const float* v, int count, const int32_t* taken, int num_taken) {
  int best = -1;
  for (int e = 0; e < count; ++e) {
    bool skip = false;
    for (int j = 0; j < num_taken; ++j) skip |= taken[j] == e;
    if (!skip && (best < 0 || v[e] > v[best])) best = e;
  }
  return best;
}

}  // namespace

void route_softmax_topk(const float* logits, int64_t n, int num_experts, int top_k, bool norm_topk_prob,
                        int32_t* ids, float* weights) {
  CHECK(top_k >= 1 && top_k <= num_experts);
  std::vector<float> p(static_cast<size_t>(num_experts));
  for (int64_t t = 0; t < n; ++t) {
    std::copy_n(logits + t * num_experts, num_experts, p.begin());
    softmax(p.data(), num_experts);
    int32_t* id = ids + t * top_k;
    float* w = weights + t * top_k;
    float sum = 0.0f;
    for (int k = 0; k < top_k; ++k) {
      id[k] = argmax_excluding(p.data(), num_experts, id, k);
      w[k] = p[id[k]];
      sum += w[k];
    }
    if (norm_topk_prob) {
      for (int k = 0; k < top_k; ++k) w[k] /= sum;
    }
  }
}

void route_sigmoid_grouped(const float* logits, const float* bias, int64_t n, int num_experts, int top_k,
                           int n_group, int topk_group, bool norm_topk_prob, float scaling, int32_t* ids,
                           float* weights) {
  CHECK(n_group >= 1 && num_experts % n_group == 0 && num_experts / n_group >= 2);
  CHECK(topk_group >= 1 && topk_group <= n_group && top_k >= 1 && top_k <= num_experts);
  const int group_size = num_experts / n_group;
  std::vector<float> s(static_cast<size_t>(num_experts)), c(s.size()), group_score(static_cast<size_t>(n_group));
  std::vector<int32_t> groups(static_cast<size_t>(topk_group));
  for (int64_t t = 0; t < n; ++t) {
    for (int e = 0; e < num_experts; ++e) {
      s[e] = 1.0f / (1.0f + std::exp(-logits[t * num_experts + e]));
      c[e] = s[e] + (bias ? bias[e] : 0.0f);
    }
    for (int g = 0; g < n_group; ++g) {
      const float* cg = c.data() + g * group_size;
      int32_t best2[2];
      best2[0] = argmax_excluding(cg, group_size, best2, 0);
      best2[1] = argmax_excluding(cg, group_size, best2, 1);
      group_score[g] = cg[best2[0]] + cg[best2[1]];
    }
    for (int k = 0; k < topk_group; ++k) groups[k] = argmax_excluding(group_score.data(), n_group, groups.data(), k);
    for (int e = 0; e < num_experts; ++e) {
      bool kept = false;
      for (int k = 0; k < topk_group; ++k) kept |= groups[k] == e / group_size;
      if (!kept) c[e] = 0.0f;
    }
    int32_t* id = ids + t * top_k;
    float* w = weights + t * top_k;
    float sum = 0.0f;
    for (int k = 0; k < top_k; ++k) {
      id[k] = argmax_excluding(c.data(), num_experts, id, k);
      w[k] = s[id[k]];
      sum += w[k];
    }
    for (int k = 0; k < top_k; ++k) w[k] = (norm_topk_prob ? w[k] / (sum + 1e-20f) : w[k]) * scaling;
  }
}

}  // namespace densa
