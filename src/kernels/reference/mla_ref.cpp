#include "kernels/reference/mla_ref.h"

#include <cmath>
#include <vector>

namespace densa::ref {
namespace {

// out[h][:] = sum_p softmax_p(s[h][p]) * v(h, p)[:] for p <= pos.
template <typename ValueFn>
void softmax_combine(const std::vector<double>& s, int32_t pos, int num_heads, int v_dim, ValueFn v,
                     float* out) {
  for (int h = 0; h < num_heads; ++h) {
    const double* sh = s.data() + static_cast<int64_t>(h) * (pos + 1);
    double mx = sh[0];
    for (int32_t p = 1; p <= pos; ++p) mx = std::max(mx, sh[p]);
    double sum = 0;
    std::vector<double> w(static_cast<size_t>(pos) + 1);
    for (int32_t p = 0; p <= pos; ++p) sum += w[p] = std::exp(sh[p] - mx);
    for (int d = 0; d < v_dim; ++d) {
      double acc = 0;
      for (int32_t p = 0; p <= pos; ++p) acc += w[p] * v(h, p, d);
      out[static_cast<int64_t>(h) * v_dim + d] = static_cast<float>(acc / sum);
    }
  }
}

}  // namespace

void mla_latent_attention(const float* q, const float* latents, int32_t pos, int num_heads,
                          int latent_dim, int value_dim, float scale, float* out) {
  std::vector<double> s(static_cast<size_t>(num_heads) * (pos + 1));
  for (int h = 0; h < num_heads; ++h) {
    for (int32_t p = 0; p <= pos; ++p) {
      double dot = 0;
      for (int d = 0; d < latent_dim; ++d) {
        dot += double(q[static_cast<int64_t>(h) * latent_dim + d]) * latents[static_cast<int64_t>(p) * latent_dim + d];
      }
      s[static_cast<size_t>(h) * (pos + 1) + p] = dot * scale;
    }
  }
  softmax_combine(s, pos, num_heads, value_dim,
                  [&](int, int32_t p, int d) { return double(latents[static_cast<int64_t>(p) * latent_dim + d]); }, out);
}

void mla_attention_decompressed(const float* q, const float* latents, int32_t pos, int num_heads,
                                int nope, int rope, int v_dim, int kv_lora, const float* kv_b,
                                float scale, float* out) {
  const int D = kv_lora + rope, qd = nope + rope;
  // K_h[p] = [W_UK_h c_p | k_pe_p], V_h[p] = W_UV_h c_p.
  std::vector<double> k(static_cast<size_t>(num_heads) * (pos + 1) * qd);
  std::vector<double> v(static_cast<size_t>(num_heads) * (pos + 1) * v_dim);
  for (int h = 0; h < num_heads; ++h) {
    for (int32_t p = 0; p <= pos; ++p) {
      const float* c = latents + static_cast<int64_t>(p) * D;
      double* kp = k.data() + (static_cast<size_t>(h) * (pos + 1) + p) * qd;
      double* vp = v.data() + (static_cast<size_t>(h) * (pos + 1) + p) * v_dim;
      for (int r = 0; r < nope + v_dim; ++r) {
        const float* row = kv_b + (static_cast<int64_t>(h) * (nope + v_dim) + r) * kv_lora;
        double dot = 0;
        for (int j = 0; j < kv_lora; ++j) dot += double(row[j]) * c[j];
        if (r < nope) kp[r] = dot; else vp[r - nope] = dot;
      }
      for (int r = 0; r < rope; ++r) kp[nope + r] = c[kv_lora + r];
    }
  }
  std::vector<double> s(static_cast<size_t>(num_heads) * (pos + 1));
  for (int h = 0; h < num_heads; ++h) {
    for (int32_t p = 0; p <= pos; ++p) {
      const double* kp = k.data() + (static_cast<size_t>(h) * (pos + 1) + p) * qd;
      double dot = 0;
      for (int d = 0; d < qd; ++d) dot += double(q[static_cast<int64_t>(h) * qd + d]) * kp[d];
      s[static_cast<size_t>(h) * (pos + 1) + p] = dot * scale;
    }
  }
  softmax_combine(s, pos, num_heads, v_dim,
                  [&](int h, int32_t p, int d) { return v[(static_cast<size_t>(h) * (pos + 1) + p) * v_dim + d]; },
                  out);
}

void rope_with_freqs(float* x, const int32_t* positions, int64_t n, int num_heads,
                     int64_t token_stride, int64_t head_stride, int rot_dim,
                     std::span<const double> inv_freq, float attn_factor, bool interleaved) {
  const int half = rot_dim / 2;
  for (int64_t t = 0; t < n; ++t) {
    for (int h = 0; h < num_heads; ++h) {
      float* v = x + t * token_stride + h * head_stride;
      for (int i = 0; i < half; ++i) {
        const double angle = static_cast<double>(positions[t]) * inv_freq[i];
        const int ia = interleaved ? 2 * i : i, ib = interleaved ? 2 * i + 1 : i + half;
        const double a = v[ia], b = v[ib];
        v[ia] = static_cast<float>((a * std::cos(angle) - b * std::sin(angle)) * attn_factor);
        v[ib] = static_cast<float>((b * std::cos(angle) + a * std::sin(angle)) * attn_factor);
      }
    }
  }
}

}  // namespace densa::ref
