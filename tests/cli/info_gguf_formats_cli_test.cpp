// `densa info` (the real binary) lists a GGUF's stored formats per tensor group with bits per
// weight, on a file mixing block types per tensor as llama-quantize writes them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "cli/cli_run.h"
#include "io/gguf_file.h"
#include "io/test_file_writers.h"
#include "quant/ggml_blocks.h"
#include "test_util.h"

namespace densa {
namespace {

TEST(InfoGgufFormats, ListsTypesAndBitsPerWeightPerGroup) {
  auto f = GgufFile::open(testing::model_dir("tinystories-llama-1m") / "gguf" / "tinystories-llama-1m-f32.gguf");
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  testing::GgufWriter g = testing::gguf_writer_from(*f);
  for (auto& t : g.tensors) {
    uint32_t type = 0;
    if (t.name.ends_with("attn_q.weight")) type = ggml_type::kQ5_0;  // 5.5 bpw
    if (t.name.ends_with("ffn_up.weight")) type = t.name.starts_with("blk.0.") ? ggml_type::kIQ4_NL : ggml_type::kMXFP4;
    if (type == 0) continue;
    const GgmlBlockFormat* fmt = ggml_block_format(type);
    const int64_t n = static_cast<int64_t>(t.bytes.size() / 4);
    std::string q(static_cast<size_t>(n / fmt->block_elems * fmt->block_bytes), '\0');
    fmt->quantize(reinterpret_cast<const float*>(t.bytes.data()), n, reinterpret_cast<uint8_t*>(q.data()));
    t.bytes = std::move(q);
    t.ggml_type = type;
  }
  const std::string out = (std::filesystem::path(::testing::TempDir()) /
                           ("densa_cli_info_formats_" + std::to_string(::getpid()) + ".gguf")).string();
  testing::write_file(out, g.serialize());
  const RunResult r = run("info -m " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("tensor formats (as stored"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  attn_q                    4  q5_0                          5.500 bpw"), std::string::npos)
      << r.output;
  // One iq4_nl (4.5 bpw) and three mxfp4 (4.25 bpw) tensors of equal size: 4.3125 bpw.
  EXPECT_NE(r.output.find("  ffn_up                    4  iq4_nl x1, mxfp4 x3           4.312 bpw"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("  attn_k                    4  f32                          32.000 bpw"), std::string::npos)
      << r.output;
  std::filesystem::remove(out);
}

}  // namespace
}  // namespace densa
