#pragma once
// RequestTimeline: where one request's time went inside the engine, measured on the engine
// thread with the steady clock. Stages partition the engine's share of the request:
//
//   total_us = queue_us + prefill_us() + kv_transfer_us + decode_us() + other_us()
//
// A step that runs a chunk of the request counts whole (its plan, forward and sampling) to
// that request's prefill (the chunk holds prompt tokens) or decode (one generated token fed
// back); a batch shares a step's time among its requests, each seeing the full step.
// other_us() is the rest: emitting events between steps and waiting after a preemption.
#include <chrono>
#include <cstdint>
#include <vector>

namespace densa {

struct RequestTimeline {
  std::chrono::steady_clock::time_point submit_time;  // Engine::submit accepted it
  double queue_us = 0;                    // submit -> start of the first step that ran it
  std::vector<double> prefill_chunk_us;   // [prefill steps] each step that ran a prompt chunk
  // Disaggregated serving: time the prompt's KV took to reach this engine (the transfer
  // stage, filled by the import path before the request's first decode step). 0 colocated.
  double kv_transfer_us = 0;
  std::vector<double> decode_step_us;     // [decode steps] each step that fed a generated token
  double first_token_us = -1;             // submit -> the event with the first token; -1: none
  double total_us = 0;                    // submit -> the final event

  double prefill_us() const {
    double s = 0;
    for (double v : prefill_chunk_us) s += v;
    return s;
  }
  double decode_us() const {
    double s = 0;
    for (double v : decode_step_us) s += v;
    return s;
  }
  // The part of total_us no stage claims (>= 0 up to clock rounding).
  double other_us() const { return total_us - queue_us - prefill_us() - kv_transfer_us - decode_us(); }
};

}  // namespace densa
