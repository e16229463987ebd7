// Tensor and expert parallelism over real MPI ranks (`mpirun -n 2` and `-n 4`, ctest runs both;
// tests/mpi/CMakeLists: the filters pick each world size's suites). Each test is one SPMD
// program: every rank loads its slice of a fixture (model/shard.h); rank 0 runs the engine and
// asserts, the others run run_engine_follower until rank 0's engine shuts down.
//  - greedy continuations equal the fixtures' golden ones (fp32 KV, the fp32-activation path
//    of the golden engine test), and each token's logprob and every step's top 5 (ids in
//    order, logprobs) are within kLogprobTolerance of one process running the same requests
//    (the split sums add in another order); also with BF16 and FP8 KV;
//  - bit-identical logprobs run to run, and with 16 prompts batched or one at a time;
//  - each rank holds 1/tp of the attention matrices and 1/(tp x ep) of the routed experts'.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/engine_test_util.h"
#include "kv/fault_injection.h"
#include "kv_scales_checkpoint.h"
#include "model/model_loader.h"
#include "mpi_test_util.h"
#include "test_util.h"

namespace densa {
namespace {

using testing::drain;
using testing::model_dir;
using testing::read_json;
using testing::world;

// fp32 sums in another order (attention output and FFN down split over ranks): logprobs move
// by ~1e-6 on these fixtures; a wrong slice moves them by whole units.
constexpr double kLogprobTolerance = 1e-3;

struct Run {
  std::vector<std::vector<TokenId>> tokens;  // per prompt
  std::vector<std::vector<float>> logprobs;  // per prompt, per token: the chosen token's
  std::vector<std::vector<float>> tops;      // per prompt: each token's top 5, id then logprob
};

std::vector<GenerateRequest> golden_requests(const nlohmann::json& golden) {
  std::vector<GenerateRequest> out = testing::golden_greedy_requests(golden);
  for (GenerateRequest& r : out) r.num_top_logprobs = 5;  // the chosen token's and the top 5: the logits beyond greedy
  return out;
}

// The requests submitted together (batched) or each after the previous finished.
Run run(Engine& engine, const std::vector<GenerateRequest>& requests, bool batched) {
  Run out;
  std::vector<std::shared_ptr<RequestStream>> streams;
  auto collect = [&](RequestStream& s) {
    const testing::Collected c = drain(s);
    out.tokens.push_back(c.tokens);
    std::vector<float> lp, tops;
    for (const TokenEvent& e : c.events) {
      if (!e.token) continue;
      lp.push_back(e.logprob);
      for (const auto& [id, top] : e.top_logprobs) {
        tops.push_back(static_cast<float>(id));  // exact in a float: the fixtures' ids are < 2^24
        tops.push_back(top);
      }
    }
    out.logprobs.push_back(lp);
    out.tops.push_back(tops);
  };
  for (const GenerateRequest& r : requests) {
    auto s = engine.submit(r);
    EXPECT_TRUE(s.is_ok()) << s.status().to_string();
    if (!s.is_ok()) return out;
    if (batched) {
      streams.push_back(*s);
    } else {
      collect(**s);
    }
  }
  for (auto& s : streams) collect(*s);
  return out;
}

EngineConfig engine_config() {
  EngineConfig c;
  c.kv_dtype = DType::kF32;
  c.chunked_prefill_size = 8;  // prompts split across steps, mixed with the others' decodes
  c.num_threads = 1;           // ranks share the machine's cores
  // Every batch that reads cached KV is checked, tags and page digests, on every rank's shard
  // (Runner::follow): the checks must pass on healthy runs and change no output.
  c.kv_integrity = KvIntegrityPolicy{KvIntegrityMode::kDigest, 1, 1};
  return c;
}

struct Group {
  std::unique_ptr<Communicator> tp;
  ParallelComms comms;
};

Group make_group(int tp, int ep) {
  Group g;
  const ParallelLayout layout = ParallelLayout::of_rank(tp, ep, world().rank());
  g.tp = world().split(layout.ep_rank, layout.tp_rank);
  g.comms = ParallelComms{layout, &world(), g.tp.get()};
  return g;
}

// This rank's slice of a fixture's F16 GGUF, fp32 activations on its F16 matrices (as the
// golden tests).
Result<ModelWeights> load_fixture_slice(const std::string& model, const Group& group) {
  LoadOptions opts;
  opts.parallel = group.comms.layout;
  opts.bf16_f32_activations = true;
  return load_model(model_dir(model) / "gguf" / (model + "-f16.gguf"), opts);
}

// Bytes of the matrices this process holds, by how they are split: attention (tp ways; MLA's
// projections are replicated), dense FFNs (tp ways), routed experts (tp x ep ways), the shared
// expert (tp ways, in expert group 0 only).
struct MatrixBytes {
  int64_t attention = 0;
  int64_t dense = 0;
  int64_t experts = 0;
  int64_t shared = 0;
};

MatrixBytes matrix_bytes(const ModelWeights& w) {
  auto b = [](const WeightView& v) { return v.empty() ? int64_t{0} : v.bytes() + v.scale_bytes(); };
  MatrixBytes m;
  for (const LayerWeights& l : w.layers) {
    m.attention += b(l.wq) + b(l.wk) + b(l.wv) + b(l.wo) + b(l.q_a) + b(l.q_b) + b(l.kv_a) + b(l.kv_b);
    for (size_t e = 0; e < l.expert_gate.size(); ++e) m.experts += b(l.expert_gate[e]) + b(l.expert_up[e]) + b(l.expert_down[e]);
    m.dense += b(l.w_gate) + b(l.w_up) + b(l.w_down);
    m.shared += b(l.shared_gate) + b(l.shared_up) + b(l.shared_down);
  }
  return m;
}

int64_t sum(const std::vector<int64_t>& v) {
  int64_t s = 0;
  for (int64_t x : v) s += x;
  return s;
}

// A model (GGUF file or HF directory) at one layout, checked against its golden continuations
// (golden.json: prompts' prompt_ids and greedy_ids) and against one process.
// With `weight_dtype` each rank quantizes its slice on load (as `serve --weight-dtype` does),
// and the one-process reference quantizes the whole model: then the continuations are
// compared with that reference only (the golden ones are fp32), and the weight bytes not at
// all (FP8's 128 x 128 scale blocks do not halve with the rows).
void check_model(const std::string& model, const std::filesystem::path& path, const std::filesystem::path& golden_path,
                 int tp, int ep, std::optional<DType> weight_dtype = std::nullopt,
                 double tolerance = kLogprobTolerance, DType kv_dtype = DType::kF32,
                 bool checkpoint_kv_scales = false) {
  ASSERT_EQ(world().size(), tp * ep) << "run under mpirun -n " << tp * ep;
  Group group = make_group(tp, ep);
  LoadOptions opts;
  opts.weight_dtype = weight_dtype;
  opts.weight_group_size = 32;
  opts.parallel = group.comms.layout;
  opts.bf16_f32_activations = true;  // fp32 activations on F16 / BF16 matrices, as the golden tests
  auto loaded = load_model(path, opts);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  EngineConfig cfg = engine_config();
  cfg.kv_dtype = kv_dtype;
  cfg.parallel = &group.comms;
  // Static fp8 KV scales from the checkpoint: each rank reads its own kv heads' (serve
  // --kv-scales checkpoint), the one-process reference all of them.
  auto checkpoint_scales = [&](const ModelWeights& w) -> std::optional<KvScales> {
    if (!checkpoint_kv_scales) return std::nullopt;
    Result<std::optional<KvScales>> s = read_checkpoint_kv_scales(w);
    EXPECT_TRUE(s.is_ok() && s->has_value()) << (s.is_ok() ? std::string("none") : s.status().to_string());
    return s.is_ok() ? *s : std::nullopt;
  };
  cfg.kv_scales = checkpoint_scales(loaded.value());

  // Memory: every rank's share, gathered (before the engines, so every rank takes part).
  const MatrixBytes mine = matrix_bytes(loaded.value());
  const std::vector<int64_t> attention = world().all_gather(mine.attention);
  const std::vector<int64_t> dense = world().all_gather(mine.dense);
  const std::vector<int64_t> experts = world().all_gather(mine.experts);
  const std::vector<int64_t> shared = world().all_gather(mine.shared);
  const std::vector<int64_t> embeddings = world().all_gather(loaded->tok_embeddings.bytes());

  if (!group.comms.leader()) {
    Status s = run_engine_follower(loaded.value(), cfg);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    return;
  }
  LoadOptions whole_opts = opts;
  whole_opts.parallel = ParallelLayout{};
  auto whole = load_model(path, whole_opts);
  ASSERT_TRUE(whole.is_ok()) << whole.status().to_string();
  const MatrixBytes full = matrix_bytes(whole.value());
  // MLA's latent projections q_a / kv_a are replicated, its query-head matrices split.
  const bool mla = whole->config.is_mla();
  int64_t latent = 0;
  if (mla) {
    for (const LayerWeights& l : whole->layers) latent += l.q_a.bytes() + l.q_a.scale_bytes() + l.kv_a.bytes() + l.kv_a.scale_bytes();
  }
  for (int r = 0; r < tp * ep && !weight_dtype; ++r) {
    EXPECT_EQ((attention[r] - latent) * tp, full.attention - latent) << "rank " << r << " attention bytes";
    EXPECT_EQ(dense[r] * tp, full.dense) << "rank " << r << " dense FFN bytes";
    EXPECT_EQ(experts[r] * tp * ep, full.experts) << "rank " << r << " routed expert bytes";
  }
  if (!weight_dtype) {
    EXPECT_EQ(sum(shared), full.shared) << "shared expert bytes, over all ranks";
  }
  // The embeddings' vocabulary is split over tp when tp divides it (each token's row on one rank).
  const bool vocab_split = tp > 1 && whole->tok_embeddings.rows % tp == 0;
  for (int r = 0; r < tp * ep; ++r) {
    EXPECT_EQ(embeddings[r] * (vocab_split ? tp : 1), whole->tok_embeddings.bytes()) << "rank " << r << " embedding bytes";
  }
  const int64_t rank0 = attention[0] + dense[0] + experts[0] + shared[0];
  const int64_t whole_bytes = full.attention + full.dense + full.experts + full.shared;
  std::printf("[ note ] %s tp %d ep %d: rank 0 holds %lld of %lld matrix bytes (%.3f); routed experts %lld of %lld\n",
              model.c_str(), tp, ep, static_cast<long long>(rank0), static_cast<long long>(whole_bytes),
              static_cast<double>(rank0) / static_cast<double>(whole_bytes), static_cast<long long>(experts[0]),
              static_cast<long long>(full.experts));

  const auto golden = read_json(golden_path);
  // The golden prompts, then shorter cuts of them up to a batch of 16 (16 new tokens each).
  std::vector<GenerateRequest> requests = golden_requests(golden);
  const size_t num_golden = requests.size();
  for (size_t k = 0; requests.size() < 16; ++k) {
    GenerateRequest r = requests[k % num_golden];
    const size_t keep = std::max<size_t>(2, r.prompt.size() - 1 - k / num_golden);
    r.prompt.resize(std::min(keep, r.prompt.size()));
    r.max_new_tokens = 16;
    requests.push_back(r);
  }
  Run batched, single, again;
  {
    auto engine = Engine::create(loaded.value(), cfg);
    ASSERT_TRUE(engine.is_ok()) << engine.status().to_string();
    batched = run(**engine, requests, true);
    single = run(**engine, requests, false);
    again = run(**engine, requests, true);
  }  // shut down: the followers return
  Run reference;
  {
    EngineConfig one = engine_config();
    one.kv_dtype = kv_dtype;
    one.kv_scales = checkpoint_scales(whole.value());
    if (checkpoint_kv_scales) {  // each rank's scales are its heads' share of the whole model's
      ASSERT_TRUE(one.kv_scales && cfg.kv_scales);
      const int H = cfg.kv_scales->num_kv_heads;
      for (int l = 0; l < one.kv_scales->num_layers; ++l) {
        for (int h = 0; h < H; ++h) EXPECT_EQ(cfg.kv_scales->at(l, 1, h), one.kv_scales->at(l, 1, h)) << l << " " << h;
      }
      EXPECT_EQ(one.kv_scales->num_kv_heads, H * tp);
    }
    auto engine = Engine::create(whole.value(), one);
    ASSERT_TRUE(engine.is_ok()) << engine.status().to_string();
    reference = run(**engine, requests, true);
  }
  ASSERT_EQ(batched.tokens.size(), requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    if (!weight_dtype && kv_dtype == DType::kF32 && i < num_golden) {
      const auto want = golden["prompts"][i]["greedy_ids"].get<std::vector<TokenId>>();
      EXPECT_EQ(batched.tokens[i], want) << "prompt " << i << " (golden)";
    }
    EXPECT_EQ(batched.tokens[i], reference.tokens[i]) << "prompt " << i << " (one process)";
    EXPECT_EQ(single.tokens[i], batched.tokens[i]) << "prompt " << i << " batch 1 vs batched";
    // Bit for bit: the same sums in the same order whatever the batch or the run.
    EXPECT_EQ(single.logprobs[i], batched.logprobs[i]) << "prompt " << i << " batch 1 vs batched";
    EXPECT_EQ(again.logprobs[i], batched.logprobs[i]) << "prompt " << i << " run to run";
    EXPECT_EQ(single.tops[i], batched.tops[i]) << "prompt " << i << " top 5, batch 1 vs batched";
    EXPECT_EQ(again.tops[i], batched.tops[i]) << "prompt " << i << " top 5, run to run";
    // The top 5 of every step against one process: the same ids in the same order, logprobs
    // within the tolerance. (Not for weights quantized per slice, whose near ties reorder.)
    if (tolerance == kLogprobTolerance) {
      ASSERT_EQ(batched.tops[i].size(), reference.tops[i].size()) << "prompt " << i;
      for (size_t t = 0; t < batched.tops[i].size(); t += 2) {
        EXPECT_EQ(batched.tops[i][t], reference.tops[i][t]) << "prompt " << i << " top-5 entry " << t / 2;
        EXPECT_NEAR(batched.tops[i][t + 1], reference.tops[i][t + 1], tolerance) << "prompt " << i;
      }
    }
    ASSERT_EQ(batched.logprobs[i].size(), reference.logprobs[i].size());
    double worst = 0;
    for (size_t t = 0; t < batched.logprobs[i].size(); ++t) {
      worst = std::max(worst, std::abs(double{batched.logprobs[i][t]} - reference.logprobs[i][t]));
    }
    EXPECT_LE(worst, tolerance) << "prompt " << i << " logprobs vs one process";
    if (i < num_golden) std::printf("[ note ] %s tp %d ep %d prompt %zu: largest logprob difference from one process %.3g\n",
                model.c_str(), tp, ep, i, worst);
  }
}

// A trained fixture (tinystories-*: F16 GGUF, golden from the fixture's PyTorch run).
void check_layout(const std::string& model, int tp, int ep) {
  check_model(model, model_dir(model) / "gguf" / (model + "-f16.gguf"), model_dir(model) / "golden" / "golden.json", tp,
              ep);
}

// A family's tiny random-weight checkpoint (tests/data/reference/<arch>: HF BF16, golden from
// the PyTorch reference in tests/reference).
void check_family(const std::string& arch, int tp, int ep) {
  const std::filesystem::path dir = std::filesystem::path(DENSA_SOURCE_DIR) / "tests" / "data" / "reference" / arch;
  check_model(arch, dir, dir / "golden.json", tp, ep);
}

TEST(World2, LlamaTensorParallel2) { check_layout("tinystories-llama-1m", 2, 1); }
TEST(World2, MixtralTensorParallel2) { check_layout("tinystories-mixtral-3.6m", 2, 1); }
TEST(World2, MixtralExpertParallel2) { check_layout("tinystories-mixtral-3.6m", 1, 2); }
TEST(World2, Qwen3MoeTensorParallel2) { check_family("qwen3_moe", 2, 1); }
TEST(World2, Qwen3MoeExpertParallel2) { check_family("qwen3_moe", 1, 2); }
TEST(World2, Qwen2MoeTensorParallel2) { check_family("qwen2_moe", 2, 1); }  // gated shared expert, qkv bias
TEST(World2, Qwen2MoeExpertParallel2) { check_family("qwen2_moe", 1, 2); }
TEST(World2, Glm4MoeTensorParallel2) { check_family("glm4_moe", 2, 1); }  // dense first layer, grouped sigmoid routing
TEST(World2, Glm4MoeExpertParallel2) { check_family("glm4_moe", 1, 2); }
TEST(World2, DeepSeekV3ExpertParallel2) { check_family("deepseek_v3", 1, 2); }  // MLA: attention replicated
TEST(World2, DeepSeekV3TensorParallel2) { check_family("deepseek_v3", 2, 1); }  // MLA: query heads split
TEST(World2, DeepSeekV3NoQLoraTensorParallel2) { check_family("deepseek_v3_no_q_lora", 2, 1); }
TEST(World2, GlmMoeDsaTensorParallel2) { check_family("glm_moe_dsa", 2, 1); }  // DSA indexer replicated
// Quantized on load, each rank its slice. INT4 g32 keeps every weight group whole (row
// slices, and column slices on group boundaries), so the weights are the whole model's; but
// the W4A8 kernels quantize activations to int8 with one scale per 128 columns, and the
// fixture's row-parallel slices (o_proj 64, down 128 of 256 columns) cut those blocks, so
// o_proj sees other activation scales than in one process: measured up to 0.023 in a
// logprob, greedy equal. (Slices a multiple of 128 columns, as in real models, keep them.)
// (FP8's 128 x 128 scale blocks do not fit the fixtures' 64-row slices: each rank's blocks
// would be other blocks than one process's, a different model; real checkpoints' slices, a
// multiple of 128 rows, keep them.)
TEST(World2, MixtralTensorParallel2Int4) {
  check_model("mixtral-int4", model_dir("tinystories-mixtral-3.6m") / "gguf" / "tinystories-mixtral-3.6m-f16.gguf",
              model_dir("tinystories-mixtral-3.6m") / "golden" / "golden.json", 2, 1, DType::kI4, 0.05);
}
// BF16 and FP8 KV (dynamic per-token scales): each rank stores its own heads' K / V rows,
// computed from the same weight rows as in one process, so the pages hold the same values and
// only the split sums differ. MLA's latent row is replicated, every rank storing it whole.
TEST(World2, MixtralTensorParallel2Fp8Kv) {
  check_model("mixtral-fp8kv", model_dir("tinystories-mixtral-3.6m") / "gguf" / "tinystories-mixtral-3.6m-f16.gguf",
              model_dir("tinystories-mixtral-3.6m") / "golden" / "golden.json", 2, 1, std::nullopt, kLogprobTolerance,
              DType::kFP8E4M3);
}
// Static fp8 KV scales from the checkpoint, one per kv head (calibrated on the whole model and
// written as k_scale / v_scale [4] tensors): each of the two ranks reads its own two heads'.
TEST(World2, LlamaTensorParallel2StaticFp8KvScalesFromTheCheckpoint) {
  namespace fs = std::filesystem;
  const fs::path dir = testing::checkpoint_with_kv_scales(model_dir("tinystories-llama-1m") / "hf", "mpi_llama");
  check_model("llama-static-fp8kv", dir, model_dir("tinystories-llama-1m") / "golden" / "golden.json", 2, 1,
              std::nullopt, kLogprobTolerance, DType::kFP8E4M3, /*checkpoint_kv_scales=*/true);
  fs::remove_all(dir);
}
TEST(World2, DeepSeekV3TensorParallel2Bf16Kv) {
  const std::filesystem::path dir = std::filesystem::path(DENSA_SOURCE_DIR) / "tests/data/reference/deepseek_v3";
  check_model("deepseek_v3-bf16kv", dir, dir / "golden.json", 2, 1, std::nullopt, kLogprobTolerance, DType::kBF16);
}

// Expert parallel slices no matrix: Q4_0 (repacked to the W4A8 layout) gives one process's
// values and, top-2 partial sums adding in the same order, its logprobs.
TEST(World2, MixtralExpertParallel2Q4_0) {
  check_model("mixtral-q4_0", model_dir("tinystories-mixtral-3.6m") / "gguf" / "tinystories-mixtral-3.6m-f16.gguf",
              model_dir("tinystories-mixtral-3.6m") / "golden" / "golden.json", 1, 2, DType::kQ4_0);
}

TEST(World4, MixtralTensor2xExpert2) { check_layout("tinystories-mixtral-3.6m", 2, 2); }
TEST(World4, LlamaTensorParallel4) { check_layout("tinystories-llama-1m", 4, 1); }
TEST(World4, Qwen2MoeTensor2xExpert2) { check_family("qwen2_moe", 2, 2); }
TEST(World4, Glm4MoeTensor2xExpert2) { check_family("glm4_moe", 2, 2); }
TEST(World4, DeepSeekV3Tensor2xExpert2) { check_family("deepseek_v3", 2, 2); }

// A bit flipped in rank 1's KV shard (a full page of one request, after its digest was taken):
// rank 1's own check catches it, the request fails on rank 0 with the rank named, and the
// other requests finish with their golden continuations.
TEST(World2, AFlipInAFollowersKvFailsThatRequestNamingTheRank) {
  const std::string model = "tinystories-mixtral-3.6m";
  Group group = make_group(2, 1);
  auto loaded = load_fixture_slice(model, group);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  EngineConfig cfg = engine_config();
  cfg.parallel = &group.comms;
  if (!group.comms.leader()) {
    FaultInjector flip(KvFault::kBitFlip, /*from_step=*/20);
    cfg.fault_injector = &flip;
    ASSERT_TRUE(run_engine_follower(loaded.value(), cfg).is_ok());
    EXPECT_TRUE(flip.fired());
    // Tell rank 0 which request it broke.
    const std::vector<uint64_t> victims = flip.victims();
    world().all_gather(victims.empty() ? int64_t{-1} : static_cast<int64_t>(victims[0]));
    return;
  }
  const auto golden = read_json(model_dir(model) / "golden" / "golden.json");
  const std::vector<GenerateRequest> requests = golden_requests(golden);
  std::vector<testing::Collected> got;
  std::vector<uint64_t> ids;
  {
    auto engine = Engine::create(loaded.value(), cfg);
    ASSERT_TRUE(engine.is_ok()) << engine.status().to_string();
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const GenerateRequest& r : requests) {
      streams.push_back(engine.value()->submit(r).value());
      ids.push_back(streams.back()->id().value);
    }
    for (auto& st : streams) got.push_back(drain(*st));
  }
  const std::vector<int64_t> victim = world().all_gather(int64_t{-1});
  ASSERT_GE(victim[1], 0) << "rank 1's fault never fired";
  int failed = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (static_cast<int64_t>(ids[i]) == victim[1]) {
      ++failed;
      EXPECT_EQ(got[i].finish, FinishReason::kError) << "request " << ids[i];
      const std::string why = got[i].events.back().error.message();
      EXPECT_NE(why.find("kv_integrity_violation"), std::string::npos) << why;
      EXPECT_NE(why.find("on rank 1 of 2"), std::string::npos) << why;
    } else {
      EXPECT_EQ(got[i].tokens, golden["prompts"][i]["greedy_ids"].get<std::vector<TokenId>>()) << "prompt " << i;
    }
  }
  EXPECT_EQ(failed, 1);
}

// The all-reduce leaves the same bits on every rank: the sum of rank 0's and rank 1's values.
TEST(World2, AllReduceGivesEveryRankTheSameSum) {
  const float mine[3] = {0.1f, 1e8f, -3.0f};
  std::vector<float> v(3);
  for (int i = 0; i < 3; ++i) v[i] = mine[i] * static_cast<float>(world().rank() + 1);
  world().all_reduce_sum(v.data(), 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(v[i], mine[i] + mine[i] * 2.0f) << i;
  const std::vector<int64_t> bits = world().all_gather(static_cast<int64_t>(std::bit_cast<uint32_t>(v[0])));
  EXPECT_EQ(bits[0], bits[1]);
}

// Engine::run_on_followers: each follower's handler runs on its own pool between steps and its
// reply (any length, empty included) comes back to rank 0 in rank order; the payload arrives
// byte for byte; the group still runs batches around the commands (golden greedy unchanged).
TEST(World4, CommandsReachEveryFollowerAndTheirRepliesComeBack) {
  const std::string model = "tinystories-mixtral-3.6m";
  Group group = make_group(2, 2);
  auto loaded = load_fixture_slice(model, group);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  EngineConfig cfg = engine_config();
  cfg.parallel = &group.comms;
  const int rank = world().rank();
  if (!group.comms.leader()) {
    int handled = 0;
    cfg.follower_command = [&](std::span<const uint8_t> payload, PagePool& pool) {
      ++handled;
      const std::string text(payload.begin(), payload.end());
      if (text == "quiet") return std::string();
      // Rank r answers r + 9 characters: lengths that are not whole 8-byte words.
      return "rank " + std::to_string(rank) + " pages " + std::to_string(pool.num_total()) + " got " + text +
             std::string(static_cast<size_t>(rank + 9), '.');
    };
    ASSERT_TRUE(run_engine_follower(loaded.value(), cfg).is_ok());
    EXPECT_EQ(handled, 3);
    return;
  }
  auto engine = Engine::create(loaded.value(), cfg);
  ASSERT_TRUE(engine.is_ok()) << engine.status().to_string();
  const auto golden = read_json(model_dir(model) / "golden" / "golden.json");
  const std::vector<GenerateRequest> requests = golden_requests(golden);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const GenerateRequest& r : requests) streams.push_back(engine.value()->submit(r).value());
  const int32_t pages = engine.value()->stats().kv_pages_total;
  for (const std::string& payload : {std::string("hello"), std::string(1000, 'x'), std::string("quiet")}) {
    const std::vector<std::string> replies =
        engine.value()->run_on_followers(std::vector<uint8_t>(payload.begin(), payload.end())).get();
    ASSERT_EQ(replies.size(), 3u);
    for (int r = 1; r < 4; ++r) {
      const std::string want = payload == "quiet" ? std::string()
                                                  : "rank " + std::to_string(r) + " pages " + std::to_string(pages) +
                                                        " got " + payload + std::string(static_cast<size_t>(r + 9), '.');
      EXPECT_EQ(replies[static_cast<size_t>(r - 1)], want) << "rank " << r;
    }
  }
  for (size_t i = 0; i < streams.size(); ++i) {
    EXPECT_EQ(drain(*streams[i]).tokens, golden["prompts"][i]["greedy_ids"].get<std::vector<TokenId>>()) << i;
  }
}

// Both all-reduce algorithms give every rank the same bits: the rank-order sum of every rank's
// buffer, whatever the size (fewer elements than ranks, slices of unequal length).
void check_all_reduce_algorithms() {
  const int n_ranks = world().size();
  auto value = [](int rank, int64_t i) { return 0.37f * static_cast<float>((i * 7919 + rank * 104729) % 2001 - 1000) + 1e-7f * static_cast<float>(rank); };
  for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{5}, int64_t{2048}, int64_t{2049}, int64_t{10007}}) {
    std::vector<float> want(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      float sum = value(0, i);
      for (int r = 1; r < n_ranks; ++r) sum += value(r, i);
      want[static_cast<size_t>(i)] = sum;
    }
    for (auto alg : {Communicator::AllReduceAlgorithm::kGather, Communicator::AllReduceAlgorithm::kReduceScatter,
                     Communicator::AllReduceAlgorithm::kAuto}) {
      std::vector<float> mine(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) mine[static_cast<size_t>(i)] = value(world().rank(), i);
      world().set_all_reduce_algorithm(alg);
      world().all_reduce_sum(mine.data(), n);
      EXPECT_EQ(std::memcmp(mine.data(), want.data(), want.size() * sizeof(float)), 0)
          << "n " << n << " algorithm " << static_cast<int>(alg);
    }
  }
  world().set_all_reduce_algorithm(Communicator::AllReduceAlgorithm::kAuto);
}
TEST(World2, AllReduceAlgorithmsGiveTheRankOrderSum) { check_all_reduce_algorithms(); }
TEST(World4, AllReduceAlgorithmsGiveTheRankOrderSum) { check_all_reduce_algorithms(); }

}  // namespace
}  // namespace densa
