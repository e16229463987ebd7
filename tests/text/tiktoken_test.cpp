// densa's tiktoken against OpenAI's tiktoken (npm) on the rank data it ships, and Kimi K2's
// split pattern (PCRE2 translation of its && class intersections) against Python's `regex`.
#include <gtest/gtest.h>

#include <random>

#include "text/gguf_bpe.h"
#include "text/regex.h"
#include "text/tiktoken.h"
#include "text/tokenizer_loader.h"
#include "tokenizer_oracle_util.h"

namespace densa {
namespace {

const std::string kStrings = std::string(DENSA_SOURCE_DIR) + "/tests/data/text/tokenizer_strings.jsonl";

std::vector<std::string> inputs() {
  std::vector<std::string> in = read_lines_json(kStrings);
  const auto corpus = read_lines_text(std::string(DENSA_DATA_DIR) + "/tinystories/valid.txt");
  in.insert(in.end(), corpus.begin(), corpus.end());
  return in;
}

void expect_equal_to_tiktoken(const std::string& encoding) {
  const auto ranks = oracle_tmp(encoding + ".tiktoken");
  const std::string cmd = "node " + kOracleScript + " " + kOracles + " tiktoken-ranks " + encoding + " " + ranks.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream meta_file(ranks.string() + ".json");
  const nlohmann::json meta = nlohmann::json::parse(meta_file);
  TiktokenSpec spec;
  spec.pattern = meta.at("pat_str").get<std::string>();
  for (const auto& [text, id] : meta.at("special_tokens").items()) {
    AddedToken t;
    t.content = text;
    t.id = id.get<TokenId>();
    t.special = true;
    spec.special_tokens.push_back(t);
  }
  auto tok = load_tiktoken(ranks, spec);
  ASSERT_TRUE(tok.is_ok()) << tok.status().to_string();
  const auto in = inputs();
  const auto want = oracle_encode("tiktoken " + encoding, in);
  ASSERT_EQ(want.size(), in.size());
  size_t mismatches = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const auto got = tok->encode(in[i], false);
    if (got != want[i] && ++mismatches <= 10) {
      ADD_FAILURE() << nlohmann::json(in[i]).dump() << "\n got  " << nlohmann::json(got).dump() << "\n want "
                    << nlohmann::json(want[i]).dump();
    }
    ASSERT_EQ(tok->decode(got, false), in[i]);
  }
  EXPECT_EQ(mismatches, 0u) << "of " << in.size();
}

TEST(Tiktoken, Cl100kEqualsTiktoken) { expect_equal_to_tiktoken("cl100k_base"); }
TEST(Tiktoken, O200kEqualsTiktoken) { expect_equal_to_tiktoken("o200k_base"); }

TEST(Tiktoken, MalformedRankFilesFailClearly) {
  TiktokenSpec spec;
  spec.pattern = R"(\S+|\s+)";
  auto bad64 = tiktoken_parts("IQ== 0\nnot*base64 1\n", spec, "t.model");
  ASSERT_FALSE(bad64.is_ok());
  EXPECT_NE(bad64.status().message().find("line 2: bad base64"), std::string::npos) << bad64.status().message();
  auto bad_rank = tiktoken_parts("IQ== zero\n", spec, "t.model");
  ASSERT_FALSE(bad_rank.is_ok());
  EXPECT_NE(bad_rank.status().message().find("bad rank"), std::string::npos);
  auto no_space = tiktoken_parts("IQ==\n", spec, "t.model");
  EXPECT_FALSE(no_space.is_ok());
  auto missing_bytes = tiktoken_parts("IQ== 0\n", spec, "t.model");
  ASSERT_FALSE(missing_bytes.is_ok());
  EXPECT_NE(missing_bytes.status().message().find("single byte"), std::string::npos);
  auto empty = tiktoken_parts("", spec, "t.model");
  EXPECT_FALSE(empty.is_ok());
}

// A Kimi K2 style directory: tiktoken.model (here cl100k's ranks) + tokenizer_config.json
// added_tokens_decoder; the rest of the 256 reserved ids get <|reserved_token_N|> names.
TEST(Tiktoken, KimiStyleDirectory) {
  const auto dir = oracle_tmp("kimi_dir");
  std::filesystem::create_directories(dir);
  const std::string cmd = "node " + kOracleScript + " " + kOracles + " tiktoken-ranks cl100k_base " + (dir / "tiktoken.model").string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ofstream(dir / "tokenizer_config.json") << R"({
    "bos_token": "[BOS]", "eos_token": "[EOS]",
    "added_tokens_decoder": {"100256": {"content": "[BOS]", "special": true},
                             "100257": {"content": "[EOS]", "special": true},
                             "100258": {"content": "<|im_end|>", "special": true}}})";
  std::ofstream(dir / "generation_config.json") << R"({"eos_token_id": 100258})";
  auto lt = load_tokenizer(dir);
  ASSERT_TRUE(lt.is_ok()) << lt.status().to_string();
  const Tokenizer& t = lt->tokenizer;
  EXPECT_EQ(t.kind(), "tiktoken");
  EXPECT_EQ(t.vocab_size(), 100256 + 256);
  EXPECT_EQ(t.bos_id(), 100256);
  EXPECT_EQ(t.eos_id(), 100257);
  EXPECT_TRUE(t.is_eos(100258));
  EXPECT_EQ(t.token_to_id("<|reserved_token_100300|>"), std::optional<TokenId>(100300));
  const auto ids = t.encode("hi<|im_end|>", false);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.back(), 100258);
  EXPECT_EQ(t.decode(ids), "hi");
  EXPECT_EQ(t.decode(ids, false), "hi<|im_end|>");
  // Han runs split apart from Latin letters (the pattern's first branch).
  const auto han = t.encode("abc你好", false);
  EXPECT_EQ(t.decode(han), "abc你好");
  EXPECT_GE(han.size(), 2u);
}

// Random strings over characters where the Kimi pattern's branches differ: Han (and
// characters whose script extensions include Han), kana, Latin upper / lower / title case,
// combining marks, digits, apostrophes, whitespace and punctuation.
std::vector<std::string> kimi_probe_strings() {
  const std::vector<std::string> pool = {
      "a", "b", "Z", "Q", "ǅ", "ʰ", "\xCC\x81" /* U+0301 */, "你", "好", "龘", "〇", "々", "、", "。", "ー", "か", "カ",
      "ｶ", "한", "ש", "ا", "न", "ि", "1", "٣", "Ⅻ", "'", "'s", "'LL", "'d", " ", "  ", "\n", "\r\n", "\t", "!", "?",
      "-", "/", "😀", "\xE2\x80\x8D", "ß", "İ", "ſ", "K", "\xE3\x80\x80"};
  std::mt19937 rng(1234);
  std::vector<std::string> out = read_lines_json(kStrings);
  for (int i = 0; i < 3000; ++i) {
    std::string s;
    const int n = 1 + static_cast<int>(rng() % 12);
    for (int k = 0; k < n; ++k) s += pool[rng() % pool.size()];
    out.push_back(s);
  }
  return out;
}

TEST(Tiktoken, KimiPatternMatchesPythonRegexWithIntersections) {
  const std::vector<std::string> probes = kimi_probe_strings();
  const auto in = oracle_tmp("kimi_in.jsonl"), out = oracle_tmp("kimi_out.jsonl"), py = oracle_tmp("kimi.py");
  {
    std::ofstream f(in);
    for (const auto& s : probes) f << nlohmann::json(s).dump() << '\n';
    // The pattern exactly as tokenization_kimi.py declares it (with &&).
    std::ofstream p(py);
    p << R"PY(import json, sys, regex
pat = "|".join([
    r"""[\p{Han}]+""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])
rx = regex.compile(pat, regex.V1)
for line in open(sys.argv[1], encoding="utf-8"):
    print(json.dumps(rx.findall(json.loads(line)), ensure_ascii=False))
)PY";
  }
  const std::string cmd = "/usr/bin/python3 " + py.string() + " " + in.string() + " > " + out.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto rx = Regex::compile(kKimiPattern);
  ASSERT_TRUE(rx.is_ok()) << rx.status().to_string();
  std::ifstream f(out);
  size_t i = 0, mismatches = 0;
  for (std::string line; std::getline(f, line); ++i) {
    ASSERT_LT(i, probes.size());
    const auto want = nlohmann::json::parse(line).get<std::vector<std::string>>();
    std::vector<std::string> got;
    rx->for_each_match(probes[i], [&](size_t b, size_t e) { got.push_back(probes[i].substr(b, e - b)); });
    if (got != want && ++mismatches <= 10) {
      ADD_FAILURE() << nlohmann::json(probes[i]).dump() << "\n got  " << nlohmann::json(got).dump() << "\n want "
                    << nlohmann::json(want).dump();
    }
  }
  EXPECT_EQ(i, probes.size());
  EXPECT_EQ(mismatches, 0u);
}

}  // namespace
}  // namespace densa
