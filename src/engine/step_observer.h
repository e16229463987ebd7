#pragma once
// StepObserver: sees each engine step once it has committed and emitted its events (benchmarks,
// tracing). Called on the engine thread after the step's end time is taken, so its own cost is
// outside the record. It may change the KV integrity policy (Engine::set_kv_integrity takes
// effect from the next batch) but must not block or call back into the engine otherwise.
// Without an observer (the default) no record is built.
#include <chrono>
#include <cstdint>
#include <optional>

namespace densa {

struct StepRecord {
  int64_t step = 0;                             // engine step number, from 0
  std::chrono::steady_clock::time_point begin;  // before plan_step
  std::chrono::steady_clock::time_point end;    // after commit and emit
  int32_t num_seqs = 0;                         // chunks in the batch
  int32_t num_decode_seqs = 0;                  // chunks feeding back one generated token
  int32_t num_tokens = 0;                       // tokens through forward
  int64_t num_kv_tokens = 0;                    // sum over chunks of begin + num_tokens
  // Wall time of the KV integrity check (StepResult::integrity_check_us); nullopt: none ran.
  std::optional<double> integrity_check_us;

  double step_us() const { return std::chrono::duration<double, std::micro>(end - begin).count(); }
};

class StepObserver {
 public:
  virtual ~StepObserver() = default;
  virtual void on_step(const StepRecord& record) = 0;
};

}  // namespace densa
