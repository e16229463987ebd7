#include "text/pipeline.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>

namespace densa {

const char* const kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

// The code point at s[pos] (valid UTF-8 assumed) and its size.
std::pair<int32_t, size_t> code_point(std::string_view s, size_t pos) {
  utf8proc_int32_t cp = 0;
  const auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data()) + pos,
                                  static_cast<utf8proc_ssize_t>(s.size() - pos), &cp);
  if (n <= 0) return {static_cast<uint8_t>(s[pos]), 1};
  return {cp, static_cast<size_t>(n)};
}

// The code point that ends at s[end) and its size.
std::pair<int32_t, size_t> code_point_before(std::string_view s, size_t end) {
  size_t begin = end - 1;
  while (begin > 0 && end - begin < 4 && (static_cast<uint8_t>(s[begin]) & 0xC0) == 0x80) --begin;
  return {code_point(s, begin).first, end - begin};
}

// Unicode White_Space (what Rust's char::is_whitespace tests).
bool is_white_space(int32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// A word character: letters, marks, numbers, connector punctuation.
bool is_word_char(int32_t c) {
  switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO: case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

bool is_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<uint8_t>(c) < 0x80; });
}

void unicode_normalize(std::string& text, int options) {
  if (is_ascii(text)) return;  // ASCII is invariant under every normalization form
  utf8proc_uint8_t* dst = nullptr;
  const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                              static_cast<utf8proc_ssize_t>(text.size()), &dst,
                              static_cast<utf8proc_option_t>(options | UTF8PROC_STABLE));
  if (n >= 0) text.assign(reinterpret_cast<const char*>(dst), static_cast<size_t>(n));
  std::free(dst);
}

void replace_all(std::string& text, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  std::string out;
  size_t pos = 0;
  for (size_t hit; (hit = text.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(text, pos, hit - pos);
    out += to;
  }
  out.append(text, pos);
  text = std::move(out);
}

void apply_normalizer(const NormalizerStep& s, std::string& text) {
  using K = NormalizerStep::Kind;
  switch (s.kind) {
    case K::kNfc: unicode_normalize(text, UTF8PROC_COMPOSE); break;
    case K::kNfkc: unicode_normalize(text, UTF8PROC_COMPOSE | UTF8PROC_COMPAT); break;
    case K::kNfd: unicode_normalize(text, UTF8PROC_DECOMPOSE); break;
    case K::kNfkd: unicode_normalize(text, UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT); break;
    case K::kLowercase: {
      std::string out;
      out.reserve(text.size());
      for (size_t pos = 0; pos < text.size();) {
        const auto [cp, n] = code_point(text, pos);
        utf8proc_uint8_t buf[4];
        const auto m = utf8proc_encode_char(utf8proc_tolower(cp), buf);
        out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(m));
        pos += n;
      }
      text = std::move(out);
      break;
    }
    case K::kStrip: {
      size_t begin = 0, end = text.size();
      while (s.left && begin < end) {
        const auto [cp, n] = code_point(text, begin);
        if (!is_white_space(cp)) break;
        begin += n;
      }
      while (s.right && end > begin) {
        const auto [cp, n] = code_point_before(text, end);
        if (!is_white_space(cp)) break;
        end -= n;
      }
      text = text.substr(begin, end - begin);
      break;
    }
    case K::kPrepend:
      if (!text.empty()) text.insert(0, s.content);
      break;
    case K::kReplace:
      if (s.regex) {
        std::string out;
        size_t prev = 0;
        s.regex->for_each_match(text, [&](size_t b, size_t e) {
          out.append(text, prev, b - prev);
          out += s.content;
          prev = e;
        });
        out.append(text, prev);
        text = std::move(out);
      } else {
        replace_all(text, s.literal, s.content);
      }
      break;
  }
}

// Pieces of text with a match flag, covering it in order.
struct Span {
  size_t begin, end;
  bool match;
};

void find_spans(std::string_view text, const PreTokenizerStep& step, std::vector<Span>& spans) {
  spans.clear();
  size_t prev = 0;
  const auto on_match = [&](size_t b, size_t e) {
    if (b > prev) spans.push_back({prev, b, false});
    spans.push_back({b, e, true});
    prev = e;
  };
  if (step.regex) {
    step.regex->for_each_match(text, on_match);
  } else if (!step.literal.empty()) {
    for (size_t hit; (hit = text.find(step.literal, prev)) != std::string_view::npos;) {
      on_match(hit, hit + step.literal.size());
    }
  }
  if (prev < text.size()) spans.push_back({prev, text.size(), false});
  if (step.invert) {
    for (Span& s : spans) s.match = !s.match;
  }
}

}  // namespace

void apply_normalizers(const std::vector<NormalizerStep>& steps, std::string& text) {
  for (const NormalizerStep& s : steps) apply_normalizer(s, text);
}

void split_pieces(std::string_view text, const PreTokenizerStep& step, std::vector<std::string>& out) {
  thread_local std::vector<Span> spans;
  thread_local std::vector<Span> merged;
  find_spans(text, step, spans);
  merged.clear();
  bool prev_match = false;
  switch (step.behavior) {
    case SplitBehavior::kRemoved:
      for (const Span& s : spans)
        if (!s.match) merged.push_back(s);
      break;
    case SplitBehavior::kIsolated:
      merged = spans;
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Span& s : spans) {
        if (s.match && !prev_match && !merged.empty()) merged.back().end = s.end;
        else merged.push_back(s);
        prev_match = s.match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (size_t i = spans.size(); i-- > 0;) {
        const Span& s = spans[i];
        if (s.match && !prev_match && !merged.empty()) merged.back().begin = s.begin;
        else merged.push_back(s);
        prev_match = s.match;
      }
      std::reverse(merged.begin(), merged.end());
      break;
    case SplitBehavior::kContiguous:
      for (size_t i = 0; i < spans.size(); ++i) {
        const Span& s = spans[i];
        if (i > 0 && s.match == prev_match) merged.back().end = s.end;
        else merged.push_back(s);
        prev_match = s.match;
      }
      break;
  }
  for (const Span& s : merged) {
    if (s.end > s.begin) out.emplace_back(text.substr(s.begin, s.end - s.begin));
  }
}

void PipelineEncoder::Trie::add(const AddedToken& t) {
  int32_t node = 0;
  for (char c : t.content) {
    const auto b = static_cast<uint8_t>(c);
    auto& next = nodes[node].next;
    auto it = std::find_if(next.begin(), next.end(), [b](const auto& p) { return p.first == b; });
    if (it == next.end()) {
      nodes.emplace_back();
      nodes[node].next.emplace_back(b, static_cast<int32_t>(nodes.size() - 1));
      node = static_cast<int32_t>(nodes.size() - 1);
    } else {
      node = it->second;
    }
  }
  if (nodes[node].token < 0) {  // the first token with this content wins
    nodes[node].token = static_cast<int32_t>(tokens.size());
    tokens.push_back(t);
  }
}

void PipelineEncoder::set_added_tokens(const std::vector<AddedToken>& tokens) {
  for (const AddedToken& t : tokens) {
    if (t.content.empty()) continue;
    (t.normalized ? normalized_added_ : raw_added_).add(t);
  }
}

void PipelineEncoder::find_added(const Trie& trie, std::string_view text, std::vector<Match>& out) {
  out.clear();
  size_t prev_end = 0;
  for (size_t pos = 0; pos < text.size();) {
    int32_t node = 0, found = -1;
    size_t found_end = 0;
    for (size_t i = pos; i < text.size(); ++i) {
      const auto b = static_cast<uint8_t>(text[i]);
      const auto& next = trie.nodes[node].next;
      auto it = std::find_if(next.begin(), next.end(), [b](const auto& p) { return p.first == b; });
      if (it == next.end()) break;
      node = it->second;
      if (trie.nodes[node].token >= 0) {
        found = trie.nodes[node].token;
        found_end = i + 1;
      }
    }
    if (found < 0) {
      ++pos;
      continue;
    }
    const AddedToken& t = trie.tokens[found];
    size_t begin = pos, end = found_end;
    if (t.single_word) {
      const bool word_before = begin > 0 && is_word_char(code_point_before(text, begin).first);
      const bool word_after = end < text.size() && is_word_char(code_point(text, end).first);
      if (word_before || word_after) {
        pos = found_end;  // like a rejected match of a leftmost-longest scan, resume after it
        continue;
      }
    }
    if (t.lstrip) {
      while (begin > prev_end) {
        const auto [cp, n] = code_point_before(text, begin);
        if (!is_white_space(cp)) break;
        begin -= n;
      }
    }
    if (t.rstrip) {
      while (end < text.size()) {
        const auto [cp, n] = code_point(text, end);
        if (!is_white_space(cp)) break;
        end += n;
      }
    }
    out.push_back({begin, end, t.id});
    prev_end = end;
    pos = end;
  }
}

void PipelineEncoder::pre_tokenize(std::string_view text, bool at_start, std::vector<std::string>& words) const {
  words.clear();
  words.emplace_back(text);
  std::vector<std::string> next;
  for (const PreTokenizerStep& step : pre_tokenizers) {
    next.clear();
    for (size_t w = 0; w < words.size(); ++w) {
      std::string& word = words[w];
      switch (step.kind) {
        case PreTokenizerStep::Kind::kSplit:
          split_pieces(word, step, next);
          break;
        case PreTokenizerStep::Kind::kByteLevel:
          if (step.add_prefix_space && !word.starts_with(' ')) word.insert(word.begin(), ' ');
          if (step.regex) split_pieces(word, step, next);
          else next.push_back(std::move(word));
          break;
        case PreTokenizerStep::Kind::kMetaspace: {
          replace_all(word, " ", step.replacement);
          const bool prepend = step.prepend == PreTokenizerStep::Prepend::kAlways ||
                               (step.prepend == PreTokenizerStep::Prepend::kFirst && at_start && w == 0);
          if (prepend && !word.starts_with(step.replacement)) word.insert(0, step.replacement);
          if (step.split) split_pieces(word, step, next);
          else next.push_back(std::move(word));
          break;
        }
      }
    }
    words.swap(next);
  }
}

void PipelineEncoder::encode_normalized(std::string_view text, bool at_start, std::vector<TokenId>& out) const {
  std::vector<std::string> words;
  pre_tokenize(text, at_start, words);
  for (const std::string& w : words) encode_word_cached(w, out);
}

void PipelineEncoder::encode_word_cached(const std::string& word, std::vector<TokenId>& out) const {
  if (word.size() > kCacheMaxWordBytes) {
    bpe.encode_word(word, out);
    return;
  }
  CacheShard& shard = cache_[std::hash<std::string>{}(word) % kCacheShards];
  {
    std::lock_guard<std::mutex> lock(shard.mu);
    auto it = shard.map.find(word);
    if (it != shard.map.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t begin = out.size();
  bpe.encode_word(word, out);
  std::lock_guard<std::mutex> lock(shard.mu);
  if (shard.map.size() >= kCacheShardWords) shard.map.clear();
  shard.map.emplace(word, std::vector<TokenId>(out.begin() + static_cast<std::ptrdiff_t>(begin), out.end()));
}

void PipelineEncoder::encode_plain(std::string_view text, bool at_start, std::vector<TokenId>& out) const {
  // Valid UTF-8 runs go through the pipeline; each invalid byte is a word of its own.
  for (size_t pos = 0; pos < text.size();) {
    size_t end = pos;
    while (end < text.size() && (static_cast<uint8_t>(text[end]) < 0x80 || utf8_char_size(text, end) > 1)) {
      end += utf8_char_size(text, end);
    }
    if (end > pos) {
      std::string normalized(text.substr(pos, end - pos));
      apply_normalizers(normalizers, normalized);
      if (normalized_added_.empty()) {
        encode_normalized(normalized, at_start && pos == 0, out);
      } else {
        std::vector<Match> matches;
        find_added(normalized_added_, normalized, matches);
        size_t prev = 0;
        for (const Match& m : matches) {
          if (m.begin > prev) encode_normalized(std::string_view(normalized).substr(prev, m.begin - prev),
                                                at_start && pos == 0 && prev == 0, out);
          out.push_back(m.id);
          prev = m.end;
        }
        if (prev < normalized.size()) encode_normalized(std::string_view(normalized).substr(prev),
                                                        at_start && pos == 0 && prev == 0, out);
      }
    }
    if (end < text.size()) bpe.encode_word(text.substr(end, 1), out);
    pos = end + (end < text.size() ? 1 : 0);
  }
}

void PipelineEncoder::encode(std::string_view text, std::vector<TokenId>& out) const {
  if (raw_added_.empty()) {
    encode_plain(text, true, out);
    return;
  }
  std::vector<Match> matches;
  find_added(raw_added_, text, matches);
  size_t prev = 0;
  for (const Match& m : matches) {
    if (m.begin > prev) encode_plain(text.substr(prev, m.begin - prev), prev == 0, out);
    out.push_back(m.id);
    prev = m.end;
  }
  if (prev < text.size()) encode_plain(text.substr(prev), prev == 0, out);
}

}  // namespace densa
