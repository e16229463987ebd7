// The layer order (CMakeLists.txt densa_layer, docs/ARCHITECTURE.md "Layers") checked by
// scripts/check-layers.py: main passes, and a copy of src/ with one upward include (kv/
// including engine/) fails naming the file, the line and the layers kv may include.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "structure/script_run.h"

namespace densa {
namespace {

namespace fs = std::filesystem;

ScriptRun check_layers(const fs::path& root) { return run_check_script("check-layers.py", root); }

TEST(Layers, MainFollowsTheLayerOrder) {
  const ScriptRun r = check_layers(DENSA_SOURCE_DIR);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("every include follows the layer order"), std::string::npos) << r.output;
}

TEST(Layers, AnUpwardIncludeFailsTheCheck) {
  const fs::path root = fs::temp_directory_path() / ("densa_layers_" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  fs::copy_file(fs::path(DENSA_SOURCE_DIR) / "CMakeLists.txt", root / "CMakeLists.txt");
  fs::copy(fs::path(DENSA_SOURCE_DIR) / "src", root / "src", fs::copy_options::recursive);
  {
    const ScriptRun clean = check_layers(root);
    ASSERT_EQ(clean.exit_code, 0) << "the copy itself: " << clean.output;
  }
  // kv sits below engine: a KV header reaching up into the engine is what the check is for.
  const fs::path victim = root / "src" / "kv" / "page_pool.h";
  ASSERT_TRUE(fs::exists(victim));
  std::stringstream text;
  text << std::ifstream(victim).rdbuf();
  std::ofstream(victim) << "#include \"engine/engine.h\"\n" << text.str();
  const ScriptRun bad = check_layers(root);
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("src/kv/page_pool.h:1: includes \"engine/engine.h\": layer kv links only"), std::string::npos)
      << bad.output;
  // What kv may include, and nothing above it.
  EXPECT_NE(bad.output.find("core, io, kernels, kv, quant"), std::string::npos) << bad.output;
  // A folder that is no layer is refused too: it would be outside the order.
  fs::create_directories(root / "src" / "newlayer");
  std::ofstream(root / "src" / "newlayer" / "x.cpp") << "int x;\n";
  const ScriptRun stray = check_layers(root);
  EXPECT_NE(stray.output.find("src/newlayer/: a folder that is no layer"), std::string::npos) << stray.output;
  fs::remove_all(root);
}

}  // namespace
}  // namespace densa
