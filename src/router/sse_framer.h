#pragma once
// SseFramer: cuts a text/event-stream into whole events as bytes arrive, so the router
// forwards only complete events and can end a broken stream with a well-formed error event.
// An event ends at a blank line ("\n\n" or "\r\n\r\n"); its raw bytes are kept as they came.
#include <string>
#include <string_view>
#include <vector>

namespace densa::router {

class SseFramer {
 public:
  // Appends bytes; returns the events completed by them (raw, blank line included).
  std::vector<std::string> feed(std::string_view bytes);
  // Bytes of an unfinished event.
  const std::string& pending() const { return pending_; }

 private:
  std::string pending_;
};

// The data of a raw event: its "data:" lines joined by "\n" (one leading space dropped).
std::string sse_event_data(std::string_view raw_event);

}  // namespace densa::router
