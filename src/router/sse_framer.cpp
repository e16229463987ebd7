#include "router/sse_framer.h"

namespace densa::router {

std::vector<std::string> SseFramer::feed(std::string_view bytes) {
  std::vector<std::string> events;
  const size_t scan_from = pending_.size() < 3 ? 0 : pending_.size() - 3;
  pending_.append(bytes);
  size_t start = 0, pos = scan_from;
  while (pos < pending_.size()) {
    const size_t lf = pending_.find('\n', pos);
    if (lf == std::string::npos) break;
    // A blank line: "\n" right after another line end ("\n\n" or "\n\r\n").
    size_t end = std::string::npos;
    if (lf + 1 < pending_.size() && pending_[lf + 1] == '\n') end = lf + 2;
    else if (lf + 2 < pending_.size() && pending_[lf + 1] == '\r' && pending_[lf + 2] == '\n') end = lf + 3;
    if (end != std::string::npos && lf >= start) {
      events.push_back(pending_.substr(start, end - start));
      start = end;
      pos = end;
    } else {
      pos = lf + 1;
    }
  }
  pending_.erase(0, start);
  return events;
}

std::string sse_event_data(std::string_view raw) {
  std::string data;
  bool any = false;
  size_t pos = 0;
  while (pos < raw.size()) {
    size_t lf = raw.find('\n', pos);
    if (lf == std::string_view::npos) lf = raw.size();
    std::string_view line = raw.substr(pos, lf - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.rfind("data:", 0) == 0) {
      line.remove_prefix(5);
      if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
      if (any) data.push_back('\n');
      data.append(line);
      any = true;
    }
    pos = lf + 1;
  }
  return data;
}

}  // namespace densa::router
