#include "text/tiktoken.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "text/byte_level.h"

namespace densa {
namespace {

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Standard base64 with '=' padding; false on any other character or a bad length.
bool base64_decode(std::string_view in, std::string& out) {
  out.clear();
  if (in.empty() || in.size() % 4 != 0) return false;
  size_t pad = 0;
  while (pad < 2 && in[in.size() - 1 - pad] == '=') ++pad;
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < in.size() - pad; ++i) {
    const int v = base64_value(in[i]);
    if (v < 0) return false;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  return true;
}

// Ids the rank file (and the special tokens) may leave unused beyond the tokens listed. Real
// files are dense or nearly so (cl100k leaves one hole); a rank far past the file's length
// would only allocate the ids between (a 1-line file ranked 10^9 asked for tens of GB).
constexpr size_t kMaxUnusedIds = size_t{1} << 16;

}  // namespace

Result<TokenizerParts> tiktoken_parts(std::string_view text, const TiktokenSpec& spec, const std::string& origin) {
  auto enc = std::make_shared<PipelineEncoder>();
  BpeModel& bpe = enc->bpe;
  bpe.byte_level = true;
  bpe.ranks_mode = true;
  bpe.ignore_merges = true;  // tiktoken looks a whole piece up before merging
  std::vector<std::string> bytes_of;
  size_t line_no = 0;
  std::string bytes;
  const size_t max_ids = static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1 + kMaxUnusedIds;
  for (size_t pos = 0; pos < text.size();) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const size_t sp = line.find(' ');
    const std::string where = origin + ": line " + std::to_string(line_no);
    if (sp == std::string_view::npos) return data_loss(where + ": not \"<base64> <rank>\"");
    if (!base64_decode(line.substr(0, sp), bytes)) return data_loss(where + ": bad base64 '" + std::string(line.substr(0, sp)) + "'");
    const std::string_view rank_text = line.substr(sp + 1);
    int64_t rank = 0;
    if (rank_text.empty() || rank_text.size() > 10) return data_loss(where + ": bad rank");
    for (char c : rank_text) {
      if (c < '0' || c > '9') return data_loss(where + ": bad rank '" + std::string(rank_text) + "'");
      rank = rank * 10 + (c - '0');
    }
    if (static_cast<size_t>(rank) >= max_ids) {
      return data_loss(where + ": rank " + std::to_string(rank) + " is far past the file's length (more than " +
                       std::to_string(kMaxUnusedIds) + " unused ids)");
    }
    if (!bpe.tokens.emplace(bytes, static_cast<TokenId>(rank)).second) return data_loss(where + ": token listed twice");
    if (static_cast<size_t>(rank) >= bytes_of.size()) bytes_of.resize(static_cast<size_t>(rank) + 1);
    if (!bytes_of[rank].empty()) return data_loss(where + ": rank " + std::to_string(rank) + " listed twice");
    bytes_of[rank] = bytes;
    if (bytes.size() == 1) bpe.byte_ids[static_cast<uint8_t>(bytes[0])] = static_cast<TokenId>(rank);
  }
  if (bytes_of.empty()) return data_loss(origin + ": no ranks");
  for (int b = 0; b < 256; ++b) {
    if (bpe.byte_ids[b] < 0) return data_loss(origin + ": no token for the single byte " + std::to_string(b));
  }
  auto regex = Regex::compile(spec.pattern);
  if (!regex.is_ok()) return Status(regex.status().code(), origin + ": split pattern: " + regex.status().message());
  PreTokenizerStep split;
  split.regex = std::move(regex).value();
  split.behavior = SplitBehavior::kIsolated;
  enc->pre_tokenizers.push_back(std::move(split));

  TokenizerParts parts;
  parts.kind = "tiktoken";
  size_t n = bytes_of.size();
  for (const AddedToken& t : spec.special_tokens) {
    if (t.id < 0 || t.content.empty()) return invalid_argument(origin + ": special token '" + t.content + "' has no id or text");
    if (static_cast<size_t>(t.id) >= bytes_of.size() + spec.special_tokens.size() + kMaxUnusedIds) {
      return invalid_argument(origin + ": special token '" + t.content + "' id " + std::to_string(t.id) + " is far past the " +
                              std::to_string(bytes_of.size()) + " ranked tokens (more than " + std::to_string(kMaxUnusedIds) +
                              " unused ids)");
    }
    n = std::max(n, static_cast<size_t>(t.id) + 1);
  }
  TokenizerVocab& v = parts.vocab;
  v.pieces.resize(n);
  v.types.assign(n, TokenType::kUnused);
  parts.decoded.resize(n);
  for (size_t id = 0; id < bytes_of.size(); ++id) {
    if (bytes_of[id].empty()) continue;
    v.pieces[id] = byte_level_encode(bytes_of[id]);
    v.types[id] = TokenType::kNormal;
    parts.decoded[id] = bytes_of[id];
  }
  for (const AddedToken& t : spec.special_tokens) {
    if (t.id < 0 || t.content.empty()) return invalid_argument(origin + ": special token '" + t.content + "' has no id or text");
    if (static_cast<size_t>(t.id) < bytes_of.size() && !bytes_of[t.id].empty()) {
      return data_loss(origin + ": special token '" + t.content + "' id " + std::to_string(t.id) + " is a ranked token");
    }
    v.pieces[t.id] = t.content;
    v.types[t.id] = t.special ? TokenType::kControl : TokenType::kUserDefined;
    parts.decoded[t.id] = t.content;
  }
  enc->set_added_tokens(spec.special_tokens);
  v.bos_id = v.eos_id = v.unk_id = -1;
  v.add_bos = false;
  v.add_dummy_prefix = false;
  parts.encoder = std::move(enc);
  return parts;
}

Result<Tokenizer> load_tiktoken(const std::filesystem::path& path, const TiktokenSpec& spec) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(path.string() + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  DENSA_ASSIGN_OR_RETURN(TokenizerParts parts, tiktoken_parts(ss.str(), spec, path.string()));
  return Tokenizer::from_parts(std::move(parts));
}

}  // namespace densa
