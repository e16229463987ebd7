#include "server/metrics.h"

#include <gtest/gtest.h>

namespace densa::server {
namespace {

TEST(ServerMetrics, RendersGaugesCountersAndCumulativeHistograms) {
  Metrics m;
  m.observe_request({0.004, 0.002, 0.3});
  m.observe_request({0.2, -1.0, 0.6});
  m.count_response(200);
  m.count_response(429);
  EngineStats s;
  s.num_running = 3;
  s.num_waiting = 1;
  s.kv_pages_total = 100;
  s.kv_pages_used = 7;
  s.prefix_cache_hit_tokens = 32;
  s.prompt_tokens_total = 50;
  s.generated_tokens_total = 60;
  s.nonfinite_logit_rows = 2;
  const std::string text = m.render(s);
  for (const char* line : {"densa_requests_running 3\n", "densa_requests_waiting 1\n", "densa_kv_pages_used 7\n",
                           "densa_kv_pages_total 100\n", "densa_prefix_cache_hit_tokens_total 32\n",
                           "densa_prompt_tokens_total 50\n", "densa_generation_tokens_total 60\n",
                           "# TYPE densa_nonfinite_logits_total counter\n", "densa_nonfinite_logits_total 2\n",
                           "# TYPE densa_time_to_first_token_seconds histogram\n",
                           "densa_time_to_first_token_seconds_bucket{le=\"0.005\"} 1\n",
                           "densa_time_to_first_token_seconds_bucket{le=\"0.25\"} 2\n",
                           "densa_time_to_first_token_seconds_bucket{le=\"+Inf\"} 2\n",
                           "densa_time_to_first_token_seconds_count 2\n",
                           "densa_time_per_output_token_seconds_count 1\n",
                           "densa_e2e_request_latency_seconds_count 2\n",
                           "densa_http_responses_total{code=\"4xx\"} 1\n"})
    EXPECT_NE(text.find(line), std::string::npos) << line;
}

}  // namespace
}  // namespace densa::server
