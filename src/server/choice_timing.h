#pragma once
// ChoiceTiming: one choice's time from the server's view, split into stages that add up:
//
//   server_ms = tokenize_ms + queue_ms + prefill_ms + kv_transfer_ms + decode_ms
//               + engine_other_ms + respond_ms
//
// tokenize: handler entry -> engine submit (parse, template, tokenize); queue .. engine_other:
// the engine's RequestTimeline; respond: the engine's final event -> the response built.
// Sent as the opt-in `densa_timing` object (ms), the Server-Timing header, the request log,
// and observed by the stage histograms of /metrics.
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request_timeline.h"

namespace densa::server {

struct ChoiceTiming {
  double tokenize_ms = 0;
  double queue_ms = 0;
  std::vector<double> prefill_chunks_ms;  // [prefill steps]
  double kv_transfer_ms = 0;              // disaggregated only; 0 colocated
  std::vector<double> decode_steps_ms;    // [decode steps]
  double engine_other_ms = 0;
  double respond_ms = 0;
  double first_token_ms = -1;             // arrival -> first token; -1: none
  double server_ms = 0;                   // arrival -> response built

  double prefill_ms() const;
  double decode_ms() const;
};

// Combines the engine's timeline with the handler's clock points. `arrival`: handler entry;
// `done`: the response (or final chunk) is built. Clamps rounding noise at 0.
ChoiceTiming make_choice_timing(const RequestTimeline& engine, std::chrono::steady_clock::time_point arrival,
                                std::chrono::steady_clock::time_point done);

// {"tokenize_ms", "queue_ms", "prefill_ms", "prefill_chunks_ms": [...], "kv_transfer_ms",
//  "decode_ms", "decode_steps_ms": [...], "engine_other_ms", "respond_ms", "first_token_ms",
//  "server_ms"}; `with_steps` false leaves the two lists out (the request log).
nlohmann::json choice_timing_json(const ChoiceTiming& t, bool with_steps = true);

// W3C Server-Timing value: "tokenize;dur=0.1, queue;dur=.., prefill;dur=.., kv_transfer;dur=0,
// decode;dur=.., engine_other;dur=.., respond;dur=.., ttft;dur=.., total;dur=.." (ms).
std::string server_timing_header(const ChoiceTiming& t);

}  // namespace densa::server
