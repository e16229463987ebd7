// The router's SSE framer (router/sse_framer): bytes fed in arbitrary chunks come out as whole
// events (each ending in a blank line) plus the pending tail, and together they are exactly
// the bytes fed, in order - whatever the chunking.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "router/sse_framer.h"

namespace {

bool ends_event(const std::string& e) {
  auto ends = [&](std::string_view s) { return e.size() >= s.size() && e.compare(e.size() - s.size(), s.size(), s) == 0; };
  return ends("\n\n") || ends("\n\r\n");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace densa::router;
  if (size == 0) return 0;
  // The first byte seeds the chunk sizes; the rest is the stream.
  uint32_t seed = data[0];
  const std::string_view stream(reinterpret_cast<const char*>(data + 1), size - 1);
  SseFramer framer;
  SseFramer whole;
  std::string out;
  for (size_t pos = 0; pos < stream.size();) {
    seed = seed * 1103515245u + 12345u;
    const size_t n = std::min<size_t>(stream.size() - pos, 1 + (seed >> 16) % 17);
    for (const std::string& e : framer.feed(stream.substr(pos, n))) {
      FUZZ_ASSERT(ends_event(e));
      (void)sse_event_data(e);
      out += e;
    }
    pos += n;
  }
  FUZZ_ASSERT(out + framer.pending() == stream);
  std::string out_whole;
  for (const std::string& e : whole.feed(stream)) out_whole += e;
  FUZZ_ASSERT(out_whole == out && whole.pending() == framer.pending());
  return 0;
}
