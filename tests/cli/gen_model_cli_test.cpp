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

}  // namespace
}  // namespace densa
