// The real binary: `densa gen-model` writes a tokenizer-less checkpoint that `densa info` and
// `densa bench offline` load, while text commands fail with one clear line.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli_run.h"
#include "test_util.h"

namespace densa {
namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(GenModelCli, PresetOverriddenWritesLoadableTokenizerlessModel) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("densa_gen_model_cli_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string model = (dir / "tiny-moe.gguf").string();
  // The MoE preset with a small shape: flags beside --preset win, experts/top-k stay 8/2.
  RunResult r = run("gen-model --preset moe-959m-a336m --hidden 128 --layers 2 --heads 4 --kv-heads 2 --ffn 128 "
                    "--vocab 512 --max-context 256 --dtype q8_0 " + model);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // 2 x 512 x 128 + 128 + 2 x (2 x 128 x 128 + 2 x 128 x 64 + 256 + 8 x 3 x 128 x 128 + 8 x 128)
  EXPECT_TRUE(contains(r.output, "total 1018496")) << r.output;
  EXPECT_TRUE(contains(r.output, "x 8 experts (top-2)")) << r.output;

  r = run("info -m " + model);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "tokenizer:      none")) << r.output;
  EXPECT_TRUE(contains(r.output, "experts:        8 (top-2 per token")) << r.output;
  EXPECT_TRUE(contains(r.output, "parameters:     1018496")) << r.output;

  const std::string json = (dir / "offline.json").string();
  r = run("bench offline -m " + model + " --batch 2 --prompt-len 8 --gen-len 3 --repeats 1 --threads 1 --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "decode:")) << r.output;
  const nlohmann::json j = testing::read_json(json);
  EXPECT_EQ(j["runs"][0]["generated_tokens"], 6);
  EXPECT_EQ(j["weight_dtype"], "q8_0");

  r = run("generate -m " + model + " -p hello -n 2");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.output, "no tokenizer")) << r.output;

  r = run("gen-model --preset dense-7b " + (dir / "x.gguf").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.output, "dense-336m")) << r.output;
  std::filesystem::remove_all(dir);
}

// --tokenizer bytes: the file gets a vocabulary, so info reports one and text commands run.
TEST(GenModelCli, ByteTokenizerMakesTextCommandsRun) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("densa_gen_model_cli_vocab_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string model = (dir / "tiny.gguf").string();
  RunResult r = run("gen-model --arch llama --hidden 128 --layers 2 --heads 4 --kv-heads 2 --ffn 128 --vocab 512 "
                    "--max-context 256 --dtype q4_0 --tokenizer bytes " + model);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run("info -m " + model);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "tokenizer:      yes")) << r.output;
  r = run("generate -m " + model + " -p hello -n 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "hello")) << r.output;
  r = run("gen-model --arch llama --hidden 128 --layers 2 --heads 4 --kv-heads 2 --ffn 128 --vocab 512 "
          "--dtype bf16 --format hf --tokenizer bytes " + (dir / "hf").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.output, "GGUF files only")) << r.output;
  std::filesystem::remove_all(dir);
}

// --lm-head-dtype through the binaries: gen-model and quantize write a quantized head, info
// counts it, bench offline converts one on load and reports it.
TEST(GenModelCli, LmHeadDtypeFlags) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("densa_gen_model_cli_head_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string shape = "--arch llama --hidden 128 --layers 2 --heads 4 --kv-heads 2 --ffn 128 --vocab 512 "
                            "--max-context 256 --format hf ";
  const std::string int4 = (dir / "int4").string(), bf16 = (dir / "bf16").string(), q = (dir / "q").string();
  RunResult r = run("gen-model " + shape + "--dtype int4 --lm-head-dtype int4 " + int4);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "(hf, int4, lm_head int4)")) << r.output;
  r = run("info -m " + int4);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Embeddings 512 x 128 stay BF16; every other matrix, lm_head included, is INT4.
  EXPECT_TRUE(contains(r.output, "matrix dtypes:  bf16=65536 int4=")) << r.output;

  ASSERT_EQ(run("gen-model " + shape + "--dtype bf16 " + bf16).exit_code, 0);
  r = run("quantize " + bf16 + " " + q + " --to fp8 --lm-head-dtype fp8");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "quantized to fp8 (lm_head fp8)")) << r.output;
  r = run("quantize " + bf16 + " " + q + " --to fp8 --lm-head-dtype int4");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.output, "densa quantize: --lm-head-dtype int4-g128: a Hugging Face checkpoint written --to "
                                 "fp8 holds lm_head as bf16 or as fp8")) << r.output;

  const std::string json = (dir / "offline.json").string();
  r = run("bench offline -m " + bf16 + " --lm-head-dtype q8_0 --batch 1 --prompt-len 4 --gen-len 2 --repeats 1 "
          "--threads 1 --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "weights bf16, lm_head q8_0")) << r.output;
  EXPECT_EQ(testing::read_json(json)["lm_head_dtype"], "q8_0");
  // BF16 matrices: x rounded to bf16 on AMX tiles where this CPU grants them, unless told f32.
  EXPECT_EQ(testing::read_json(json)["bf16_activations"], matmul_bf16_on_amx() ? "bf16" : "f32");
  r = run("bench offline -m " + bf16 + " --bf16-activations f32 --batch 1 --prompt-len 4 --gen-len 2 --repeats 1 "
          "--threads 1 --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "BF16 / F16 matrices' x f32")) << r.output;
  EXPECT_EQ(testing::read_json(json)["bf16_activations"], "f32");
  EXPECT_EQ(run("bench offline -m " + bf16 + " --bf16-activations f16 --repeats 1").exit_code, 105) << "CLI11: value not in the set";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace densa
