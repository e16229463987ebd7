#pragma once
// StopMatcher: finds OpenAI "stop" strings in streamed text. Text is fed as it is decoded;
// what is returned is safe to send: a tail that could still become a stop string is held back
// until the next feed shows it does not. The stop string itself is never returned.
#include <string>
#include <string_view>
#include <vector>

namespace densa::server {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  // Appends `text` and returns the text now safe to emit. After a match it returns the text
  // before the earliest stop string (once) and drops everything after; matched() turns true.
  std::string feed(std::string_view text);
  // End of stream without a match: returns the held-back tail.
  std::string flush();
  bool matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;  // text not yet emitted: a possible stop-string prefix
  bool matched_ = false;
};

}  // namespace densa::server
