#pragma once
// Internal: the per-family tool-call formats and the engines that drive them over growing text.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "text/chat_parse/chat_parse.h"
#include "text/chat_parse/text_util.h"

namespace densa::toolparse {

// What one call block's body (the text after the call's opening marker) says so far. The
// contract that makes streaming exact: for bodies b and b + more, the result for b (with
// final false) is a prefix of the result for b + more: once have_name is set it stays set with
// the same name and id, args only grows, and failed / done never flip back.
struct CallProgress {
  bool failed = false;     // this block can never be a call: its text goes back to content
  bool have_name = false;  // name (and id, when the format carries one) are final
  std::string name, id;
  std::string args;        // committed prefix of the arguments JSON text
  bool done = false;       // the call closed; `consumed` bytes of body belong to it
  size_t consumed = 0;
  std::string error;       // with done: what was wrong (the call is kept)
};

class ToolFormat {
 public:
  virtual ~ToolFormat() = default;
  // A section wraps all calls (Kimi, DeepSeek); empty when calls stand alone in the text.
  virtual std::string_view section_begin() const { return {}; }
  virtual std::string_view section_end() const { return {}; }
  virtual std::string_view call_begin() const = 0;
  // A new call block starts: parse_call's bodies until the next begin_call are one growing
  // text, so a format may cache scanning work between them.
  virtual void begin_call() const {}
  // `final`: no more text will come, so held-back bytes are what they are.
  virtual CallProgress parse_call(std::string_view body, bool final, const ToolSet& tools) const = 0;
};

// nullptr for an unknown name.
std::unique_ptr<ToolFormat> make_tool_format(std::string_view name);

// Drives a ToolFormat over text that arrives in pieces; emits content and tool-call deltas.
// With no format, all text is content.
class ToolEngine {
 public:
  ToolEngine(std::unique_ptr<ToolFormat> format, const ToolSet* tools, IdSource ids);
  void feed(std::string_view text) { buf_.append(text); }
  void advance(bool final, std::vector<ChatDelta>* out, ParsedMessage* msg);
  // Per closed call, in order: "" or what is wrong with it (ToolCall::error).
  const std::vector<std::string>& call_errors() const { return call_errors_; }

 private:
  enum class State { kContent, kSection, kCall };
  void emit_content(std::string_view text, std::vector<ChatDelta>* out);
  void flush_content(std::string* text, std::vector<ChatDelta>* out);
  bool step_content(bool final, std::vector<ChatDelta>* out);
  bool step_section(bool final, std::vector<ChatDelta>* out, ParsedMessage* msg);
  bool step_call(bool final, std::vector<ChatDelta>* out, ParsedMessage* msg);
  void close_call(const CallProgress& p, bool truncated, ParsedMessage* msg);

  std::unique_ptr<ToolFormat> format_;
  const ToolSet* tools_;
  IdSource ids_;
  std::string buf_;
  size_t pos_ = 0;
  State state_ = State::kContent;
  size_t call_open_ = 0;   // where the current call's opening marker starts
  size_t body_start_ = 0;  // where its body starts
  bool announced_ = false;
  std::string args_sent_;  // the current call's arguments as streamed so far
  size_t calls_ = 0;
  std::vector<std::string> call_errors_;
  bool in_section_ = false;
  bool section_junk_noted_ = false;
  bool in_section_text_ = false;  // pos_ is inside section text that is not a call
  BoundaryTrimmer content_{false, true};
};

// Splits reasoning from the rest of the text; the rest goes on to the tool engine.
struct ReasoningFormat {
  std::string start = "<think>";
  std::string end = "</think>";
  std::string alt_end;  // ends reasoning without being consumed (Kimi: a tool-call section)
};
bool make_reasoning_format(std::string_view name, ReasoningFormat* out);

class ReasoningSplitter {
 public:
  ReasoningSplitter(ReasoningFormat format, bool open_in_prompt)
      : format_(std::move(format)), state_(open_in_prompt ? State::kStartInside : State::kStart) {}
  void feed(std::string_view text) { buf_.append(text); }
  // Appends committed reasoning deltas to *out and the committed rest of the text to *rest.
  void advance(bool final, std::vector<ChatDelta>* out, std::string* rest, ParsedMessage* msg);

 private:
  enum class State { kStart, kStartInside, kReasoning, kAfterEnd, kContent };
  void emit_reasoning(std::string_view text, std::vector<ChatDelta>* out);
  ReasoningFormat format_;
  State state_;
  std::string buf_;
  size_t pos_ = 0;
  BoundaryTrimmer trim_{true, false};
};

}  // namespace densa::toolparse
