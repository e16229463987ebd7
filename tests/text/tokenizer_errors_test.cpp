// Malformed or unsupported tokenizer inputs fail with a message naming what is wrong.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "text/hf_tokenizer.h"
#include "text/tiktoken.h"
#include "text/tokenizer_loader.h"
#include "tokenizer_oracle_util.h"

namespace densa {
namespace {

using json = nlohmann::json;

json tiny_tokenizer_json() {
  return json::parse(R"({
    "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
    "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
    "post_processor": null,
    "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3}, "merges": ["a b"]}
  })");
}

std::string error_of(const json& j) {
  auto r = hf_tokenizer_parts(j, "t.json");
  return r.is_ok() ? std::string("(loaded)") : r.status().message();
}

TEST(TokenizerErrors, TinyTokenizerJsonLoadsAndMerges) {
  auto parts = hf_tokenizer_parts(tiny_tokenizer_json(), "t.json");
  ASSERT_TRUE(parts.is_ok()) << parts.status().to_string();
  auto tok = Tokenizer::from_parts(std::move(parts).value());
  ASSERT_TRUE(tok.is_ok());
  EXPECT_EQ(tok->encode("ab", false), std::vector<TokenId>{2});
  EXPECT_EQ(tok->encode("ba", false), (std::vector<TokenId>{1, 0}));
}

TEST(TokenizerErrors, UnsupportedPartsAreRefusedByName) {
  json j = tiny_tokenizer_json();
  j["model"]["type"] = "Unigram";
  EXPECT_NE(error_of(j).find("model: type 'Unigram' is not supported"), std::string::npos) << error_of(j);
  j = tiny_tokenizer_json();
  j["pre_tokenizer"] = {{"type", "BertPreTokenizer"}};
  EXPECT_NE(error_of(j).find("pre_tokenizer: type 'BertPreTokenizer' is not supported"), std::string::npos) << error_of(j);
  j = tiny_tokenizer_json();
  j["normalizer"] = {{"type", "BertNormalizer"}};
  EXPECT_NE(error_of(j).find("normalizer: type 'BertNormalizer'"), std::string::npos) << error_of(j);
  j = tiny_tokenizer_json();
  j["decoder"] = {{"type", "WordPiece"}};
  EXPECT_NE(error_of(j).find("decoder: type 'WordPiece'"), std::string::npos) << error_of(j);
  j = tiny_tokenizer_json();
  j["post_processor"] = {{"type", "Mystery"}};
  EXPECT_NE(error_of(j).find("post_processor: type 'Mystery'"), std::string::npos) << error_of(j);
  j = tiny_tokenizer_json();
  j["model"]["continuing_subword_prefix"] = "##";
  EXPECT_NE(error_of(j).find("continuing_subword_prefix '##' is not supported"), std::string::npos) << error_of(j);
  j = tiny_tokenizer_json();
  j["truncation"] = {{"max_length", 8}};
  EXPECT_NE(error_of(j).find("truncation"), std::string::npos);
  j = tiny_tokenizer_json();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
  EXPECT_NE(error_of(j).find("regex '(unclosed'"), std::string::npos) << error_of(j);
  j = tiny_tokenizer_json();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", "x"}}}, {"behavior", "Sideways"}};
  EXPECT_NE(error_of(j).find("behavior 'Sideways'"), std::string::npos) << error_of(j);
}

TEST(TokenizerErrors, BadMergesAndVocab) {
  json j = tiny_tokenizer_json();
  j["model"]["merges"] = {"a c"};
  EXPECT_NE(error_of(j).find("merges[0]: 'a c': c is not in the vocabulary"), std::string::npos) << error_of(j);
  j["model"]["merges"] = {"abc"};
  EXPECT_NE(error_of(j).find("merges[0]: 'abc' is not two tokens"), std::string::npos) << error_of(j);
  j["model"]["merges"] = json::array({json::array({"a"})});
  EXPECT_NE(error_of(j).find("neither"), std::string::npos) << error_of(j);
  j = tiny_tokenizer_json();
  j["model"]["merges"] = json::array({json::array({"a", "b"})});  // the pair form
  EXPECT_EQ(error_of(j), "(loaded)");
  j["model"]["vocab"]["x"] = "seven";
  EXPECT_NE(error_of(j).find("'x' has no valid id"), std::string::npos) << error_of(j);
  j = tiny_tokenizer_json();
  j["added_tokens"] = {{{"id", 9}}};
  EXPECT_NE(error_of(j).find("added_tokens[0]"), std::string::npos) << error_of(j);
  j = tiny_tokenizer_json();
  j["model"]["unk_token"] = "<unk>";
  EXPECT_NE(error_of(j).find("unk_token '<unk>' is not in the vocabulary"), std::string::npos) << error_of(j);
  j = tiny_tokenizer_json();
  j["decoder"] = nullptr;
  EXPECT_NE(error_of(j).find("decoder"), std::string::npos);
}

TEST(TokenizerErrors, TruncatedFilesAndDirs) {
  const auto dir = oracle_tmp("bad_dir");
  std::filesystem::create_directories(dir);
  const std::string text = tiny_tokenizer_json().dump();
  std::ofstream(dir / "tokenizer.json") << text.substr(0, text.size() / 2);
  auto r = load_tokenizer(dir);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("not valid JSON"), std::string::npos) << r.status().message();
  std::ofstream(dir / "tokenizer.json") << text;
  std::ofstream(dir / "generation_config.json") << R"({"eos_token_id": "two"})";
  r = load_tokenizer(dir);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("eos_token_id is neither"), std::string::npos) << r.status().message();
  std::ofstream(dir / "generation_config.json") << R"({"eos_token_id": [3, 99]})";
  r = load_tokenizer(dir);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("eos_token_id 99 is outside"), std::string::npos) << r.status().message();
  std::ofstream(dir / "generation_config.json") << R"({"eos_token_id": [3]})";
  std::ofstream(dir / "tokenizer_config.json") << R"({"eos_token": "<nope>"})";
  r = load_tokenizer(dir);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("eos_token '<nope>' is not in the vocabulary"), std::string::npos) << r.status().message();
  std::ofstream(dir / "tokenizer_config.json") << R"({"add_bos_token": true})";
  r = load_tokenizer(dir);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("no bos token"), std::string::npos) << r.status().message();
  std::filesystem::remove(dir / "tokenizer.json");
  r = load_tokenizer(dir);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("no tokenizer.json"), std::string::npos);
  std::ofstream(dir / "tiktoken.model") << "IQ== 0\n@@@ 1\n";
  r = load_tokenizer(dir);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("bad base64"), std::string::npos) << r.status().message();
}

// Ids far past the tokens a file lists would only allocate the ids between: refused by name.
TEST(TokenizerErrors, IdsFarPastTheListedTokensAreRefused) {
  json j = tiny_tokenizer_json();
  j["model"]["vocab"]["b"] = 1000000000;
  EXPECT_NE(error_of(j).find("'b' has id 1000000000, far past the 4 tokens listed"), std::string::npos) << error_of(j);
  j = tiny_tokenizer_json();
  j["added_tokens"] = json::array({{{"id", 900000000}, {"content", "<x>"}, {"special", true}}});
  EXPECT_NE(error_of(j).find("'<x>' has id 900000000, far past"), std::string::npos) << error_of(j);
  j = tiny_tokenizer_json();
  j["added_tokens"] = json::array({{{"id", int64_t{1} << 40}, {"content", "<x>"}}});
  EXPECT_NE(error_of(j).find("is out of range"), std::string::npos) << error_of(j);

  std::string ranks;  // every single byte, then one rank far past the file
  for (int b = 0; b < 256; ++b) {
    static const char* const k64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    ranks += std::string{k64[b >> 2], k64[(b & 3) << 4], '=', '='} + " " + std::to_string(b) + "\n";
  }
  TiktokenSpec spec;
  spec.pattern = R"(\S+|\s+)";
  EXPECT_TRUE(tiktoken_parts(ranks, spec, "t.model").is_ok());
  auto far = tiktoken_parts(ranks + "YWI= 1073741000\n", spec, "t.model");
  ASSERT_FALSE(far.is_ok());
  EXPECT_NE(far.status().message().find("line 257: rank 1073741000 is far past the file's length"), std::string::npos)
      << far.status().message();
  AddedToken special;
  special.content = "<|end|>";
  special.id = 2000000000;
  spec.special_tokens.push_back(special);
  auto far_special = tiktoken_parts(ranks, spec, "t.model");
  ASSERT_FALSE(far_special.is_ok());
  EXPECT_NE(far_special.status().message().find("special token '<|end|>' id 2000000000 is far past the 256 ranked tokens"),
            std::string::npos)
      << far_special.status().message();

  // Kimi's added_tokens_decoder: ids in the 256 reserved after the ranks, flags booleans.
  const auto dir = oracle_tmp("kimi_bad_config");
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tiktoken.model") << ranks;
  const auto error_for = [&](const std::string& cfg) {
    std::ofstream(dir / "tokenizer_config.json") << cfg;
    auto r = load_tokenizer(dir);
    return r.is_ok() ? std::string("(loaded)") : r.status().message();
  };
  EXPECT_EQ(error_for(R"({"added_tokens_decoder": {"256": {"content": "[BOS]"}}})"), "(loaded)");
  EXPECT_NE(error_for(R"({"added_tokens_decoder": {"512": {"content": "[BOS]"}}})").find("id 512 is past the 256 reserved"),
            std::string::npos);
  EXPECT_NE(error_for(R"({"added_tokens_decoder": {"2000000000000": {"content": "[BOS]"}}})").find("is past the 256 reserved"),
            std::string::npos);
  EXPECT_NE(error_for(R"({"added_tokens_decoder": {"256x": {"content": "[BOS]"}}})").find("key '256x' is not an id"),
            std::string::npos);
  EXPECT_NE(error_for(R"({"added_tokens_decoder": {"256": {"content": "[BOS]", "special": "yes"}}})")
                .find("256 'special' is not a boolean"),
            std::string::npos);
}

}  // namespace
}  // namespace densa
