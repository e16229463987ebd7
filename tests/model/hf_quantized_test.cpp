// Compressed-tensors INT4 checkpoints (model/hf_quantized.h) keep their group scales as bf16:
//  * BF16 `weight_scale` is used in place: the view points into the mapped file and its bytes
//    are the checkpoint's (no conversion, no copy); a copy only for an odd address;
//  * F32 / F16 scales are rounded to bf16, to nearest even (ties checked bit by bit).
// The checkpoints are the dense fixture with two matrices stored as INT4 g32.
#include "model/hf_quantized.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "io/test_file_writers.h"
#include "model/model_loader.h"
#include "quant/int4_group.h"
#include "test_util.h"

namespace densa {
namespace {

using namespace ::densa::testing;  // NOLINT

namespace fs = std::filesystem;

const char* kDense = "tinystories-llama-1m";
constexpr int64_t kGroup = 32;

// The two matrices stored as INT4 (the rest stays F32 `.weight`).
const char* kQName = "model.layers.0.self_attn.q_proj";  // [128, 128]
const char* kDownName = "model.layers.2.mlp.down_proj";  // [128, 384]

struct Int4Tensors {
  std::vector<uint8_t> packed;
  std::vector<uint16_t> scales;  // bf16 bits, as int4_group_quantize writes them
};

// Quantizes the fixture's F32 matrix `name` as INT4 g32.
Int4Tensors quantize_fixture_matrix(const SafetensorsFile& f, const std::string& name, int64_t rows, int64_t cols) {
  const SafetensorsTensor* t = f.find(name + ".weight");
  EXPECT_NE(t, nullptr) << name;
  std::vector<float> w(static_cast<size_t>(rows * cols));
  std::memcpy(w.data(), t->data, w.size() * 4);
  Int4Tensors q;
  q.packed.resize(w.size() / 2);
  q.scales.resize(static_cast<size_t>(rows * cols / kGroup));
  int4_group_quantize(w.data(), rows, cols, kGroup, q.packed, q.scales);
  return q;
}

std::string bytes_of(const void* p, size_t n) { return std::string(static_cast<const char*>(p), n); }

// Writes the checkpoint: `scale_tensor(bf16 scales)` gives the dtype name and bytes stored as
// `weight_scale`; pad_bytes > 0 puts a U8 tensor of that size before each scale tensor.
fs::path write_checkpoint(const std::string& tag,
                          const std::function<StWriterTensor(const std::vector<uint16_t>&)>& scale_tensor,
                          size_t pad_bytes = 0) {
  const fs::path dir = fresh_temp_dir("hf_int4_" + tag);
  nlohmann::json config = read_json(model_dir(kDense) / "hf" / "config.json");
  config["quantization_config"] = {
      {"quant_method", "compressed-tensors"},
      {"format", "pack-quantized"},
      {"config_groups",
       {{"group_0",
         {{"targets", {"Linear"}},
          {"weights", {{"num_bits", 4}, {"type", "int"}, {"symmetric", true}, {"strategy", "group"}, {"group_size", kGroup}}}}}}}};
  if (pad_bytes > 0) config["num_nextn_predict_layers"] = 1;
  write_file(dir / "config.json", config.dump());
  auto f = SafetensorsFile::open(model_dir(kDense) / "hf" / "model.safetensors");
  EXPECT_TRUE(f.is_ok());
  std::vector<StWriterTensor> out;
  for (const StWriterTensor& t : safetensors_tensors_from(*f)) {
    std::string base;
    for (const char* n : {kQName, kDownName}) {
      if (t.name == std::string(n) + ".weight") base = n;
    }
    if (base.empty()) {
      out.push_back(t);
      continue;
    }
    const int64_t rows = t.shape[0], cols = t.shape[1];
    const Int4Tensors q = quantize_fixture_matrix(*f, base, rows, cols);
    const int32_t dims[2] = {static_cast<int32_t>(rows), static_cast<int32_t>(cols)};
    out.push_back({base + ".weight_packed", "I32", {rows, cols / 8}, bytes_of(q.packed.data(), q.packed.size())});
    // Named as a part of the (declared, skipped) NextN layer after the last decoder layer, so
    // the loader's tensor inventory accounts for it.
    if (pad_bytes > 0) {
      const std::string pad = "model.layers." + std::to_string(config["num_hidden_layers"].get<int>()) + ".pad" +
                              std::to_string(out.size());
      out.push_back({pad, "U8", {static_cast<int64_t>(pad_bytes)}, std::string(pad_bytes, '\0')});
    }
    StWriterTensor s = scale_tensor(q.scales);
    s.name = base + ".weight_scale";
    s.shape = {rows, cols / kGroup};
    out.push_back(std::move(s));
    out.push_back({base + ".weight_shape", "I32", {2}, bytes_of(dims, 8)});
  }
  write_file(dir / "model.safetensors", serialize_safetensors(out));
  return dir;
}

StWriterTensor bf16_scales(const std::vector<uint16_t>& s) { return {"", "BF16", {}, bytes_of(s.data(), s.size() * 2)}; }

// As stored: without moving matrices into huge pages, so views show where the loader put them.
ModelWeights load_ok(const fs::path& dir) {
  auto w = load_model(dir, LoadOptions{.prepare_for_kernels = false});
  EXPECT_TRUE(w.is_ok()) << w.status().to_string();
  return std::move(w).value();
}

bool inside_mapping(const ModelWeights& w, const void* p) {
  for (const auto& f : w.files) {
    const auto* b = static_cast<const uint8_t*>(p);
    if (b >= f->data() && b < f->data() + f->size()) return true;
  }
  return false;
}

std::vector<uint16_t> scales_of(const WeightView& v) { return {v.scales_bf16, v.scales_bf16 + v.num_scales()}; }

TEST(HfQuantized, Int4Bf16ScalesAreUsedInPlace) {
  const fs::path dir = write_checkpoint("bf16", bf16_scales);
  const ModelWeights w = load_ok(dir);
  auto st = SafetensorsFile::open(dir / "model.safetensors");  // a second, independent mapping
  ASSERT_TRUE(st.is_ok());
  for (const auto& [view, name] : {std::pair{&w.layers[0].wq, kQName}, std::pair{&w.layers[2].w_down, kDownName}}) {
    SCOPED_TRACE(name);
    ASSERT_EQ(view->dtype, DType::kI4);
    EXPECT_EQ(view->scale_cols, kGroup);
    EXPECT_EQ(view->scales_f32, nullptr);
    ASSERT_NE(view->scales_bf16, nullptr);
    EXPECT_TRUE(inside_mapping(w, view->scales_bf16)) << "scales were copied";
    const SafetensorsTensor* s = st->find(std::string(name) + ".weight_scale");
    ASSERT_NE(s, nullptr);
    ASSERT_EQ(s->nbytes, static_cast<uint64_t>(view->scale_bytes()));
    EXPECT_EQ(0, std::memcmp(view->scales_bf16, s->data, s->nbytes));
  }
  // Only the two INT4 matrices carry scales: 2 bytes per 32 weights.
  EXPECT_EQ(w.layers[0].wq.scale_bytes() + w.layers[2].w_down.scale_bytes(), (128 * 128 + 128 * 384) / kGroup * 2);
  fs::remove_all(dir);
}

TEST(HfQuantized, Int4Bf16ScalesAtAnOddAddressAreCopiedUnchanged) {
  // Pad sizes until the scale tensors land at odd addresses (the header length moves with them).
  for (size_t pad = 1; pad <= 4; ++pad) {
    const fs::path dir = write_checkpoint("bf16_odd", bf16_scales, pad);
    auto st = SafetensorsFile::open(dir / "model.safetensors");
    ASSERT_TRUE(st.is_ok());
    const SafetensorsTensor* s = st->find(std::string(kQName) + ".weight_scale");
    ASSERT_NE(s, nullptr);
    if (reinterpret_cast<uintptr_t>(s->data) % 2 == 0) {
      fs::remove_all(dir);
      continue;
    }
    const ModelWeights w = load_ok(dir);
    const WeightView& v = w.layers[0].wq;
    ASSERT_NE(v.scales_bf16, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.scales_bf16) % 2, 0u);
    EXPECT_FALSE(inside_mapping(w, v.scales_bf16));
    EXPECT_EQ(0, std::memcmp(v.scales_bf16, s->data, s->nbytes));
    fs::remove_all(dir);
    return;
  }
  FAIL() << "no pad size put the scales at an odd address";
}

// Loads `dir` and checks q_proj's scales were converted into an owned bf16 buffer (not used in
// place in the mapping) holding exactly `want`.
void expect_converted_scales(const fs::path& dir, const std::vector<uint16_t>& want) {
  const ModelWeights w = load_ok(dir);
  const WeightView& v = w.layers[0].wq;
  ASSERT_NE(v.scales_bf16, nullptr);
  EXPECT_FALSE(inside_mapping(w, v.scales_bf16));
  EXPECT_EQ(scales_of(v), want);
  fs::remove_all(dir);
}

// F32 scales: the fixture's bf16 scales widened (exact), except three set to values between two
// bf16 numbers: 1 + 2^-8 (a tie, to even 0x3f80), 1 + 3 * 2^-8 (a tie, to even 0x3f82) and
// 1 + 2^-8 + 2^-9 (above the tie, up to 0x3f81).
TEST(HfQuantized, Int4F32ScalesRoundToNearestEvenBf16) {
  const uint32_t special_bits[3] = {0x3f808000u, 0x3f818000u, 0x3f80c000u};
  const uint16_t special_want[3] = {0x3f80, 0x3f82, 0x3f81};
  std::vector<uint16_t> written;
  const fs::path dir = write_checkpoint("f32", [&](const std::vector<uint16_t>& s) {
    std::vector<uint32_t> f(s.size());
    for (size_t i = 0; i < s.size(); ++i) f[i] = static_cast<uint32_t>(s[i]) << 16;
    if (written.empty()) {  // the first matrix (q_proj) gets the special values
      for (int k = 0; k < 3; ++k) f[k] = special_bits[k];
      written = s;
      for (int k = 0; k < 3; ++k) written[k] = special_want[k];
    }
    return StWriterTensor{"", "F32", {}, bytes_of(f.data(), f.size() * 4)};
  });
  expect_converted_scales(dir, written);
}

// F16 scales: 0x3c04 = 1 + 2^-8 (tie, to 0x3f80), 0x3c0c = 1 + 3 * 2^-8 (tie, to 0x3f82),
// 0x3c06 = 1 + 3 * 2^-9 (above the tie, to 0x3f81); the rest are the fixture's bf16 scales,
// which fp16 holds exactly at these magnitudes.
TEST(HfQuantized, Int4F16ScalesRoundToNearestEvenBf16) {
  const uint16_t special_f16[3] = {0x3c04, 0x3c0c, 0x3c06};
  const uint16_t special_want[3] = {0x3f80, 0x3f82, 0x3f81};
  std::vector<uint16_t> written;
  const fs::path dir = write_checkpoint("f16", [&](const std::vector<uint16_t>& s) {
    std::vector<uint16_t> h(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
      h[i] = f32_to_f16(bf16_to_f32(s[i]));
      EXPECT_EQ(f16_to_f32(h[i]), bf16_to_f32(s[i])) << i;
    }
    if (written.empty()) {
      for (int k = 0; k < 3; ++k) h[k] = special_f16[k];
      written = s;
      for (int k = 0; k < 3; ++k) written[k] = special_want[k];
    }
    return StWriterTensor{"", "F16", {}, bytes_of(h.data(), h.size() * 2)};
  });
  expect_converted_scales(dir, written);
}

}  // namespace
}  // namespace densa
