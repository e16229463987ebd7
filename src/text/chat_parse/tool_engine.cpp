// ToolEngine: walks the generated text through content, tool-call sections and call blocks,
// committing only what later text cannot change (see CallProgress in formats.h).
#include <algorithm>

#include "text/chat_parse/formats.h"

namespace densa::toolparse {

namespace {
constexpr size_t npos = std::string_view::npos;

bool starts_with(std::string_view s, std::string_view prefix) {
  return !prefix.empty() && s.substr(0, prefix.size()) == prefix;
}

}  // namespace

ToolEngine::ToolEngine(std::unique_ptr<ToolFormat> format, const ToolSet* tools, IdSource ids)
    : format_(std::move(format)), tools_(tools), ids_(std::move(ids)) {}

void ToolEngine::emit_content(std::string_view text, std::vector<ChatDelta>* out) {
  std::string s;
  content_.text(text, &s);
  flush_content(&s, out);
}

void ToolEngine::flush_content(std::string* text, std::vector<ChatDelta>* out) {
  if (text->empty()) return;
  ChatDelta d;
  d.kind = ChatDelta::Kind::kContent;
  d.text = std::move(*text);
  out->push_back(std::move(d));
}

void ToolEngine::advance(bool final, std::vector<ChatDelta>* out, ParsedMessage* msg) {
  for (bool more = true; more;) {
    switch (state_) {
      case State::kContent: more = step_content(final, out); break;
      case State::kSection: more = step_section(final, out, msg); break;
      case State::kCall: more = step_call(final, out, msg); break;
    }
  }
  if (final) {
    std::string s;
    content_.finish(&s);
    flush_content(&s, out);
  }
}

bool ToolEngine::step_content(bool final, std::vector<ChatDelta>* out) {
  const std::string_view b(buf_);
  std::string_view opener;
  if (format_) opener = format_->section_begin().empty() ? format_->call_begin() : format_->section_begin();
  const size_t p = opener.empty() ? npos : b.find(opener, pos_);
  if (p != npos) {
    emit_content(b.substr(pos_, p - pos_), out);
    if (!format_->section_begin().empty()) {
      content_.structure_begins();
      in_section_ = true;
      state_ = State::kSection;
      pos_ = p + opener.size();
    } else {
      state_ = State::kCall;
      call_open_ = p;
      body_start_ = pos_ = p + opener.size();
      announced_ = false;
      args_sent_.clear();
      format_->begin_call();
    }
    return true;
  }
  const std::string_view rest = b.substr(pos_);
  size_t hold = 0;
  if (!final) {
    hold = std::max(opener.empty() ? 0 : partial_marker_suffix(rest, opener), incomplete_utf8_tail(rest));
  }
  emit_content(rest.substr(0, rest.size() - hold), out);
  pos_ += rest.size() - hold;
  return false;
}

bool ToolEngine::step_section(bool final, std::vector<ChatDelta>* out, ParsedMessage* msg) {
  const std::string_view b(buf_);
  // Whitespace between calls is structure; inside a run of text that is not a call it is that
  // text's own (the run was cut only by the end of what has arrived so far, so skipping it
  // here would make the content depend on the chunking).
  if (!in_section_text_) {
    while (pos_ < b.size() && is_space(b[pos_])) ++pos_;
  }
  const std::string_view rest = b.substr(pos_);
  if (rest.empty()) return false;  // an unclosed section at the end is accepted (see CHAT_PARSE.md)
  const std::string_view end = format_->section_end(), call = format_->call_begin();
  if (starts_with(rest, end)) {
    in_section_text_ = false;
    pos_ += end.size();
    in_section_ = false;
    state_ = State::kContent;
    content_.structure_ends();
    return true;
  }
  if (starts_with(rest, call)) {
    in_section_text_ = false;
    state_ = State::kCall;
    call_open_ = pos_;
    body_start_ = pos_ = pos_ + call.size();
    announced_ = false;
    args_sent_.clear();
    format_->begin_call();
    return true;
  }
  if (!final && (is_proper_prefix_of(rest, end) || is_proper_prefix_of(rest, call))) return false;
  // Text inside a section that is not a call: kept as content, noted once.
  size_t which = 0;
  const size_t q = find_first_marker(b, pos_, {end, call}, &which);
  size_t stop = q;
  if (q == npos) {
    stop = b.size();
    if (!final) stop -= std::max(partial_marker_suffix(rest, {end, call}), incomplete_utf8_tail(rest));
  }
  if (!section_junk_noted_ && stop > pos_) {
    msg->issues.push_back("text at byte " + std::to_string(pos_) +
                          " inside the tool-call section is not a call, kept as content");
    section_junk_noted_ = true;
  }
  emit_content(b.substr(pos_, stop - pos_), out);
  pos_ = stop;
  in_section_text_ = q == npos;  // stopped short of a marker: the run goes on with the next text
  return q != npos;
}

bool ToolEngine::step_call(bool final, std::vector<ChatDelta>* out, ParsedMessage* msg) {
  const std::string_view b(buf_);
  const std::string_view body = b.substr(body_start_);
  const CallProgress p = format_->parse_call(body, final, *tools_);
  if (!announced_ && (p.failed || (final && !p.done && !p.have_name))) {
    // Not a call after all: its opening marker is content and scanning resumes after it.
    msg->issues.push_back("the tool-call marker at byte " + std::to_string(call_open_) +
                          " does not start a well-formed call, kept as content");
    emit_content(b.substr(call_open_, body_start_ - call_open_), out);
    pos_ = body_start_;
    state_ = in_section_ ? State::kSection : State::kContent;
    return true;
  }
  if (p.have_name && !announced_) {
    if (!in_section_) content_.structure_begins();  // whitespace before a call is structure
    ChatDelta d;
    d.kind = ChatDelta::Kind::kToolCallStart;
    d.tool_index = calls_;
    d.name = p.name;
    d.id = !p.id.empty() ? p.id : ids_(calls_);
    out->push_back(std::move(d));
    announced_ = true;
  }
  if (announced_) {
    if (p.args.compare(0, args_sent_.size(), args_sent_) != 0 || p.args.size() < args_sent_.size()) {
      // A format broke its own contract; never retract what was sent.
      msg->issues.push_back("internal: tool call " + std::to_string(calls_) +
                            " arguments were revised after streaming; kept the streamed text");
    } else {
      size_t n = p.args.size();
      if (!p.done && !final) n -= incomplete_utf8_tail(p.args);
      if (n > args_sent_.size()) {
        ChatDelta d;
        d.kind = ChatDelta::Kind::kToolCallArguments;
        d.tool_index = calls_;
        d.text = p.args.substr(args_sent_.size(), n - args_sent_.size());
        args_sent_ += d.text;
        out->push_back(std::move(d));
      }
    }
  }
  if (!p.done && !final) return false;
  close_call(p, !p.done, msg);
  pos_ = p.done ? body_start_ + p.consumed : b.size();
  state_ = in_section_ ? State::kSection : State::kContent;
  if (!in_section_) content_.structure_ends();
  return p.done;
}

void ToolEngine::close_call(const CallProgress& p, bool truncated, ParsedMessage* msg) {
  std::string error = truncated ? "tool call is truncated (the text ended inside it)" : p.error;
  if (error.empty()) {
    const auto args = nlohmann::json::parse(args_sent_, nullptr, false);
    if (args.is_discarded()) error = "arguments are not valid JSON";
    else if (!args.is_object()) error = "arguments are not a JSON object";
  }
  if (error.empty() && !tools_->empty() && !tools_->has(p.name)) error = "unknown tool '" + p.name + "'";
  call_errors_.push_back(std::move(error));
  ++calls_;
}

}  // namespace densa::toolparse
