#include "exec/tag_tracker.h"

// GCC 12 reports the intrinsics' own `__Y = __Y` placeholders as maybe-uninitialized once they
// are inlined into target-attributed code (as in the attention kernels); a known false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdio>
#include <string>

#include "core/cpu_features.h"

namespace densa {
namespace {

uint64_t pack(const KvIntegrityPolicy& p) {
  const uint64_t sample = static_cast<uint32_t>(std::max(1, p.sample_every));
  const uint64_t digest = static_cast<uint32_t>(std::max(1, p.digest_every));
  return static_cast<uint64_t>(p.mode) | (sample & 0xffffff) << 8 | digest << 32;
}

KvIntegrityPolicy unpack(uint64_t bits) {
  KvIntegrityPolicy p;
  p.mode = static_cast<KvIntegrityMode>(bits & 0xff);
  p.sample_every = static_cast<int32_t>((bits >> 8) & 0xffffff);
  p.digest_every = static_cast<int32_t>(bits >> 32);
  return p;
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08x", v);
  return buf;
}

std::string hex64(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string history_text(const PagePool& pool, PageId page) {
  std::string out = "page history (oldest first):";
  const std::vector<PageEventRecord> events = pool.history().events(page);
  if (events.empty()) out += " none";
  for (const PageEventRecord& e : events) {
    out += " [step " + std::to_string(e.step) + " " + page_event_name(e.event) + " tag " + hex32(e.tag) + "]";
  }
  return out;
}

std::string where(const BlockTable& t, int32_t entry) {
  return "page " + std::to_string(t.pages[entry].value) + " (entry " + std::to_string(entry) + " of " +
         std::to_string(t.num_pages()) + ", " + std::to_string(t.num_tokens) + " tokens)";
}

Status tag_violation(const PagePool& pool, const BlockTable& t, int32_t entry) {
  const PageId page = t.pages[entry];
  return Status(StatusCode::kAborted, std::string(kKvIntegrityViolation) + ": " + where(t, entry) +
                                          ": expected tag " + hex32(t.tags[entry]) + ", found " +
                                          hex32(pool.tag(page)) + "; " + history_text(pool, page));
}

Status digest_violation(const PagePool& pool, const BlockTable& t, int32_t entry, const DigestCheck& c) {
  const PageId page = t.pages[entry];
  return Status(StatusCode::kDataLoss, std::string(kKvIntegrityViolation) + ": " + where(t, entry) +
                                           ": digest mismatch (bytes changed after the page filled): expected " +
                                           hex64(c.expected) + ", found " + hex64(c.found) + ", tag " +
                                           hex32(t.tags[entry]) + " unchanged; " + history_text(pool, page));
}

__attribute__((target("avx512f"))) size_t find_tag_mismatch_avx512(const uint32_t* tags, const int32_t* pages,
                                                                    const uint32_t* expected, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i idx = _mm512_loadu_si512(pages + i);
    const __m512i got = _mm512_i32gather_epi32(idx, tags, 4);
    const __m512i want = _mm512_loadu_si512(expected + i);
    const __mmask16 bad = _mm512_cmpneq_epu32_mask(got, want);
    if (bad != 0) return i + static_cast<size_t>(__builtin_ctz(bad));
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512i idx = _mm512_maskz_loadu_epi32(m, pages + i);
    const __m512i got = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx, tags, 4);
    const __m512i want = _mm512_maskz_loadu_epi32(m, expected + i);
    const __mmask16 bad = _mm512_mask_cmpneq_epu32_mask(m, got, want);
    if (bad != 0) return i + static_cast<size_t>(__builtin_ctz(bad));
  }
  return n;
}

// Branch-free blocks of 64 so the compiler can vectorize the compare; the exact index is
// found only inside a block that has a mismatch.
size_t find_tag_mismatch_scalar(const uint32_t* tags, const int32_t* pages, const uint32_t* expected, size_t n) {
  constexpr size_t kBlock = 64;
  for (size_t b = 0; b < n; b += kBlock) {
    const size_t e = std::min(n, b + kBlock);
    uint32_t diff = 0;
    for (size_t i = b; i < e; ++i) diff |= tags[pages[i]] ^ expected[i];
    if (diff != 0) {
      for (size_t i = b; i < e; ++i) {
        if (tags[pages[i]] != expected[i]) return i;
      }
    }
  }
  return n;
}

}  // namespace

size_t find_tag_mismatch_reference(const uint32_t* tags, std::span<const int32_t> pages,
                                   std::span<const uint32_t> expected) {
  CHECK(pages.size() == expected.size()) << "one expected tag per page";
  for (size_t i = 0; i < pages.size(); ++i) {
    if (tags[pages[i]] != expected[i]) return i;
  }
  return pages.size();
}

size_t find_tag_mismatch(const uint32_t* tags, std::span<const int32_t> pages, std::span<const uint32_t> expected) {
  DCHECK(pages.size() == expected.size()) << "one expected tag per page";
  static const bool avx512 = cpu_isa() == CpuIsa::kAvx512Bf16;
  return avx512 ? find_tag_mismatch_avx512(tags, pages.data(), expected.data(), pages.size())
                : find_tag_mismatch_scalar(tags, pages.data(), expected.data(), pages.size());
}

TagTracker::TagTracker(const KvIntegrityPolicy& policy) : policy_bits_(pack(policy)) {}

void TagTracker::set_policy(const KvIntegrityPolicy& policy) { policy_bits_.store(pack(policy), std::memory_order_relaxed); }

KvIntegrityPolicy TagTracker::policy() const { return unpack(policy_bits_.load(std::memory_order_relaxed)); }

void TagTracker::verify(const PagePool& pool, std::span<const BlockTable* const> tables, std::span<Status> verdicts) {
  default_overrides_.assign(tables.size(), IntegrityOverride::kDefault);
  verify_batch(pool, tables, default_overrides_, verdicts);
}

void TagTracker::verify_batch(const PagePool& pool, std::span<const BlockTable* const> tables,
                              std::span<const IntegrityOverride> overrides, std::span<Status> verdicts) {
  CHECK(tables.size() == verdicts.size() && overrides.size() == tables.size()) << "one verdict per table";
  const KvIntegrityPolicy pol = policy();
  ++num_batches_;
  const bool sampled = pol.mode != KvIntegrityMode::kOff && num_batches_ % pol.sample_every == 0;

  // Gather every checked request's (page, expected tag) pairs into two flat arrays.
  checked_.assign(tables.size(), 0);
  flat_pages_.clear();
  flat_tags_.clear();
  for (size_t k = 0; k < tables.size(); ++k) {
    const bool want = overrides[k] == IntegrityOverride::kOn || (overrides[k] == IntegrityOverride::kDefault && sampled);
    if (!want) continue;
    checked_[k] = 1;
    const BlockTable& t = *tables[k];
    DCHECK(t.pages.size() == t.tags.size()) << "table with " << t.pages.size() << " pages, " << t.tags.size() << " tags";
    static_assert(sizeof(PageId) == sizeof(int32_t));
    const auto* pages = reinterpret_cast<const int32_t*>(t.pages.data());
    flat_pages_.insert(flat_pages_.end(), pages, pages + t.pages.size());
    flat_tags_.insert(flat_tags_.end(), t.tags.begin(), t.tags.end());
  }
  if (flat_pages_.empty()) return;
  ++num_checked_batches_;
  num_checked_pages_ += static_cast<int64_t>(flat_pages_.size());

  // The one pass. Only a mismatch (rare) pays for finding which request it belongs to.
  if (find_tag_mismatch(pool.tags_data(), flat_pages_, flat_tags_) != flat_pages_.size()) {
    for (size_t k = 0; k < tables.size(); ++k) {
      if (!checked_[k]) continue;
      const BlockTable& t = *tables[k];
      const auto* pages = reinterpret_cast<const int32_t*>(t.pages.data());
      const size_t at = find_tag_mismatch_reference(pool.tags_data(), {pages, t.pages.size()}, t.tags);
      if (at != t.pages.size()) verdicts[k] = tag_violation(pool, t, static_cast<int32_t>(at));
    }
  }

  if (pol.mode != KvIntegrityMode::kDigest || !sampled) return;
  const bool compare = ++num_digest_batches_ % pol.digest_every == 0;
  digests_.reserve(pool.num_total());
  const int32_t P = pool.layout().page_size;
  for (size_t k = 0; k < tables.size(); ++k) {
    if (!checked_[k] || !verdicts[k].is_ok()) continue;
    const BlockTable& t = *tables[k];
    for (int32_t i = 0; i < t.num_tokens / P; ++i) {
      const DigestCheck c = digests_.check(pool, t.pages[i], t.tags[i], compare);
      if (!c.match) {
        verdicts[k] = digest_violation(pool, t, i, c);
        break;
      }
    }
  }
}

}  // namespace densa
