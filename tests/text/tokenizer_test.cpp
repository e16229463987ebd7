#include "text/tokenizer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "text/sentencepiece_model.h"

namespace densa {
namespace {

const std::string kModelsDir = DENSA_MODELS_DIR;
const std::string kDataDir = DENSA_DATA_DIR;
const std::string kModelPath = kModelsDir + "/tokenizer/tokenizer.model";
const std::string kGoldenDir = kModelsDir + "/tinystories-mixtral-3.6m/golden";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

const Tokenizer& shared_tokenizer() {
  static const Tokenizer tok = [] {
    auto r = Tokenizer::from_sentencepiece_file(kModelPath);
    CHECK(r.is_ok()) << r.status().to_string();
    return std::move(r).value();
  }();
  return tok;
}

std::vector<TokenId> valid_golden_ids() {
  const std::string raw = read_file(kGoldenDir + "/valid.ids.u16.bin");
  std::vector<TokenId> ids;
  for (size_t i = 0; i + 1 < raw.size(); i += 2) {
    ids.push_back(static_cast<uint8_t>(raw[i]) | (static_cast<uint8_t>(raw[i + 1]) << 8));
  }
  return ids;
}

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<uint8_t>(s[i]);
    size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t j = 1; j < n; ++j) {
      if ((static_cast<uint8_t>(s[i + j]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

// Strings that exercise digits, newlines, spaces, mojibake, invalid UTF-8 and piece syntax.
const std::vector<std::string> kTrickyTexts = {
    "Room 101 costs $2,024.50!",
    "a\n\nb\n",
    "\nstarts with a newline",
    "  two leading spaces and two trailing  ",
    " ",
    "It\xC3\xA2\xE2\x82\xAC\xE2\x84\xA2s Lily\xC3\xA2\xE2\x82\xAC\xC5\x93s toy",  // "Itâ€™s Lilyâ€œs toy"
    "h\xC3\xA9llo \xE4\xB8\x96\xE7\x95\x8C \xF0\x9F\x98\x80",                          // "héllo 世界 😀"
    "bad \xFF\xFE\x80 bytes \xC3",                                                      // invalid UTF-8
    "\xE0\x80\xAF overlong, \xED\xA0\x80 surrogate",
    "<s> </s> <unk> <0x41>",
    "tab\there",
};

TEST(TokenizerTest, LoadsModelFile) {
  const Tokenizer& tok = shared_tokenizer();
  EXPECT_EQ(tok.vocab_size(), 1024);
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_EQ(tok.vocab().unk_id, 0);
  EXPECT_TRUE(tok.vocab().add_dummy_prefix);
  EXPECT_TRUE(tok.byte_fallback());
  EXPECT_EQ(tok.vocab().types[1], TokenType::kControl);
  EXPECT_EQ(tok.vocab().types[0], TokenType::kUnknown);
  EXPECT_EQ(tok.vocab().types[3 + 0x41], TokenType::kByte);
  EXPECT_EQ(tok.token_bytes(3 + 0x0A), "\n");
  EXPECT_EQ(tok.token_bytes(2), "</s>");
  EXPECT_EQ(tok.token_bytes(5000), "");
}

TEST(TokenizerTest, MissingFileIsNotFound) {
  auto r = Tokenizer::from_sentencepiece_file("/nonexistent/tokenizer.model");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
}

TEST(TokenizerTest, GoldenPrompts) {
  const Tokenizer& tok = shared_tokenizer();
  const auto golden = nlohmann::json::parse(read_file(kGoldenDir + "/golden.json"));
  ASSERT_EQ(golden.at("prompts").size(), 4u);
  for (const auto& p : golden.at("prompts")) {
    const std::string prompt = p.at("prompt");
    const auto want = p.at("prompt_ids").get<std::vector<TokenId>>();
    const std::vector<TokenId> got = tok.encode(prompt, true);
    EXPECT_EQ(got, want) << prompt;
    EXPECT_EQ(tok.decode(got), prompt);

    // The greedy continuation: pieces and full text.
    const auto greedy = p.at("greedy_ids").get<std::vector<TokenId>>();
    const auto pieces = p.at("greedy_pieces").get<std::vector<std::string>>();
    ASSERT_EQ(greedy.size(), pieces.size());
    for (size_t i = 0; i < greedy.size(); ++i) EXPECT_EQ(tok.vocab().pieces[greedy[i]], pieces[i]);
    std::vector<TokenId> all = want;
    all.insert(all.end(), greedy.begin(), greedy.end());
    EXPECT_EQ(tok.decode(all), p.at("full_text").get<std::string>());
  }
}

TEST(TokenizerTest, ValidationFileMatchesGoldenIds) {
  const Tokenizer& tok = shared_tokenizer();
  std::string text = read_file(kDataDir + "/tinystories/valid.txt");
  ASSERT_FALSE(text.empty());
  ASSERT_EQ(text.back(), '\n');
  text.pop_back();
  const std::vector<TokenId> want = valid_golden_ids();
  ASSERT_EQ(want.size(), 16398u);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<TokenId> got = tok.encode(text, true);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(got.size(), want.size());
  size_t first_diff = got.size();
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      first_diff = i;
      break;
    }
  }
  EXPECT_EQ(first_diff, got.size()) << "first mismatch at token " << first_diff;
  RecordProperty("encode_ms", std::to_string(ms));  // speed is a benchmark concern, not asserted here
}

TEST(TokenizerTest, LargeTextRoundTrips) {
  const Tokenizer& tok = shared_tokenizer();
  const std::string text = read_file(kDataDir + "/tinystories/train.txt");  // ~0.9 MB
  const std::vector<TokenId> ids = tok.encode(text, false);
  EXPECT_GT(ids.size(), text.size() / 8);
  EXPECT_EQ(tok.decode(ids), text);
}

TEST(TokenizerTest, ValidationFileRoundTrips) {
  const Tokenizer& tok = shared_tokenizer();
  const std::string text = read_file(kDataDir + "/tinystories/valid.txt");
  EXPECT_EQ(tok.decode(tok.encode(text, true)), text);
  std::istringstream lines(text);
  std::string line;
  int num_lines = 0;
  while (std::getline(lines, line)) {
    ASSERT_EQ(tok.decode(tok.encode(line, true)), line) << "line " << num_lines;
    ++num_lines;
  }
  EXPECT_GT(num_lines, 100);
}

TEST(TokenizerTest, TrickyTextsRoundTrip) {
  const Tokenizer& tok = shared_tokenizer();
  for (const std::string& text : kTrickyTexts) {
    EXPECT_EQ(tok.decode(tok.encode(text, true)), text) << text;
    EXPECT_EQ(tok.decode(tok.encode(text, false)), text) << text;
  }
  EXPECT_EQ(tok.encode("", true), std::vector<TokenId>{1});
  EXPECT_TRUE(tok.encode("", false).empty());
  EXPECT_EQ(tok.decode(std::vector<TokenId>{}), "");
  // As in SentencePiece, a literal "▁" in text is indistinguishable from a space.
  EXPECT_EQ(tok.encode("a\xE2\x96\x81" "b", false), tok.encode("a b", false));
}

TEST(TokenizerTest, DigitsNewlinesAndUnknownBytesAreByteTokens) {
  const Tokenizer& tok = shared_tokenizer();
  const std::vector<TokenId> ids = tok.encode("7\n", false);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(tok.vocab().pieces[ids[0]], "\xE2\x96\x81");  // the dummy prefix alone
  EXPECT_EQ(ids[1], 3 + '7');
  EXPECT_EQ(ids[2], 13);
  // "é" is not a piece: its two UTF-8 bytes.
  const std::vector<TokenId> e = tok.encode("\xC3\xA9", false);
  EXPECT_EQ(e, (std::vector<TokenId>{ids[0], 3 + 0xC3, 3 + 0xA9}));
  // Piece syntax in text never yields control or byte tokens by merging.
  for (TokenId id : tok.encode("<s></s><unk><0x41>", true)) {
    if (id == 1) continue;
    EXPECT_NE(tok.vocab().types[id], TokenType::kControl);
    EXPECT_NE(id, 3 + 0x41);
  }
  // Control and unknown ids are dropped by decode; out-of-range ids are ignored.
  EXPECT_EQ(tok.decode(std::vector<TokenId>{1, 0, 2, -5, 99999}), "");
}

TEST(TokenizerTest, DecodeStripsOnlyTheDummyPrefix) {
  const Tokenizer& tok = shared_tokenizer();
  const std::vector<TokenId> ids = tok.encode("the cat", false);
  // BOS/EOS before the first piece do not stop the strip.
  std::vector<TokenId> with_control = {1, 2};
  with_control.insert(with_control.end(), ids.begin(), ids.end());
  EXPECT_EQ(tok.decode(with_control), "the cat");
  // A piece decoded on its own (e.g. mid-stream) keeps its space via token_bytes.
  EXPECT_EQ(tok.token_bytes(ids[0]).front(), ' ');
}

// Naive O(n^2) SentencePiece BPE over UTF-8 characters: the oracle for the fast encoder.
std::vector<TokenId> naive_encode(const Tokenizer& tok, const std::string& text) {
  const TokenizerVocab& v = tok.vocab();
  std::map<std::string, TokenId> ids;
  for (size_t i = 0; i < v.pieces.size(); ++i) {
    if (v.types[i] == TokenType::kNormal || v.types[i] == TokenType::kUserDefined) {
      ids.emplace(v.pieces[i], static_cast<TokenId>(i));
    }
  }
  std::string norm = "\xE2\x96\x81";
  for (char c : text) norm += c == ' ' ? std::string("\xE2\x96\x81") : std::string(1, c);
  std::vector<std::string> syms;
  for (size_t i = 0; i < norm.size();) {
    const auto b = static_cast<uint8_t>(norm[i]);
    size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 1;
    if (!is_valid_utf8(norm.substr(i, n)) || i + n > norm.size()) n = 1;
    syms.push_back(norm.substr(i, n));
    i += n;
  }
  while (true) {
    int best = -1;
    float best_score = 0;
    for (size_t i = 0; i + 1 < syms.size(); ++i) {
      auto it = ids.find(syms[i] + syms[i + 1]);
      if (it != ids.end() && (best < 0 || v.scores[it->second] > best_score)) {
        best = static_cast<int>(i);
        best_score = v.scores[it->second];
      }
    }
    if (best < 0) break;
    syms[best] += syms[best + 1];
    syms.erase(syms.begin() + best + 1);
  }
  std::vector<TokenId> out;
  for (const std::string& s : syms) {
    auto it = ids.find(s);
    if (it != ids.end()) {
      out.push_back(it->second);
    } else {
      for (char c : s) out.push_back(3 + static_cast<uint8_t>(c));
    }
  }
  return out;
}

TEST(TokenizerTest, MatchesNaiveBpeOnRandomSnippets) {
  const Tokenizer& tok = shared_tokenizer();
  const std::string corpus = read_file(kDataDir + "/tinystories/valid.txt");
  std::mt19937 rng(3);
  for (int trial = 0; trial < 300; ++trial) {
    const size_t len = 1 + rng() % 200;
    std::string text = corpus.substr(rng() % (corpus.size() - len), len);
    if (trial % 4 == 0) text[rng() % text.size()] = static_cast<char>(rng());  // a random byte
    ASSERT_EQ(tok.encode(text, false), naive_encode(tok, text)) << text;
  }
  for (const std::string& text : kTrickyTexts) EXPECT_EQ(tok.encode(text, false), naive_encode(tok, text)) << text;
}

TEST(TokenizerTest, FromVocabMatchesModelFile) {
  const Tokenizer& from_file = shared_tokenizer();
  // Rebuild from the parsed pieces (what a GGUF's tokenizer.ggml.* arrays carry).
  const std::string bytes = read_file(kModelPath);
  auto parsed = parse_sentencepiece_model(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  ASSERT_TRUE(parsed.is_ok()) << parsed.status().to_string();
  EXPECT_TRUE(parsed->spec.byte_fallback);
  TokenizerVocab vocab;
  vocab.pieces = parsed->vocab.pieces;
  vocab.scores = parsed->vocab.scores;
  vocab.types = parsed->vocab.types;
  vocab.bos_id = 1;
  vocab.eos_id = 2;
  vocab.unk_id = 0;
  auto from_vocab = Tokenizer::from_vocab(vocab);
  ASSERT_TRUE(from_vocab.is_ok()) << from_vocab.status().to_string();
  EXPECT_TRUE(from_vocab->byte_fallback());

  std::vector<std::string> texts = kTrickyTexts;
  texts.push_back(read_file(kDataDir + "/tinystories/valid.txt"));
  for (const std::string& text : texts) {
    const auto ids = from_vocab->encode(text, true);
    EXPECT_EQ(ids, from_file.encode(text, true)) << text.substr(0, 80);
    EXPECT_EQ(from_vocab->decode(ids), from_file.decode(ids));
  }
}

TEST(TokenizerTest, FromVocabRejectsBadInput) {
  TokenizerVocab v;
  EXPECT_FALSE(Tokenizer::from_vocab(v).is_ok());  // empty
  v.pieces = {"<unk>", "<s>", "</s>", "a"};
  v.scores = {0, 0, 0};
  v.types = {TokenType::kUnknown, TokenType::kControl, TokenType::kControl, TokenType::kNormal};
  EXPECT_FALSE(Tokenizer::from_vocab(v).is_ok());  // scores too short
  v.scores.push_back(0);
  EXPECT_TRUE(Tokenizer::from_vocab(v).is_ok());
  v.eos_id = 7;
  EXPECT_FALSE(Tokenizer::from_vocab(v).is_ok());  // eos out of range
  v.eos_id = 2;
  v.types[3] = static_cast<TokenType>(42);
  EXPECT_FALSE(Tokenizer::from_vocab(v).is_ok());  // unknown type
  v.types[3] = TokenType::kByte;
  EXPECT_FALSE(Tokenizer::from_vocab(v).is_ok());  // byte token "a" is not <0xNN>
}

// A hand-built vocabulary: merge order, ties, control pieces, user-defined pieces, unk runs.
TokenizerVocab tiny_vocab() {
  TokenizerVocab v;
  v.pieces = {"<unk>", "<s>", "</s>", "a", "b", "c", "ab", "ba", "bc", "abc", "<ctl>", "XY"};
  v.scores = {0, 0, 0, -100, -100, -100, -1, -1, -2, -3, 0, 0};
  v.types = {TokenType::kUnknown, TokenType::kControl, TokenType::kControl, TokenType::kNormal,
             TokenType::kNormal,  TokenType::kNormal,  TokenType::kNormal,  TokenType::kNormal,
             TokenType::kNormal,  TokenType::kNormal,  TokenType::kControl, TokenType::kUserDefined};
  v.add_dummy_prefix = false;
  return v;
}

TEST(TokenizerTest, MergesByScoreThenLeftmost) {
  TokenizerVocab v = tiny_vocab();
  auto tok = Tokenizer::from_vocab(v);
  ASSERT_TRUE(tok.is_ok());
  EXPECT_FALSE(tok->byte_fallback());
  // "ab" and "ba" tie at -1: the leftmost pair merges first.
  EXPECT_EQ(tok->encode("aba", false), (std::vector<TokenId>{6, 3}));
  // "abc": ab (-1) beats bc (-2), then ab+c = abc.
  EXPECT_EQ(tok->encode("abc", false), (std::vector<TokenId>{9}));
  // Raise "ba" above "ab": "aba" -> a + ba.
  v.scores[7] = 0;
  auto tok2 = Tokenizer::from_vocab(v);
  ASSERT_TRUE(tok2.is_ok());
  EXPECT_EQ(tok2->encode("aba", false), (std::vector<TokenId>{3, 7}));
  // A control piece is never produced from text; user-defined pieces are matched whole.
  EXPECT_EQ(tok->encode("<ctl>", false), (std::vector<TokenId>{0, 5, 0}));  // "<", "c", "tl>"
  EXPECT_EQ(tok->encode("aXYb", false), (std::vector<TokenId>{3, 11, 4}));
  // Without byte fallback a run of unknown characters is one unk.
  EXPECT_EQ(tok->encode("a??b?", false), (std::vector<TokenId>{3, 0, 4, 0}));
}

TEST(TokenizerTest, DecodeIncrementalHoldsPartialUtf8) {
  const Tokenizer& tok = shared_tokenizer();
  // "😀" is four byte tokens.
  const std::vector<TokenId> ids = tok.encode("x \xF0\x9F\x98\x80!", false);
  std::string streamed;
  size_t emitted = 0;
  std::vector<std::string> chunks;
  for (size_t n = 1; n <= ids.size(); ++n) {
    std::string chunk = tok.decode_incremental(std::span(ids).first(n), emitted);
    EXPECT_TRUE(is_valid_utf8(chunk)) << n;
    chunks.push_back(chunk);
    streamed += chunk;
    EXPECT_EQ(emitted, streamed.size());
  }
  EXPECT_EQ(streamed, "x \xF0\x9F\x98\x80!");
  // Some chunk was held back and released as the whole emoji.
  EXPECT_NE(std::find(chunks.begin(), chunks.end(), std::string("\xF0\x9F\x98\x80")), chunks.end());
  // Calling again with no new ids yields nothing.
  EXPECT_EQ(tok.decode_incremental(ids, emitted), "");

  // An incomplete tail stays held until flush.
  const std::vector<TokenId> partial = {3 + 0xF0, 3 + 0x9F};
  size_t e2 = 0;
  EXPECT_EQ(tok.decode_incremental(partial, e2), "");
  EXPECT_EQ(e2, 0u);
  EXPECT_EQ(tok.decode_incremental(partial, e2, /*flush=*/true), "\xF0\x9F");
  EXPECT_EQ(e2, 2u);
  // Invalid bytes are never held back.
  const std::vector<TokenId> invalid = {3 + 0xFF, 3 + 0x80};
  size_t e3 = 0;
  EXPECT_EQ(tok.decode_incremental(invalid, e3), "\xFF\x80");
}

TEST(TokenizerTest, DecodeIncrementalMatchesDecodeOnValidationText) {
  const Tokenizer& tok = shared_tokenizer();
  std::string text = read_file(kDataDir + "/tinystories/valid.txt").substr(0, 8000);
  text += " h\xC3\xA9llo \xE4\xB8\x96\xE7\x95\x8C";
  const std::vector<TokenId> ids = tok.encode(text, true);
  std::string streamed;
  size_t emitted = 0;
  for (size_t n = 0; n <= ids.size(); ++n) {
    const std::string chunk = tok.decode_incremental(std::span(ids).first(n), emitted);
    ASSERT_TRUE(is_valid_utf8(chunk)) << n;
    streamed += chunk;
  }
  streamed += tok.decode_incremental(ids, emitted, /*flush=*/true);
  EXPECT_EQ(streamed, text);
}

TEST(TokenizerTest, MalformedProtobufIsAnErrorNotACrash) {
  const std::string good = read_file(kModelPath);
  const auto parse = [](const std::string& b) {
    return parse_sentencepiece_model(
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(b.data()), b.size()));
  };
  ASSERT_TRUE(parse(good).is_ok());
  // Every truncation is either an error or (at a field boundary) a smaller valid model.
  for (size_t n = 0; n < good.size(); n += 3) {
    auto r = parse(good.substr(0, n));
    if (!r.is_ok()) {
      EXPECT_NE(r.status().code(), StatusCode::kOk);
    }
  }
  // Random byte corruption, fixed seed.
  std::mt19937 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bad = good;
    for (int k = 0; k < 4; ++k) bad[rng() % bad.size()] = static_cast<char>(rng());
    auto r = parse(bad);
    if (r.is_ok()) (void)Tokenizer::from_vocab(r->vocab);
  }
  // Specific shapes.
  EXPECT_EQ(parse(std::string("\x0A\xFF\xFF\xFF\xFF\x0F", 6)).status().code(), StatusCode::kDataLoss);  // length past end
  EXPECT_EQ(parse(std::string(11, '\xFF')).status().code(), StatusCode::kDataLoss);  // endless varint
  EXPECT_EQ(parse(std::string("\x0B", 1)).status().code(), StatusCode::kDataLoss);   // group wire type
  EXPECT_EQ(parse(std::string("\x00\x00", 2)).status().code(), StatusCode::kDataLoss);  // field 0
  EXPECT_EQ(parse("").status().code(), StatusCode::kDataLoss);                         // no pieces
}

// Minimal protobuf writer for hand-built ModelProtos.
std::string varint(uint64_t v) {
  std::string s;
  while (v >= 0x80) {
    s += static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  s += static_cast<char>(v);
  return s;
}
std::string field_bytes(int number, const std::string& b) { return varint(number << 3 | 2) + varint(b.size()) + b; }
std::string field_varint(int number, uint64_t v) { return varint(number << 3) + varint(v); }

std::string tiny_model(uint64_t model_type, bool remove_extra_whitespaces) {
  std::string m;
  for (const char* p : {"<unk>", "<s>", "</s>"}) {
    m += field_bytes(1, field_bytes(1, p) + field_varint(3, std::string(p) == "<unk>" ? 2 : 3));
  }
  m += field_bytes(1, field_bytes(1, "a"));  // type defaults to NORMAL, score to 0
  m += field_bytes(2, field_varint(3, model_type) + field_varint(41, 1) + field_varint(43, static_cast<uint64_t>(-1)));
  m += field_bytes(3, field_bytes(1, "identity") + field_varint(4, remove_extra_whitespaces ? 1 : 0));
  return m;
}

TEST(TokenizerTest, HandBuiltModelProtos) {
  const auto parse = [](const std::string& b) {
    return parse_sentencepiece_model(
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(b.data()), b.size()));
  };
  auto ok = parse(tiny_model(2, false));
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  EXPECT_EQ(ok->vocab.pieces.size(), 4u);
  EXPECT_EQ(ok->vocab.types[3], TokenType::kNormal);
  EXPECT_EQ(ok->vocab.bos_id, 1);
  EXPECT_FALSE(ok->spec.byte_fallback);
  EXPECT_EQ(parse(tiny_model(1, false)).status().code(), StatusCode::kUnimplemented);  // unigram
  EXPECT_EQ(parse(tiny_model(2, true)).status().code(), StatusCode::kUnimplemented);   // whitespace folding
}

}  // namespace
}  // namespace densa
