#pragma once
// Test helpers for the chat-output parsers: chunkings of a text, folding streamed deltas, and
// the checks every streamed parse must pass against the non-streaming result.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/chat_parse/chat_parse.h"

namespace densa::toolparse::testing {

inline bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

// Folds deltas the way an OpenAI streaming client does, checking their order as it goes.
struct Folded {
  std::string content, reasoning;
  std::vector<ToolCall> calls;
  std::string problems;  // order / shape violations seen while folding
  void add(const ChatDelta& d) {
    switch (d.kind) {
      case ChatDelta::Kind::kContent: content += d.text; break;
      case ChatDelta::Kind::kReasoning: reasoning += d.text; break;
      case ChatDelta::Kind::kToolCallStart:
        if (d.tool_index != calls.size()) problems += "call start out of order; ";
        if (d.id.empty() || d.name.empty()) problems += "call start without id or name; ";
        calls.push_back({d.id, d.name, "", ""});
        break;
      case ChatDelta::Kind::kToolCallArguments:
        if (d.tool_index + 1 != calls.size()) problems += "arguments for a call that is not the latest; ";
        else calls[d.tool_index].arguments += d.text;
        break;
    }
    if (d.kind != ChatDelta::Kind::kToolCallStart && d.text.empty()) problems += "empty delta; ";
  }
};

// Chunkings of `text`: one byte at a time, and `random_count` random ones of 1..max_len bytes.
inline std::vector<std::vector<std::string>> random_chunkings(const std::string& text, int count,
                                                              size_t max_len, uint32_t seed) {
  std::vector<std::vector<std::string>> out;
  std::mt19937 rng(seed);
  for (int k = 0; k < count; ++k) {
    std::vector<std::string> chunks;
    for (size_t i = 0; i < text.size();) {
      const size_t n = std::min(text.size() - i, 1 + rng() % max_len);
      chunks.push_back(text.substr(i, n));
      i += n;
    }
    out.push_back(std::move(chunks));
  }
  return out;
}

// Token-like pieces: each of `specials` whole, other text in runs of letters, of digits, or
// single other bytes (spaces attach to the next run), as a BPE detokenizer tends to emit.
inline std::vector<std::string> token_like_chunks(const std::string& text, const std::vector<std::string>& specials) {
  std::vector<std::string> out;
  size_t i = 0;
  auto kind = [](unsigned char c) { return std::isalpha(c) || c >= 0x80 ? 1 : std::isdigit(c) ? 2 : 0; };
  while (i < text.size()) {
    bool special = false;
    for (const auto& s : specials) {
      if (!s.empty() && text.compare(i, s.size(), s) == 0) {
        out.push_back(s);
        i += s.size();
        special = true;
        break;
      }
    }
    if (special) continue;
    size_t j = i;
    while (j < text.size() && text[j] == ' ') ++j;
    if (j < text.size()) {
      const int k = kind(static_cast<unsigned char>(text[j]));
      ++j;
      if (k != 0) {
        while (j < text.size() && kind(static_cast<unsigned char>(text[j])) == k && j - i < 6) ++j;
      }
    }
    out.push_back(text.substr(i, j - i));
    i = j;
  }
  return out;
}

// Streams `chunks` (with feed, or with update of the whole text so far) and checks the fold
// of the deltas equals `expected` (the non-streaming parse of the concatenation).
inline void expect_stream_matches(const ChatParseOptions& options, const std::vector<std::string>& chunks,
                                  const ParsedMessage& expected, bool use_update, const std::string& label) {
  auto parser = ChatStreamParser::create(options);
  ASSERT_TRUE(parser.is_ok()) << parser.status().to_string();
  Folded f;
  std::string so_far;
  auto take = [&](const std::vector<ChatDelta>& deltas) {
    for (const auto& d : deltas) {
      if (!valid_utf8(d.text)) f.problems += "delta text is not whole UTF-8; ";
      f.add(d);
    }
  };
  for (const auto& c : chunks) {
    so_far += c;
    if (use_update) {
      auto r = (*parser)->update(so_far);
      ASSERT_TRUE(r.is_ok()) << r.status().to_string();
      take(*r);
    } else {
      take((*parser)->feed(c));
    }
  }
  take((*parser)->finish());
  EXPECT_EQ(f.problems, "") << label;
  EXPECT_EQ(f.content, expected.content) << label;
  EXPECT_EQ(f.reasoning, expected.reasoning_content) << label;
  ASSERT_EQ(f.calls.size(), expected.tool_calls.size()) << label;
  for (size_t i = 0; i < f.calls.size(); ++i) {
    EXPECT_EQ(f.calls[i].id, expected.tool_calls[i].id) << label;
    EXPECT_EQ(f.calls[i].name, expected.tool_calls[i].name) << label;
    EXPECT_EQ(f.calls[i].arguments, expected.tool_calls[i].arguments) << label;
    EXPECT_EQ((*parser)->message().tool_calls[i].error, expected.tool_calls[i].error) << label;
  }
  EXPECT_EQ((*parser)->message().issues, expected.issues) << label;
}

// Every single split point (as two chunks, alternating feed / update), one byte at a time,
// random chunkings and token-like chunks.
inline void expect_all_chunkings_match(const ChatParseOptions& options, const std::string& text,
                                       const std::vector<std::string>& specials, const std::string& label) {
  auto whole = parse_chat_output(text, options);
  ASSERT_TRUE(whole.is_ok()) << whole.status().to_string();
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    expect_stream_matches(options, {text.substr(0, cut), text.substr(cut)}, *whole, cut % 2 == 1,
                          label + " split at byte " + std::to_string(cut));
    if (::testing::Test::HasFailure()) return;
  }
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  expect_stream_matches(options, bytes, *whole, false, label + " byte by byte");
  for (const auto& marker : specials) {  // no marker (or its start) ever reaches content
    EXPECT_EQ(whole->content.find(marker.substr(0, 2)), std::string::npos) << label << ": " << marker;
  }
  int k = 0;
  for (const auto& chunks : random_chunkings(text, 20, 9, 1234)) {
    expect_stream_matches(options, chunks, *whole, k % 2 == 0, label + " random chunking " + std::to_string(k));
    ++k;
  }
  expect_stream_matches(options, token_like_chunks(text, specials), *whole, false, label + " token-like");
}

}  // namespace densa::toolparse::testing
