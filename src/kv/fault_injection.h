#pragma once
// FaultInjector (tests only): really breaks the KV bookkeeping or bytes of one running request
// at a chosen engine step, the way real engine bugs do, so the integrity checks can be shown
// to catch each kind. The engine calls maybe_inject() after apply() and before the batch runs,
// with the batch's block tables. Refcounts stay balanced (every table entry still counts once),
// so the rest of the run goes on without cascading failures; only the victims' KV is wrong.
//
//   kPageReuse   a full page of A is freed and handed to B (B's current page moves into it)
//   kLateWrite   a full page of A is reallocated and a stale writer overwrites its bytes
//   kEvictInUse  the radix cache drops A's referenced node; its page goes to B as above
//   kStaleTable  A's table keeps (page, tag) of a page it gave up; the page is now B's
//   kOffByOne    at a page boundary A's new entry names its previous page (index - 1)
//   kBitFlip     one exponent bit of one V element in a full page of A flips (digest mode)
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/ids.h"
#include "kv/block_table.h"
#include "kv/page_pool.h"
#include "kv/radix_cache.h"

namespace densa {

enum class KvFault : uint8_t { kPageReuse, kLateWrite, kEvictInUse, kStaleTable, kOffByOne, kBitFlip };

inline constexpr KvFault kAllKvFaults[] = {KvFault::kPageReuse,  KvFault::kLateWrite, KvFault::kEvictInUse,
                                           KvFault::kStaleTable, KvFault::kOffByOne,  KvFault::kBitFlip};

const char* kv_fault_name(KvFault fault);  // "page-reuse", "late-write", ...
std::optional<KvFault> kv_fault_from_name(std::string_view name);

// One request of the batch as the injector sees it.
struct FaultTarget {
  uint64_t request_id = 0;
  BlockTable* table = nullptr;
};

// One-shot fault for tests: the first request of a batch it fits breaks.
class FaultInjector {
 public:
  // Fires once, at the first step >= from_step where some request of the batch fits `fault`.
  FaultInjector(KvFault fault, int64_t from_step);

  // Returns true when it fired in this call.
  bool maybe_inject(int64_t step, PagePool& pool, RadixCache& cache, std::span<const FaultTarget> targets);

  KvFault fault() const { return fault_; }
  // Thread-safe views for tests (read after the run).
  bool fired() const;
  int64_t fired_step() const;
  std::vector<uint64_t> victims() const;  // requests whose KV the fault made wrong

 private:
  const KvFault fault_;
  const int64_t from_step_;
  std::unordered_map<uint64_t, int32_t> prev_num_tokens_;  // request -> table.num_tokens last call
  mutable std::mutex mu_;
  bool fired_ = false;
  int64_t fired_step_ = -1;
  std::vector<uint64_t> victims_;
};

// Faults the requests ask for themselves (GenerateRequest::inject_fault; `densa serve
// --test-allow-fault-injection` and the soak harness): request k of a batch that still asks
// for a fault is the victim of that fault at the first step where it fits with k as the
// victim (B, when the kind needs one, is any other request of the batch, and is left
// intact). Engine thread only. The previous step's batch is remembered so a bit flip lands
// on a page already digested.
class RequestFaultInjector {
 public:
  // faults[k]: the fault targets[k] still asks for, or nullopt. Returns the indices of the
  // targets whose fault fired in this call (each is now a victim).
  std::vector<size_t> maybe_inject(PagePool& pool, RadixCache& cache, std::span<const FaultTarget> targets,
                                   std::span<const std::optional<KvFault>> faults);

 private:
  std::unordered_map<uint64_t, int32_t> prev_num_tokens_;  // request -> table.num_tokens last call
};

}  // namespace densa
