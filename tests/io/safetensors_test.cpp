#include "io/safetensors.h"

#include <gtest/gtest.h>

#include "io/test_file_writers.h"
#include "test_util.h"

namespace densa {
namespace {

using namespace ::densa::testing;  // NOLINT

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string filled(size_t n, char c) { return std::string(n, c); }

Result<SafetensorsFile> open_bytes(const std::string& test, const std::string& bytes) {
  const auto dir = fresh_temp_dir(test);
  write_file(dir / "model.safetensors", bytes);
  return SafetensorsFile::open(dir / "model.safetensors");
}

// A header with one tensor and hand-written offsets over `data_bytes` bytes of data.
std::string file_with_offsets(const std::string& shape_and_offsets, size_t data_bytes) {
  const std::string header = R"({"w":{"dtype":"F32",)" + shape_and_offsets + "}}";
  std::string s;
  append_pod<uint64_t>(s, header.size());
  return s + header + std::string(data_bytes, '\0');
}

TEST(SafetensorsTest, ReadsF32Fixture) {
  auto f = SafetensorsFile::open(model_dir("tinystories-llama-1m") / "hf" / "model.safetensors");
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  EXPECT_EQ(f->tensors().size(), 39u);
  auto k = f->tensor("model.layers.2.self_attn.k_proj.weight");
  ASSERT_TRUE(k.is_ok()) << k.status().to_string();
  EXPECT_EQ(k->dtype, DType::kF32);
  EXPECT_EQ(k->shape, (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(k->nbytes, 64u * 128 * 4);
  auto norm = f->tensor("model.norm.weight");
  ASSERT_TRUE(norm.is_ok());
  EXPECT_EQ(norm->shape, (std::vector<int64_t>{128}));
}

TEST(SafetensorsTest, ReadsBf16MoeFixture) {
  auto f = SafetensorsFile::open(model_dir("tinystories-mixtral-3.6m") / "hf-bf16" / "model.safetensors");
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  EXPECT_EQ(f->tensors().size(), 3u + 4 * (2 + 4 + 1 + 3 * 8));
  auto w2 = f->tensor("model.layers.0.block_sparse_moe.experts.7.w2.weight");
  ASSERT_TRUE(w2.is_ok());
  EXPECT_EQ(w2->dtype, DType::kBF16);
  EXPECT_EQ(w2->shape, (std::vector<int64_t>{128, 256}));
}

TEST(SafetensorsTest, AllSupportedDtypesAndMetadataIgnored) {
  const std::vector<StWriterTensor> ts = {
      {"f32", "F32", {2, 3}, filled(24, 1)}, {"f16", "F16", {3}, filled(6, 2)},
      {"bf16", "BF16", {3}, filled(6, 3)},   {"fp8", "F8_E4M3", {4, 2}, filled(8, 4)},
      {"i8", "I8", {5}, filled(5, 5)},       {"u8", "U8", {1}, filled(1, 6)},
      {"i32", "I32", {2}, filled(8, 7)},     {"scalar", "F32", {}, filled(4, 8)},
  };
  auto f = open_bytes("dtypes", serialize_safetensors(ts, {{"format", "pt"}}));
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  EXPECT_EQ(f->tensors().size(), ts.size());
  EXPECT_EQ(f->find("__metadata__"), nullptr);
  const std::pair<const char*, DType> expected[] = {
      {"f32", DType::kF32}, {"f16", DType::kF16}, {"bf16", DType::kBF16}, {"fp8", DType::kFP8E4M3},
      {"i8", DType::kI8},   {"u8", DType::kU8},   {"i32", DType::kI32}};
  for (const auto& [name, dtype] : expected) {
    auto t = f->tensor(name);
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    EXPECT_EQ(t->dtype, dtype) << name;
  }
  EXPECT_EQ(f->tensor("fp8")->data[0], 4);
  EXPECT_EQ(f->tensor("i32")->nbytes, 8u);
  EXPECT_EQ(f->tensor("scalar")->numel(), 1);
}

TEST(SafetensorsTest, UnsupportedDtypeIsUnimplemented) {
  auto f = open_bytes("f64", serialize_safetensors({{"w", "F64", {2}, filled(16, 0)}}));
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  auto t = f->tensor("w");
  ASSERT_FALSE(t.is_ok());
  EXPECT_EQ(t.status().code(), StatusCode::kUnimplemented);
  EXPECT_TRUE(contains(t.status().message(), "F64")) << t.status().message();
}

TEST(SafetensorsTest, HeaderLyingAboutEndOffsetIsDataLoss) {
  auto f = open_bytes("lie_end", file_with_offsets(R"("shape":[4],"data_offsets":[0,1600])", 16));
  ASSERT_FALSE(f.is_ok());
  EXPECT_EQ(f.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(contains(f.status().message(), "tensor 'w'")) << f.status().message();
  EXPECT_TRUE(contains(f.status().message(), "outside the data section")) << f.status().message();
}

TEST(SafetensorsTest, HeaderWithBeginAfterEndIsDataLoss) {
  auto f = open_bytes("lie_begin", file_with_offsets(R"("shape":[0],"data_offsets":[8,4])", 16));
  ASSERT_FALSE(f.is_ok());
  EXPECT_EQ(f.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(contains(f.status().message(), "data_offsets [8, 4)")) << f.status().message();
}

TEST(SafetensorsTest, HeaderSizeDisagreeingWithShapeIsDataLoss) {
  auto f = open_bytes("lie_size", file_with_offsets(R"("shape":[8],"data_offsets":[0,16])", 16));
  ASSERT_FALSE(f.is_ok());
  EXPECT_EQ(f.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(contains(f.status().message(), "span 16 bytes")) << f.status().message();
  EXPECT_TRUE(contains(f.status().message(), "need 32")) << f.status().message();
}

// A shape whose byte size wraps around 2^64 (here 2^62 F32 elements: 0 bytes) is refused,
// not accepted as an empty tensor with 2^62 elements; parse() reads from memory like open().
TEST(SafetensorsTest, ShapeWhoseByteSizeWrapsIsDataLoss) {
  const std::string bytes = file_with_offsets(R"("shape":[4611686018427387904],"data_offsets":[0,0])", 0);
  auto f = SafetensorsFile::parse(MappedFile::from_bytes(std::vector<uint8_t>(bytes.begin(), bytes.end()), "mem"));
  ASSERT_FALSE(f.is_ok());
  EXPECT_EQ(f.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(contains(f.status().message(), "mem: tensor 'w': shape overflows")) << f.status().message();
}

TEST(SafetensorsTest, HeaderLengthBeyondFileIsDataLoss) {
  std::string bytes = read_text(model_dir("tinystories-llama-1m") / "hf" / "model.safetensors");
  const uint64_t huge = uint64_t{1} << 40;
  std::memcpy(bytes.data(), &huge, 8);
  auto f = open_bytes("hlen", bytes);
  ASSERT_FALSE(f.is_ok());
  EXPECT_EQ(f.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(contains(f.status().message(), "header length")) << f.status().message();
}

TEST(SafetensorsTest, TruncatedFileIsDataLoss) {
  const std::string bytes = read_text(model_dir("tinystories-llama-1m") / "hf" / "model.safetensors");
  auto tiny = open_bytes("trunc_tiny", bytes.substr(0, 5));
  ASSERT_FALSE(tiny.is_ok());
  EXPECT_EQ(tiny.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(contains(tiny.status().message(), "truncated")) << tiny.status().message();
  auto cut = open_bytes("trunc_data", bytes.substr(0, bytes.size() - 1000));
  ASSERT_FALSE(cut.is_ok());
  EXPECT_EQ(cut.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(contains(cut.status().message(), "outside the data section")) << cut.status().message();
}

TEST(SafetensorsTest, MalformedJsonHeaderIsDataLoss) {
  const std::string header = R"({"w": {"dtype": "F32", )";
  std::string s;
  append_pod<uint64_t>(s, header.size());
  auto f = open_bytes("badjson", s + header);
  ASSERT_FALSE(f.is_ok());
  EXPECT_EQ(f.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(contains(f.status().message(), "malformed safetensors JSON header")) << f.status().message();
}

TEST(SafetensorsTest, ShardedDirectoryFollowsWeightMap) {
  const auto dir = fresh_temp_dir("sharded");
  write_file(dir / "model-00001-of-00002.safetensors", serialize_safetensors({{"a", "F32", {2}, filled(8, 1)}}));
  write_file(dir / "model-00002-of-00002.safetensors", serialize_safetensors({{"b", "I8", {3}, filled(3, 2)}}));
  write_file(dir / "model.safetensors.index.json",
             R"({"metadata":{},"weight_map":{"a":"model-00001-of-00002.safetensors",
                 "b":"model-00002-of-00002.safetensors"}})");
  auto d = SafetensorsDir::open(dir);
  ASSERT_TRUE(d.is_ok()) << d.status().to_string();
  EXPECT_TRUE(d->has_tensor("a"));
  EXPECT_EQ(d->tensor("b")->dtype, DType::kI8);
  EXPECT_EQ(d->tensor("b")->data[2], 2);
  auto missing = d->tensor("c");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(d->release_files().size(), 2u);
}

TEST(SafetensorsTest, ShardIndexNamingMissingFileIsNotFound) {
  const auto dir = fresh_temp_dir("sharded_missing");
  write_file(dir / "model.safetensors.index.json", R"({"weight_map":{"a":"gone.safetensors"}})");
  auto d = SafetensorsDir::open(dir);
  ASSERT_FALSE(d.is_ok());
  EXPECT_EQ(d.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(contains(d.status().message(), "gone.safetensors")) << d.status().message();
}

TEST(SafetensorsTest, EmptyDirectoryIsNotFound) {
  auto d = SafetensorsDir::open(fresh_temp_dir("empty"));
  ASSERT_FALSE(d.is_ok());
  EXPECT_EQ(d.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace densa
