#include "text/hf_tokenizer.h"

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "text/byte_level.h"
#include "text/gguf_bpe.h"
#include "text/pipeline.h"

namespace densa {
namespace {

using json = nlohmann::json;

// Ids a vocabulary may leave unused beyond the tokens it lists (real files are dense, or pad
// a few ids); an id far past the listed count would only allocate the ids between (one
// token with id 10^9 asked for tens of GB).
constexpr size_t kMaxUnusedIds = size_t{1} << 16;

// Errors carry "origin: where: what".
struct Ctx {
  std::string origin;
  Status fail(const std::string& where, const std::string& what) const {
    return data_loss(origin + ": " + where + ": " + what);
  }
  Status refuse(const std::string& where, const std::string& what) const {
    return unimplemented(origin + ": " + where + ": " + what);
  }
};

Result<bool> opt_bool(const Ctx& c, const json& j, const char* key, bool fallback, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) return c.fail(where, std::string("'") + key + "' is not a boolean");
  return it->get<bool>();
}

Result<std::string> opt_string(const Ctx& c, const json& j, const char* key, const std::string& fallback,
                               const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_string()) return c.fail(where, std::string("'") + key + "' is not a string");
  return it->get<std::string>();
}

Result<std::string> type_of(const Ctx& c, const json& j, const std::string& where) {
  if (!j.is_object()) return c.fail(where, "not an object");
  auto it = j.find("type");
  if (it == j.end() || !it->is_string()) return c.fail(where, "no 'type' string");
  return it->get<std::string>();
}

// {"String": s} or {"Regex": r}: a literal or a compiled regex.
Status parse_pattern(const Ctx& c, const json& j, const std::string& where, std::string& literal,
                     std::optional<Regex>& regex) {
  if (!j.is_object()) return c.fail(where, "'pattern' is not an object");
  if (auto it = j.find("String"); it != j.end() && it->is_string()) {
    literal = it->get<std::string>();
    if (literal.empty()) return c.fail(where, "empty String pattern");
    return Status::ok();
  }
  if (auto it = j.find("Regex"); it != j.end() && it->is_string()) {
    auto r = Regex::compile(it->get<std::string>());
    if (!r.is_ok()) return c.fail(where, r.status().message());
    regex = std::move(r).value();
    return Status::ok();
  }
  return c.fail(where, "'pattern' is neither {String} nor {Regex}");
}

Status parse_normalizer(const Ctx& c, const json& j, std::vector<NormalizerStep>& out) {
  if (j.is_null()) return Status::ok();
  DENSA_ASSIGN_OR_RETURN(std::string type, type_of(c, j, "normalizer"));
  const std::string where = "normalizer " + type;
  using K = NormalizerStep::Kind;
  NormalizerStep s;
  if (type == "Sequence") {
    auto it = j.find("normalizers");
    if (it == j.end() || !it->is_array()) return c.fail(where, "no 'normalizers' array");
    for (const json& n : *it) DENSA_RETURN_IF_ERROR(parse_normalizer(c, n, out));
    return Status::ok();
  }
  if (type == "NFC") s.kind = K::kNfc;
  else if (type == "NFKC") s.kind = K::kNfkc;
  else if (type == "NFD") s.kind = K::kNfd;
  else if (type == "NFKD") s.kind = K::kNfkd;
  else if (type == "Lowercase") s.kind = K::kLowercase;
  else if (type == "Strip") {
    s.kind = K::kStrip;
    DENSA_ASSIGN_OR_RETURN(s.left, opt_bool(c, j, "strip_left", true, where));
    DENSA_ASSIGN_OR_RETURN(s.right, opt_bool(c, j, "strip_right", true, where));
  } else if (type == "Prepend") {
    s.kind = K::kPrepend;
    DENSA_ASSIGN_OR_RETURN(s.content, opt_string(c, j, "prepend", "", where));
  } else if (type == "Replace") {
    s.kind = K::kReplace;
    if (!j.contains("pattern")) return c.fail(where, "no 'pattern'");
    DENSA_RETURN_IF_ERROR(parse_pattern(c, j["pattern"], where, s.literal, s.regex));
    DENSA_ASSIGN_OR_RETURN(s.content, opt_string(c, j, "content", "", where));
  } else {
    return c.refuse("normalizer", "type '" + type + "' is not supported");
  }
  out.push_back(std::move(s));
  return Status::ok();
}

Result<SplitBehavior> parse_behavior(const Ctx& c, const json& j, const std::string& where) {
  DENSA_ASSIGN_OR_RETURN(std::string b, opt_string(c, j, "behavior", "", where));
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  return c.refuse(where, "behavior '" + b + "' is not supported");
}

Result<PreTokenizerStep> regex_step(const Ctx& c, const std::string& where, const char* pattern,
                                    SplitBehavior behavior, bool invert) {
  PreTokenizerStep s;
  auto r = Regex::compile(pattern);
  if (!r.is_ok()) return c.fail(where, r.status().message());
  s.regex = std::move(r).value();
  s.behavior = behavior;
  s.invert = invert;
  return s;
}

Result<PreTokenizerStep::Prepend> parse_prepend_scheme(const Ctx& c, const json& j, const std::string& where) {
  if (j.contains("prepend_scheme") && !j["prepend_scheme"].is_null()) {
    DENSA_ASSIGN_OR_RETURN(std::string p, opt_string(c, j, "prepend_scheme", "", where));
    if (p == "always") return PreTokenizerStep::Prepend::kAlways;
    if (p == "first") return PreTokenizerStep::Prepend::kFirst;
    if (p == "never") return PreTokenizerStep::Prepend::kNever;
    return c.refuse(where, "prepend_scheme '" + p + "' is not supported");
  }
  DENSA_ASSIGN_OR_RETURN(bool add, opt_bool(c, j, "add_prefix_space", true, where));
  return add ? PreTokenizerStep::Prepend::kAlways : PreTokenizerStep::Prepend::kNever;
}

Status parse_pre_tokenizer(const Ctx& c, const json& j, std::vector<PreTokenizerStep>& out) {
  if (j.is_null()) return Status::ok();
  DENSA_ASSIGN_OR_RETURN(std::string type, type_of(c, j, "pre_tokenizer"));
  const std::string where = "pre_tokenizer " + type;
  if (type == "Sequence") {
    auto it = j.find("pretokenizers");
    if (it == j.end() || !it->is_array()) return c.fail(where, "no 'pretokenizers' array");
    for (const json& p : *it) DENSA_RETURN_IF_ERROR(parse_pre_tokenizer(c, p, out));
    return Status::ok();
  }
  PreTokenizerStep s;
  if (type == "Split") {
    if (!j.contains("pattern")) return c.fail(where, "no 'pattern'");
    DENSA_RETURN_IF_ERROR(parse_pattern(c, j["pattern"], where, s.literal, s.regex));
    DENSA_ASSIGN_OR_RETURN(s.behavior, parse_behavior(c, j, where));
    DENSA_ASSIGN_OR_RETURN(s.invert, opt_bool(c, j, "invert", false, where));
  } else if (type == "ByteLevel") {
    DENSA_ASSIGN_OR_RETURN(bool use_regex, opt_bool(c, j, "use_regex", true, where));
    if (use_regex) {
      DENSA_ASSIGN_OR_RETURN(s, regex_step(c, where, kGpt2Pattern, SplitBehavior::kIsolated, false));
    }
    s.kind = PreTokenizerStep::Kind::kByteLevel;
    DENSA_ASSIGN_OR_RETURN(s.add_prefix_space, opt_bool(c, j, "add_prefix_space", true, where));
  } else if (type == "Digits") {
    DENSA_ASSIGN_OR_RETURN(bool individual, opt_bool(c, j, "individual_digits", false, where));
    DENSA_ASSIGN_OR_RETURN(s, regex_step(c, where, individual ? R"(\p{N})" : R"(\p{N}+)", SplitBehavior::kIsolated, false));
  } else if (type == "Whitespace") {
    DENSA_ASSIGN_OR_RETURN(s, regex_step(c, where, R"(\w+|[^\w\s]+)", SplitBehavior::kRemoved, true));
  } else if (type == "WhitespaceSplit") {
    DENSA_ASSIGN_OR_RETURN(s, regex_step(c, where, R"(\s+)", SplitBehavior::kRemoved, false));
  } else if (type == "Metaspace") {
    s.kind = PreTokenizerStep::Kind::kMetaspace;
    DENSA_ASSIGN_OR_RETURN(s.replacement, opt_string(c, j, "replacement", "\xE2\x96\x81", where));
    if (s.replacement.empty()) return c.fail(where, "empty replacement");
    DENSA_ASSIGN_OR_RETURN(s.prepend, parse_prepend_scheme(c, j, where));
    DENSA_ASSIGN_OR_RETURN(s.split, opt_bool(c, j, "split", true, where));
    s.literal = s.replacement;
    s.behavior = SplitBehavior::kMergedWithNext;
  } else {
    return c.refuse("pre_tokenizer", "type '" + type + "' is not supported");
  }
  out.push_back(std::move(s));
  return Status::ok();
}

// The decoder as per-token rewrites, then what applies to the whole text after Fuse.
struct DecoderOp {
  enum class Kind { kByteLevel, kByteFallback, kReplace, kStrip };
  Kind kind;
  std::string literal, content;
  std::optional<Regex> regex;
  std::string strip_char;
  size_t start = 0, stop = 0;
};
struct DecoderPlan {
  std::vector<DecoderOp> per_token;
  bool fused = false;
  int strip_count = 0;  // whole-text leading strip (Strip after Fuse, Metaspace)
  char strip_char = ' ';
};

Status parse_decoder(const Ctx& c, const json& j, DecoderPlan& plan) {
  DENSA_ASSIGN_OR_RETURN(std::string type, type_of(c, j, "decoder"));
  const std::string where = "decoder " + type;
  if (type == "Sequence") {
    auto it = j.find("decoders");
    if (it == j.end() || !it->is_array()) return c.fail(where, "no 'decoders' array");
    for (const json& d : *it) DENSA_RETURN_IF_ERROR(parse_decoder(c, d, plan));
    return Status::ok();
  }
  if (type == "Fuse") {
    plan.fused = true;
    return Status::ok();
  }
  DecoderOp op;
  if (type == "ByteLevel") {
    op.kind = DecoderOp::Kind::kByteLevel;
  } else if (type == "ByteFallback") {
    op.kind = DecoderOp::Kind::kByteFallback;
  } else if (type == "Replace") {
    op.kind = DecoderOp::Kind::kReplace;
    if (!j.contains("pattern")) return c.fail(where, "no 'pattern'");
    DENSA_RETURN_IF_ERROR(parse_pattern(c, j["pattern"], where, op.literal, op.regex));
    DENSA_ASSIGN_OR_RETURN(op.content, opt_string(c, j, "content", "", where));
  } else if (type == "Strip") {
    op.kind = DecoderOp::Kind::kStrip;
    DENSA_ASSIGN_OR_RETURN(op.strip_char, opt_string(c, j, "content", " ", where));
    if (!j.value("start", json(0)).is_number_unsigned() || !j.value("stop", json(0)).is_number_unsigned()) {
      return c.fail(where, "'start' / 'stop' are not counts");
    }
    op.start = j.value("start", size_t{0});
    op.stop = j.value("stop", size_t{0});
    if (plan.fused) {
      if (op.stop != 0 || op.strip_char.size() != 1) return c.refuse(where, "after Fuse only a leading one-byte Strip is supported");
      plan.strip_count = static_cast<int>(op.start);
      plan.strip_char = op.strip_char[0];
      return Status::ok();
    }
  } else if (type == "Metaspace") {
    op.kind = DecoderOp::Kind::kReplace;
    DENSA_ASSIGN_OR_RETURN(op.literal, opt_string(c, j, "replacement", "\xE2\x96\x81", where));
    op.content = " ";
    DENSA_ASSIGN_OR_RETURN(PreTokenizerStep::Prepend p, parse_prepend_scheme(c, j, where));
    if (p != PreTokenizerStep::Prepend::kNever) plan.strip_count = 1, plan.strip_char = ' ';
  } else {
    return c.refuse("decoder", "type '" + type + "' is not supported");
  }
  if (plan.fused) return c.refuse(where, "decoders after Fuse other than Strip are not supported");
  plan.per_token.push_back(std::move(op));
  return Status::ok();
}

bool parse_byte_token(std::string_view t, uint8_t& b) {
  if (t.size() != 6 || !t.starts_with("<0x") || t[5] != '>') return false;
  unsigned v = 0;
  for (char ch : t.substr(3, 2)) {
    v <<= 4;
    if (ch >= '0' && ch <= '9') v |= static_cast<unsigned>(ch - '0');
    else if (ch >= 'A' && ch <= 'F') v |= static_cast<unsigned>(ch - 'A' + 10);
    else if (ch >= 'a' && ch <= 'f') v |= static_cast<unsigned>(ch - 'a' + 10);
    else return false;
  }
  b = static_cast<uint8_t>(v);
  return true;
}

std::string decode_token(const DecoderPlan& plan, std::string text) {
  for (const DecoderOp& op : plan.per_token) {
    switch (op.kind) {
      case DecoderOp::Kind::kByteLevel: {
        std::string bytes;
        if (byte_level_decode(text, bytes)) text = std::move(bytes);
        break;
      }
      case DecoderOp::Kind::kByteFallback: {
        uint8_t b = 0;
        if (parse_byte_token(text, b)) text = std::string(1, static_cast<char>(b));
        break;
      }
      case DecoderOp::Kind::kReplace: {
        NormalizerStep s;  // same rewrite as the Replace normalizer
        s.kind = NormalizerStep::Kind::kReplace;
        s.literal = op.literal;
        s.regex = op.regex;
        s.content = op.content;
        if (is_valid_utf8(text)) apply_normalizers({s}, text);
        break;
      }
      case DecoderOp::Kind::kStrip: {
        size_t b = 0, e = text.size();
        for (size_t i = 0; i < op.start && text.compare(b, op.strip_char.size(), op.strip_char) == 0; ++i) b += op.strip_char.size();
        for (size_t i = 0; i < op.stop && e >= b + op.strip_char.size() &&
                           text.compare(e - op.strip_char.size(), op.strip_char.size(), op.strip_char) == 0; ++i) {
          e -= op.strip_char.size();
        }
        text = text.substr(b, e - b);
        break;
      }
    }
  }
  return text;
}

// Post-processor: the ids around a single sequence.
Status parse_post_processor(const Ctx& c, const json& j, std::vector<TokenId>& prefix, std::vector<TokenId>& suffix) {
  if (j.is_null()) return Status::ok();
  DENSA_ASSIGN_OR_RETURN(std::string type, type_of(c, j, "post_processor"));
  const std::string where = "post_processor " + type;
  if (type == "Sequence") {
    auto it = j.find("processors");
    if (it == j.end() || !it->is_array()) return c.fail(where, "no 'processors' array");
    for (const json& p : *it) DENSA_RETURN_IF_ERROR(parse_post_processor(c, p, prefix, suffix));
    return Status::ok();
  }
  if (type == "ByteLevel") return Status::ok();  // only moves offsets
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    const json& cls = j.at("cls");
    const json& sep = j.at("sep");
    if (!cls.is_array() || cls.size() != 2 || !sep.is_array() || sep.size() != 2) return c.fail(where, "cls / sep are not [token, id]");
    prefix.push_back(cls[1].get<TokenId>());
    suffix.insert(suffix.begin(), sep[1].get<TokenId>());
    return Status::ok();
  }
  if (type != "TemplateProcessing") return c.refuse("post_processor", "type '" + type + "' is not supported");
  auto single = j.find("single");
  auto specials = j.find("special_tokens");
  if (single == j.end() || !single->is_array()) return c.fail(where, "no 'single' template");
  bool seen_sequence = false;
  std::vector<TokenId> before, after;
  for (const json& piece : *single) {
    if (piece.contains("Sequence")) {
      if (piece["Sequence"].value("id", "") != "A") return c.fail(where, "the single template names a sequence other than A");
      if (seen_sequence) return c.fail(where, "the single template has sequence A twice");
      seen_sequence = true;
    } else if (piece.contains("SpecialToken")) {
      const std::string name = piece["SpecialToken"].value("id", "");
      if (specials == j.end() || !specials->contains(name)) return c.fail(where, "special token '" + name + "' is not in special_tokens");
      const json& ids = (*specials)[name].at("ids");
      for (const json& id : ids) (seen_sequence ? after : before).push_back(id.get<TokenId>());
    } else {
      return c.fail(where, "a template piece is neither Sequence nor SpecialToken");
    }
  }
  if (!seen_sequence) return c.fail(where, "the single template lacks sequence A");
  prefix.insert(prefix.end(), before.begin(), before.end());
  suffix.insert(suffix.begin(), after.begin(), after.end());
  return Status::ok();
}

Status parse_added_tokens(const Ctx& c, const json& j, std::vector<AddedToken>& out) {
  if (j.is_null()) return Status::ok();
  if (!j.is_array()) return c.fail("added_tokens", "not an array");
  for (const json& t : j) {
    const std::string where = "added_tokens[" + std::to_string(out.size()) + "]";
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() || !t.contains("content") ||
        !t["content"].is_string()) {
      return c.fail(where, "needs an integer 'id' and a string 'content'");
    }
    AddedToken a;
    if (t["id"].get<int64_t>() >= (1 << 30)) return c.fail(where, "id " + t["id"].dump() + " is out of range");
    a.id = t["id"].get<TokenId>();
    a.content = t["content"].get<std::string>();
    if (a.id < 0) return c.fail(where, "negative id");
    if (a.content.empty()) return c.fail(where, "empty content");
    DENSA_ASSIGN_OR_RETURN(a.special, opt_bool(c, t, "special", false, where));
    DENSA_ASSIGN_OR_RETURN(a.lstrip, opt_bool(c, t, "lstrip", false, where));
    DENSA_ASSIGN_OR_RETURN(a.rstrip, opt_bool(c, t, "rstrip", false, where));
    DENSA_ASSIGN_OR_RETURN(a.single_word, opt_bool(c, t, "single_word", false, where));
    DENSA_ASSIGN_OR_RETURN(a.normalized, opt_bool(c, t, "normalized", !a.special, where));
    out.push_back(std::move(a));
  }
  return Status::ok();
}

// The model section: vocab and merges into the BPE tables and the vocabulary.
struct ModelOut {
  std::vector<std::string> pieces;  // [id] as stored
  std::vector<std::string> merges;  // "a b"
  bool byte_fallback = false;
  std::string unk_token;
};

Status parse_model(const Ctx& c, const json& m, BpeModel& bpe, ModelOut& out) {
  if (!m.is_object()) return c.fail("model", "not an object");
  const std::string type = m.value("type", m.contains("merges") ? "BPE" : "");
  if (type != "BPE") return c.refuse("model", "type '" + type + "' is not supported (only BPE)");
  if (m.contains("dropout") && !m["dropout"].is_null() && !(m["dropout"].is_number() && m["dropout"].get<double>() == 0.0)) {
    return c.refuse("model", "BPE dropout is not supported");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    DENSA_ASSIGN_OR_RETURN(std::string v, opt_string(c, m, key, "", "model"));
    if (!v.empty()) return c.refuse("model", std::string(key) + " '" + v + "' is not supported");
  }
  DENSA_ASSIGN_OR_RETURN(bpe.ignore_merges, opt_bool(c, m, "ignore_merges", false, "model"));
  DENSA_ASSIGN_OR_RETURN(bpe.fuse_unk, opt_bool(c, m, "fuse_unk", false, "model"));
  DENSA_ASSIGN_OR_RETURN(out.byte_fallback, opt_bool(c, m, "byte_fallback", false, "model"));
  DENSA_ASSIGN_OR_RETURN(out.unk_token, opt_string(c, m, "unk_token", "", "model"));
  auto vocab = m.find("vocab");
  if (vocab == m.end() || !vocab->is_object()) return c.fail("model", "no 'vocab' object");
  std::unordered_map<std::string, TokenId> ids;
  ids.reserve(vocab->size());
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 || it.value().get<int64_t>() >= (1 << 30)) {
      return c.fail("model.vocab", "'" + it.key() + "' has no valid id");
    }
    if (it.value().get<uint64_t>() >= vocab->size() + kMaxUnusedIds) {
      return c.fail("model.vocab", "'" + it.key() + "' has id " + it.value().dump() + ", far past the " +
                                       std::to_string(vocab->size()) + " tokens listed (more than " +
                                       std::to_string(kMaxUnusedIds) + " unused ids)");
    }
    const auto id = it.value().get<TokenId>();
    ids.emplace(it.key(), id);
    if (static_cast<size_t>(id) >= out.pieces.size()) out.pieces.resize(static_cast<size_t>(id) + 1);
    out.pieces[static_cast<size_t>(id)] = it.key();
  }
  auto merges = m.find("merges");
  if (merges == m.end() || !merges->is_array()) return c.fail("model", "no 'merges' array");
  bpe.merges.reserve(merges->size());
  uint32_t rank = 0;
  for (const json& e : *merges) {
    std::string a, b;
    const std::string where = "model.merges[" + std::to_string(rank) + "]";
    if (e.is_string()) {
      const std::string s = e.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) return c.fail(where, "'" + s + "' is not two tokens \"a b\"");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      a = e[0].get<std::string>();
      b = e[1].get<std::string>();
    } else {
      return c.fail(where, "neither \"a b\" nor [a, b]");
    }
    auto ia = ids.find(a), ib = ids.find(b), iab = ids.find(a + b);
    if (ia == ids.end() || ib == ids.end() || iab == ids.end()) {
      return c.fail(where, "'" + a + " " + b + "': " + (ia == ids.end() ? a : ib == ids.end() ? b : a + b) + " is not in the vocabulary");
    }
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(ia->second)) << 32) | static_cast<uint32_t>(ib->second);
    bpe.merges.emplace(key, (static_cast<uint64_t>(rank) << 32) | static_cast<uint32_t>(iab->second));
    out.merges.push_back(a + " " + b);
    ++rank;
  }
  return Status::ok();
}

// Fills the BPE token map and byte tables for the pieces (byte-level: their raw bytes).
void index_tokens(const std::vector<std::string>& pieces, BpeModel& bpe) {
  std::string bytes;
  for (size_t id = 0; id < pieces.size(); ++id) {
    const std::string& p = pieces[id];
    if (p.empty()) continue;
    if (bpe.byte_level) {
      if (!byte_level_decode(p, bytes)) continue;  // not in the alphabet: BPE cannot make it
      bpe.tokens.emplace(bytes, static_cast<TokenId>(id));
      if (bytes.size() == 1 && bpe.byte_ids[static_cast<uint8_t>(bytes[0])] < 0) {
        bpe.byte_ids[static_cast<uint8_t>(bytes[0])] = static_cast<TokenId>(id);
      }
    } else {
      bpe.tokens.emplace(p, static_cast<TokenId>(id));
      uint8_t b = 0;
      if (bpe.byte_fallback && parse_byte_token(p, b) && bpe.byte_ids[b] < 0) bpe.byte_ids[b] = static_cast<TokenId>(id);
    }
  }
}

}  // namespace

Result<TokenizerParts> hf_tokenizer_parts(const json& j, const std::string& origin) {
  const Ctx c{origin};
  if (!j.is_object()) return c.fail("top level", "not a JSON object");
  try {
    if (j.contains("truncation") && !j["truncation"].is_null()) return c.refuse("truncation", "is set; densa does not truncate");
    if (j.contains("padding") && !j["padding"].is_null()) {
      const json& s = j["padding"].value("strategy", json());
      if (s.is_object() && s.contains("Fixed")) return c.refuse("padding", "a Fixed padding length is not supported");
    }
    auto enc = std::make_shared<PipelineEncoder>();
    DENSA_RETURN_IF_ERROR(parse_normalizer(c, j.value("normalizer", json()), enc->normalizers));
    DENSA_RETURN_IF_ERROR(parse_pre_tokenizer(c, j.value("pre_tokenizer", json()), enc->pre_tokenizers));
    bool byte_level = false;
    for (size_t i = 0; i < enc->pre_tokenizers.size(); ++i) {
      if (enc->pre_tokenizers[i].kind != PreTokenizerStep::Kind::kByteLevel) continue;
      if (i + 1 != enc->pre_tokenizers.size()) return c.refuse("pre_tokenizer", "ByteLevel is only supported as the last step");
      byte_level = true;
    }
    if (!j.contains("model")) return c.fail("top level", "no 'model'");
    ModelOut model;
    enc->bpe.byte_level = byte_level;
    DENSA_RETURN_IF_ERROR(parse_model(c, j["model"], enc->bpe, model));
    enc->bpe.byte_fallback = model.byte_fallback && !byte_level;
    std::vector<AddedToken> added;
    DENSA_RETURN_IF_ERROR(parse_added_tokens(c, j.value("added_tokens", json()), added));
    const json& dec = j.value("decoder", json());
    if (dec.is_null()) return c.refuse("decoder", "none given (tokens would be joined with spaces)");
    DecoderPlan plan;
    DENSA_RETURN_IF_ERROR(parse_decoder(c, dec, plan));

    TokenizerParts parts;
    parts.kind = "hf-bpe";
    std::vector<std::string>& pieces = model.pieces;
    const size_t listed = pieces.size() + added.size();
    for (const AddedToken& a : added) {
      if (static_cast<size_t>(a.id) >= listed + kMaxUnusedIds) {
        return c.fail("added_tokens", "'" + a.content + "' has id " + std::to_string(a.id) + ", far past the " +
                                          std::to_string(listed) + " tokens listed (more than " +
                                          std::to_string(kMaxUnusedIds) + " unused ids)");
      }
    }
    for (const AddedToken& a : added) {
      if (static_cast<size_t>(a.id) >= pieces.size()) pieces.resize(static_cast<size_t>(a.id) + 1);
    }
    index_tokens(pieces, enc->bpe);
    const size_t n = pieces.size();
    TokenizerVocab& v = parts.vocab;
    v.types.assign(n, TokenType::kNormal);
    for (size_t id = 0; id < n; ++id) {
      uint8_t b = 0;
      if (pieces[id].empty()) v.types[id] = TokenType::kUnused;
      else if (model.byte_fallback && parse_byte_token(pieces[id], b)) v.types[id] = TokenType::kByte;
    }
    for (const AddedToken& a : added) {
      pieces[static_cast<size_t>(a.id)] = a.content;
      v.types[static_cast<size_t>(a.id)] = a.special ? TokenType::kControl : TokenType::kUserDefined;
    }
    parts.decoded.resize(n);
    for (size_t id = 0; id < n; ++id) parts.decoded[id] = decode_token(plan, pieces[id]);
    parts.strip_count = plan.strip_count;
    parts.strip_char = plan.strip_char;
    parts.strippable.assign(n, 1);
    v.bos_id = -1;
    v.eos_id = -1;
    v.unk_id = -1;
    v.add_dummy_prefix = false;
    if (!model.unk_token.empty()) {
      auto it = std::find(pieces.begin(), pieces.end(), model.unk_token);
      if (it == pieces.end()) return c.fail("model", "unk_token '" + model.unk_token + "' is not in the vocabulary");
      v.unk_id = static_cast<TokenId>(it - pieces.begin());
      enc->bpe.unk_id = v.unk_id;
    }
    DENSA_RETURN_IF_ERROR(parse_post_processor(c, j.value("post_processor", json()), parts.prefix, parts.suffix));
    v.add_bos = !parts.prefix.empty();
    enc->set_added_tokens(added);

    if (byte_level) {  // the GGUF form, when the split patterns are a known llama.cpp pre type
      std::vector<std::string> patterns;
      bool plain = true;
      for (const PreTokenizerStep& s : enc->pre_tokenizers) {
        if (s.kind == PreTokenizerStep::Kind::kSplit && s.regex && s.behavior == SplitBehavior::kIsolated && !s.invert) {
          patterns.push_back(s.regex->pattern());
        } else if (s.kind == PreTokenizerStep::Kind::kByteLevel && !s.add_prefix_space && !s.regex) {
        } else {
          plain = false;
        }
      }
      std::optional<std::string> pre = plain && enc->normalizers.empty() ? gguf_pre_name(patterns) : std::nullopt;
      if (!pre && plain && enc->normalizers.size() == 1 && enc->normalizers[0].kind == NormalizerStep::Kind::kNfc) {
        pre = gguf_pre_name(patterns);  // llama.cpp does not normalize; NFC text is unchanged
      }
      if (pre) {
        auto ex = std::make_shared<GgufBpeExport>();
        ex->pre = *pre;
        ex->merges = std::move(model.merges);
        ex->tokens.resize(n);
        ex->token_types.resize(n);
        for (size_t id = 0; id < n; ++id) {
          ex->tokens[id] = pieces[id].empty() ? "[PAD" + std::to_string(id) + "]" : pieces[id];
          ex->token_types[id] = static_cast<int32_t>(v.types[id] == TokenType::kUnused ? TokenType::kUnused : v.types[id]);
        }
        parts.gguf_export = std::move(ex);
      }
    }
    v.pieces = std::move(pieces);
    parts.encoder = std::move(enc);
    return parts;
  } catch (const json::exception& e) {
    return c.fail("structure", e.what());
  }
}

Result<TokenizerParts> read_hf_tokenizer_json(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(path.string() + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  const json j = json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return data_loss(path.string() + ": not valid JSON (truncated or corrupt)");
  return hf_tokenizer_parts(j, path.string());
}

Result<Tokenizer> load_hf_tokenizer_json(const std::filesystem::path& path) {
  DENSA_ASSIGN_OR_RETURN(TokenizerParts parts, read_hf_tokenizer_json(path));
  return Tokenizer::from_parts(std::move(parts));
}

}  // namespace densa
