#include "tools/model_files/gen_model_tokenizer.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace densa {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

Result<Json> read_json(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return not_found(p.string() + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  Json j = Json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalid_argument(p.string() + ": not valid JSON");
  return j;
}

// bos_token / eos_token: a string or {"content": string}.
std::optional<std::string> token_text(const Json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  return std::nullopt;
}

}  // namespace

Result<TokenizerDirInfo> inspect_tokenizer_dir(const fs::path& dir) {
  if (!fs::is_directory(dir)) return not_found(dir.string() + ": not a directory (--tokenizer takes none, bytes or a directory)");
  TokenizerDirInfo info;
  Json token_ids = Json::object();  // token text -> id, for bos / eos
  if (fs::exists(dir / "tokenizer.json")) {
    DENSA_ASSIGN_OR_RETURN(Json tj, read_json(dir / "tokenizer.json"));
    const Json* vocab = tj.contains("model") && tj["model"].is_object() && tj["model"].contains("vocab")
                            ? &tj["model"]["vocab"] : nullptr;
    if (vocab == nullptr || !vocab->is_object())
      return invalid_argument((dir / "tokenizer.json").string() + ": no model.vocab object");
    int64_t highest = -1;
    for (const auto& [text, id] : vocab->items()) {
      if (!id.is_number_integer()) return invalid_argument((dir / "tokenizer.json").string() + ": vocab id of '" + text + "' is not an integer");
      highest = std::max<int64_t>(highest, id.get<int64_t>());
      token_ids[text] = id;
    }
    if (tj.contains("added_tokens") && tj["added_tokens"].is_array())
      for (const Json& t : tj["added_tokens"]) {
        if (!t.contains("id") || !t["id"].is_number_integer() || !t.contains("content") || !t["content"].is_string())
          return invalid_argument((dir / "tokenizer.json").string() + ": an added token lacks an integer id or content");
        highest = std::max<int64_t>(highest, t["id"].get<int64_t>());
        token_ids[t["content"].get<std::string>()] = t["id"];
      }
    info.vocab_size = static_cast<int>(highest + 1);
    info.files.push_back(dir / "tokenizer.json");
  } else if (fs::exists(dir / "tiktoken.model")) {
    std::ifstream in(dir / "tiktoken.model");
    std::string line;
    int64_t highest = -1;
    while (std::getline(in, line)) {
      const size_t sp = line.find(' ');
      if (line.empty()) continue;
      if (sp == std::string::npos) return invalid_argument((dir / "tiktoken.model").string() + ": a line is not 'TOKEN RANK'");
      highest = std::max<int64_t>(highest, std::stoll(line.substr(sp + 1)));
    }
    info.vocab_size = static_cast<int>(highest + 1);
    info.files.push_back(dir / "tiktoken.model");
  } else {
    return not_found(dir.string() + ": holds neither tokenizer.json nor tiktoken.model");
  }
  if (fs::exists(dir / "tokenizer_config.json")) {
    DENSA_ASSIGN_OR_RETURN(Json tc, read_json(dir / "tokenizer_config.json"));
    // Special tokens a tiktoken model declares here extend its vocabulary.
    if (tc.contains("added_tokens_decoder") && tc["added_tokens_decoder"].is_object())
      for (const auto& [id_text, t] : tc["added_tokens_decoder"].items()) {
        const int64_t id = std::stoll(id_text);
        info.vocab_size = std::max<int>(info.vocab_size, static_cast<int>(id + 1));
        if (t.is_object() && t.contains("content") && t["content"].is_string()) token_ids[t["content"].get<std::string>()] = id;
      }
    auto lookup = [&](const char* key) -> std::optional<TokenId> {
      const std::optional<std::string> text = token_text(tc, key);
      if (!text || !token_ids.contains(*text)) return std::nullopt;
      return token_ids[*text].get<TokenId>();
    };
    info.bos_id = lookup("bos_token");
    info.eos_id = lookup("eos_token");
    info.files.push_back(dir / "tokenizer_config.json");
  }
  if (fs::exists(dir / "generation_config.json")) {
    DENSA_ASSIGN_OR_RETURN(Json gc, read_json(dir / "generation_config.json"));
    if (!info.eos_id && gc.contains("eos_token_id")) {
      const Json& e = gc["eos_token_id"].is_array() && !gc["eos_token_id"].empty() ? gc["eos_token_id"][0] : gc["eos_token_id"];
      if (e.is_number_integer()) info.eos_id = e.get<TokenId>();
    }
    info.files.push_back(dir / "generation_config.json");
  }
  for (const char* extra : {"special_tokens_map.json", "chat_template.jinja", "tokenization_kimi.py"})
    if (fs::exists(dir / extra)) info.files.push_back(dir / extra);
  if (info.vocab_size < 1) return invalid_argument(dir.string() + ": the tokenizer has an empty vocabulary");
  return info;
}

Status copy_tokenizer_files(const TokenizerDirInfo& info, const fs::path& out) {
  for (const fs::path& f : info.files) {
    std::error_code ec;
    fs::copy_file(f, out / f.filename(), fs::copy_options::overwrite_existing, ec);
    if (ec) return data_loss((out / f.filename()).string() + ": cannot copy the tokenizer file: " + ec.message());
  }
  return Status::ok();
}

}  // namespace densa
