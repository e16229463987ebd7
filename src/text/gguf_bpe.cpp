#include "text/gguf_bpe.h"

#include <nlohmann/json.hpp>

#include "text/hf_tokenizer.h"

namespace densa {

const char* const kKimiPattern =
    R"([\p{sc:Han}]+)"
    R"(|[^\r\n\p{L}\p{N}]?(?:(?!\p{sc:Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])*(?:(?!\p{sc:Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?(?:(?!\p{sc:Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])+(?:(?!\p{sc:Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3})"
    R"(| ?[^\s\p{L}\p{N}]+[\r\n]*)"
    R"(|\s*[\r\n]+)"
    R"(|\s+(?!\S))"
    R"(|\s+)";

namespace {

// The patterns as the models' tokenizer.json files spell them (the DeepSeek ones hold raw CR
// and LF characters inside their classes).
constexpr const char* kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kDeepSeek3Digits = R"(\p{N}{1,3})";
constexpr const char* kDeepSeek3Cjk = "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+";
constexpr const char* kDeepSeek3Main =
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|"
    "\\s*[\r\n]+|\\s+(?!\\S)|\\s+";

struct PreType {
  const char* name;
  std::vector<std::string> patterns;
  bool add_bos;  // when the file has no tokenizer.ggml.add_bos_token
};

const std::vector<PreType>& pre_types() {
  static const std::vector<PreType> t = {
      {"qwen2", {kQwen2}, false},
      {"llama-bpe", {kLlama3}, true},
      {"glm4", {kLlama3}, false},
      {"deepseek-v3", {kDeepSeek3Digits, kDeepSeek3Cjk, kDeepSeek3Main}, true},
      {"kimi-k2", {kKimiPattern}, false},
  };
  return t;
}

const PreType* find_pre(std::string_view name) {
  for (const PreType& p : pre_types())
    if (p.name == name) return &p;
  return nullptr;
}

// tokenizer.ggml.model = gpt2, expressed as the tokenizer.json it came from.
Result<Tokenizer> gpt2_tokenizer(const GgufFile& f, std::vector<std::string> tokens) {
  using json = nlohmann::json;
  const std::string origin = f.path().string();
  const std::string pre_name = f.get_string("tokenizer.ggml.pre").value_or("");
  const PreType* pre = find_pre(pre_name);
  if (pre == nullptr) {
    return unimplemented(origin + ": tokenizer.ggml.pre '" + pre_name +
                         "' is not supported (qwen2, deepseek-v3, glm4, kimi-k2, llama-bpe are)");
  }
  auto merges = f.get_string_array("tokenizer.ggml.merges");
  if (!merges) return data_loss(origin + ": tokenizer.ggml.merges is missing or not a string array");
  const size_t n = tokens.size();
  const auto types = f.get_int_array("tokenizer.ggml.token_type").value_or(std::vector<int64_t>(n, 1));
  if (types.size() != n) return data_loss(origin + ": tokenizer.ggml.token_type length differs from tokenizer.ggml.tokens");
  json j;
  json vocab = json::object();
  json added = json::array();
  for (size_t i = 0; i < n; ++i) {
    const int64_t t = types[i];
    if (t == static_cast<int64_t>(TokenType::kControl) || t == static_cast<int64_t>(TokenType::kUserDefined)) {
      added.push_back({{"id", i}, {"content", tokens[i]}, {"special", t == static_cast<int64_t>(TokenType::kControl)},
                       {"lstrip", false}, {"rstrip", false}, {"normalized", false}, {"single_word", false}});
    } else if (t == static_cast<int64_t>(TokenType::kNormal) || t == static_cast<int64_t>(TokenType::kUnused) ||
               t == static_cast<int64_t>(TokenType::kByte) || t == static_cast<int64_t>(TokenType::kUnknown)) {
      vocab[tokens[i]] = i;
    } else {
      return data_loss(origin + ": token " + std::to_string(i) + " has unknown tokenizer.ggml.token_type " + std::to_string(t));
    }
  }
  json pretok = json::array();
  for (const std::string& p : pre->patterns) {
    pretok.push_back({{"type", "Split"}, {"pattern", {{"Regex", p}}}, {"behavior", "Isolated"}, {"invert", false}});
  }
  pretok.push_back({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}});
  j["model"] = {{"type", "BPE"}, {"vocab", std::move(vocab)}, {"merges", std::move(*merges)}, {"ignore_merges", false}};
  j["added_tokens"] = std::move(added);
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", std::move(pretok)}};
  j["decoder"] = {{"type", "ByteLevel"}};
  DENSA_ASSIGN_OR_RETURN(TokenizerParts parts, hf_tokenizer_parts(j, origin));
  parts.kind = "gguf-bpe";
  // Vocabulary holes (tokens present only by type) keep the file's text.
  for (size_t i = 0; i < n && i < parts.vocab.pieces.size(); ++i) {
    if (parts.vocab.pieces[i].empty()) parts.vocab.pieces[i] = tokens[i];
  }
  const auto id_of = [&](const char* key) -> Result<TokenId> {
    auto v = f.get_int(key);
    if (!v) return TokenId{-1};
    if (*v < 0 || *v >= static_cast<int64_t>(n)) return data_loss(origin + ": " + key + " " + std::to_string(*v) + " is outside the vocabulary");
    return static_cast<TokenId>(*v);
  };
  DENSA_ASSIGN_OR_RETURN(parts.vocab.bos_id, id_of("tokenizer.ggml.bos_token_id"));
  DENSA_ASSIGN_OR_RETURN(parts.vocab.eos_id, id_of("tokenizer.ggml.eos_token_id"));
  const bool add_bos = f.get_bool("tokenizer.ggml.add_bos_token").value_or(pre->add_bos);
  const bool add_eos = f.get_bool("tokenizer.ggml.add_eos_token").value_or(false);
  parts.prefix.clear();
  parts.suffix.clear();
  if (add_bos) {
    if (parts.vocab.bos_id < 0) return data_loss(origin + ": add_bos_token is set but there is no bos_token_id");
    parts.prefix.push_back(parts.vocab.bos_id);
  }
  if (add_eos) {
    if (parts.vocab.eos_id < 0) return data_loss(origin + ": add_eos_token is set but there is no eos_token_id");
    parts.suffix.push_back(parts.vocab.eos_id);
  }
  parts.vocab.add_bos = add_bos;
  if (auto eot = id_of("tokenizer.ggml.eot_token_id"); eot.is_ok() && *eot >= 0) parts.eos_ids.push_back(*eot);
  if (parts.gguf_export) {
    auto ex = std::make_shared<GgufBpeExport>(*parts.gguf_export);
    ex->pre = pre_name;
    parts.gguf_export = std::move(ex);
  }
  return Tokenizer::from_parts(std::move(parts));
}

}  // namespace

Result<std::vector<std::string>> gguf_pre_patterns(std::string_view pre) {
  const PreType* p = find_pre(pre);
  if (p == nullptr) return unimplemented("tokenizer pre type '" + std::string(pre) + "' is not supported");
  return p->patterns;
}

std::optional<std::string> gguf_pre_name(const std::vector<std::string>& patterns) {
  for (const PreType& p : pre_types())
    if (p.patterns == patterns) return std::string(p.name);
  return std::nullopt;
}

Result<std::optional<Tokenizer>> gguf_tokenizer(const GgufFile& f) {
  const std::string fname = f.path().string();
  auto pieces = f.get_string_array("tokenizer.ggml.tokens");
  if (!pieces) return std::optional<Tokenizer>();
  const std::string model = f.get_string("tokenizer.ggml.model").value_or("llama");
  if (model == "gpt2") {
    DENSA_ASSIGN_OR_RETURN(Tokenizer t, gpt2_tokenizer(f, std::move(*pieces)));
    return std::optional<Tokenizer>(std::move(t));
  }
  if (model != "llama") return unimplemented(fname + ": tokenizer.ggml.model '" + model + "' is not supported (llama, gpt2 are)");
  TokenizerVocab v;
  v.pieces = std::move(*pieces);
  const size_t n = v.pieces.size();
  v.scores = f.get_float_array("tokenizer.ggml.scores").value_or(std::vector<float>(n, 0.0f));
  const auto types = f.get_int_array("tokenizer.ggml.token_type").value_or(std::vector<int64_t>(n, 1));
  if (v.scores.size() != n || types.size() != n) {
    return data_loss(fname + ": tokenizer.ggml.scores/token_type lengths disagree with tokenizer.ggml.tokens (" +
                     std::to_string(n) + ")");
  }
  for (int64_t t : types) v.types.push_back(static_cast<TokenType>(t));
  v.bos_id = static_cast<TokenId>(f.get_int("tokenizer.ggml.bos_token_id").value_or(1));
  v.eos_id = static_cast<TokenId>(f.get_int("tokenizer.ggml.eos_token_id").value_or(2));
  v.unk_id = static_cast<TokenId>(f.get_int("tokenizer.ggml.unknown_token_id").value_or(0));
  v.add_bos = f.get_bool("tokenizer.ggml.add_bos_token").value_or(true);
  auto tok = Tokenizer::from_vocab(std::move(v));
  if (!tok.is_ok()) return Status(tok.status().code(), fname + ": " + tok.status().message());
  return std::optional<Tokenizer>(std::move(tok).value());
}

}  // namespace densa
