// MLA latent attention over a paged latent cache: against the naive latent oracle for F32 /
// BF16 / FP8 (dynamic, and static per-layer c_kv / k_pe scales) pages, shuffled pages and
// several page sizes; the absorbed form against the simple (decompressed) form; batch
// invariance; the rope kernel against its twin.
#include "kernels/mla_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "kernels/reference/attention_ref.h"
#include "kernels/reference/mla_ref.h"
#include "quant/fp8.h"

namespace densa {
namespace {

struct Case {
  int page_size;
  int kv_lora;  // value_dim
  int rope;
  DType dtype;
  KvScaleMode scale_mode = KvScaleMode::kNone;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << "page" << c.page_size << "_c" << c.kv_lora << "_r" << c.rope << "_" << dtype_name(c.dtype)
      << (c.scale_mode == KvScaleMode::kStatic ? "_static" : "");
}

// Static scales of the tests: [layer][c_kv | k_pe], distinct per layer and part.
float static_scale(int layer, int part) { return (6.0f + layer + 2.0f * part) / kFp8E4M3Max; }

// Pages of all sequences scattered in a random order.
struct LatentCache {
  KvLayout layout;
  std::unique_ptr<uint8_t[]> bytes;
  std::vector<int32_t> table, offsets = {0};
  std::vector<float> scales;  // kStatic: [layer][c_kv | k_pe]

  LatentCache(const KvLayout& l, const std::vector<int>& lens, std::mt19937& rng) : layout(l) {
    int total = 0;
    for (int len : lens) total += (len + l.page_size - 1) / l.page_size;
    std::vector<int32_t> perm(total);
    for (int i = 0; i < total; ++i) perm[i] = i;
    std::shuffle(perm.begin(), perm.end(), rng);
    int next = 0;
    for (int len : lens) {
      for (int p = 0; p < (len + l.page_size - 1) / l.page_size; ++p) table.push_back(perm[next++]);
      offsets.push_back(static_cast<int32_t>(table.size()));
    }
    bytes = std::make_unique<uint8_t[]>(l.page_bytes() * total);
    if (l.scale_mode == KvScaleMode::kStatic) {
      for (int layer = 0; layer < l.num_layers; ++layer) {
        for (int part = 0; part < 2; ++part) scales.push_back(static_scale(layer, part));
      }
    }
  }
  KvView view() const { return KvView{layout, bytes.get(), table, offsets, scales.empty() ? nullptr : scales.data()}; }
};

KvLayout latent_layout(const Case& c, int layers) {
  KvLayout l;
  l.num_layers = layers;
  l.page_size = c.page_size;
  l.dtype = c.dtype;
  l.scale_mode = c.scale_mode;
  l.latent_dim = c.kv_lora + c.rope;
  return l;
}

// What a latent row reads back as after mla_kv_store.
void held_values(const Case& c, int layer, const float* row, float* out) {
  const int D = c.kv_lora + c.rope;
  if (c.dtype == DType::kF32) {
    std::copy_n(row, D, out);
  } else if (c.dtype == DType::kBF16) {
    for (int d = 0; d < D; ++d) out[d] = bf16_to_f32(f32_to_bf16(row[d]));
  } else if (c.scale_mode == KvScaleMode::kStatic) {
    ref::kv_fp8_round_trip(row, c.kv_lora, static_scale(layer, 0), out);
    ref::kv_fp8_round_trip(row + c.kv_lora, c.rope, static_scale(layer, 1), out + c.kv_lora);
  } else {
    ref::kv_fp8_round_trip(row, D, ref::kv_fp8_dynamic_scale(row, D), out);
  }
}

TEST(KvLayoutLatent, PageBytesAndOffsets) {
  KvLayout l;
  l.num_layers = 61;
  l.page_size = 16;
  l.latent_dim = 512 + 64;  // DeepSeek-V3 / Kimi K2
  l.dtype = DType::kBF16;
  EXPECT_EQ(l.rows_per_layer(), 1);
  EXPECT_EQ(l.token_bytes_per_layer(), 1152);
  EXPECT_EQ(l.page_bytes(), 61 * 16 * 1152);  // 70,272 bytes per token
  l.dtype = DType::kFP8E4M3;
  l.scale_mode = KvScaleMode::kDynamic;
  EXPECT_EQ(l.data_bytes_per_page(), 61 * 16 * 576);
  EXPECT_EQ(l.scale_bytes_per_page(), 61 * 16 * 4);  // one f32 per latent row
  EXPECT_EQ(l.row_offset(2, 0, 3), (2 * 16 + 3) * 576);
  EXPECT_EQ(l.row_scale_offset(60, 0, 15), l.data_bytes_per_page() + (60 * 16 + 15) * 4);
  // GQA offsets keep their old meaning.
  KvLayout g{2, 4, 16, 8, DType::kBF16, KvScaleMode::kNone};
  EXPECT_EQ(g.rows_per_layer(), 8);
  EXPECT_EQ(g.data_offset(1, 1, 2, 5), ((((1 * 2 + 1) * 4 + 2) * 8 + 5) * 16) * 2);
  EXPECT_EQ(g.page_bytes(), 2 * 2 * 4 * 8 * 16 * 2);
}

class PagedMla : public ::testing::TestWithParam<Case> {};

TEST_P(PagedMla, MatchesLatentReferenceAndDecompressedForm) {
  const Case c = GetParam();
  const int layers = 2, layer = 1, H = 5, nope = 12, v_dim = 10;
  const int C = c.kv_lora, R = c.rope, D = C + R;
  const std::vector<int> lens = {1, 23, 41};
  std::mt19937 rng(11);
  LatentCache cache(latent_layout(c, layers), lens, rng);
  const KvView kv = cache.view();
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> kv_b(static_cast<size_t>(H) * (nope + v_dim) * C);
  for (float& x : kv_b) x = nd(rng) * 0.3f;
  const float scale = 0.21f;

  std::vector<std::vector<float>> held(lens.size());
  for (size_t s = 0; s < lens.size(); ++s) {
    std::vector<float> rows(static_cast<size_t>(lens[s]) * D);
    for (float& x : rows) x = nd(rng);
    if (lens[s] > 3) std::fill_n(rows.begin() + 3 * D, D, 0.0f);  // an all-zero row: scale 0
    held[s].resize(rows.size());
    for (int p = 0; p < lens[s]; ++p) held_values(c, layer, &rows[p * D], &held[s][p * D]);
    std::vector<int32_t> seq(lens[s], static_cast<int32_t>(s)), pos(lens[s]);
    for (int i = 0; i < lens[s]; ++i) pos[i] = i;
    mla_kv_store(kv, layer, rows.data(), C, seq, pos);
  }
  // One query per sequence at its last position, plus an early position of the longest.
  std::vector<int32_t> seq = {0, 1, 2, 2}, pos = {0, 22, 40, 17};
  const int n = static_cast<int>(seq.size());
  std::vector<float> q_full(static_cast<size_t>(n) * H * (nope + R));  // [q_nope | q_pe]
  for (float& x : q_full) x = nd(rng);
  // Absorb W_UK: q_abs[h] = [W_UK_h^T q_nope_h | q_pe_h].
  std::vector<float> q_abs(static_cast<size_t>(n) * H * D, 0.0f);
  for (int i = 0; i < n; ++i) {
    for (int h = 0; h < H; ++h) {
      const float* qh = &q_full[(static_cast<size_t>(i) * H + h) * (nope + R)];
      float* qa = &q_abs[(static_cast<size_t>(i) * H + h) * D];
      for (int d = 0; d < nope; ++d) {
        const float* row = &kv_b[(static_cast<size_t>(h) * (nope + v_dim) + d) * C];
        for (int j = 0; j < C; ++j) qa[j] += qh[d] * row[j];
      }
      std::copy_n(qh + nope, R, qa + C);
    }
  }
  std::vector<float> out(static_cast<size_t>(n) * H * C);
  ThreadPool pool(2);
  paged_mla_attention(kv, layer, q_abs.data(), H, C, scale, seq, pos, out.data(), &pool);

  for (int i = 0; i < n; ++i) {
    const float* lat = held[seq[i]].data();
    std::vector<float> want(static_cast<size_t>(H) * C);
    ref::mla_latent_attention(&q_abs[static_cast<size_t>(i) * H * D], lat, pos[i], H, D, C, scale, want.data());
    for (int k = 0; k < H * C; ++k) {
      ASSERT_NEAR(out[static_cast<size_t>(i) * H * C + k], want[k], 2e-5 + 2e-5 * std::fabs(want[k]))
          << "query " << i << " elem " << k;
    }
    // Apply W_UV and compare with the simple (decompressed) form.
    std::vector<float> simple(static_cast<size_t>(H) * v_dim);
    ref::mla_attention_decompressed(&q_full[static_cast<size_t>(i) * H * (nope + R)], lat, pos[i], H, nope, R,
                                    v_dim, C, kv_b.data(), scale, simple.data());
    for (int h = 0; h < H; ++h) {
      for (int j = 0; j < v_dim; ++j) {
        const float* row = &kv_b[(static_cast<size_t>(h) * (nope + v_dim) + nope + j) * C];
        double o = 0;
        for (int k = 0; k < C; ++k) o += double(row[k]) * out[(static_cast<size_t>(i) * H + h) * C + k];
        ASSERT_NEAR(o, simple[h * v_dim + j], 1e-4 + 1e-4 * std::fabs(simple[h * v_dim + j]))
            << "query " << i << " head " << h << " v " << j;
      }
    }
  }
}

TEST_P(PagedMla, BatchInvariantAndPageSizeInvariant) {
  const Case c = GetParam();
  const int H = 3, C = c.kv_lora, R = c.rope, D = C + R, len = 45;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> rows(static_cast<size_t>(len) * D), q(static_cast<size_t>(len) * H * D);
  for (float& x : rows) x = nd(rng);
  for (float& x : q) x = nd(rng);
  std::vector<int32_t> seq(len, 0), pos(len);
  for (int i = 0; i < len; ++i) pos[i] = i;
  // Whole prompt in one batch, page size as given.
  LatentCache a(latent_layout(c, 1), {len}, rng);
  mla_kv_store(a.view(), 0, rows.data(), C, seq, pos);
  std::vector<float> out_a(static_cast<size_t>(len) * H * C);
  paged_mla_attention(a.view(), 0, q.data(), H, C, 0.3f, seq, pos, out_a.data(), nullptr);
  // One token at a time into a contiguous cache (one page of 64).
  Case c64 = c;
  c64.page_size = 64;
  LatentCache b(latent_layout(c64, 1), {len}, rng);
  ThreadPool pool(2);
  for (int i = 0; i < len; ++i) {
    const std::span<const int32_t> s1(&seq[i], 1), p1(&pos[i], 1);
    mla_kv_store(b.view(), 0, &rows[static_cast<size_t>(i) * D], C, s1, p1);
    std::vector<float> o(static_cast<size_t>(H) * C);
    paged_mla_attention(b.view(), 0, &q[static_cast<size_t>(i) * H * D], H, C, 0.3f, s1, p1, o.data(), &pool);
    for (int k = 0; k < H * C; ++k) ASSERT_EQ(o[k], out_a[static_cast<size_t>(i) * H * C + k]) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, PagedMla,
    ::testing::Values(Case{16, 32, 8, DType::kF32}, Case{4, 32, 8, DType::kBF16},
                      Case{16, 32, 8, DType::kFP8E4M3, KvScaleMode::kDynamic},
                      // C and R multiples of 16: the AVX-512 tile path where the CPU has it.
                      Case{16, 32, 16, DType::kF32}, Case{8, 64, 16, DType::kBF16},
                      Case{16, 32, 16, DType::kFP8E4M3, KvScaleMode::kDynamic},
                      Case{16, 32, 8, DType::kFP8E4M3, KvScaleMode::kStatic},
                      Case{4, 32, 16, DType::kFP8E4M3, KvScaleMode::kStatic}));

TEST(MlaKvStore, Fp8RowsHoldReferenceCodesAndScales) {
  const Case c{8, 32, 8, DType::kFP8E4M3, KvScaleMode::kDynamic};
  const int D = 40, len = 19;
  std::mt19937 rng(3);
  LatentCache cache(latent_layout(c, 2), {len}, rng);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::vector<float> rows(static_cast<size_t>(len) * D);
  for (float& x : rows) x = nd(rng);
  std::vector<int32_t> seq(len, 0), pos(len);
  for (int i = 0; i < len; ++i) pos[i] = i;
  mla_kv_store(cache.view(), 1, rows.data(), 32, seq, pos);
  const KvView kv = cache.view();
  for (int p = 0; p < len; ++p) {
    const uint8_t* page = kv.page_ptr(kv.page_of(0, p));
    float s;
    std::memcpy(&s, page + kv.layout.row_scale_offset(1, 0, p % c.page_size), 4);
    EXPECT_EQ(s, ref::kv_fp8_dynamic_scale(&rows[p * D], D)) << p;
    std::vector<float> want(D);
    ref::kv_fp8_round_trip(&rows[p * D], D, s, want.data());
    const uint8_t* codes = page + kv.layout.row_offset(1, 0, p % c.page_size);
    for (int d = 0; d < D; ++d) EXPECT_EQ(fp8_e4m3_decode_table()[codes[d]] * s, want[d]) << p << " " << d;
  }
}

// Static scales: the c_kv part of each row takes its layer's c_kv scale, the k_pe part the
// k_pe scale, no per-row scale is stored (the page has no scale region).
TEST(MlaKvStore, Fp8StaticRowsUseTheLayersTwoScales) {
  const Case c{8, 32, 8, DType::kFP8E4M3, KvScaleMode::kStatic};
  const int C = 32, D = 40, len = 11;
  std::mt19937 rng(4);
  LatentCache cache(latent_layout(c, 2), {len}, rng);
  EXPECT_EQ(cache.layout.scale_bytes_per_page(), 0);
  std::normal_distribution<float> nd(0.0f, 1.5f);
  std::vector<float> rows(static_cast<size_t>(len) * D);
  for (float& x : rows) x = nd(rng);
  std::vector<int32_t> seq(len, 0), pos(len);
  for (int i = 0; i < len; ++i) pos[i] = i;
  mla_kv_store(cache.view(), 1, rows.data(), C, seq, pos);
  const KvView kv = cache.view();
  for (int p = 0; p < len; ++p) {
    std::vector<float> want(D);
    held_values(c, 1, &rows[p * D], want.data());
    const uint8_t* codes = kv.page_ptr(kv.page_of(0, p)) + kv.layout.row_offset(1, 0, p % c.page_size);
    for (int d = 0; d < D; ++d) {
      const float s = static_scale(1, d < C ? 0 : 1);
      EXPECT_EQ(fp8_e4m3_decode_table()[codes[d]] * s, want[d]) << p << " " << d;
    }
  }
}

TEST(RopeWithFreqs, MatchesReferenceAndInterleavedIsPermutedRotateHalf) {
  const int n = 5, H = 3, dn = 4, dr = 8, stride_h = dn + dr, stride_t = H * stride_h;
  std::vector<double> inv_freq = {1.0, 0.3, 0.05, 0.001};
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n) * stride_t);
  for (float& v : x) v = nd(rng);
  const std::vector<int32_t> positions = {0, 1, 7, 100, 255};
  for (bool interleaved : {true, false}) {
    std::vector<float> got = x, want = x;
    rope_with_freqs(got.data() + dn, positions.data(), n, H, stride_t, stride_h, dr, inv_freq, 1.25f, interleaved);
    ref::rope_with_freqs(want.data() + dn, positions.data(), n, H, stride_t, stride_h, dr, inv_freq, 1.25f,
                         interleaved);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5) << i;
    for (int t = 0; t < n; ++t)  // the nope part is untouched
      for (int h = 0; h < H; ++h)
        for (int d = 0; d < dn; ++d) EXPECT_EQ(got[t * stride_t + h * stride_h + d], x[t * stride_t + h * stride_h + d]);
  }
  // Interleaved on x == rotate-half on x de-interleaved (HF's view(d/2, 2).transpose form).
  std::vector<float> inter(dr), half(dr);
  for (int d = 0; d < dr; ++d) inter[d] = nd(rng);
  for (int i = 0; i < dr / 2; ++i) {
    half[i] = inter[2 * i];
    half[i + dr / 2] = inter[2 * i + 1];
  }
  const int32_t p = 37;
  rope_with_freqs(inter.data(), &p, 1, 1, dr, dr, dr, inv_freq, 1.0f, true);
  rope_with_freqs(half.data(), &p, 1, 1, dr, dr, dr, inv_freq, 1.0f, false);
  for (int i = 0; i < dr / 2; ++i) {
    EXPECT_FLOAT_EQ(inter[2 * i], half[i]);
    EXPECT_FLOAT_EQ(inter[2 * i + 1], half[i + dr / 2]);
  }
}

}  // namespace
}  // namespace densa
