// TagTracker, page digests, page history and the fault injector on a small pool, without a
// model: the vectorized tag pass equals its naive twin, a reallocated page is reported with
// both tags and its history, digests catch a bit flip tags cannot see, sampling and
// per-request overrides decide who is checked, and each injected fault leaves refcounts
// balanced while making exactly the victim's table wrong.
#include "exec/tag_tracker.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kv/fault_injection.h"
#include "kv/kv_audit.h"
#include "kv/page_digest.h"
#include "kv/radix_cache.h"

namespace densa {
namespace {

KvLayout small_layout() {
  KvLayout l;
  l.num_layers = 2;
  l.num_kv_heads = 2;
  l.head_dim = 16;
  l.page_size = 4;
  l.dtype = DType::kBF16;
  return l;
}

PagePool make_pool(int32_t num_pages) {
  Result<PagePool> pool = PagePool::create(small_layout(), num_pages * small_layout().page_bytes());
  CHECK(pool.is_ok()) << pool.status().to_string();
  return std::move(pool).value();
}

// A table of `num_pages` fresh pages with `num_tokens` filled and bytes set to a pattern.
BlockTable fill(PagePool& pool, int32_t num_pages, int32_t num_tokens, uint8_t pattern) {
  BlockTable t;
  CHECK(pool.allocate_into(num_pages, t));
  t.num_tokens = num_tokens;
  for (PageId p : t.pages) {
    uint8_t* d = pool.page_data(p);
    for (int64_t b = 0; b < pool.page_bytes(); ++b) d[b] = static_cast<uint8_t>(pattern + b * 7);
  }
  return t;
}

std::vector<Status> run(TagTracker& tracker, const PagePool& pool, const std::vector<const BlockTable*>& tables,
                        std::vector<IntegrityOverride> overrides = {}) {
  if (overrides.empty()) overrides.assign(tables.size(), IntegrityOverride::kDefault);
  std::vector<Status> verdicts(tables.size(), Status::ok());
  tracker.verify_batch(pool, tables, overrides, verdicts);
  return verdicts;
}

TEST(IntegrityTagPass, VectorizedEqualsReference) {
  std::mt19937 rng(3);
  std::vector<uint32_t> tags(1000);
  for (uint32_t& t : tags) t = rng();
  for (size_t n : {0u, 1u, 15u, 16u, 17u, 63u, 64u, 65u, 200u, 999u}) {
    std::vector<int32_t> pages(n);
    std::vector<uint32_t> expected(n);
    for (size_t i = 0; i < n; ++i) {
      pages[i] = static_cast<int32_t>(rng() % tags.size());
      expected[i] = tags[pages[i]];
    }
    EXPECT_EQ(find_tag_mismatch(tags.data(), pages, expected), n);
    for (size_t bad : {size_t{0}, n / 2, n - 1}) {
      if (n == 0) break;
      std::vector<uint32_t> e = expected;
      e[bad] ^= 1u << (rng() % 32);
      EXPECT_EQ(find_tag_mismatch(tags.data(), pages, e), bad) << "n " << n;
      EXPECT_EQ(find_tag_mismatch_reference(tags.data(), pages, e), bad);
    }
  }
}

TEST(IntegrityTagTracker, ReallocatedPageFailsOnlyItsRequestWithHistory) {
  PagePool pool = make_pool(16);
  pool.set_step(1);
  BlockTable a = fill(pool, 3, 10, 1);
  BlockTable b = fill(pool, 2, 6, 2);
  TagTracker tracker({KvIntegrityMode::kTags, 1, 1});
  ASSERT_TRUE(tracker.active());
  for (const Status& s : run(tracker, pool, {&a, &b})) EXPECT_TRUE(s.is_ok());

  // The bug: a's page 1 is freed under it and handed out again.
  pool.set_step(7);
  const PageId victim = a.pages[1];
  const uint32_t old_tag = a.tags[1];
  pool.release(victim);
  ASSERT_EQ(pool.allocate(), victim);
  const std::vector<Status> v = run(tracker, pool, {&a, &b});
  ASSERT_FALSE(v[0].is_ok());
  EXPECT_TRUE(v[1].is_ok());
  EXPECT_EQ(v[0].code(), StatusCode::kAborted);
  EXPECT_TRUE(is_kv_integrity_violation(v[0]));
  const std::string& m = v[0].message();
  EXPECT_NE(m.find("page " + std::to_string(victim.value)), std::string::npos) << m;
  char hex[16];
  std::snprintf(hex, sizeof(hex), "0x%08x", old_tag);
  EXPECT_NE(m.find(std::string("expected tag ") + hex), std::string::npos) << m;
  std::snprintf(hex, sizeof(hex), "0x%08x", pool.tag(victim));
  EXPECT_NE(m.find(std::string("found ") + hex), std::string::npos) << m;
  EXPECT_NE(m.find("[step 1 allocate"), std::string::npos) << m;
  EXPECT_NE(m.find("[step 7 free"), std::string::npos) << m;
  EXPECT_NE(m.find("[step 7 allocate"), std::string::npos) << m;

  const Status attributed = attribute_to_request(v[0], 42);
  EXPECT_TRUE(is_kv_integrity_violation(attributed));
  EXPECT_EQ(attributed.message().rfind("kv_integrity_violation: request 42: page", 0), 0u) << attributed.message();
}

TEST(IntegrityTagTracker, SamplingOverridesAndOffMode) {
  PagePool pool = make_pool(8);
  BlockTable a = fill(pool, 2, 8, 1);
  pool.release(a.pages[0]);
  ASSERT_EQ(pool.allocate(), a.pages[0]);  // a is now stale
  TagTracker tracker({KvIntegrityMode::kTags, 3, 1});
  int caught = 0;
  for (int batch = 1; batch <= 9; ++batch) caught += run(tracker, pool, {&a})[0].is_ok() ? 0 : 1;
  EXPECT_EQ(caught, 3);  // batches 3, 6, 9

  tracker.set_policy({KvIntegrityMode::kOff, 1, 1});
  EXPECT_FALSE(tracker.active());
  EXPECT_TRUE(run(tracker, pool, {&a})[0].is_ok());
  EXPECT_FALSE(run(tracker, pool, {&a}, {IntegrityOverride::kOn})[0].is_ok());  // forced on
  tracker.set_policy({KvIntegrityMode::kTags, 1, 1});
  EXPECT_TRUE(run(tracker, pool, {&a}, {IntegrityOverride::kOff})[0].is_ok());  // opted out
  EXPECT_FALSE(run(tracker, pool, {&a})[0].is_ok());

  NoopTracker noop;
  EXPECT_FALSE(noop.active());
}

TEST(IntegrityDigest, BitFlipCaughtOnlyInDigestMode) {
  PagePool pool = make_pool(8);
  BlockTable a = fill(pool, 3, 9, 5);  // pages 0 and 1 full, page 2 partial
  TagTracker tags_only({KvIntegrityMode::kTags, 1, 1});
  TagTracker digest({KvIntegrityMode::kDigest, 1, 1});
  EXPECT_TRUE(run(digest, pool, {&a})[0].is_ok());  // digests taken

  // Writes into the partial page are legal; a flip in a full page is not.
  pool.page_data(a.pages[2])[3] ^= 0xff;
  EXPECT_TRUE(run(digest, pool, {&a})[0].is_ok());
  pool.page_data(a.pages[1])[100] ^= 0x10;
  EXPECT_TRUE(run(tags_only, pool, {&a})[0].is_ok());
  const Status s = run(digest, pool, {&a})[0];
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_TRUE(is_kv_integrity_violation(s));
  EXPECT_NE(s.message().find("digest mismatch"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("page " + std::to_string(a.pages[1].value)), std::string::npos);

  // digest_every = 2: full pages are re-hashed on every other checked batch only.
  TagTracker sampled({KvIntegrityMode::kDigest, 1, 2});
  pool.page_data(a.pages[1])[100] ^= 0x10;  // restore
  EXPECT_TRUE(run(sampled, pool, {&a})[0].is_ok());  // batch 1: records
  pool.page_data(a.pages[0])[0] ^= 0x01;
  EXPECT_FALSE(run(sampled, pool, {&a})[0].is_ok());  // batch 2: compares
  EXPECT_TRUE(run(sampled, pool, {&a})[0].is_ok());   // batch 3: skipped
  // A page reallocated under a new tag starts a fresh digest.
  EXPECT_EQ(page_digest(pool, a.pages[0]), page_digest(pool, a.pages[0]));
}

// Each fault leaves refcounts balanced (kv_audit passes once the victim's stale tag is
// accepted as the only problem) and makes exactly the victim's table fail the tag check.
TEST(IntegrityFaultInjector, EveryFaultBreaksOnlyTheVictim) {
  for (KvFault fault : kAllKvFaults) {
    SCOPED_TRACE(kv_fault_name(fault));
    ASSERT_EQ(kv_fault_from_name(kv_fault_name(fault)), fault);
    PagePool pool = make_pool(32);
    RadixCache cache(4);
    BlockTable a = fill(pool, 4, 13, 1);  // 3 full pages + the page being written
    BlockTable b = fill(pool, 3, 9, 2);
    if (fault == KvFault::kOffByOne) a.num_tokens = 12;  // at a boundary: page 3 is fresh
    std::vector<TokenId> tokens_a(16), tokens_b(16);
    for (int i = 0; i < 16; ++i) tokens_a[i] = i, tokens_b[i] = 100 + i;
    cache.insert(tokens_a, a, pool);
    cache.insert(tokens_b, b, pool);
    FaultInjector inj(fault, 2);
    TagTracker tracker({fault == KvFault::kBitFlip ? KvIntegrityMode::kDigest : KvIntegrityMode::kTags, 1, 1});
    for (const Status& s : run(tracker, pool, {&a, &b})) EXPECT_TRUE(s.is_ok());  // digests taken
    const FaultTarget targets[] = {{1, &a}, {2, &b}};
    EXPECT_FALSE(inj.maybe_inject(1, pool, cache, targets));  // before from_step
    const std::vector<uint8_t> before_b(pool.page_data(b.pages[0]), pool.page_data(b.pages[0]) + 64);
    ASSERT_TRUE(inj.maybe_inject(2, pool, cache, targets));
    EXPECT_FALSE(inj.maybe_inject(3, pool, cache, targets));  // once
    EXPECT_EQ(inj.victims(), std::vector<uint64_t>{1});
    EXPECT_EQ(inj.fired_step(), 2);

    const std::vector<Status> v = run(tracker, pool, {&a, &b});
    EXPECT_FALSE(v[0].is_ok());
    EXPECT_TRUE(is_kv_integrity_violation(v[0])) << v[0].to_string();
    EXPECT_TRUE(v[1].is_ok()) << v[1].to_string();
    // Refcounts still equal references: every table entry counts once.
    std::vector<int32_t> refs(32, 0);
    for (const BlockTable* t : {&a, &b}) {
      for (PageId p : t->pages) ++refs[p.value];
    }
    for (int32_t p = 0; p < 32; ++p) EXPECT_EQ(pool.refcount(PageId(p)), refs[p]) << "page " << p;
    // b's data is intact wherever it lives now.
    EXPECT_EQ(std::vector<uint8_t>(pool.page_data(b.pages[0]), pool.page_data(b.pages[0]) + 64), before_b);
  }
}

}  // namespace
}  // namespace densa
