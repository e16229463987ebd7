#include "engine/timeline_recorder.h"

#include <algorithm>

namespace densa {
namespace {

double micros(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

}  // namespace

void TimelineRecorder::submitted(RequestId id, Clock::time_point time) {
  Entry& e = live_[id];
  e = Entry{};
  e.timeline.submit_time = time;
}

void TimelineRecorder::step(std::span<const ScheduledChunk> chunks, std::span<Request* const> requests,
                            Clock::time_point begin, Clock::time_point end) {
  const double step_us = micros(end - begin);
  for (size_t k = 0; k < chunks.size(); ++k) {
    const auto it = live_.find(chunks[k].id);
    if (it == live_.end()) continue;
    Entry& e = it->second;
    if (!e.started) {
      e.started = true;
      // An imported request waited for its KV transfer before it could queue; that is not queueing.
      e.timeline.queue_us = std::max(0.0, micros(begin - e.timeline.submit_time) - e.timeline.kv_transfer_us);
    }
    // A chunk holding prompt tokens is prefill; one generated token fed back is decode.
    const bool prefill = requests[k] == nullptr || chunks[k].begin < requests[k]->num_prompt_tokens;
    (prefill ? e.timeline.prefill_chunk_us : e.timeline.decode_step_us).push_back(step_us);
  }
}

void TimelineRecorder::event(RequestId id, TokenEvent& event) {
  const auto it = live_.find(id);
  if (it == live_.end()) return;
  RequestTimeline& t = it->second.timeline;
  if (event.token && t.first_token_us < 0) t.first_token_us = std::max(0.0, micros(event.time - t.submit_time));
  if (event.finish == FinishReason::kNone) return;
  t.total_us = std::max(0.0, micros(event.time - t.submit_time));
  if (!it->second.started) t.queue_us = t.total_us;  // ended (aborted) before any step ran it
  event.timeline = std::move(t);
  live_.erase(it);
}

RequestTimeline* TimelineRecorder::find(RequestId id) {
  const auto it = live_.find(id);
  return it == live_.end() ? nullptr : &it->second.timeline;
}

}  // namespace densa
