#include "kv/fault_injection.h"

#include <cstring>

namespace densa {
namespace {

int32_t num_full_pages(const BlockTable& t, int32_t page_size) { return t.num_tokens / page_size; }

// Index of a full page of `t` that only `t` references (so the fault harms nobody else), or
// nullopt. `min_full_tokens`: the page must have been full when the table held that many.
std::optional<int32_t> private_full_page(const PagePool& pool, const BlockTable& t, int32_t min_tokens_full) {
  const int32_t P = pool.layout().page_size;
  for (int32_t i = 0; i < num_full_pages(t, P); ++i) {
    if ((i + 1) * P > min_tokens_full) break;
    if (pool.refcount(t.pages[i]) == 1) return i;
  }
  return std::nullopt;
}

// The page `t` is writing this step (its last page, not full, private), or nullopt.
std::optional<int32_t> private_write_page(const PagePool& pool, const BlockTable& t) {
  if (t.num_pages() == 0) return std::nullopt;
  const int32_t j = t.num_pages() - 1;
  if (j < num_full_pages(t, pool.layout().page_size)) return std::nullopt;
  const PageId q = t.pages[j];
  if (pool.refcount(q) != 1 || pool.held_by_cache(q)) return std::nullopt;
  return j;
}

// The bug's core move: `page` (referenced once, by a table that keeps its stale entry) is
// dropped from the prefix cache, freed, and allocated again with a new tag. The new
// allocation's reference stands for the stale entry, so refcounts stay balanced.
void reallocate_under(PagePool& pool, RadixCache& cache, PageId page) {
  CHECK(pool.refcount(page) == 1) << "reallocate_under a shared page " << page.value;
  if (pool.held_by_cache(page)) {
    const PageId one[] = {page};
    cache.erase(one, pool);
  }
  pool.release(page);
  const std::optional<PageId> again = pool.allocate();  // LIFO free list: the page just freed
  CHECK(again && *again == page) << "free list did not return the freed page";
}

// Gives `page` (just reallocated) to `b` in place of b's write page: b's bytes move over,
// b's entry takes the new tag, b's old page is released.
void hand_to(PagePool& pool, PageId page, BlockTable& b, int32_t j) {
  const PageId old = b.pages[j];
  std::memcpy(pool.page_data(page), pool.page_data(old), static_cast<size_t>(pool.page_bytes()));
  pool.retain(page);
  b.pages[j] = page;
  b.tags[j] = pool.tag(page);
  pool.release(old);
}

// Flips the top exponent bit of the first V element of layer 0 with magnitude in [2^-7, 1):
// the value grows by 2^128 (bf16 / f32; fp8 e4m3: by 2^8), so whatever attends to that slot
// is visibly off.
void flip_one_bit(PagePool& pool, PageId page) {
  const KvLayout& l = pool.layout();
  uint8_t* data = pool.page_data(page) + l.data_offset(0, /*kv=*/1, 0, 0);
  const int64_t n = l.token_bytes_per_layer() * l.page_size / l.elem_bytes();  // layer 0 V
  const int64_t width = l.elem_bytes();
  const int exp_shift = width == 4 ? 23 : 7;  // bf16 shares f32's exponent field, 16 bits up
  for (int64_t e = 0; width > 1 && e < n; ++e) {
    uint32_t v = 0;
    std::memcpy(&v, data + e * width, static_cast<size_t>(width));
    const uint32_t exp = (v >> exp_shift) & 0xff;
    if (exp >= 120 && exp <= 126) {
      v ^= 1u << (exp_shift + 7);
      std::memcpy(data + e * width, &v, static_cast<size_t>(width));
      return;
    }
  }
  data[0] ^= 0x40;  // fp8 e4m3 (or nothing moderate found): the top exponent bit
}

// Breaks the KV of targets[victim] with `fault` if it fits now; true when it fired.
// prev_num_tokens: each request's table size at the previous step (bit flips need a page
// that was already full then, so its digest exists).
bool inject_on(KvFault fault, PagePool& pool, RadixCache& cache, std::span<const FaultTarget> targets, size_t victim,
               const std::unordered_map<uint64_t, int32_t>& prev_num_tokens) {
  const int32_t P = pool.layout().page_size;
  const FaultTarget& a = targets[victim];
  BlockTable& ta = *a.table;
  switch (fault) {
    case KvFault::kPageReuse:
    case KvFault::kEvictInUse: {
      const std::optional<int32_t> i = private_full_page(pool, ta, ta.num_tokens);
      if (!i) break;
      const PageId page = ta.pages[*i];
      if (fault == KvFault::kEvictInUse && !pool.held_by_cache(page)) break;
      for (const FaultTarget& b : targets) {
        if (b.request_id == a.request_id) continue;
        const std::optional<int32_t> j = private_write_page(pool, *b.table);
        if (!j) continue;
        reallocate_under(pool, cache, page);
        hand_to(pool, page, *b.table, *j);
        return true;
      }
      break;
    }
    case KvFault::kLateWrite: {
      const std::optional<int32_t> i = private_full_page(pool, ta, ta.num_tokens);
      if (!i) break;
      const PageId page = ta.pages[*i];
      reallocate_under(pool, cache, page);
      std::memset(pool.page_data(page), 0x3f, static_cast<size_t>(pool.page_bytes()));
      return true;
    }
    case KvFault::kStaleTable: {
      const std::optional<int32_t> i = private_full_page(pool, ta, ta.num_tokens);
      if (!i) break;
      for (const FaultTarget& b : targets) {
        if (b.request_id == a.request_id || num_full_pages(*b.table, P) == 0) continue;
        const PageId theirs = b.table->pages[0];
        if (theirs == ta.pages[*i]) continue;
        pool.retain(theirs);
        pool.release(ta.pages[*i]);
        ta.pages[*i] = theirs;  // the tag stays: the one A got when the page was its own
        return true;
      }
      break;
    }
    case KvFault::kOffByOne: {
      const int32_t k = ta.num_pages() - 1;
      if (ta.num_tokens < P || ta.num_tokens % P != 0 || k != ta.num_tokens / P) break;
      if (pool.refcount(ta.pages[k]) != 1) break;
      pool.retain(ta.pages[k - 1]);
      pool.release(ta.pages[k]);
      ta.pages[k] = ta.pages[k - 1];  // tags[k] still names the fresh page
      return true;
    }
    case KvFault::kBitFlip: {
      // A page already full at the previous step, so its digest has been taken.
      const auto prev = prev_num_tokens.find(a.request_id);
      if (prev == prev_num_tokens.end()) break;
      const std::optional<int32_t> i = private_full_page(pool, ta, prev->second);
      if (!i) break;
      flip_one_bit(pool, ta.pages[*i]);
      return true;
    }
  }
  return false;
}

}  // namespace

const char* kv_fault_name(KvFault fault) {
  switch (fault) {
    case KvFault::kPageReuse: return "page-reuse";
    case KvFault::kLateWrite: return "late-write";
    case KvFault::kEvictInUse: return "evict-in-use";
    case KvFault::kStaleTable: return "stale-table";
    case KvFault::kOffByOne: return "off-by-one";
    case KvFault::kBitFlip: return "bit-flip";
  }
  return "?";
}

std::optional<KvFault> kv_fault_from_name(std::string_view name) {
  for (KvFault f : kAllKvFaults) {
    if (name == kv_fault_name(f)) return f;
  }
  return std::nullopt;
}

FaultInjector::FaultInjector(KvFault fault, int64_t from_step) : fault_(fault), from_step_(from_step) {}

bool FaultInjector::fired() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fired_;
}

int64_t FaultInjector::fired_step() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fired_step_;
}

std::vector<uint64_t> FaultInjector::victims() const {
  std::lock_guard<std::mutex> lock(mu_);
  return victims_;
}

bool FaultInjector::maybe_inject(int64_t step, PagePool& pool, RadixCache& cache,
                                 std::span<const FaultTarget> targets) {
  bool now = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t k = 0; !fired_ && step >= from_step_ && k < targets.size(); ++k) {
      if (!inject_on(fault_, pool, cache, targets, k, prev_num_tokens_)) continue;
      fired_ = true;
      fired_step_ = step;
      victims_.push_back(targets[k].request_id);
      now = true;
    }
  }
  prev_num_tokens_.clear();
  for (const FaultTarget& t : targets) prev_num_tokens_[t.request_id] = t.table->num_tokens;
  return now;
}

std::vector<size_t> RequestFaultInjector::maybe_inject(PagePool& pool, RadixCache& cache,
                                                       std::span<const FaultTarget> targets,
                                                       std::span<const std::optional<KvFault>> faults) {
  std::vector<size_t> fired;
  for (size_t k = 0; k < targets.size() && k < faults.size(); ++k) {
    if (faults[k] && inject_on(*faults[k], pool, cache, targets, k, prev_num_tokens_)) fired.push_back(k);
  }
  prev_num_tokens_.clear();
  for (const FaultTarget& t : targets) prev_num_tokens_[t.request_id] = t.table->num_tokens;
  return fired;
}

}  // namespace densa
