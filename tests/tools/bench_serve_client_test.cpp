// The benchmark client's parsing (SSE framing, OpenAI stream chunks, base URLs), its prompt
// sets, the report's A/B comparison and the SVG plot writer.
#include "tools/bench/bench_serve_client.h"

#include <gtest/gtest.h>

#include "tools/bench/bench_serve_load.h"
#include "tools/bench/bench_serve_report.h"
#include "tools/bench/svg_plot.h"

namespace densa::bench {
namespace {

std::vector<std::string> feed_all(const std::string& stream, size_t piece) {
  SseParser p;
  std::vector<std::string> out;
  for (size_t i = 0; i < stream.size(); i += piece) {
    p.feed(std::string_view(stream).substr(i, piece), [&](std::string_view d) { out.emplace_back(d); });
  }
  return out;
}

TEST(BenchClient, SseParserSplitsEventsAcrossArbitraryReads) {
  const std::string stream =
      ": keep-alive comment\n"
      "data: {\"a\":1}\n\n"
      "event: message\r\ndata: {\"b\":2}\r\n\r\n"
      "data: line1\ndata: line2\n\n"
      "data: [DONE]\n\n";
  for (size_t piece : {1, 2, 5, 1000}) {
    const auto events = feed_all(stream, piece);
    ASSERT_EQ(events.size(), 4u) << "piece " << piece;
    EXPECT_EQ(events[0], "{\"a\":1}");
    EXPECT_EQ(events[1], "{\"b\":2}");
    EXPECT_EQ(events[2], "line1\nline2");
    EXPECT_EQ(events[3], "[DONE]");
  }
  EXPECT_TRUE(feed_all("data: x\n", 1).empty());  // no blank line yet: not an event
}

TEST(BenchClient, StreamChunksCountTokensAndUsage) {
  StreamChunk c = parse_stream_chunk(R"({"choices":[{"index":0,"text":" the","finish_reason":null}]})");
  EXPECT_TRUE(c.is_token);
  c = parse_stream_chunk(R"({"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]})");
  EXPECT_TRUE(c.is_token);
  // A token whose bytes are held back (incomplete UTF-8) still arrived.
  c = parse_stream_chunk(R"({"choices":[{"index":0,"text":"","finish_reason":null}]})");
  EXPECT_TRUE(c.is_token);
  // The chat role preamble and finish-only chunks are not tokens.
  c = parse_stream_chunk(R"({"choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]})");
  EXPECT_FALSE(c.is_token);
  c = parse_stream_chunk(R"({"choices":[{"index":0,"text":"","finish_reason":"length"}]})");
  EXPECT_FALSE(c.is_token);
  // The last token may carry the finish reason.
  c = parse_stream_chunk(R"({"choices":[{"index":0,"text":"end","finish_reason":"stop"}]})");
  EXPECT_TRUE(c.is_token);
  c = parse_stream_chunk(R"({"choices":[],"usage":{"prompt_tokens":17,"completion_tokens":8,"total_tokens":25}})");
  EXPECT_FALSE(c.is_token);
  EXPECT_EQ(c.prompt_tokens, 17);
  EXPECT_EQ(c.completion_tokens, 8);
  EXPECT_TRUE(parse_stream_chunk("[DONE]").done);
  EXPECT_EQ(parse_stream_chunk(R"({"error":{"message":"boom","type":"x"}})").error, "boom");
  EXPECT_FALSE(parse_stream_chunk("{not json").error.empty());
}

TEST(BenchClient, EndpointsJoinBaseUrlAndPath) {
  auto e = parse_endpoint("http://127.0.0.1:8080", "/v1/completions");
  ASSERT_TRUE(e.is_ok());
  EXPECT_EQ(e.value().origin, "http://127.0.0.1:8080");
  EXPECT_EQ(e.value().path, "/v1/completions");
  EXPECT_FALSE(e.value().chat);
  e = parse_endpoint("http://host:9/v1/", "/v1/chat/completions");
  ASSERT_TRUE(e.is_ok());
  EXPECT_EQ(e.value().origin, "http://host:9");
  EXPECT_EQ(e.value().path, "/v1/chat/completions");
  EXPECT_TRUE(e.value().chat);
  e = parse_endpoint("https://gw.example/api/v1", "/v1/completions");
  ASSERT_TRUE(e.is_ok());
  EXPECT_EQ(e.value().path, "/api/v1/completions");
  EXPECT_FALSE(parse_endpoint("127.0.0.1:8080", "/v1/completions").is_ok());
  EXPECT_FALSE(parse_endpoint("ftp://x", "/v1/completions").is_ok());
}

TEST(BenchClient, RequestBodiesAreStreamedOpenAiRequests) {
  ClientOptions o;
  o.model = "m";
  o.endpoint = parse_endpoint("http://h:1", "/v1/completions").value();
  o.extra_body = {{"ignore_eos", true}};
  BenchPrompt p{"hello there", {}, 0, 16};
  auto body = request_body(o, p);
  EXPECT_EQ(body["prompt"], "hello there");
  EXPECT_EQ(body["max_tokens"], 16);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
  EXPECT_EQ(body["ignore_eos"], true);
  p.ids = {5, 6, 7};
  EXPECT_EQ(request_body(o, p)["prompt"], nlohmann::json({5, 6, 7}));
  o.endpoint = parse_endpoint("http://h:1", "/v1/chat/completions").value();
  body = request_body(o, p);
  EXPECT_EQ(body["messages"][0]["content"], "hello there");
  EXPECT_FALSE(body.contains("prompt"));
}

TEST(BenchClient, PromptSetsAreSeededAndSized) {
  const auto a = random_word_prompts(5, 12, 7, 42, nullptr);
  const auto b = random_word_prompts(5, 12, 7, 42, nullptr);
  ASSERT_EQ(a.size(), 5u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].text, b[i].text);
    EXPECT_EQ(std::count(a[i].text.begin(), a[i].text.end(), ' '), 11);  // 12 words
    EXPECT_EQ(a[i].max_tokens, 7);
  }
  EXPECT_NE(a[0].text, a[1].text);
  // With a token counter the text is fitted to the exact length (here: characters / 3).
  const auto count = [](const std::string& s) { return static_cast<int64_t>(s.size() / 3); };
  for (const BenchPrompt& p : random_word_prompts(10, 40, 8, 1, count)) {
    EXPECT_EQ(p.num_tokens, count(p.text));
    EXPECT_NEAR(p.num_tokens, 40, 2);
  }
  const auto ids = random_id_prompts(3, 9, 4, 1, 259, 1024);
  for (const BenchPrompt& p : ids) {
    ASSERT_EQ(p.ids.size(), 9u);
    EXPECT_EQ(p.num_tokens, 9);
    for (int32_t id : p.ids) EXPECT_TRUE(id >= 259 && id < 1024);
  }
  const auto t = poisson_arrivals(2000, 50.0, 3);
  EXPECT_EQ(t.front(), 0);
  EXPECT_NEAR(t.back() / 1999, 1.0 / 50, 0.002);  // mean gap 1/rate
  EXPECT_EQ(poisson_arrivals(4, 0, 3), std::vector<double>(4, 0.0));
}

RequestRecord rec(double ttft, int n, double gap) {
  RequestRecord r;
  r.ok = true;
  r.ttft_s = ttft;
  r.output_tokens = n;
  r.prompt_tokens = 8;
  r.e2e_s = ttft + gap * (n - 1);
  for (int i = 1; i < n; ++i) r.itl_s.push_back(gap);
  return r;
}

std::vector<LevelResult> fake_run(double scale, int repeats) {
  std::vector<LevelResult> out;
  for (int rep = 0; rep < repeats; ++rep) {
    for (int level : {1, 4}) {
      LevelResult lr;
      for (int i = 0; i < 20; ++i) lr.records.push_back(rec(scale * (0.05 + 0.001 * i), 8, scale * 0.01 * level));
      lr.metrics = compute_level_metrics(lr.records, scale * 2.0, Slo{});
      lr.metrics.level = level;
      lr.metrics.repeat_idx = rep;
      out.push_back(std::move(lr));
    }
  }
  return out;
}

TEST(BenchReport, CompareGivesRatiosWithIntervals) {
  BenchMeta meta;
  meta.model = "m";
  meta.repeats = 2;
  const auto a = result_json(meta, fake_run(1.0, 2));
  const auto b = result_json(meta, fake_run(2.0, 2));  // everything twice as slow
  auto c = compare_results(a, b);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c.value().num_pairs, 4);
  for (const MetricRatio& m : c.value().metrics) {
    const double want = m.higher_is_better ? 0.5 : 2.0;
    EXPECT_NEAR(m.overall.ratio, want, 1e-9) << m.metric;
    EXPECT_TRUE(m.overall.has_ci) << m.metric;
    EXPECT_NEAR(m.overall.lo, want, 1e-9) << m.metric;
    ASSERT_EQ(m.per_level.size(), 2u);
    for (const RatioCi& r : m.per_level) EXPECT_NEAR(r.ratio, want, 1e-9) << m.metric;
  }
  const std::string md = comparison_markdown(c.value());
  EXPECT_NE(md.find("output_throughput"), std::string::npos);
  EXPECT_TRUE(comparison_json(c.value())["metrics"].contains("mean_tpot_ms"));
  // Self-comparison: ratio 1 everywhere.
  auto self = compare_results(a, a);
  ASSERT_TRUE(self.is_ok());
  for (const MetricRatio& m : self.value().metrics) EXPECT_NEAR(m.overall.ratio, 1.0, 1e-12);
  EXPECT_FALSE(compare_results(a, nlohmann::json::object()).is_ok());
}

TEST(BenchReport, MarkdownAndJsonCarryTheMetrics) {
  BenchMeta meta;
  meta.model = "m";
  const auto run = fake_run(1.0, 1);
  const auto j = result_json(meta, run);
  ASSERT_EQ(j["levels"].size(), 2u);
  EXPECT_EQ(j["levels"][0]["samples"]["ttft_ms"].size(), 20u);
  EXPECT_NEAR(j["levels"][1]["tpot_ms"]["mean"].get<double>(), 40.0, 1e-9);  // 0.01 * 4 s
  const std::string md = result_markdown(meta, run);
  EXPECT_NE(md.find("| 4 | 20/0 |"), std::string::npos) << md;
}

TEST(SvgPlot, RendersLinesCdfsAndNiceTicks) {
  EXPECT_EQ(nice_ticks(0, 10, 5), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(nice_ticks(0, 1, 4), (std::vector<double>{0, 0.5, 1}));
  PlotSpec s{"t <1>", "concurrency", "tok/s", true};
  s.series.push_back({"out", {1, 4, 16}, {10, 30, 50}});
  const std::string svg = render_svg_plot(s);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("t &lt;1&gt;"), std::string::npos);
  EXPECT_NE(svg.find("<polyline"), std::string::npos);
  EXPECT_EQ(svg, render_svg_plot(s));  // deterministic
  const PlotSeries cdf = cdf_series("ttft", {3, 1, 2});
  EXPECT_EQ(cdf.x, (std::vector<double>{1, 1, 2, 3}));
  EXPECT_EQ(cdf.y, (std::vector<double>{0, 1.0 / 3, 2.0 / 3, 1}));
}

}  // namespace
}  // namespace densa::bench
