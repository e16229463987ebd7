#include "io/gguf_file.h"

#include <gtest/gtest.h>

#include "io/test_file_writers.h"
#include "test_util.h"

namespace densa {
namespace {

using namespace ::densa::testing;  // NOLINT

std::filesystem::path gguf_path(const std::string& model, const std::string& type) {
  return model_dir(model) / "gguf" / (model + "-" + type + ".gguf");
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Writes `bytes` to a temp file and opens it.
Result<GgufFile> open_bytes(const std::string& test, const std::string& bytes) {
  const auto dir = fresh_temp_dir(test);
  write_file(dir / "m.gguf", bytes);
  return GgufFile::open(dir / "m.gguf");
}

TEST(GgufFileTest, ReadsDenseFixtureMetadataAndTensors) {
  auto f = GgufFile::open(gguf_path("tinystories-llama-1m", "f32"));
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->data_offset() % 32, 0u);
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_int("llama.block_count"), 4);
  EXPECT_EQ(f->get_int("llama.embedding_length"), 128);
  EXPECT_EQ(f->get_int("llama.feed_forward_length"), 384);
  EXPECT_EQ(f->get_int("llama.attention.head_count_kv"), 4);
  EXPECT_FLOAT_EQ(static_cast<float>(f->get_float("llama.attention.layer_norm_rms_epsilon").value()), 1e-5f);
  EXPECT_DOUBLE_EQ(f->get_float("llama.rope.freq_base").value(), 10000.0);
  EXPECT_EQ(f->get_int("general.file_type"), 0);
  EXPECT_EQ(f->get_bool("tokenizer.ggml.add_bos_token"), true);
  EXPECT_EQ(f->get_bool("tokenizer.ggml.add_eos_token"), false);
  EXPECT_FALSE(f->get_int("general.architecture").has_value());  // wrong kind -> nullopt
  EXPECT_FALSE(f->get_string("no.such.key").has_value());

  auto tokens = f->get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.has_value());
  ASSERT_EQ(tokens->size(), 1024u);
  EXPECT_EQ((*tokens)[0], "<unk>");
  EXPECT_EQ((*tokens)[1], "<s>");
  EXPECT_EQ((*tokens)[13], "<0x0A>");
  auto scores = f->get_float_array("tokenizer.ggml.scores");
  ASSERT_TRUE(scores.has_value());
  EXPECT_EQ(scores->size(), 1024u);
  auto types = f->get_int_array("tokenizer.ggml.token_type");
  ASSERT_TRUE(types.has_value());
  EXPECT_EQ((*types)[0], 2);
  EXPECT_EQ((*types)[1], 3);
  EXPECT_EQ((*types)[13], 6);
  EXPECT_EQ((*types)[300], 1);

  EXPECT_EQ(f->tensor_infos().size(), 39u);
  auto k = f->tensor("blk.0.attn_k.weight");
  ASSERT_TRUE(k.is_ok()) << k.status().to_string();
  EXPECT_EQ(k->dtype, DType::kF32);
  EXPECT_EQ(k->ne, (std::vector<int64_t>{128, 64}));
  EXPECT_EQ(k->nbytes, 128u * 64 * 4);
  auto emb = f->tensor("token_embd.weight");
  ASSERT_TRUE(emb.is_ok());
  EXPECT_EQ(emb->ne, (std::vector<int64_t>{128, 1024}));
}

TEST(GgufFileTest, ReadsMoeF16FixtureTypes) {
  auto f = GgufFile::open(gguf_path("tinystories-mixtral-3.6m", "f16"));
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  EXPECT_EQ(f->get_int("llama.expert_count"), 8);
  EXPECT_EQ(f->get_int("llama.expert_used_count"), 2);
  EXPECT_EQ(f->get_int("general.file_type"), 1);
  EXPECT_EQ(f->tensor_infos().size(), 43u);
  auto exps = f->tensor("blk.3.ffn_down_exps.weight");
  ASSERT_TRUE(exps.is_ok());
  EXPECT_EQ(exps->dtype, DType::kF16);
  EXPECT_EQ(exps->ne, (std::vector<int64_t>{256, 128, 8}));
  EXPECT_EQ(exps->nbytes, 256u * 128 * 8 * 2);
  auto router = f->tensor("blk.3.ffn_gate_inp.weight");
  ASSERT_TRUE(router.is_ok());
  EXPECT_EQ(router->dtype, DType::kF32);
  EXPECT_EQ(f->tensor("output_norm.weight")->dtype, DType::kF32);
}

TEST(GgufFileTest, AllValueTypesRoundTripAndV2IsAccepted) {
  GgufWriter w;
  w.version = 2;
  auto scalar = [](GgufType t, int64_t i, double r) {
    GgufValue v;
    v.type = t;
    v.integer = i;
    v.real = r;
    return v;
  };
  w.set("u8", scalar(GgufType::kU8, 200, 0));
  w.set("i8", scalar(GgufType::kI8, -5, 0));
  w.set("u16", scalar(GgufType::kU16, 60000, 0));
  w.set("i16", scalar(GgufType::kI16, -30000, 0));
  w.set("u32", scalar(GgufType::kU32, 4000000000, 0));
  w.set("i32", scalar(GgufType::kI32, -7, 0));
  w.set("u64", scalar(GgufType::kU64, int64_t{1} << 40, 0));
  w.set("i64", scalar(GgufType::kI64, -(int64_t{1} << 40), 0));
  w.set("b", scalar(GgufType::kBool, 1, 0));
  w.set("f32", scalar(GgufType::kF32, 0, 0.5));
  w.set("f64", scalar(GgufType::kF64, 0, 0.25));
  w.set("s", gguf_str("hello"));
  GgufValue ints;
  ints.type = GgufType::kArray;
  ints.elem_type = GgufType::kI16;
  ints.integers = {1, -2, 3};
  w.set("ints", ints);
  GgufValue nested;
  nested.type = GgufType::kArray;
  nested.elem_type = GgufType::kArray;
  nested.items = {ints, ints};
  w.set("nested", nested);
  GgufValue floats;
  floats.type = GgufType::kArray;
  floats.elem_type = GgufType::kF64;
  floats.reals = {1.5, -2.5};
  w.set("floats", floats);
  w.set("general.alignment", gguf_u32(64));
  w.alignment = 64;
  w.tensors.push_back({"a", 0, {4, 2}, std::string(32, '\1')});
  w.tensors.push_back({"q", 8, {64}, std::string(68, '\2')});  // q8_0: 2 blocks of 34 bytes

  auto f = open_bytes("roundtrip", w.serialize());
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->get_int("u8"), 200);
  EXPECT_EQ(f->get_int("i8"), -5);
  EXPECT_EQ(f->get_int("u16"), 60000);
  EXPECT_EQ(f->get_int("i16"), -30000);
  EXPECT_EQ(f->get_int("u32"), 4000000000);
  EXPECT_EQ(f->get_int("i32"), -7);
  EXPECT_EQ(f->get_int("u64"), int64_t{1} << 40);
  EXPECT_EQ(f->get_int("i64"), -(int64_t{1} << 40));
  EXPECT_EQ(f->get_bool("b"), true);
  EXPECT_EQ(f->get_float("f32"), 0.5);
  EXPECT_EQ(f->get_float("f64"), 0.25);
  EXPECT_EQ(f->get_float("i32"), -7.0);
  EXPECT_EQ(f->get_string("s"), "hello");
  EXPECT_EQ(f->get_int_array("ints"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(f->get_float_array("floats"), (std::vector<float>{1.5f, -2.5f}));
  ASSERT_NE(f->find("nested"), nullptr);
  EXPECT_EQ(f->find("nested")->items.size(), 2u);
  EXPECT_EQ(f->find("nested")->items[1].integers, (std::vector<int64_t>{1, -2, 3}));
  auto q = f->tensor("q");
  ASSERT_TRUE(q.is_ok()) << q.status().to_string();
  EXPECT_EQ(q->dtype, DType::kQ8_0);
  EXPECT_EQ(q->nbytes, 68u);
  EXPECT_EQ(q->data[0], 2);
  EXPECT_EQ((q->data - f->tensor("a")->data) % 64, 0);
}

TEST(GgufFileTest, TruncatedHeaderIsDataLoss) {
  const std::string bytes = read_text(gguf_path("tinystories-llama-1m", "f32"));
  auto f = open_bytes("trunc_header", bytes.substr(0, 20));  // inside the metadata count
  ASSERT_FALSE(f.is_ok());
  EXPECT_EQ(f.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(contains(f.status().message(), "m.gguf")) << f.status().message();
  EXPECT_TRUE(contains(f.status().message(), "truncated GGUF header at byte 16 reading metadata count"))
      << f.status().message();
  // Cut inside the vocabulary array: its count now reaches past the end.
  auto g = open_bytes("trunc_header_array", bytes.substr(0, 1000));
  ASSERT_FALSE(g.is_ok());
  EXPECT_EQ(g.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(contains(g.status().message(), "beyond the end of the file")) << g.status().message();
}

TEST(GgufFileTest, TruncatedDataIsOutOfBoundsNamingTensor) {
  const std::string bytes = read_text(gguf_path("tinystories-llama-1m", "f32"));
  auto f = open_bytes("trunc_data", bytes.substr(0, bytes.size() - 100));
  ASSERT_FALSE(f.is_ok());
  EXPECT_EQ(f.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(contains(f.status().message(), "data out of bounds")) << f.status().message();
  EXPECT_TRUE(contains(f.status().message(), "tensor '")) << f.status().message();
}

TEST(GgufFileTest, TensorOffsetOutOfBoundsNamesTensor) {
  GgufWriter w;
  w.tensors.push_back({"blk.0.attn_q.weight", 0, {4, 4}, std::string(64, '\0')});
  std::string bytes = w.serialize();
  // The tensor's offset field sits just before the data section: patch it far past the end.
  const size_t info_end = 24 + 8 + std::string("blk.0.attn_q.weight").size() + 4 + 16 + 4;
  const uint64_t bad_offset = 1 << 20;
  std::memcpy(bytes.data() + info_end, &bad_offset, 8);
  auto f = open_bytes("oob", bytes);
  ASSERT_FALSE(f.is_ok());
  EXPECT_EQ(f.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(contains(f.status().message(), "tensor 'blk.0.attn_q.weight' data out of bounds"))
      << f.status().message();
}

// Dimensions whose element count times the type's bytes leaves int64 (2^31 x 2^31 f32) are
// refused at open; they used to pass as a tensor of 0 bytes (the size wrapped around).
TEST(GgufFileTest, TensorWhoseByteSizeOverflowsIsDataLoss) {
  GgufWriter w;
  w.tensors.push_back({"huge", 0, {int64_t{1} << 31, int64_t{1} << 31}, ""});
  const std::string bytes = w.serialize();
  auto f = GgufFile::parse(MappedFile::from_bytes(std::vector<uint8_t>(bytes.begin(), bytes.end()), "mem.gguf"));
  ASSERT_FALSE(f.is_ok());
  EXPECT_EQ(f.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(contains(f.status().message(), "tensor 'huge' has invalid dimension")) << f.status().message();
}

TEST(GgufFileTest, WrongMagicIsInvalidArgument) {
  std::string bytes = read_text(gguf_path("tinystories-llama-1m", "f16"));
  bytes[0] = 'X';
  auto f = open_bytes("magic", bytes);
  ASSERT_FALSE(f.is_ok());
  EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(f.status().message(), "not a GGUF file")) << f.status().message();
}

TEST(GgufFileTest, UnsupportedVersionIsInvalidArgument) {
  std::string bytes = read_text(gguf_path("tinystories-llama-1m", "f16"));
  const uint32_t version = 7;
  std::memcpy(bytes.data() + 4, &version, 4);
  auto f = open_bytes("version", bytes);
  ASSERT_FALSE(f.is_ok());
  EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(f.status().message(), "unsupported GGUF version 7")) << f.status().message();
}

TEST(GgufFileTest, StringLengthBeyondFileIsDataLoss) {
  GgufWriter w;
  w.set("general.name", gguf_str("tiny"));
  std::string bytes = w.serialize();
  const uint64_t huge = uint64_t{1} << 50;
  std::memcpy(bytes.data() + 24, &huge, 8);  // length of the first key
  auto f = open_bytes("strlen", bytes);
  ASSERT_FALSE(f.is_ok());
  EXPECT_EQ(f.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(contains(f.status().message(), "beyond the end of the file")) << f.status().message();
}

TEST(GgufFileTest, ArrayCountBeyondFileIsDataLoss) {
  GgufWriter w;
  GgufValue a;
  a.type = GgufType::kArray;
  a.elem_type = GgufType::kString;
  a.strings = {"x", "y"};
  w.set("tokenizer.ggml.tokens", a);
  std::string bytes = w.serialize();
  // key length (8) + key + value type (4) + element type (4), then the count.
  const size_t count_at = 24 + 8 + std::string("tokenizer.ggml.tokens").size() + 4 + 4;
  const uint64_t huge = uint64_t{1} << 40;
  std::memcpy(bytes.data() + count_at, &huge, 8);
  auto f = open_bytes("arrcount", bytes);
  ASSERT_FALSE(f.is_ok());
  EXPECT_EQ(f.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(contains(f.status().message(), "tokenizer.ggml.tokens")) << f.status().message();
  EXPECT_TRUE(contains(f.status().message(), "array count")) << f.status().message();
}

TEST(GgufFileTest, UnsupportedTensorTypeIsUnimplementedNamingType) {
  GgufWriter w;
  w.tensors.push_back({"blk.0.ffn_down.weight", 12, {256, 1}, std::string(144, '\0')});  // q4_K
  auto f = open_bytes("qk", w.serialize());
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  auto t = f->tensor("blk.0.ffn_down.weight");
  ASSERT_FALSE(t.is_ok());
  EXPECT_EQ(t.status().code(), StatusCode::kUnimplemented);
  EXPECT_TRUE(contains(t.status().message(), "q4_K")) << t.status().message();
  EXPECT_TRUE(contains(t.status().message(), "blk.0.ffn_down.weight")) << t.status().message();
}

TEST(GgufFileTest, MissingTensorIsNotFound) {
  auto f = GgufFile::open(gguf_path("tinystories-llama-1m", "f16"));
  ASSERT_TRUE(f.is_ok());
  auto t = f->tensor("blk.9.attn_q.weight");
  ASSERT_FALSE(t.is_ok());
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(contains(t.status().message(), "blk.9.attn_q.weight")) << t.status().message();
}

TEST(GgufFileTest, CopiedFixtureReserializesIdentically) {
  const auto path = gguf_path("tinystories-mixtral-3.6m", "f32");
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.is_ok());
  auto copy = open_bytes("copy", gguf_writer_from(*f).serialize());
  ASSERT_TRUE(copy.is_ok()) << copy.status().to_string();
  EXPECT_EQ(copy->tensor_infos().size(), f->tensor_infos().size());
  auto a = f->tensor("blk.1.ffn_up_exps.weight");
  auto b = copy->tensor("blk.1.ffn_up_exps.weight");
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  ASSERT_EQ(a->nbytes, b->nbytes);
  EXPECT_EQ(std::memcmp(a->data, b->data, a->nbytes), 0);
  EXPECT_EQ(copy->get_string_array("tokenizer.ggml.tokens"), f->get_string_array("tokenizer.ggml.tokens"));
}

TEST(GgufFileTest, GgmlTypeOfIsTheReadersTableInverted) {
  // ggml's ids (ggml.h): the writers use these, the reader maps them back.
  EXPECT_EQ(ggml_type_of(DType::kF32), 0u);
  EXPECT_EQ(ggml_type_of(DType::kF16), 1u);
  EXPECT_EQ(ggml_type_of(DType::kQ4_0), 2u);
  EXPECT_EQ(ggml_type_of(DType::kQ8_0), 8u);
  EXPECT_EQ(ggml_type_of(DType::kBF16), 30u);
  EXPECT_EQ(ggml_type_of(DType::kFP8E4M3), std::nullopt);
  EXPECT_EQ(ggml_type_of(DType::kI4), std::nullopt);
  EXPECT_EQ(ggml_type_name(*ggml_type_of(DType::kQ8_0)), "q8_0");
}

}  // namespace
}  // namespace densa
