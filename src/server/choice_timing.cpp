#include "server/choice_timing.h"

#include <algorithm>
#include <cstdio>

namespace densa::server {
namespace {

double ms(std::chrono::steady_clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}

}  // namespace

double ChoiceTiming::prefill_ms() const { return sum(prefill_chunks_ms); }
double ChoiceTiming::decode_ms() const { return sum(decode_steps_ms); }

ChoiceTiming make_choice_timing(const RequestTimeline& e, std::chrono::steady_clock::time_point arrival,
                                std::chrono::steady_clock::time_point done) {
  ChoiceTiming t;
  t.tokenize_ms = std::max(0.0, ms(e.submit_time - arrival));
  t.queue_ms = e.queue_us / 1000.0;
  for (double us : e.prefill_chunk_us) t.prefill_chunks_ms.push_back(us / 1000.0);
  t.kv_transfer_ms = e.kv_transfer_us / 1000.0;
  for (double us : e.decode_step_us) t.decode_steps_ms.push_back(us / 1000.0);
  t.engine_other_ms = std::max(0.0, e.other_us() / 1000.0);
  const auto final_event = e.submit_time + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                               std::chrono::duration<double, std::micro>(e.total_us));
  t.respond_ms = std::max(0.0, ms(done - final_event));
  t.first_token_ms = e.first_token_us < 0 ? -1.0 : t.tokenize_ms + e.first_token_us / 1000.0;
  t.server_ms = std::max(0.0, ms(done - arrival));  // measured, not summed: the stages must add up to it
  return t;
}

nlohmann::json choice_timing_json(const ChoiceTiming& t, bool with_steps) {
  nlohmann::json j = {{"tokenize_ms", t.tokenize_ms},
                      {"queue_ms", t.queue_ms},
                      {"prefill_ms", t.prefill_ms()},
                      {"kv_transfer_ms", t.kv_transfer_ms},
                      {"decode_ms", t.decode_ms()},
                      {"engine_other_ms", t.engine_other_ms},
                      {"respond_ms", t.respond_ms},
                      {"first_token_ms", t.first_token_ms},
                      {"server_ms", t.server_ms},
                      {"num_prefill_chunks", t.prefill_chunks_ms.size()},
                      {"num_decode_steps", t.decode_steps_ms.size()}};
  if (with_steps) {
    j["prefill_chunks_ms"] = t.prefill_chunks_ms;
    j["decode_steps_ms"] = t.decode_steps_ms;
  }
  return j;
}

std::string server_timing_header(const ChoiceTiming& t) {
  const std::pair<const char*, double> parts[] = {
      {"tokenize", t.tokenize_ms},     {"queue", t.queue_ms},   {"prefill", t.prefill_ms()},
      {"kv_transfer", t.kv_transfer_ms}, {"decode", t.decode_ms()}, {"engine_other", t.engine_other_ms},
      {"respond", t.respond_ms},       {"ttft", std::max(0.0, t.first_token_ms)}, {"total", t.server_ms}};
  std::string out;
  char buf[64];
  for (const auto& [name, value] : parts) {
    std::snprintf(buf, sizeof(buf), "%s%s;dur=%.3f", out.empty() ? "" : ", ", name, value);
    out += buf;
  }
  return out;
}

}  // namespace densa::server
