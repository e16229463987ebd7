// text/regex.h: matches from many threads, and the per-thread match data freed when a thread
// exits (under the sanitizer build a block left behind is a leak report, which fails the run).
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "text/regex.h"

namespace densa {
namespace {

TEST(Regex, ThreadsThatComeAndGoMatchAlikeAndKeepNothing) {
  const auto rx = Regex::compile(R"(\p{L}+|\p{N}+)");
  ASSERT_TRUE(rx.is_ok()) << rx.status().to_string();
  const std::string text = "héllo wörld 123 über";
  const std::vector<std::string> want = {"héllo", "wörld", "123", "über"};
  std::vector<std::vector<std::string>> got(8);
  for (int round = 0; round < 4; ++round) {
    std::vector<std::thread> threads;
    for (size_t t = 0; t < got.size(); ++t) {
      threads.emplace_back([&, t] {
        got[t].clear();
        rx->for_each_match(text, [&](size_t b, size_t e) { got[t].push_back(text.substr(b, e - b)); });
      });
    }
    for (std::thread& th : threads) th.join();
    for (const auto& g : got) EXPECT_EQ(g, want) << "round " << round;
  }
}

}  // namespace
}  // namespace densa
