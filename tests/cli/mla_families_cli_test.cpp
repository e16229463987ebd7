// `densa info` (the real binary) on the production families' tiny checkpoints, HF and the GGUF
// `densa quantize` writes: GLM-5 (glm_moe_dsa, plus a NextN layer), Kimi-K2.5 (kimi_k25: vision
// tower, projector and a NextN layer beside the DeepSeek-V3 text model) and GLM-4.7-Flash
// (glm4_moe_lite, a NextN layer). Each names the architecture, the attention kind (MLA /
// MLA+DSA, GQA for a GQA family), the experts, the NextN layers and what the load skipped.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "cli/cli_run.h"
#include "mla_checkpoints.h"
#include "test_util.h"

namespace densa {
namespace {

namespace fs = std::filesystem;

fs::path ref(const std::string& arch) { return fs::path(DENSA_SOURCE_DIR) / "tests/data/reference" / arch; }

void expect_has(const std::string& out, const std::string& line) {
  EXPECT_NE(out.find(line), std::string::npos) << "missing '" << line << "' in:\n" << out;
}

TEST(MlaFamiliesCli, InfoOnGlm5NamesMlaDsaExpertsAndTheSkippedNextnLayer) {
  const fs::path dir = testing::wrap_with_nextn_layer(ref("glm_moe_dsa"), "info_glm5");
  const RunResult r = run("info -m " + dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_has(r.output, "architecture:   GlmMoeDsaForCausalLM (attention MLA+DSA)");
  expect_has(r.output, "sparse attn:    DSA, lightning indexer 4 heads x 16, each query attends to the top 8");
  expect_has(r.output, "experts:        8 (top-2 per token, sigmoid grouped routing)");
  expect_has(r.output, "nextn layers:   1 (MTP, not loaded)");
  expect_has(r.output, "skipped:        4 tensors");
  expect_has(r.output, "of 1 NextN/MTP layer (layer 2): no speculative decoding");
  // Its GGUF (llama.cpp's glm-dsa): the same architecture and attention; NextN blocks are not written.
  const fs::path gguf = dir / "glm5.gguf";
  const RunResult q = run("quantize " + dir.string() + " " + gguf.string() + " --to bf16");
  ASSERT_EQ(q.exit_code, 0) << q.output;
  const RunResult g = run("info -m " + gguf.string());
  ASSERT_EQ(g.exit_code, 0) << g.output;
  expect_has(g.output, "(gguf)");
  expect_has(g.output, "architecture:   GlmMoeDsaForCausalLM (attention MLA+DSA)");
  expect_has(g.output, "sparse attn:    DSA, lightning indexer 4 heads x 16");
  expect_has(g.output, "experts:        8 (top-2 per token");
  expect_has(g.output, "nextn layers:   0");
  expect_has(g.output, "skipped:        nothing");
  fs::remove_all(dir);
}

TEST(MlaFamiliesCli, InfoOnKimiK25NamesTheWrapperAndWhatWasSkipped) {
  const fs::path dir = testing::wrap_as_kimi_k25(testing::deepseek_v3_ref_dir(), "info");
  const RunResult r = run("info -m " + dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_has(r.output, "architecture:   KimiK25ForConditionalGeneration (attention MLA)");
  expect_has(r.output, "experts:        8 (top-2 per token, sigmoid grouped routing)");
  expect_has(r.output, "nextn layers:   1 (MTP, not loaded)");
  expect_has(r.output, "skipped:        4 vision tensors");
  expect_has(r.output, "text-only serving");
  expect_has(r.output, "of 1 NextN/MTP layer (layer 3)");
  EXPECT_EQ(r.output.find("sparse attn:"), std::string::npos) << r.output;
  // Its GGUF is llama.cpp's deepseek2: the text model alone.
  const fs::path gguf = dir / "k25.gguf";
  const RunResult q = run("quantize " + dir.string() + " " + gguf.string() + " --to bf16");
  ASSERT_EQ(q.exit_code, 0) << q.output;
  const RunResult g = run("info -m " + gguf.string());
  ASSERT_EQ(g.exit_code, 0) << g.output;
  expect_has(g.output, "architecture:   DeepseekV3ForCausalLM (attention MLA)");
  expect_has(g.output, "skipped:        nothing");
  fs::remove_all(dir);
}

TEST(MlaFamiliesCli, InfoOnGlm47FlashNamesMlaAndTheNextnLayer) {
  const fs::path dir = testing::wrap_as_glm4_moe_lite("info");
  const RunResult r = run("info -m " + dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_has(r.output, "architecture:   Glm4MoeLiteForCausalLM (attention MLA)");
  expect_has(r.output, "experts:        8 (top-2 per token, sigmoid grouped routing), width 32, in 2 of 3 layers");
  expect_has(r.output, "nextn layers:   1 (MTP, not loaded)");
  expect_has(r.output, "skipped:        2 tensors");
  expect_has(r.output, "of 1 NextN/MTP layer (layer 3)");
  fs::remove_all(dir);
}

TEST(MlaFamiliesCli, InfoOnAGqaFamilyNamesGqa) {
  const RunResult r = run("info -m " + ref("glm4_moe").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_has(r.output, "architecture:   Glm4MoeForCausalLM (attention GQA)");
  expect_has(r.output, "nextn layers:   0");
  expect_has(r.output, "skipped:        nothing");
}

}  // namespace
}  // namespace densa
