#include "api/sse.h"

namespace densa::api {

std::string sse_event(std::string_view payload) {
  // A JSON payload is dumped on one line; any stray newline would end the event early, so
  // each line of a multi-line payload gets its own "data:" field (the SSE rule).
  std::string out;
  out.reserve(payload.size() + 8);
  size_t start = 0;
  while (true) {
    const size_t nl = payload.find('\n', start);
    out += "data: ";
    out.append(payload.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start));
    out += '\n';
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  out += '\n';
  return out;
}

std::string sse_done() { return "data: [DONE]\n\n"; }

}  // namespace densa::api
