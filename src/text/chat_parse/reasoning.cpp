// ReasoningSplitter: <think> ... </think> at the start of the output goes to reasoning_content,
// the rest on to the tool-call parser.
#include "text/chat_parse/formats.h"

namespace densa::toolparse {

bool make_reasoning_format(std::string_view name, ReasoningFormat* out) {
  ReasoningFormat f;
  if (name == "kimi_k2") {
    f.alt_end = "<|tool_calls_section_begin|>";  // K2-Thinking may go straight to its calls
  } else if (name != "qwen3" && name != "deepseek_r1" && name != "deepseek_v31" &&
             name != "deepseek_v3" && name != "glm45" && name != "glm4_moe") {
    return false;
  }
  *out = std::move(f);
  return true;
}

void ReasoningSplitter::emit_reasoning(std::string_view text, std::vector<ChatDelta>* out) {
  std::string s;
  trim_.text(text, &s);
  if (s.empty()) return;
  ChatDelta d;
  d.kind = ChatDelta::Kind::kReasoning;
  d.text = std::move(s);
  out->push_back(std::move(d));
}

void ReasoningSplitter::advance(bool final, std::vector<ChatDelta>* out, std::string* rest,
                                ParsedMessage* msg) {
  const std::string_view b(buf_);
  for (;;) {
    if (state_ == State::kStart || state_ == State::kStartInside) {
      size_t i = pos_;
      while (i < b.size() && is_space(b[i])) ++i;
      const std::string_view t = b.substr(i);
      if (!final && (t.empty() || is_proper_prefix_of(t, format_.start))) return;  // not known yet
      if (t.substr(0, format_.start.size()) == format_.start) {
        pos_ = i + format_.start.size();
        state_ = State::kReasoning;
      } else {
        // No opening marker: the output is content (its leading whitespace is structure, as
        // the templates strip it), unless the prompt opened the block.
        if (state_ == State::kStart) pos_ = i;
        state_ = state_ == State::kStartInside ? State::kReasoning : State::kContent;
      }
      continue;
    }
    if (state_ == State::kReasoning) {
      size_t which = 0;
      const size_t p = find_first_marker(b, pos_, {format_.end, format_.alt_end}, &which);
      if (p != std::string_view::npos) {
        emit_reasoning(b.substr(pos_, p - pos_), out);
        trim_.finish(nullptr);
        pos_ = which == 0 ? p + format_.end.size() : p;  // an alternative end stays in the text
        state_ = which == 0 ? State::kAfterEnd : State::kContent;
        continue;
      }
      const std::string_view r = b.substr(pos_);
      const size_t hold = final ? 0 : std::max(partial_marker_suffix(r, {format_.end, format_.alt_end}),
                                               incomplete_utf8_tail(r));
      emit_reasoning(r.substr(0, r.size() - hold), out);
      pos_ += r.size() - hold;
      if (final && !b.empty()) msg->issues.push_back("reasoning was not closed with " + format_.end);
      return;
    }
    if (state_ == State::kAfterEnd) {  // whitespace after the end marker is structure
      while (pos_ < b.size() && is_space(b[pos_])) ++pos_;
      if (pos_ == b.size()) return;
      state_ = State::kContent;
      continue;
    }
    rest->append(b.substr(pos_));
    pos_ = b.size();
    return;
  }
}

}  // namespace densa::toolparse
