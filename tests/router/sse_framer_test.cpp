#include "router/sse_framer.h"

#include <gtest/gtest.h>

namespace densa::router {
namespace {

TEST(RouterSseFramer, CutsWholeEventsWhereverTheBytesSplit) {
  const std::string stream = "data: {\"a\":1}\n\ndata: {\"b\":2}\n\ndata: [DONE]\n\n";
  for (size_t step = 1; step <= stream.size(); ++step) {
    SseFramer f;
    std::vector<std::string> events;
    for (size_t i = 0; i < stream.size(); i += step)
      for (std::string& e : f.feed(std::string_view(stream).substr(i, step))) events.push_back(std::move(e));
    ASSERT_EQ(events.size(), 3u) << "step " << step;
    EXPECT_EQ(events[0], "data: {\"a\":1}\n\n");
    EXPECT_EQ(events[2], "data: [DONE]\n\n");
    EXPECT_TRUE(f.pending().empty());
  }
}

TEST(RouterSseFramer, CrLfEventsAndAnUnfinishedTail) {
  SseFramer f;
  std::vector<std::string> e = f.feed("data: x\r\n\r\ndata: y\r\n\r");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0], "data: x\r\n\r\n");
  EXPECT_EQ(f.pending(), "data: y\r\n\r");
  e = f.feed("\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(sse_event_data(e[0]), "y");
}

TEST(RouterSseFramer, EventDataJoinsDataLinesAndSkipsOtherFields) {
  EXPECT_EQ(sse_event_data("event: x\ndata: a\ndata:b\n: comment\n\n"), "a\nb");
  EXPECT_EQ(sse_event_data("data: [DONE]\n\n"), "[DONE]");
  EXPECT_EQ(sse_event_data("id: 3\n\n"), "");
}

}  // namespace
}  // namespace densa::router
