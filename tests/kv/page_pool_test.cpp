// PagePool: lifetime, tags, budgets, and long randomized operation sequences with kv_audit
// after every step. KvAudit: the audit must also fail on deliberately broken states.
#include "kv/page_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <unordered_set>
#include <vector>

#include "kv/kv_audit.h"

namespace densa {
namespace {

KvLayout small_layout(DType dtype = DType::kBF16, KvScaleMode mode = KvScaleMode::kNone) {
  KvLayout l;
  l.num_layers = 2;
  l.num_kv_heads = 2;
  l.head_dim = 16;
  l.page_size = 4;
  l.dtype = dtype;
  l.scale_mode = mode;
  return l;
}

PagePool make_pool(int32_t num_pages, KvLayout layout = small_layout()) {
  Result<PagePool> pool = PagePool::create(layout, num_pages * layout.page_bytes());
  CHECK(pool.is_ok()) << pool.status().to_string();
  return std::move(pool).value();
}

Status audit(const PagePool& pool, const std::vector<BlockTable>& tables,
             const std::vector<PageId>& cache) {
  std::vector<const BlockTable*> ptrs;
  for (const BlockTable& t : tables) ptrs.push_back(&t);
  return kv_audit(pool, ptrs, cache);
}

TEST(PagePoolTest, ReservesPagesFromBudget) {
  const KvLayout layout = small_layout();
  ASSERT_EQ(layout.page_bytes(), 2 * 2 * 2 * 4 * 16 * 2);
  Result<PagePool> pool = PagePool::create(layout, 10 * layout.page_bytes() + 17);
  ASSERT_TRUE(pool.is_ok()) << pool.status().to_string();
  EXPECT_EQ(pool->num_total(), 10);
  EXPECT_EQ(pool->num_free(), 10);
  EXPECT_EQ(pool->num_used(), 0);
  EXPECT_EQ(pool->num_cached(), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(pool->base()) % PagePool::kAlignBytes, 0u);
  EXPECT_EQ(pool->page_data(PageId(3)), pool->base() + 3 * layout.page_bytes());
  for (int32_t p = 0; p < 10; ++p) EXPECT_EQ(pool->tag(PageId(p)), 0u);  // never allocated

  // FP8 with dynamic scales: half the data bytes plus the scale region.
  const KvLayout fp8 = small_layout(DType::kFP8E4M3, KvScaleMode::kDynamic);
  EXPECT_EQ(fp8.data_bytes_per_page() * 2, layout.data_bytes_per_page());
  Result<PagePool> fp8_pool = PagePool::create(fp8, 10 * layout.page_bytes());
  ASSERT_TRUE(fp8_pool.is_ok());
  EXPECT_EQ(fp8_pool->num_total(), 10 * layout.page_bytes() / fp8.page_bytes());
  EXPECT_EQ(fp8_pool->page_bytes(), fp8.page_bytes());
}

TEST(PagePoolTest, BudgetBelowOnePageIsAnError) {
  const KvLayout layout = small_layout();
  Result<PagePool> pool = PagePool::create(layout, layout.page_bytes() - 1);
  ASSERT_FALSE(pool.is_ok());
  EXPECT_EQ(pool.status().code(), StatusCode::kResourceExhausted);
}

TEST(PagePoolTest, PagesAreWritableThroughKvView) {
  PagePool pool = make_pool(4);
  BlockTable table;
  ASSERT_TRUE(pool.allocate_into(2, table));
  std::memset(pool.page_data(table.pages[1]), 0xab, pool.page_bytes());
  const std::vector<int32_t> block_table = {table.pages[0].value, table.pages[1].value};
  const std::vector<int32_t> offsets = {0, 2};
  KvView view;
  view.layout = pool.layout();
  view.pool = pool.base();
  view.block_table = block_table;
  view.block_offsets = offsets;
  EXPECT_EQ(view.page_ptr(view.page_of(0, 5)), pool.page_data(table.pages[1]));
  EXPECT_EQ(view.page_ptr(view.page_of(0, 5))[pool.page_bytes() - 1], 0xab);
}

TEST(PagePoolTest, OutOfPagesIsNotACrash) {
  PagePool pool = make_pool(5);
  std::vector<BlockTable> tables(1);
  for (int i = 0; i < 5; ++i) {
    std::optional<PageId> p = pool.allocate();
    ASSERT_TRUE(p.has_value());
    tables[0].append(*p, pool.tag(*p));
  }
  EXPECT_FALSE(pool.allocate().has_value());
  BlockTable other;
  EXPECT_FALSE(pool.allocate_into(1, other));
  EXPECT_TRUE(other.pages.empty());
  EXPECT_TRUE(audit(pool, tables, {}).is_ok());

  // All-or-nothing: 3 free pages cannot satisfy 4, and nothing is taken.
  pool.release_all(std::span(tables[0].pages).subspan(0, 3));
  tables[0].pages.erase(tables[0].pages.begin(), tables[0].pages.begin() + 3);
  tables[0].tags.erase(tables[0].tags.begin(), tables[0].tags.begin() + 3);
  BlockTable big;
  EXPECT_FALSE(pool.allocate_into(4, big));
  EXPECT_EQ(pool.num_free(), 3);
  EXPECT_TRUE(big.pages.empty());
  EXPECT_TRUE(pool.allocate_into(3, big));
  EXPECT_EQ(pool.num_free(), 0);
  tables.push_back(big);
  EXPECT_TRUE(audit(pool, tables, {}).is_ok());
}

TEST(PagePoolTest, TagChangesOnEveryReallocation) {
  PagePool pool = make_pool(1);
  std::unordered_set<uint32_t> seen;
  for (int i = 0; i < 10000; ++i) {
    std::optional<PageId> p = pool.allocate();
    ASSERT_TRUE(p.has_value());
    const uint32_t t = pool.tag(*p);
    EXPECT_NE(t, 0u);
    EXPECT_TRUE(seen.insert(t).second) << "tag repeated after " << i << " allocations";
    pool.release(*p);
  }
}

TEST(PagePoolTest, SharedAndCachedLifecycle) {
  PagePool pool = make_pool(4);
  std::vector<BlockTable> tables(1);
  std::vector<PageId> cache;
  ASSERT_TRUE(pool.allocate_into(2, tables[0]));
  tables[0].num_tokens = 7;
  const PageId p0 = tables[0].pages[0];

  // Share the first page with a second request.
  tables.push_back(BlockTable{});
  pool.retain(p0);
  tables[1].append(p0, pool.tag(p0));
  EXPECT_EQ(pool.refcount(p0), 2);
  ASSERT_TRUE(audit(pool, tables, cache).is_ok());

  // The prefix cache takes the page; both requests finish; it stays cached.
  pool.mark_cached(p0);
  cache.push_back(p0);
  pool.release_all(tables[0].pages);
  pool.release_all(tables[1].pages);
  tables.clear();
  EXPECT_EQ(pool.state(p0), PageState::kCached);
  EXPECT_EQ(pool.num_cached(), 1);
  EXPECT_EQ(pool.num_free(), 3);
  ASSERT_TRUE(audit(pool, tables, cache).is_ok());

  // A prefix hit revives it with the same tag.
  const uint32_t tag_before = pool.tag(p0);
  tables.push_back(BlockTable{});
  pool.retain(p0);
  tables[0].append(p0, pool.tag(p0));
  EXPECT_EQ(pool.tag(p0), tag_before);
  EXPECT_EQ(pool.state(p0), PageState::kInUse);
  ASSERT_TRUE(audit(pool, tables, cache).is_ok());

  // Eviction while in use only drops the cache's hold; the last release frees it.
  pool.uncache(p0);
  cache.clear();
  EXPECT_EQ(pool.state(p0), PageState::kInUse);
  ASSERT_TRUE(audit(pool, tables, cache).is_ok());
  pool.release(p0);
  tables.clear();
  EXPECT_EQ(pool.state(p0), PageState::kFree);
  EXPECT_EQ(pool.num_free(), 4);
  ASSERT_TRUE(audit(pool, tables, cache).is_ok());
}

// A long random walk over every operation a scheduler and a prefix cache perform.
TEST(PagePoolTest, RandomizedOperationsKeepAuditClean) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    std::mt19937 rng(seed);
    PagePool pool = make_pool(64);
    const int32_t page_size = pool.layout().page_size;
    std::vector<BlockTable> tables;
    std::vector<PageId> cache;
    std::unordered_set<uint32_t> tags_issued;
    std::vector<uint32_t> last_tag(pool.num_total(), 0);
    int64_t num_out_of_pages = 0;

    auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
    auto note_new_pages = [&](const BlockTable& t, size_t from) {
      for (size_t k = from; k < t.pages.size(); ++k) {
        const uint32_t tag = t.tags[k];
        ASSERT_TRUE(tags_issued.insert(tag).second) << "tag reused";
        ASSERT_NE(tag, last_tag[t.pages[k].value]) << "tag unchanged on reallocation";
        last_tag[t.pages[k].value] = tag;
      }
    };

    for (int step = 0; step < 20000; ++step) {
      // Finish requests more often when the pool runs low, so pages keep cycling.
      const bool pressure = pool.num_free() < 8 && pick(2) == 0;
      const int op = pressure ? 3 : static_cast<int>(pick(7));
      if (op == 0) {  // new request with 1..40 tokens
        BlockTable t;
        t.num_tokens = static_cast<int32_t>(1 + pick(40));
        const int32_t need = t.pages_missing(t.num_tokens, page_size);
        const int32_t free_before = pool.num_free();
        if (pool.allocate_into(need, t)) {
          note_new_pages(t, 0);
          tables.push_back(std::move(t));
        } else {
          ++num_out_of_pages;
          ASSERT_LT(free_before, need);
          ASSERT_EQ(pool.num_free(), free_before);
          ASSERT_TRUE(t.pages.empty());
        }
      } else if (op == 1 && !tables.empty()) {  // decode: grow a request by 1..8 tokens
        BlockTable& t = tables[pick(tables.size())];
        const int32_t grown = t.num_tokens + static_cast<int32_t>(1 + pick(8));
        const size_t before = t.pages.size();
        if (pool.allocate_into(t.pages_missing(grown, page_size), t)) {
          t.num_tokens = grown;
          note_new_pages(t, before);
        } else {
          ++num_out_of_pages;
        }
      } else if (op == 2 && !tables.empty()) {  // fork: share full prefix pages
        const BlockTable& src = tables[pick(tables.size())];
        const int32_t full = src.num_tokens / page_size;
        if (full > 0) {
          BlockTable t;
          const int32_t shared = static_cast<int32_t>(1 + pick(full));
          for (int32_t k = 0; k < shared; ++k) {
            pool.retain(src.pages[k]);
            t.append(src.pages[k], src.tags[k]);
          }
          t.num_tokens = shared * page_size;
          tables.push_back(std::move(t));
        }
      } else if (op == 3 && !tables.empty()) {  // finish a request
        const size_t i = pick(tables.size());
        pool.release_all(tables[i].pages);
        tables.erase(tables.begin() + static_cast<std::ptrdiff_t>(i));
      } else if (op == 4 && !tables.empty()) {  // prefix cache inserts a request's page
        const BlockTable& t = tables[pick(tables.size())];
        if (!t.pages.empty()) {
          const PageId p = t.pages[pick(t.pages.size())];
          if (!pool.held_by_cache(p)) {
            pool.mark_cached(p);
            cache.push_back(p);
          }
        }
      } else if (op == 5 && !cache.empty()) {  // prefix hit: a new request reuses a cached page
        const PageId p = cache[pick(cache.size())];
        BlockTable t;
        pool.retain(p);
        t.append(p, pool.tag(p));
        t.num_tokens = page_size;
        tables.push_back(std::move(t));
      } else if (op == 6 && !cache.empty()) {  // evict (or drop while still in use)
        const size_t i = pick(cache.size());
        pool.uncache(cache[i]);
        cache.erase(cache.begin() + static_cast<std::ptrdiff_t>(i));
      }
      const Status s = audit(pool, tables, cache);
      ASSERT_TRUE(s.is_ok()) << "seed " << seed << " step " << step << " op " << op << ": "
                             << s.to_string();
      ASSERT_EQ(pool.num_free() + pool.num_used() + pool.num_cached(), pool.num_total());
    }
    EXPECT_GT(num_out_of_pages, 0) << "the walk never hit an empty pool";
    EXPECT_GT(tags_issued.size(), 5000u) << "too few reallocations";
  }
}

// ---- the audit can fail ----

struct BrokenFixture {
  PagePool pool = make_pool(8);
  std::vector<BlockTable> tables;
  std::vector<PageId> cache;
  BrokenFixture() {
    tables.resize(2);
    CHECK(pool.allocate_into(2, tables[0])) << "fixture";
    CHECK(pool.allocate_into(1, tables[1])) << "fixture";
    tables[0].num_tokens = 5;
    tables[1].num_tokens = 1;
    CHECK(audit(pool, tables, cache).is_ok()) << "fixture";
  }
};

void expect_fails(const Status& s, const std::string& needle) {
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
}

TEST(KvAuditTest, DetectsStaleTagAfterReallocation) {
  BrokenFixture f;
  // Request 1's page is freed and reallocated to someone else while a stale copy of the
  // table survives.
  const BlockTable stale = f.tables[1];
  f.pool.release_all(f.tables[1].pages);
  f.tables[1].clear();
  BlockTable fresh;
  ASSERT_TRUE(f.pool.allocate_into(1, fresh));
  ASSERT_EQ(fresh.pages[0], stale.pages[0]);  // LIFO free list hands the same page back
  ASSERT_NE(fresh.tags[0], stale.tags[0]);
  f.tables[1] = stale;
  expect_fails(audit(f.pool, f.tables, f.cache), "reallocated");
}

TEST(KvAuditTest, DetectsRefcountMismatch) {
  BrokenFixture f;
  f.pool.retain(f.tables[0].pages[1]);  // a reference nobody records
  expect_fails(audit(f.pool, f.tables, f.cache), "refcount 2 but 1");
}

TEST(KvAuditTest, DetectsFreePageStillReferenced) {
  BrokenFixture f;
  f.pool.release(f.tables[1].pages[0]);  // freed while the table still lists it
  expect_fails(audit(f.pool, f.tables, f.cache), "refcount 0 but 1");
}

TEST(KvAuditTest, DetectsLeakedPage) {
  BrokenFixture f;
  f.tables.pop_back();  // request forgotten without releasing its page
  expect_fails(audit(f.pool, f.tables, f.cache), "refcount 1 but 0");
}

TEST(KvAuditTest, DetectsCacheSetMismatch) {
  BrokenFixture f;
  f.pool.mark_cached(f.tables[0].pages[0]);
  expect_fails(audit(f.pool, f.tables, f.cache), "held by the cache");
  f.cache.push_back(f.tables[0].pages[0]);
  EXPECT_TRUE(audit(f.pool, f.tables, f.cache).is_ok());
  f.cache.push_back(f.tables[1].pages[0]);
  expect_fails(audit(f.pool, f.tables, f.cache), "not held by the cache");
}

TEST(KvAuditTest, DetectsMalformedTables) {
  BrokenFixture f;
  f.tables[0].num_tokens = 9;  // 2 pages of 4 tokens
  expect_fails(audit(f.pool, f.tables, f.cache), "9 tokens");
  f.tables[0].num_tokens = 5;
  f.tables[0].tags.pop_back();
  expect_fails(audit(f.pool, f.tables, f.cache), "tags");
  f.tables[0].tags.push_back(f.pool.tag(f.tables[0].pages[1]) ^ 1u);
  expect_fails(audit(f.pool, f.tables, f.cache), "expects tag");
  f.tables[0].tags.back() ^= 1u;
  f.tables[0].pages.push_back(PageId(100));
  f.tables[0].tags.push_back(0);
  expect_fails(audit(f.pool, f.tables, f.cache), "out-of-range");
}

}  // namespace
}  // namespace densa
