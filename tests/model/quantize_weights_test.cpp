// Quantize-on-load of the output projection (quantize_lm_head, LoadOptions::lm_head) on the
// real fixtures:
//  * the option changes lm_head's stored format and nothing else;
//  * logits through the model's own matmul (batched prefill rows and batch-1 decode steps)
//    equal a reference built from the final hidden states and the dequantized lm_head in
//    double, within the kernel's documented error bound for that format;
//  * a tied lm_head gets its own copy and the embedding lookup keeps the stored values;
//  * unsupported targets and shapes are clear errors that leave the weights unchanged.
#include "model/quantize_weights.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>

#include "core/cpu_features.h"
#include "exec/runner.h"
#include "io/gguf_file.h"
#include "io/test_file_writers.h"
#include "kernels/internal/matmul_quant_avx512.h"
#include "kernels/matmul.h"
#include "kv/contiguous_kv_cache.h"
#include "model/forward.h"
#include "model/model_loader.h"
#include "quality/generator.h"
#include "quant/activation_q8.h"
#include "test_util.h"

namespace densa {
namespace {

using testing::model_dir;

const char kDense[] = "tinystories-llama-1m";
const char kMoe[] = "tinystories-mixtral-3.6m";

ThreadPool& pool() {
  static ThreadPool p(2);
  return p;
}

ModelWeights load_ok(const std::filesystem::path& path, const LoadOptions& opts = {}) {
  Result<ModelWeights> w = load_model(path, opts);
  EXPECT_TRUE(w.is_ok()) << w.status().to_string();
  return std::move(w).value();
}

WeightQuantSpec spec_of(const std::string& name) {
  Result<WeightQuantSpec> s = weight_quant_spec_from_name(name, 128);
  EXPECT_TRUE(s.is_ok()) << s.status().to_string();
  return *s;
}

std::vector<TokenId> tokens(int n) {
  const auto ids = testing::validation_ids(kDense);
  std::vector<TokenId> t(ids.begin() + 300, ids.begin() + 300 + n);
  t[0] = 1;  // <s>
  return t;
}

// Logits of `toks` in two ways: rows 0..prefill-1 from one batched pass that asks for every
// row, then each later token as its own batch-1 step (the decode GEMV), teacher-forced.
// Returns [toks.size(), vocab].
std::vector<float> batched_then_decode_logits(const ModelWeights& w, const std::vector<TokenId>& toks, int prefill) {
  const ModelConfig& c = w.config;
  const int n = static_cast<int>(toks.size()), V = c.vocab_size;
  const ContiguousKvCache cache(kv_layout_for(c, n, DType::kF32), 1);
  ForwardScratch scratch;
  std::vector<float> logits(static_cast<size_t>(n) * V);
  std::vector<int32_t> pos(prefill), seq(prefill, 0), rows(prefill);
  std::iota(pos.begin(), pos.end(), 0);
  std::iota(rows.begin(), rows.end(), 0);
  forward(w, ForwardBatch{std::span(toks).first(prefill), pos, seq, rows}, cache.view(), scratch, &pool(),
          logits.data());
  for (int t = prefill; t < n; ++t) {
    const int32_t p = t, s = 0, r = 0;
    forward(w, ForwardBatch{std::span(toks).subspan(t, 1), {&p, 1}, {&s, 1}, {&r, 1}}, cache.view(), scratch, &pool(),
            logits.data() + static_cast<size_t>(t) * V);
  }
  return logits;
}

// A copy of `w`'s views whose lm_head is F32 [vocab, hidden] with rows 0..hidden-1 the
// identity and the rest zero: its logits' first `hidden` columns are the final (normed)
// hidden states, exactly (each is one product with 1 plus exact zeros).
struct IdentityHead {
  std::vector<float> values;
  WeightView view;
};
IdentityHead identity_head(const ModelConfig& c) {
  IdentityHead h;
  h.values.assign(static_cast<size_t>(c.vocab_size) * c.hidden_size, 0.0f);
  for (int i = 0; i < c.hidden_size; ++i) h.values[static_cast<size_t>(i) * c.hidden_size + i] = 1.0f;
  h.view = WeightView{.dtype = DType::kF32, .rows = c.vocab_size, .cols = c.hidden_size, .data = h.values.data()};
  return h;
}

// Checks logits [n, V] of a model whose lm_head is `head` against hidden [n, V] (first H
// columns used) times the dequantized head, in double. Bound per element, S = sum |w x|:
// fp32 accumulation 2e-5 S + 1e-6, plus the activation rounding of the FP8 / INT4 kernels
// (kernels/matmul/quant_*.cpp): bf16 x for FP8 (2^-8 S), int8 x per block of 32 for INT4
// and INT8 (repacked Q8_0) (sum |w| amax(x block) / 254). Returns the largest |error| / bound.
double check_against_reference(const std::vector<float>& logits, const std::vector<float>& hidden,
                               const WeightView& head, int64_t n) {
  const int64_t V = head.rows, H = head.cols;
  const std::vector<float> wd = dequantize_matrix(head);
  double worst = 0;
  int64_t checked = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* x = hidden.data() + i * V;
    std::vector<float> block_amax(static_cast<size_t>((H + kActQ8Block - 1) / kActQ8Block), 0.0f);
    for (int64_t k = 0; k < H; ++k) {
      float& a = block_amax[static_cast<size_t>(k / kActQ8Block)];
      a = std::max(a, std::fabs(x[k]));
    }
    for (int64_t v = 0; v < V; ++v) {
      const float* wr = wd.data() + v * H;
      double ref = 0, s = 0, int4_term = 0;
      for (int64_t k = 0; k < H; ++k) {
        ref += static_cast<double>(wr[k]) * x[k];
        s += std::fabs(static_cast<double>(wr[k]) * x[k]);
        int4_term += std::fabs(wr[k]) * block_amax[static_cast<size_t>(k / kActQ8Block)] / 254.0;
      }
      double bound = 2e-5 * s + 1e-6;
      if (head.dtype == DType::kFP8E4M3) bound += s / 256.0;
      if (head.dtype == DType::kI4 || head.dtype == DType::kI8) bound += int4_term;  // int8 x either way
      const double err = std::fabs(logits[static_cast<size_t>(i * V + v)] - ref);
      EXPECT_LE(err, bound) << "row " << i << " logit " << v << ": " << logits[static_cast<size_t>(i * V + v)]
                            << " vs reference " << ref;
      if (err > bound) return err / bound;
      worst = std::max(worst, err / bound);
      ++checked;
    }
  }
  EXPECT_EQ(checked, n * V);
  return worst;
}

struct HeadCase {
  const char* model;
  const char* body;  // --weight-dtype name, "" = as stored
  const char* head;  // --lm-head-dtype name
};

void PrintTo(const HeadCase& c, std::ostream* os) { *os << c.model << " body=" << c.body << " head=" << c.head; }

class LmHeadOnLoad : public ::testing::TestWithParam<HeadCase> {
 protected:
  // The reference bound is for the head's weights alone, with fp32 activations.
};

TEST_P(LmHeadOnLoad, LogitsEqualDequantizedHeadReference) {
  const HeadCase& hc = GetParam();
  const std::filesystem::path path = model_dir(hc.model) / "hf";
  LoadOptions body;
  if (*hc.body) {
    const WeightQuantSpec b = spec_of(hc.body);
    body.weight_dtype = b.dtype;
    body.weight_group_size = b.group_size;
  }
  LoadOptions with_head = body;
  const WeightQuantSpec head_spec = spec_of(hc.head);
  with_head.lm_head = head_spec;
  // The reference bound is for the head's weights alone, with fp32 activations.
  body.bf16_f32_activations = with_head.bf16_f32_activations = true;
  const ModelWeights q = load_ok(path, with_head);
  ModelWeights ident = load_ok(path, body);  // same body, lm_head swapped for the identity below
  const ModelWeights stored = load_ok(path, body);

  // The option took effect on lm_head alone (the fixture stores lm_head F32).
  ASSERT_EQ(stored.lm_head.dtype, DType::kF32);
  if (head_spec.dtype == DType::kQ4_0 || head_spec.dtype == DType::kQ8_0) {  // held repacked: g32, f16 scales kept
    EXPECT_EQ(q.lm_head.dtype, head_spec.dtype == DType::kQ4_0 ? DType::kI4 : DType::kI8);
    EXPECT_NE(q.lm_head.scales_f16, nullptr);
    EXPECT_EQ(q.lm_head.scale_cols, 32);
  } else {
    EXPECT_EQ(q.lm_head.dtype, head_spec.dtype);
    EXPECT_TRUE(weight_view_in_format(q.lm_head, head_spec));
  }
  EXPECT_EQ(q.lm_head.rows, stored.lm_head.rows);
  EXPECT_EQ(q.lm_head.cols, stored.lm_head.cols);
  EXPECT_EQ(q.tok_embeddings.dtype, stored.tok_embeddings.dtype);
  EXPECT_EQ(q.layers[1].wo.dtype, stored.layers[1].wo.dtype);
  // The stored head quantized by the reference quantizer is what the model holds.
  const std::vector<float> f = dequantize_matrix(stored.lm_head);
  const QuantizedMatrix expect = quantize_matrix(f.data(), f.size() / stored.lm_head.cols, stored.lm_head.cols,
                                                 head_spec);
  EXPECT_EQ(dequantize_matrix(q.lm_head), dequantize_matrix(expect.view));

  const IdentityHead id = identity_head(ident.config);
  ident.lm_head = id.view;
  const std::vector<TokenId> toks = tokens(40);
  const int prefill = 24, n = static_cast<int>(toks.size());
  const std::vector<float> got = batched_then_decode_logits(q, toks, prefill);
  const std::vector<float> hidden = batched_then_decode_logits(ident, toks, prefill);
  const double worst = check_against_reference(got, hidden, q.lm_head, n);
  std::printf("%s body=%s head=%s: max |logit - reference| / bound = %.3g\n", hc.model, hc.body, hc.head, worst);

  // And the head's precision shows in the logits (the as-stored F32 head gives others).
  const std::vector<float> base = batched_then_decode_logits(stored, toks, prefill);
  double max_diff = 0;
  for (size_t i = 0; i < got.size(); ++i) max_diff = std::max(max_diff, std::fabs(static_cast<double>(got[i]) - base[i]));
  EXPECT_GT(max_diff, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(
    Heads, LmHeadOnLoad,
    ::testing::Values(HeadCase{kDense, "", "bf16"}, HeadCase{kDense, "", "fp8"}, HeadCase{kDense, "", "int4-g32"},
                      HeadCase{kDense, "", "int4-g128"}, HeadCase{kDense, "", "q8_0"}, HeadCase{kDense, "", "q4_0"},
                      HeadCase{kDense, "int4-g32", "int4-g32"}, HeadCase{kMoe, "int4-g32", "fp8"},
                      HeadCase{kMoe, "fp8", "int4-g32"}),
    [](const ::testing::TestParamInfo<HeadCase>& info) {
      std::string s = std::string(info.param.model == kDense ? "dense" : "moe") + "_body_" +
                      (*info.param.body ? info.param.body : "stored") + "_head_" + info.param.head;
      for (char& ch : s) if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return s;
    });

TEST(LmHeadOnLoad, DefaultKeepsLmHeadAsStoredWithQuantizedBody) {
  const ModelWeights w = load_ok(model_dir(kDense) / "hf", LoadOptions{DType::kI4, 32});
  EXPECT_EQ(w.layers[0].wq.dtype, DType::kI4);
  EXPECT_EQ(w.lm_head.dtype, DType::kF32);
}

TEST(LmHeadOnLoad, HeadAlreadyInTheTargetIsKeptExact) {
  ModelWeights w = load_ok(model_dir(kDense) / "hf", LoadOptions{.lm_head = spec_of("int4-g32")});
  const WeightView before = w.lm_head;
  const size_t owned = w.arena.allocated();
  ASSERT_TRUE(quantize_lm_head(w, spec_of("int4-g32")).is_ok());
  EXPECT_EQ(w.lm_head.data, before.data);
  EXPECT_EQ(w.arena.allocated(), owned);
  // Another group size is a conversion.
  ASSERT_TRUE(quantize_lm_head(w, spec_of("int4-g128")).is_ok());
  EXPECT_NE(w.lm_head.data, before.data);
  EXPECT_EQ(w.lm_head.scale_cols, 128);
}

// Tied embeddings (a GGUF without output.weight): lm_head is a view of tok_embeddings.
// Quantizing it makes a copy; the embedding rows the forward reads stay the stored F32 ones.
TEST(LmHeadOnLoad, TiedHeadGetsItsOwnCopyAndEmbeddingsStayExact) {
  auto f = GgufFile::open(model_dir(kDense) / "gguf" / (std::string(kDense) + "-f32.gguf"));
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  testing::GgufWriter g = testing::gguf_writer_from(*f);
  g.erase_tensor("output.weight");
  const auto dir = testing::fresh_temp_dir("lm_head_tied");
  testing::write_file(dir / "tied.gguf", g.serialize());

  const ModelWeights stored = load_ok(dir / "tied.gguf");
  ASSERT_TRUE(stored.config.tie_word_embeddings);
  ASSERT_EQ(stored.lm_head.data, stored.tok_embeddings.data);
  const WeightQuantSpec spec = spec_of("int4-g32");
  const ModelWeights q = load_ok(dir / "tied.gguf", LoadOptions{.lm_head = spec});
  EXPECT_TRUE(q.config.tie_word_embeddings);
  EXPECT_NE(q.lm_head.data, q.tok_embeddings.data);
  EXPECT_EQ(q.lm_head.dtype, DType::kI4);
  EXPECT_EQ(q.lm_head.scale_cols, 32);
  // Embeddings: same F32 values, still read from the file mapping.
  EXPECT_EQ(q.tok_embeddings.dtype, DType::kF32);
  const std::vector<float> emb = dequantize_matrix(q.tok_embeddings);
  EXPECT_EQ(emb, dequantize_matrix(stored.tok_embeddings));
  // The head is the embeddings quantized.
  const QuantizedMatrix expect = quantize_matrix(emb.data(), q.tok_embeddings.rows, q.tok_embeddings.cols, spec);
  EXPECT_EQ(dequantize_matrix(q.lm_head), dequantize_matrix(expect.view));
  // Bytes of both count now (the head is no longer shared).
  EXPECT_EQ(q.weight_bytes(), stored.weight_bytes() + q.lm_head.bytes() + q.lm_head.rows * (q.lm_head.cols / 32) * 2);  // bf16 scales

  // Hidden states are those of the stored model bit for bit (the embedding path is
  // untouched), and the logits follow the quantized head.
  ModelWeights ident_q = load_ok(dir / "tied.gguf", LoadOptions{.lm_head = spec});
  ModelWeights ident_s = load_ok(dir / "tied.gguf");
  const IdentityHead id = identity_head(stored.config);
  ident_q.lm_head = id.view;
  ident_s.lm_head = id.view;
  const std::vector<TokenId> toks = tokens(20);
  const std::vector<float> hidden = batched_then_decode_logits(ident_q, toks, 12);
  EXPECT_EQ(hidden, batched_then_decode_logits(ident_s, toks, 12));
  check_against_reference(batched_then_decode_logits(q, toks, 12), hidden, q.lm_head, 20);
  std::filesystem::remove_all(dir);
}

TEST(LmHeadOnLoad, BadTargetsAreClearErrorsAndLeaveWeightsUnchanged) {
  // A dtype no weight format has.
  Result<ModelWeights> f16 = load_model(model_dir(kDense) / "hf", LoadOptions{.lm_head = WeightQuantSpec{DType::kF16}});
  ASSERT_FALSE(f16.is_ok());
  EXPECT_EQ(f16.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(f16.status().message().find("lm_head: unsupported weight dtype 'f16'"), std::string::npos)
      << f16.status().message();

  // Shapes the target cannot hold: hidden 48 is not a multiple of the INT4 group or of 32.
  std::vector<float> values(10 * 48, 0.5f);
  ModelWeights w;
  w.source = "hand-built";
  w.lm_head = WeightView{.dtype = DType::kF32, .rows = 10, .cols = 48, .data = values.data()};
  for (const char* name : {"int4-g32", "int4-g128", "q8_0", "q4_0"}) {
    const Status s = quantize_lm_head(w, spec_of(name));
    ASSERT_FALSE(s.is_ok()) << name;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("hand-built: lm_head [10, 48] cannot be stored as " + std::string(name)),
              std::string::npos)
        << s.message();
    EXPECT_EQ(w.lm_head.data, values.data());
    EXPECT_EQ(w.lm_head.dtype, DType::kF32);
    EXPECT_EQ(w.arena.allocated(), 0u);
  }
  // FP8 blocks may be partial: any shape works.
  ASSERT_TRUE(quantize_lm_head(w, spec_of("fp8")).is_ok());
  EXPECT_EQ(w.lm_head.dtype, DType::kFP8E4M3);
}

// GGUF Q4_0 (here quantized on load) is held repacked for the INT4 kernel: every matrix keeps
// its values, the body and lm_head become INT4 g32 with f16 scales, and with the repack off
// the same load keeps Q4_0. A tied head (lm_head viewing the embeddings) and the embeddings
// end up sharing the one repacked copy.
TEST(RepackQ4_0, KeepsValuesAndSharesATiedHead) {
  const std::filesystem::path path = model_dir(kMoe) / "hf";
  LoadOptions opts;
  opts.weight_dtype = DType::kQ4_0;
  opts.weight_group_size = 32;
  opts.lm_head = spec_of("q4_0");
  const ModelWeights packed = load_ok(path, opts);
  opts.prepare_for_kernels = false;
  ModelWeights stored = load_ok(path, opts);
  int matrices = 0;
  auto same = [&](const WeightView& a, const WeightView& b, const char* what) {
    EXPECT_EQ(a.dtype, DType::kI4) << what;
    EXPECT_NE(a.scales_f16, nullptr) << what;
    EXPECT_EQ(b.dtype, DType::kQ4_0) << what;
    EXPECT_EQ(a.bytes() + a.scale_bytes(), b.bytes()) << what;
    EXPECT_EQ(dequantize_matrix(a), dequantize_matrix(b)) << what;
    ++matrices;
  };
  same(packed.lm_head, stored.lm_head, "lm_head");
  same(packed.layers[2].wq, stored.layers[2].wq, "wq");
  same(packed.layers[3].wo, stored.layers[3].wo, "wo");
  same(packed.layers[0].expert_up[5], stored.layers[0].expert_up[5], "expert_up");
  same(packed.layers[1].expert_down[7], stored.layers[1].expert_down[7], "expert_down");
  EXPECT_EQ(matrices, 5);
  EXPECT_EQ(packed.tok_embeddings.dtype, stored.tok_embeddings.dtype);  // untied: embeddings as stored

  // Tied: lm_head and tok_embeddings view the same Q4_0 tensor.
  stored.tok_embeddings = stored.lm_head;
  const std::vector<float> before = dequantize_matrix(stored.lm_head);
  const int repacked = repack_ggml_for_kernels(stored);
  EXPECT_EQ(repacked, 1 + 4 * (4 + 3 * 8));  // lm_head + per layer q/k/v/o and 8 experts' gate/up/down
  EXPECT_EQ(stored.lm_head.dtype, DType::kI4);
  EXPECT_EQ(stored.tok_embeddings.data, stored.lm_head.data);
  EXPECT_EQ(stored.tok_embeddings.scales_f16, stored.lm_head.scales_f16);
  EXPECT_EQ(dequantize_matrix(stored.tok_embeddings), before);
  EXPECT_EQ(repack_ggml_for_kernels(stored), 0);  // nothing left to repack
}

// The default load copies the matrices decode streams out of the mapped file into the
// huge-page arena: same values and format, none left in the file, lm_head moved, the untied
// embeddings (one row read per token) left in place; as-stored loads keep the file views.
TEST(MoveMatricesToArena, DefaultLoadCopiesStreamedMatricesOutOfTheFile) {
  const std::filesystem::path path = model_dir(kMoe) / "gguf" / "tinystories-mixtral-3.6m-f16.gguf";
  const ModelWeights moved = load_ok(path);
  const ModelWeights stored = load_ok(path, LoadOptions{.prepare_for_kernels = false});
  ASSERT_EQ(moved.files.size(), 1u);
  const auto in_file_of = [](const ModelWeights& w, const void* p) {
    const uint8_t* file = w.files[0]->data();
    return static_cast<const uint8_t*>(p) >= file && static_cast<const uint8_t*>(p) < file + w.files[0]->size();
  };
  const auto in_file = [&](const void* p) { return in_file_of(moved, p); };
  int checked = 0;
  auto check = [&](const WeightView& a, const WeightView& b) {
    EXPECT_EQ(a.dtype, b.dtype);
    EXPECT_TRUE(moved.arena.contains(a.data));
    EXPECT_FALSE(in_file(a.data));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data) % 64, 0u);
    EXPECT_TRUE(stored.arena.contains(b.data) || in_file_of(stored, b.data));
    ASSERT_EQ(a.bytes(), b.bytes());
    EXPECT_EQ(0, std::memcmp(a.data, b.data, static_cast<size_t>(a.bytes())));
    ++checked;
  };
  check(moved.lm_head, stored.lm_head);
  for (size_t l = 0; l < moved.layers.size(); ++l) {
    check(moved.layers[l].wq, stored.layers[l].wq);
    check(moved.layers[l].wv, stored.layers[l].wv);
    for (size_t e = 0; e < moved.layers[l].expert_down.size(); ++e) {
      check(moved.layers[l].expert_down[e], stored.layers[l].expert_down[e]);
    }
  }
  EXPECT_EQ(checked, 1 + 4 * (2 + 8));
  EXPECT_TRUE(in_file(moved.tok_embeddings.data));
  EXPECT_TRUE(in_file_of(stored, stored.layers[1].expert_up[3].data));
  EXPECT_FALSE(in_file(moved.layers[1].expert_up[3].data));
  ModelWeights again = load_ok(path);
  EXPECT_EQ(move_matrices_to_arena(again), 0);  // nothing left outside
}

// A tiled load against the row-major load of the same file, on lm_head, a K, an O and an
// expert down projection: the tiled matrix has `layout`, sits in the arena and holds the
// row-major values; `more` checks it further. The tiled load takes no more arena.
void expect_tiled_like_rows(const ModelWeights& tiled, const ModelWeights& rows, WeightLayout layout,
                            const std::function<void(const WeightView&)>& more) {
  int checked = 0;
  auto check = [&](const WeightView& a, const WeightView& b) {
    EXPECT_EQ(a.layout, layout);
    EXPECT_EQ(b.layout, WeightLayout::kRows);
    EXPECT_TRUE(tiled.arena.contains(a.data));
    EXPECT_EQ(dequantize_matrix(a), dequantize_matrix(b));
    more(a);
    ++checked;
  };
  check(tiled.lm_head, rows.lm_head);
  check(tiled.layers[1].wk, rows.layers[1].wk);
  check(tiled.layers[2].wo, rows.layers[2].wo);
  check(tiled.layers[3].expert_down[6], rows.layers[3].expert_down[6]);
  EXPECT_EQ(checked, 4);
  EXPECT_LE(tiled.arena.allocated(), rows.arena.allocated());
}

// The logits of a 16-row tile load against a row-major one (logit_diff). On AVX2 both layouts
// run the group arithmetic (exact group sums, one fma per group): the same bits. On AVX-512 the
// row-major kernels round x alike and sum the same int products in another fp32 order; an
// expert flipped by it would show as one large difference, so the bound is on the mean and a
// loose maximum. Where the row-major matrices run the exact fallback, the difference is the
// tiles' int8 rounding of x (W4A8 / W8A8 against fp32 activations, 0.03-0.08 mean on these
// models), so only the mean is held, to that error's order.
void expect_tiles_close_to_rows(double mean_diff, double max_diff, const WeightView& row_major) {
  if (cpu_isa() == CpuIsa::kAvx2) {
    EXPECT_EQ(max_diff, 0.0) << "AVX2 runs both layouts with one arithmetic";
    return;
  }
  EXPECT_GT(max_diff, 0.0) << "the 16-row tiles ran the row-major arithmetic";
  if (matmul_internal::matmul_quant_avx512_supports(row_major) && cpu_isa() == CpuIsa::kAvx512Bf16) {
    EXPECT_LT(mean_diff, 1e-3);
    EXPECT_LT(max_diff, 0.5);
  } else {
    EXPECT_LT(mean_diff, 0.15);
  }
}

// Logits of two loads of one model: the mean and the largest absolute difference.
std::pair<double, double> logit_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double max_diff = 0, sum_diff = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    EXPECT_TRUE(std::isfinite(a[i]));
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    max_diff = std::max(max_diff, d);
    sum_diff += d;
  }
  return {sum_diff / static_cast<double>(std::max<size_t>(a.size(), 1)), max_diff};
}

// INT4 g32 loads lay the matrices out in the tiles asked for (or the kernels' choice,
// matmul_int4_layout): quantized on load (HF BF16 -> INT4 g32 with an INT4 head) and repacked
// (GGUF Q4_0, f16 scales). The tiled views sit in the arena, hold the same values as a
// --int4-layout rows load and take no more arena (no row-major copy left over). 8-row tiles give
// the row-major logits bit for bit (prefill + decode); 16-row tiles (exact group sums, one fma per
// group) give logits within rounding of them, and not the same bits.
TEST(Int4Tiles, LoadLaysOutTilesWithTheSameOrCloseLogits) {
  const std::filesystem::path path = model_dir(kMoe) / "hf";
  int layouts_run = 0;
  for (const WeightLayout layout : {WeightLayout::kInt4Tiles8, WeightLayout::kInt4Tiles16}) {
    if (!matmul_runs_int4_layout(layout)) continue;
    ++layouts_run;
    for (const char* target : {"int4-g32", "q4_0"}) {
      SCOPED_TRACE(std::string(target) + (layout == WeightLayout::kInt4Tiles8 ? " tiles8" : " tiles16"));
      LoadOptions opts;
      const WeightQuantSpec spec = spec_of(target);
      opts.weight_dtype = spec.dtype;
      opts.weight_group_size = 32;
      opts.lm_head = spec;
      opts.int4_layout = layout;
      const ModelWeights tiled = load_ok(path, opts);
      opts.int4_layout = WeightLayout::kRows;
      const ModelWeights rows = load_ok(path, opts);
      expect_tiled_like_rows(tiled, rows, layout,
                             [&](const WeightView& a) { EXPECT_EQ(a.scales_f16 != nullptr, std::string(target) == "q4_0"); });
      const std::vector<TokenId> toks = tokens(24);
      const std::vector<float> a = batched_then_decode_logits(tiled, toks, 16);
      const std::vector<float> b = batched_then_decode_logits(rows, toks, 16);
      ASSERT_EQ(a.size(), b.size());
      if (layout == WeightLayout::kInt4Tiles8) {
        EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4));
        continue;
      }
      const auto [mean_diff, max_diff] = logit_diff(a, b);
      expect_tiles_close_to_rows(mean_diff, max_diff, rows.lm_head);
    }
  }
  // Every AVX2 CPU runs the 16-row tiles; below it, no tile layout (and the test says so).
  if (static_cast<int>(cpu_isa()) >= static_cast<int>(CpuIsa::kAvx2)) {
    EXPECT_GE(layouts_run, 1);
  } else {
    GTEST_SKIP() << "no INT4 tile layout runs below AVX2";
  }
  // The kernels' choice is a layout this CPU runs: 16-row tiles wherever they run.
  EXPECT_TRUE(matmul_runs_int4_layout(matmul_int4_layout()));
  EXPECT_EQ(matmul_int4_layout() == WeightLayout::kInt4Tiles16, matmul_runs_int4_layout(WeightLayout::kInt4Tiles16));
}

// Q8_0 loads lay the matrices out in 16-row tiles where the kernels read them
// (matmul_prefers_int8_tiles): quantized on load from HF BF16, head included. The tiles sit in
// the arena, hold the same values as a --int8-layout rows load, take no more arena, and give
// logits within rounding of the row-major kernels' (their per-group arithmetic rounds
// differently, so not the same bits), for a batched prefill and the decode steps after it.
TEST(Int8Tiles, LoadLaysOutTilesWithCloseLogits) {
  const bool tiles = matmul_prefers_int8_tiles();
  LoadOptions opts;
  opts.weight_dtype = DType::kQ8_0;
  opts.lm_head = spec_of("q8_0");
  const std::filesystem::path path = model_dir(kMoe) / "hf";
  const ModelWeights tiled = load_ok(path, opts);
  opts.int8_tiles = false;
  const ModelWeights rows = load_ok(path, opts);
  expect_tiled_like_rows(tiled, rows, tiles ? WeightLayout::kInt8Tiles16 : WeightLayout::kRows,
                         [](const WeightView& a) { EXPECT_EQ(a.dtype, DType::kI8); });
  const std::vector<TokenId> toks = tokens(24);
  const std::vector<float> a = batched_then_decode_logits(tiled, toks, 16);
  const std::vector<float> b = batched_then_decode_logits(rows, toks, 16);
  ASSERT_EQ(a.size(), b.size());
  const auto [mean_diff, max_diff] = logit_diff(a, b);
  if (tiles) {
    expect_tiles_close_to_rows(mean_diff, max_diff, rows.lm_head);
  } else {
    EXPECT_EQ(max_diff, 0.0);
  }
}

}  // namespace
}  // namespace densa
