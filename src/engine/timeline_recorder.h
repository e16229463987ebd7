#pragma once
// TimelineRecorder: the engine thread's book of RequestTimelines, one per live request. The
// engine tells it when a request was submitted, which chunks each step ran and how long the
// step took, and hands it every event; the final event leaves with the request's timeline.
// Cost per step: two clock reads and one hash lookup per chunk. Engine thread only.
#include <chrono>
#include <span>
#include <unordered_map>

#include "engine/engine_types.h"
#include "engine/request_timeline.h"
#include "sched/request.h"
#include "sched/step_plan.h"

namespace densa {

class TimelineRecorder {
 public:
  using Clock = std::chrono::steady_clock;

  void submitted(RequestId id, Clock::time_point time);
  // One step ran `chunks` (requests: [chunks.size()], the request of each) from begin to end.
  void step(std::span<const ScheduledChunk> chunks, std::span<Request* const> requests, Clock::time_point begin,
            Clock::time_point end);
  // Notes the event's first token; the final event takes the timeline along (and it is forgotten).
  void event(RequestId id, TokenEvent& event);
  // The live timeline of `id` (e.g. to fill kv_transfer_us); null when unknown.
  RequestTimeline* find(RequestId id);
  void forget(RequestId id) { live_.erase(id); }
  size_t num_live() const { return live_.size(); }

 private:
  struct Entry {
    RequestTimeline timeline;
    bool started = false;  // a step has run it (queue_us is set)
  };
  std::unordered_map<RequestId, Entry> live_;
};

}  // namespace densa
