// RadixCache: exact-token prefix matching in whole pages, insert / dedupe, LRU eviction of
// unreferenced leaves, erase; and a long randomized run of request lifetimes against a
// PagePool with kv_audit + RadixCache::audit after every operation.
#include "kv/radix_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <random>
#include <vector>

#include "kv/kv_audit.h"

namespace densa {
namespace {

constexpr int32_t kPage = 4;

PagePool make_pool(int32_t num_pages) {
  KvLayout l;
  l.num_layers = 1;
  l.num_kv_heads = 1;
  l.head_dim = 8;
  l.page_size = kPage;
  l.dtype = DType::kBF16;
  Result<PagePool> pool = PagePool::create(l, num_pages * l.page_bytes());
  CHECK(pool.is_ok());
  return std::move(pool).value();
}

// A request's table: prefix pages (retained) + fresh pages for the rest of `tokens`.
BlockTable take(PagePool& pool, const PrefixMatch& m, int32_t num_tokens) {
  BlockTable t;
  pool.retain_all(m.pages);
  for (size_t k = 0; k < m.pages.size(); ++k) t.append(m.pages[k], m.tags[k]);
  const int32_t missing = t.pages_missing(num_tokens, kPage);
  CHECK(pool.allocate_into(missing, t));
  t.num_tokens = num_tokens;
  return t;
}

Status audit_all(const PagePool& pool, const RadixCache& cache, const std::vector<BlockTable>& tables) {
  std::vector<const BlockTable*> ptrs;
  for (const BlockTable& t : tables) ptrs.push_back(&t);
  const std::vector<PageId> held = cache.pages();
  DENSA_RETURN_IF_ERROR(kv_audit(pool, ptrs, held));
  return cache.audit(pool);
}

TEST(RadixCacheTest, MatchesWholePagesOfEqualTokens) {
  PagePool pool = make_pool(16);
  RadixCache cache(kPage);
  const std::vector<TokenId> a = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_EQ(cache.match(a, 100).num_tokens, 0);
  BlockTable t = take(pool, {}, 10);
  EXPECT_EQ(cache.insert(a, t, pool), 2);  // two full pages; the partial third is not cached
  EXPECT_EQ(cache.num_pages(), 2);

  PrefixMatch m = cache.match(a, 100);
  EXPECT_EQ(m.num_tokens, 8);
  EXPECT_EQ(m.pages, std::vector<PageId>(t.pages.begin(), t.pages.begin() + 2));
  EXPECT_EQ(cache.match(a, 7).num_tokens, 4);   // capped
  // One differing token in the second page: only the first page matches.
  std::vector<TokenId> b = a;
  b[6] = 99;
  EXPECT_EQ(cache.match(b, 100).num_tokens, 4);
  b[0] = 99;
  EXPECT_EQ(cache.match(b, 100).num_tokens, 0);
  // Re-inserting the same table adds nothing.
  EXPECT_EQ(cache.insert(a, t, pool), 0);
  std::vector<BlockTable> live{t};
  ASSERT_TRUE(audit_all(pool, cache, live).is_ok());

  // Referenced pages are not evictable; released ones are, leaves first.
  EXPECT_EQ(cache.num_evictable(pool), 0);
  EXPECT_EQ(cache.evict(5, pool), 0);
  pool.release_all(t.pages);
  EXPECT_EQ(pool.num_cached(), 2);
  EXPECT_EQ(cache.num_evictable(pool), 2);
  EXPECT_EQ(cache.evict(1, pool), 1);
  EXPECT_EQ(cache.match(a, 100).num_tokens, 4);  // the leaf went first
  ASSERT_TRUE(audit_all(pool, cache, {}).is_ok());
  EXPECT_EQ(cache.evict(5, pool), 1);
  EXPECT_EQ(pool.num_free(), 16);
  ASSERT_TRUE(audit_all(pool, cache, {}).is_ok());
}

TEST(RadixCacheTest, DuplicateComputeKeepsTheFirstCopy) {
  PagePool pool = make_pool(16);
  RadixCache cache(kPage);
  const std::vector<TokenId> a = {1, 2, 3, 4, 5, 6, 7, 8};
  BlockTable t1 = take(pool, {}, 8);
  BlockTable t2 = take(pool, {}, 8);  // computed the same prefix concurrently
  EXPECT_EQ(cache.insert(a, t1, pool), 2);
  EXPECT_EQ(cache.insert(a, t2, pool), 0);  // diverges at page 0: keeps t1's pages
  std::vector<BlockTable> live{t1, t2};
  ASSERT_TRUE(audit_all(pool, cache, live).is_ok());
  pool.release_all(t2.pages);
  EXPECT_EQ(pool.num_cached(), 0);  // t2's pages were never cached: they are free
  pool.release_all(t1.pages);
  EXPECT_EQ(pool.num_cached(), 2);
  ASSERT_TRUE(audit_all(pool, cache, {}).is_ok());
}

TEST(RadixCacheTest, LeastRecentlyUsedGoesFirst) {
  PagePool pool = make_pool(16);
  RadixCache cache(kPage);
  const std::vector<TokenId> a = {1, 1, 1, 1}, b = {2, 2, 2, 2}, c = {3, 3, 3, 3};
  for (const auto* toks : {&a, &b, &c}) {
    BlockTable t = take(pool, {}, 4);
    cache.insert(*toks, t, pool);
    pool.release_all(t.pages);
  }
  cache.touch(cache.match(a, 4));  // a is now the most recent
  EXPECT_EQ(cache.evict(2, pool), 2);
  EXPECT_EQ(cache.match(a, 4).num_tokens, 4);
  EXPECT_EQ(cache.match(b, 4).num_tokens, 0);
  EXPECT_EQ(cache.match(c, 4).num_tokens, 0);
}

TEST(RadixCacheTest, EraseDropsSubtree) {
  PagePool pool = make_pool(16);
  RadixCache cache(kPage);
  const std::vector<TokenId> a = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  BlockTable t = take(pool, {}, 12);
  cache.insert(a, t, pool);
  cache.erase(std::span<const PageId>(&t.pages[1], 1), pool);
  EXPECT_EQ(cache.num_pages(), 1);
  EXPECT_EQ(cache.match(a, 100).num_tokens, 4);
  std::vector<BlockTable> live{t};
  ASSERT_TRUE(audit_all(pool, cache, live).is_ok());
  pool.release_all(t.pages);
  EXPECT_EQ(pool.num_free(), 15);
}

// Request lifetimes over a small vocabulary (so prefixes collide often): admit with a prefix
// match, grow, insert, finish or abort, evict under pressure; audit after every operation.
TEST(RadixCacheTest, RandomizedLifetimesKeepAuditClean) {
  std::mt19937 rng(1234);
  PagePool pool = make_pool(48);
  RadixCache cache(kPage);
  struct Live {
    std::vector<TokenId> tokens;
    BlockTable table;
    std::string salt;
  };
  const char* const kSalts[] = {"", "", "t1", "t2"};  // shared twice as often as each tenant
  std::map<int32_t, std::string> page_salt;           // the salt each cached page was inserted under
  std::vector<Live> live;
  auto tables = [&] {
    std::vector<BlockTable> out;
    for (const Live& l : live) out.push_back(l.table);
    return out;
  };
  auto insert = [&](const Live& l) {
    cache.insert(l.tokens, l.table, pool, l.salt);
    // Pages cached before keep their salt; the ones this insert cached take l.salt.
    for (PageId p : l.table.pages)
      if (pool.held_by_cache(p)) page_salt.try_emplace(p.value, l.salt);
  };
  int64_t hits = 0;
  for (int op = 0; op < 4000; ++op) {
    // A page that left the cache may come back under another salt.
    for (auto it = page_salt.begin(); it != page_salt.end();)
      it = pool.held_by_cache(PageId(it->first)) ? std::next(it) : page_salt.erase(it);
    const int kind = std::uniform_int_distribution<int>(0, 9)(rng);
    if (kind <= 3) {  // admit a request
      const int len = std::uniform_int_distribution<int>(1, 24)(rng);
      std::vector<TokenId> toks(len);
      for (TokenId& t : toks) t = std::uniform_int_distribution<int>(0, 2)(rng);
      const std::string salt = kSalts[std::uniform_int_distribution<int>(0, 3)(rng)];
      PrefixMatch m = cache.match(toks, len - 1, salt);
      for (size_t k = 0; k < m.pages.size(); ++k) {
        ASSERT_EQ(pool.tag(m.pages[k]), m.tags[k]);
        ASSERT_EQ(page_salt.at(m.pages[k].value), salt) << "a page crossed tenants";
      }
      hits += m.num_tokens;
      const int32_t need = static_cast<int32_t>(pages_for_tokens(len, kPage)) - static_cast<int32_t>(m.pages.size());
      const int32_t cost = static_cast<int32_t>(std::count_if(m.pages.begin(), m.pages.end(),
                                                              [&](PageId p) { return pool.refcount(p) == 0; }));
      if (need + cost > pool.num_free() + cache.num_evictable(pool)) continue;  // would wait
      pool.retain_all(m.pages);  // retain first: retained pages cannot be evicted
      cache.touch(m);
      if (pool.num_free() < need) cache.evict(need - pool.num_free(), pool);
      ASSERT_GE(pool.num_free(), need);
      BlockTable t;
      for (size_t k = 0; k < m.pages.size(); ++k) t.append(m.pages[k], m.tags[k]);
      ASSERT_TRUE(pool.allocate_into(need, t));
      t.num_tokens = len;
      live.push_back({toks, t, salt});
    } else if (kind <= 5 && !live.empty()) {  // finish: cache full pages, release
      const size_t i = std::uniform_int_distribution<size_t>(0, live.size() - 1)(rng);
      insert(live[i]);
      pool.release_all(live[i].table.pages);
      live.erase(live.begin() + static_cast<int64_t>(i));
    } else if (kind == 6 && !live.empty()) {  // abort: release without caching
      const size_t i = std::uniform_int_distribution<size_t>(0, live.size() - 1)(rng);
      pool.release_all(live[i].table.pages);
      live.erase(live.begin() + static_cast<int64_t>(i));
    } else if (kind == 7 && !live.empty()) {  // prefilled: insert while still running
      const size_t i = std::uniform_int_distribution<size_t>(0, live.size() - 1)(rng);
      insert(live[i]);
    } else if (kind == 8) {
      cache.evict(std::uniform_int_distribution<int>(0, 4)(rng), pool);
    } else if (kind == 9 && !live.empty() && op % 50 == 0) {  // integrity failure
      const size_t i = std::uniform_int_distribution<size_t>(0, live.size() - 1)(rng);
      cache.erase(live[i].table.pages, pool);
      pool.release_all(live[i].table.pages);
      live.erase(live.begin() + static_cast<int64_t>(i));
    }
    const Status s = audit_all(pool, cache, tables());
    ASSERT_TRUE(s.is_ok()) << "op " << op << ": " << s.to_string();
    // Every cached page is evictable (the path invariant).
    ASSERT_EQ(cache.num_evictable(pool), pool.num_cached()) << "op " << op;
  }
  EXPECT_GT(hits, 0);
  for (Live& l : live) pool.release_all(l.table.pages);
  live.clear();
  cache.evict(pool.num_total(), pool);
  EXPECT_EQ(pool.num_free(), pool.num_total());
  ASSERT_TRUE(audit_all(pool, cache, {}).is_ok());
}

}  // namespace
}  // namespace densa

namespace densa {
namespace {

// cache_salt: a salt is its own namespace. Same tokens under another salt (or none) never
// match; the same salt does; a salt whose pages are all evicted leaves no root behind; the
// audits hold throughout.
TEST(RadixCacheTest, SaltsKeepTenantsApart) {
  PagePool pool = make_pool(32);
  RadixCache cache(kPage);
  const std::vector<TokenId> a = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  BlockTable shared = take(pool, {}, 9);
  EXPECT_EQ(cache.insert(a, shared, pool), 2);
  BlockTable tenant = take(pool, {}, 9);
  EXPECT_EQ(cache.insert(a, tenant, pool, "tenant-a"), 2);  // its own copy, not deduplicated
  EXPECT_EQ(cache.num_pages(), 4);
  ASSERT_TRUE(audit_all(pool, cache, {shared, tenant}).is_ok()) << audit_all(pool, cache, {shared, tenant}).to_string();

  const PrefixMatch m_shared = cache.match(a, 100);
  const PrefixMatch m_a = cache.match(a, 100, "tenant-a");
  ASSERT_EQ(m_shared.num_tokens, 8);
  ASSERT_EQ(m_a.num_tokens, 8);
  EXPECT_EQ(m_shared.pages, (std::vector<PageId>{shared.pages[0], shared.pages[1]}));
  EXPECT_EQ(m_a.pages, (std::vector<PageId>{tenant.pages[0], tenant.pages[1]}));
  EXPECT_EQ(cache.match(a, 100, "tenant-b").num_tokens, 0);
  // Salts compare exactly, not by prefix.
  EXPECT_EQ(cache.match(a, 100, "tenant-").num_tokens, 0);
  EXPECT_EQ(cache.match(a, 100, "tenant-aa").num_tokens, 0);

  // Evicting everything drops the salt's root; the same salt can come back.
  pool.release_all(shared.pages);
  pool.release_all(tenant.pages);
  EXPECT_EQ(cache.num_evictable(pool), 4);
  EXPECT_EQ(cache.evict(4, pool), 4);
  EXPECT_EQ(cache.num_pages(), 0);
  EXPECT_TRUE(cache.audit(pool).is_ok()) << cache.audit(pool).to_string();
  EXPECT_EQ(cache.match(a, 100, "tenant-a").num_tokens, 0);
  BlockTable again = take(pool, {}, 9);
  EXPECT_EQ(cache.insert(a, again, pool, "tenant-a"), 2);
  EXPECT_EQ(cache.match(a, 100, "tenant-a").num_tokens, 8);
  // A table with no full page makes no root.
  BlockTable small = take(pool, {}, 3);
  EXPECT_EQ(cache.insert(a, small, pool, "tenant-c"), 0);
  EXPECT_TRUE(audit_all(pool, cache, {again, small}).is_ok()) << audit_all(pool, cache, {again, small}).to_string();
  // erase() of a salt's only pages removes its root too.
  cache.erase(again.pages, pool);
  EXPECT_EQ(cache.match(a, 100, "tenant-a").num_tokens, 0);
  EXPECT_TRUE(audit_all(pool, cache, {again, small}).is_ok()) << audit_all(pool, cache, {again, small}).to_string();
}

}  // namespace
}  // namespace densa
