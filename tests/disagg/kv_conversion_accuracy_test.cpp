// Accuracy of precision per role: a BF16 prefill whose KV is converted to FP8 on the sender
// (convert_kv_page, the path a transfer takes) and decoded on an FP8 cache, against colocated
// FP8 KV (the cache FP8 from the first token). Both are measured against an F32-KV reference
// over teacher-forced continuations of the validation text (perplexity and mean KL of the
// next-token distribution); the converted path must stay within the colocated FP8 bounds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "disagg/kv_page_convert.h"
#include "engine/engine_test_util.h"
#include "kv/contiguous_kv_cache.h"
#include "model/forward.h"

namespace densa::disagg {
namespace {

using testing::moe_f16;
using testing::validation_ids;

constexpr int kWindow = 192;  // BOS + 191 text tokens
constexpr int kPrefix = 128;  // prompt: its first kPrefix - 1 tokens are the transferred KV

// Logits [num rows, vocab] of rows [from, kWindow - 1) after feeding tokens [begin, end).
void run(const ModelWeights& w, const std::vector<TokenId>& tokens, int begin, int end, int first_logit,
         const KvView& kv, ThreadPool* pool, std::vector<float>& out) {
  std::vector<int32_t> pos, seq(static_cast<size_t>(end - begin), 0), rows;
  for (int t = begin; t < end; ++t) pos.push_back(t);
  for (int t = first_logit; t < end; ++t) rows.push_back(t - begin);
  ForwardScratch scratch;
  out.assign(rows.size() * static_cast<size_t>(w.config.vocab_size), 0.0f);
  forward(w, ForwardBatch{std::span<const TokenId>(tokens.data() + begin, static_cast<size_t>(end - begin)), pos, seq, rows},
          kv, scratch, pool, out.data());
}

std::vector<double> log_softmax(const float* row, int n) {
  double m = -1e30;
  for (int i = 0; i < n; ++i) m = std::max(m, static_cast<double>(row[i]));
  double z = 0;
  for (int i = 0; i < n; ++i) z += std::exp(row[i] - m);
  std::vector<double> out(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) out[i] = row[i] - m - std::log(z);
  return out;
}

struct Score {
  double nll = 0, kl = 0;
  int n = 0;
  double ppl() const { return std::exp(nll / n); }
  double mean_kl() const { return kl / n; }
};

// Adds the positions of one window: `logits` rows predict tokens[kPrefix + i].
void score(const std::vector<float>& ref, const std::vector<float>& got, const std::vector<TokenId>& tokens, int vocab,
           Score& s) {
  const size_t rows = got.size() / vocab;
  for (size_t i = 0; i < rows; ++i) {
    const std::vector<double> p = log_softmax(ref.data() + i * vocab, vocab);
    const std::vector<double> q = log_softmax(got.data() + i * vocab, vocab);
    double kl = 0;
    for (int v = 0; v < vocab; ++v) kl += std::exp(p[v]) * (p[v] - q[v]);
    s.kl += kl;
    s.nll -= q[tokens[kPrefix + i]];
    ++s.n;
  }
}

TEST(KvConversionAccuracy, Bf16PrefillToFp8DecodeStaysWithinColocatedFp8) {
  const ModelWeights& w = moe_f16();
  const ModelConfig& c = w.config;
  const int V = c.vocab_size;
  ThreadPool pool(2);
  const std::vector<int32_t> text = validation_ids("tinystories-mixtral-3.6m");
  Score ref_score, fp8_score, converted_score;
  for (int win = 0; win < 6; ++win) {
    std::vector<TokenId> tokens = {1};
    tokens.insert(tokens.end(), text.begin() + win * 400, text.begin() + win * 400 + kWindow - 1);
    // Rows kPrefix-1 .. kWindow-2 predict tokens kPrefix .. kWindow-1.
    std::vector<float> ref, fp8, converted;
    ContiguousKvCache f32(c.num_layers, c.num_kv_heads, c.head_dim, kWindow, 1, DType::kF32);
    run(w, tokens, 0, kWindow - 1, kPrefix - 1, f32.view(), &pool, ref);

    ContiguousKvCache colocated(c.num_layers, c.num_kv_heads, c.head_dim, kWindow, 1, DType::kFP8E4M3,
                                KvScaleMode::kDynamic);
    run(w, tokens, 0, kWindow - 1, kPrefix - 1, colocated.view(), &pool, fp8);

    // Prefill worker: BF16 KV of the first kPrefix - 1 tokens; the sender converts the page
    // into the decode side's FP8 format; the decode side feeds the last prompt token onward.
    ContiguousKvCache bf16(c.num_layers, c.num_kv_heads, c.head_dim, kWindow, 1, DType::kBF16);
    std::vector<float> unused;
    run(w, tokens, 0, kPrefix - 1, kPrefix - 2, bf16.view(), &pool, unused);
    ContiguousKvCache decode(c.num_layers, c.num_kv_heads, c.head_dim, kWindow, 1, DType::kFP8E4M3,
                             KvScaleMode::kDynamic);
    convert_kv_page({bf16.layout(), {}}, bf16.view().page_ptr(0), {decode.layout(), {}}, kPrefix - 1,
                    decode.view().page_ptr(0));
    run(w, tokens, kPrefix - 1, kWindow - 1, kPrefix - 1, decode.view(), &pool, converted);

    score(ref, ref, tokens, V, ref_score);
    score(ref, fp8, tokens, V, fp8_score);
    score(ref, converted, tokens, V, converted_score);
  }
  std::printf("positions %d: PPL f32 %.4f, colocated fp8 %.4f, bf16->fp8 converted %.4f; mean KL vs f32: "
              "colocated %.3e, converted %.3e\n",
              ref_score.n, ref_score.ppl(), fp8_score.ppl(), converted_score.ppl(), fp8_score.mean_kl(),
              converted_score.mean_kl());
  EXPECT_GT(fp8_score.mean_kl(), 0.0) << "fp8 KV must differ from f32 at all";
  EXPECT_GT(converted_score.mean_kl(), 0.0);
  // Within the colocated FP8 bounds: the extra BF16 rounding before FP8 may cost a little.
  EXPECT_LE(converted_score.mean_kl(), 1.25 * fp8_score.mean_kl());
  const double fp8_dppl = std::fabs(fp8_score.ppl() / ref_score.ppl() - 1);
  const double converted_dppl = std::fabs(converted_score.ppl() / ref_score.ppl() - 1);
  EXPECT_LE(converted_dppl, std::max(1.25 * fp8_dppl, 0.002)) << "relative PPL change";
  EXPECT_LT(converted_dppl, 0.01) << "FP8 KV stays within 1% of the F32 perplexity";
}

}  // namespace
}  // namespace densa::disagg
