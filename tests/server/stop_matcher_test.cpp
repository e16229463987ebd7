#include "server/stop_matcher.h"

#include <gtest/gtest.h>

namespace densa::server {
namespace {

TEST(ServerStopMatcher, NoStopsPassesThrough) {
  StopMatcher m({});
  EXPECT_EQ(m.feed("hello"), "hello");
  EXPECT_EQ(m.flush(), "");
  EXPECT_FALSE(m.matched());
}

TEST(ServerStopMatcher, MatchAcrossFeedsDropsStopAndRest) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.feed("abc E"), "abc ");  // "E" may start "END": held back
  EXPECT_EQ(m.feed("N"), "");
  EXPECT_EQ(m.feed("D tail"), "");
  EXPECT_TRUE(m.matched());
  EXPECT_EQ(m.feed("more"), "");
  EXPECT_EQ(m.flush(), "");
}

TEST(ServerStopMatcher, FalsePrefixIsReleased) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.feed("xE"), "x");
  EXPECT_EQ(m.feed("Nx"), "ENx");
  EXPECT_FALSE(m.matched());
  EXPECT_EQ(m.feed("EN"), "");
  EXPECT_EQ(m.flush(), "EN");
}

TEST(ServerStopMatcher, EarliestOfSeveral) {
  StopMatcher m({"world", "lo"});
  EXPECT_EQ(m.feed("hello world"), "hel");
  EXPECT_TRUE(m.matched());
}

}  // namespace
}  // namespace densa::server
