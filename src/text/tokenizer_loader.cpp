#include "text/tokenizer_loader.h"

#include <charconv>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "io/gguf_file.h"
#include "text/gguf_bpe.h"
#include "text/hf_tokenizer.h"
#include "text/tiktoken.h"

namespace densa {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// Kimi K2 reserves this many special-token ids after the ranked tokens.
constexpr int kKimiReservedSpecials = 256;

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

Result<std::string> read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return not_found(p.string() + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The parsed JSON file, or null when it does not exist.
Result<json> read_json_if_present(const fs::path& p) {
  if (!is_file(p)) return json();
  DENSA_ASSIGN_OR_RETURN(std::string text, read_text(p));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return data_loss(p.string() + ": not a JSON object (truncated or corrupt?)");
  return j;
}

// bos_token / eos_token: a string, {content: string}, or null.
Result<std::string> token_text(const json& cfg, const char* key, const fs::path& file) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return std::string();
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  return data_loss(file.string() + ": '" + key + "' is neither a string nor {content}");
}

Status read_chat_templates(const json& cfg, const fs::path& dir, TextAssets& a) {
  const fs::path file = dir / "tokenizer_config.json";
  if (auto it = cfg.find("chat_template"); it != cfg.end() && !it->is_null()) {
    if (it->is_string()) {
      a.chat_templates.push_back({"default", it->get<std::string>()});
    } else if (it->is_array()) {
      for (const json& t : *it) {
        if (!t.is_object() || !t.contains("name") || !t["name"].is_string() || !t.contains("template") ||
            !t["template"].is_string()) {
          return data_loss(file.string() + ": chat_template list entries need string 'name' and 'template'");
        }
        a.chat_templates.push_back({t["name"].get<std::string>(), t["template"].get<std::string>()});
      }
    } else {
      return data_loss(file.string() + ": chat_template is neither a string nor a list of {name, template}");
    }
  }
  if (is_file(dir / "chat_template.jinja")) {
    DENSA_ASSIGN_OR_RETURN(std::string text, read_text(dir / "chat_template.jinja"));
    std::erase_if(a.chat_templates, [](const NamedChatTemplate& t) { return t.name == "default"; });
    a.chat_templates.insert(a.chat_templates.begin(), {"default", std::move(text)});
  }
  for (const NamedChatTemplate& t : a.chat_templates) {
    if (t.name == "default") a.chat_template = t.text;
  }
  if (a.chat_template.empty() && a.chat_templates.size() == 1) a.chat_template = a.chat_templates[0].text;
  return Status::ok();
}

Result<std::vector<int64_t>> generation_eos_ids(const fs::path& dir) {
  const fs::path file = dir / "generation_config.json";
  DENSA_ASSIGN_OR_RETURN(json g, read_json_if_present(file));
  std::vector<int64_t> ids;
  if (g.is_null()) return ids;
  auto it = g.find("eos_token_id");
  if (it == g.end() || it->is_null()) return ids;
  if (it->is_number_integer()) {
    ids.push_back(it->get<int64_t>());
  } else if (it->is_array()) {
    for (const json& e : *it) {
      if (!e.is_number_integer()) return data_loss(file.string() + ": eos_token_id list holds a non-integer");
      ids.push_back(e.get<int64_t>());
    }
  } else {
    return data_loss(file.string() + ": eos_token_id is neither an integer nor a list");
  }
  return ids;
}

// Kimi's special tokens: added_tokens_decoder entries, the rest of the reserved range named
// <|reserved_token_N|>.
Result<TiktokenSpec> kimi_spec(const json& cfg, const fs::path& rank_file) {
  DENSA_ASSIGN_OR_RETURN(std::string ranks, read_text(rank_file));
  size_t base = 0;
  for (char c : ranks) base += c == '\n' ? 1 : 0;
  if (!ranks.empty() && ranks.back() != '\n') ++base;
  TiktokenSpec spec;
  spec.pattern = kKimiPattern;
  std::map<int64_t, AddedToken> named;
  if (!cfg.is_null() && cfg.contains("added_tokens_decoder")) {
    const json& d = cfg["added_tokens_decoder"];
    if (!d.is_object()) return data_loss(rank_file.string() + ": tokenizer_config.json added_tokens_decoder is not an object");
    for (auto it = d.begin(); it != d.end(); ++it) {
      AddedToken t;
      // The key is the id in decimal; Kimi's named specials live in the reserved range after
      // the ranked tokens (an id below it is a ranked token, refused by tiktoken_parts).
      const std::string& key = it.key();
      int64_t id = 0;
      const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
      if (ec != std::errc() || end != key.data() + key.size() || id < 0) {
        return data_loss("tokenizer_config.json: added_tokens_decoder key '" + key + "' is not an id");
      }
      if (id >= static_cast<int64_t>(base) + kKimiReservedSpecials) {
        return data_loss("tokenizer_config.json: added_tokens_decoder id " + key + " is past the " +
                         std::to_string(kKimiReservedSpecials) + " reserved special ids after the " + std::to_string(base) +
                         " ranked tokens of " + rank_file.string());
      }
      t.id = static_cast<TokenId>(id);
      if (!it.value().is_object() || !it.value().contains("content") || !it.value()["content"].is_string()) {
        return data_loss("tokenizer_config.json: added_tokens_decoder " + it.key() + " has no string content");
      }
      t.content = it.value()["content"].get<std::string>();
      // json::value() throws on a type mismatch; a flag that is not a boolean is an error.
      const json& e = it.value();
      for (auto [flag, field, fallback] : {std::tuple{"special", &t.special, true}, std::tuple{"lstrip", &t.lstrip, false},
                                           std::tuple{"rstrip", &t.rstrip, false},
                                           std::tuple{"single_word", &t.single_word, false}}) {
        auto f = e.find(flag);
        if (f == e.end() || f->is_null()) {
          *field = fallback;
        } else if (f->is_boolean()) {
          *field = f->get<bool>();
        } else {
          return data_loss("tokenizer_config.json: added_tokens_decoder " + key + " '" + flag + "' is not a boolean");
        }
      }
      t.normalized = false;
      named[t.id] = t;
    }
  }
  for (int64_t id = static_cast<int64_t>(base); id < static_cast<int64_t>(base) + kKimiReservedSpecials; ++id) {
    if (named.count(id) == 0) {
      AddedToken t;
      t.id = static_cast<TokenId>(id);
      t.content = "<|reserved_token_" + std::to_string(id) + "|>";
      t.special = true;
      named[id] = t;
    }
  }
  for (auto& [id, t] : named) spec.special_tokens.push_back(t);
  return spec;
}

Result<Tokenizer> load_from_dir_file(const fs::path& file, const json& cfg) {
  const std::string name = file.filename().string();
  if (name == "tiktoken.model") {
    DENSA_ASSIGN_OR_RETURN(TiktokenSpec spec, kimi_spec(cfg, file));
    return load_tiktoken(file, spec);
  }
  if (file.extension() == ".json") return load_hf_tokenizer_json(file);
  return Tokenizer::from_sentencepiece_file(file);
}

Result<LoadedTokenizer> load_gguf_tokenizer(const fs::path& path) {
  DENSA_ASSIGN_OR_RETURN(GgufFile f, GgufFile::open(path));
  DENSA_ASSIGN_OR_RETURN(std::optional<Tokenizer> tok, gguf_tokenizer(f));
  if (!tok) return not_found(path.string() + ": no tokenizer.ggml.tokens");
  LoadedTokenizer out{std::move(*tok), {}};
  out.assets.chat_template = f.get_string("tokenizer.chat_template").value_or("");
  if (!out.assets.chat_template.empty()) out.assets.chat_templates.push_back({"default", out.assets.chat_template});
  const Tokenizer& t = out.tokenizer;
  if (t.bos_id() >= 0) out.assets.bos_token = t.vocab().pieces[t.bos_id()];
  if (t.eos_id() >= 0) out.assets.eos_token = t.vocab().pieces[t.eos_id()];
  out.assets.eos_ids = t.eos_ids();
  return out;
}

}  // namespace

bool has_tokenizer_files(const fs::path& dir) {
  return is_file(dir / "tokenizer.json") || is_file(dir / "tiktoken.model") || is_file(dir / "tokenizer.model");
}

Result<TextAssets> read_text_assets(const fs::path& dir) {
  DENSA_ASSIGN_OR_RETURN(json cfg, read_json_if_present(dir / "tokenizer_config.json"));
  TextAssets a;
  if (!cfg.is_null()) {
    DENSA_RETURN_IF_ERROR(read_chat_templates(cfg, dir, a));
    DENSA_ASSIGN_OR_RETURN(a.bos_token, token_text(cfg, "bos_token", dir / "tokenizer_config.json"));
    DENSA_ASSIGN_OR_RETURN(a.eos_token, token_text(cfg, "eos_token", dir / "tokenizer_config.json"));
  } else {
    DENSA_RETURN_IF_ERROR(read_chat_templates(json::object(), dir, a));
  }
  return a;
}

Result<LoadedTokenizer> load_tokenizer(const fs::path& path) {
  std::error_code ec;
  fs::path file;
  fs::path dir;
  if (fs::is_directory(path, ec)) {
    dir = path;
    for (const char* name : {"tokenizer.json", "tiktoken.model", "tokenizer.model"}) {
      if (is_file(dir / name)) {
        file = dir / name;
        break;
      }
    }
    if (file.empty()) return not_found(path.string() + ": no tokenizer.json, tiktoken.model or tokenizer.model");
  } else if (is_file(path)) {
    if (path.extension() == ".gguf") return load_gguf_tokenizer(path);
    file = path;
    dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  } else {
    return not_found(path.string() + ": no such file or directory");
  }
  const fs::path cfg_file = dir / "tokenizer_config.json";
  DENSA_ASSIGN_OR_RETURN(json cfg, read_json_if_present(cfg_file));
  DENSA_ASSIGN_OR_RETURN(Tokenizer base, load_from_dir_file(file, cfg));
  DENSA_ASSIGN_OR_RETURN(TextAssets assets, read_text_assets(dir));

  SpecialTokenConfig sc;
  const auto id_of = [&](const std::string& text, const char* what) -> Result<std::optional<TokenId>> {
    if (text.empty()) return std::optional<TokenId>();
    auto id = base.token_to_id(text);
    if (!id) return data_loss(cfg_file.string() + ": " + what + " '" + text + "' is not in the vocabulary");
    return id;
  };
  DENSA_ASSIGN_OR_RETURN(sc.bos_id, id_of(assets.bos_token, "bos_token"));
  DENSA_ASSIGN_OR_RETURN(sc.eos_id, id_of(assets.eos_token, "eos_token"));
  if (!cfg.is_null()) {
    for (auto [key, field] : {std::pair{"add_bos_token", &sc.add_bos}, std::pair{"add_eos_token", &sc.add_eos}}) {
      auto it = cfg.find(key);
      if (it == cfg.end() || it->is_null()) continue;
      if (!it->is_boolean()) return data_loss(cfg_file.string() + ": " + key + " is not a boolean");
      *field = it->get<bool>();
    }
  }
  DENSA_ASSIGN_OR_RETURN(std::vector<int64_t> gen_eos, generation_eos_ids(dir));
  for (int64_t id : gen_eos) {
    if (id < 0 || id >= base.vocab_size()) {
      return data_loss((dir / "generation_config.json").string() + ": eos_token_id " + std::to_string(id) + " is outside the vocabulary");
    }
    sc.eos_ids.push_back(static_cast<TokenId>(id));
  }
  if (!sc.eos_id && !sc.eos_ids.empty()) sc.eos_id = sc.eos_ids.front();
  DENSA_ASSIGN_OR_RETURN(Tokenizer tok, base.with_config(sc));
  assets.eos_ids = tok.eos_ids();
  return LoadedTokenizer{std::move(tok), std::move(assets)};
}

}  // namespace densa
