// engine/disagg_ledger: reservations and exports pin pages until released, cancelled or shut
// down (kv_audit agrees at every point); adopt writes nothing unless every tag checks out, and
// fails on a digest that does not match the bytes.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "engine/disagg_ledger.h"
#include "kv/kv_audit.h"
#include "kv/page_digest.h"

namespace densa {
namespace {

KvLayout small_layout() { return KvLayout{1, 1, 16, 4, DType::kBF16}; }  // 4-token pages, 128 B

PagePool make_pool(int pages) {
  const KvLayout l = small_layout();
  Result<PagePool> p = PagePool::create(l, l.page_bytes() * pages);
  CHECK(p.is_ok()) << p.status().to_string();
  return std::move(p).value();
}

std::unique_ptr<Request> request(uint64_t id, int prompt_tokens) {
  return std::make_unique<Request>(RequestId(id), std::vector<TokenId>(static_cast<size_t>(prompt_tokens), 7),
                                   RequestParams{});
}

Status audit(const PagePool& pool, const DisaggLedger& ledger) {
  std::vector<const BlockTable*> tables;
  ledger.tables(tables);
  return kv_audit(pool, tables, {});
}

TEST(DisaggLedger, ReservationsPinPagesUntilTakenCancelledOrShutDown) {
  PagePool pool = make_pool(4);
  RadixCache cache(4);
  DisaggLedger ledger;
  Result<KvImport> a = ledger.reserve_import(request(1, 11), std::make_shared<RequestStream>(RequestId(1)), 10, 4, pool, cache);
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  EXPECT_EQ(a->pages.size(), 3u);  // 10 tokens in 4-token pages
  EXPECT_EQ(a->tags.size(), 3u);
  EXPECT_EQ(ledger.pinned_pages(), 3);
  EXPECT_EQ(ledger.import_tokens(), 11);
  EXPECT_TRUE(audit(pool, ledger).is_ok());
  // No room for another: refused, nothing taken.
  Result<KvImport> b = ledger.reserve_import(request(2, 9), std::make_shared<RequestStream>(RequestId(2)), 8, 4, pool, cache);
  EXPECT_EQ(b.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(pool.num_free(), 1);
  EXPECT_EQ(ledger.pinned_pages(), 3);
  // Cancelled: pages free again, the import handed back for its stream; twice is a no-op.
  std::optional<DisaggLedger::Import> cancelled = ledger.cancel_import(RequestId(1), pool);
  ASSERT_TRUE(cancelled.has_value());
  EXPECT_EQ(cancelled->num_tokens, 10);
  EXPECT_TRUE(cancelled->request->table.pages.empty());
  EXPECT_EQ(pool.num_free(), 4);
  EXPECT_FALSE(ledger.cancel_import(RequestId(1), pool).has_value());
  EXPECT_FALSE(ledger.take_import(RequestId(1)).has_value());
  EXPECT_TRUE(audit(pool, ledger).is_ok());
  // Taken: the pages stay with the request (the caller adopts them).
  ASSERT_TRUE(ledger.reserve_import(request(3, 5), std::make_shared<RequestStream>(RequestId(3)), 4, 4, pool, cache).is_ok());
  std::optional<DisaggLedger::Import> taken = ledger.take_import(RequestId(3));
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->request->table.pages.size(), 1u);
  EXPECT_EQ(ledger.pinned_pages(), 0);
  EXPECT_EQ(pool.num_free(), 3);
  pool.release_all(taken->request->table.pages);
  // Shutdown: every export unpinned, every import freed and returned.
  ASSERT_TRUE(ledger.reserve_import(request(4, 5), std::make_shared<RequestStream>(RequestId(4)), 4, 4, pool, cache).is_ok());
  BlockTable exported;
  ASSERT_TRUE(pool.allocate_into(2, exported));
  ledger.pin_export(RequestId(5), exported);
  EXPECT_EQ(ledger.pinned_pages(), 3);
  EXPECT_TRUE(audit(pool, ledger).is_ok());
  const std::vector<DisaggLedger::Import> left = ledger.release_all(pool);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].request->id, RequestId(4));
  EXPECT_EQ(pool.num_free(), 4);
  EXPECT_EQ(ledger.pinned_pages(), 0);
  EXPECT_TRUE(audit(pool, ledger).is_ok());
}

TEST(DisaggLedger, AnExportIsReleasedOnce) {
  PagePool pool = make_pool(4);
  DisaggLedger ledger;
  BlockTable t;
  ASSERT_TRUE(pool.allocate_into(3, t));
  ledger.pin_export(RequestId(9), t);
  EXPECT_EQ(pool.num_free(), 1);
  EXPECT_TRUE(ledger.release_export(RequestId(9), pool));
  EXPECT_EQ(pool.num_free(), 4);
  EXPECT_FALSE(ledger.release_export(RequestId(9), pool));
  EXPECT_FALSE(ledger.release_export(RequestId(10), pool));
  EXPECT_EQ(pool.num_free(), 4);
}

// The bytes of `pages` pages from a sender's pool (random contents), with their digests.
KvImportData sent_pages(const BlockTable& reserved, uint32_t seed) {
  PagePool sender = make_pool(4);
  BlockTable t;
  CHECK(sender.allocate_into(static_cast<int32_t>(reserved.pages.size()), t));
  std::mt19937 rng(seed);
  KvImportData d;
  for (size_t k = 0; k < t.pages.size(); ++k) {
    uint8_t* p = sender.page_data(t.pages[k]);
    for (int64_t i = 0; i < sender.page_bytes(); ++i) p[i] = static_cast<uint8_t>(rng());
    d.bytes.insert(d.bytes.end(), p, p + sender.page_bytes());
    d.digests.push_back(page_digest(sender, t.pages[k]));
    d.tags.push_back(reserved.tags[k]);
  }
  return d;
}

TEST(DisaggLedger, AdoptChecksEveryTagBeforeWritingAndEveryDigestAfter) {
  PagePool pool = make_pool(4);
  BlockTable table;
  ASSERT_TRUE(pool.allocate_into(2, table));
  const KvImportData good = sent_pages(table, 1);
  auto zero = [&] {
    for (PageId p : table.pages) std::memset(pool.page_data(p), 0, static_cast<size_t>(pool.page_bytes()));
  };
  auto untouched = [&] {
    for (PageId p : table.pages) {
      const uint8_t* d = pool.page_data(p);
      for (int64_t i = 0; i < pool.page_bytes(); ++i) {
        if (d[i] != 0) return false;
      }
    }
    return true;
  };
  // A page written for another tag: rejected, nothing written (not even the first page).
  zero();
  KvImportData wrong_tag = good;
  wrong_tag.tags[1] += 1;
  Status s = DisaggLedger::adopt(pool, table, wrong_tag);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("write rejected"), std::string::npos) << s.message();
  EXPECT_TRUE(untouched());
  // Too few bytes: rejected before any write.
  KvImportData short_bytes = good;
  short_bytes.bytes.resize(short_bytes.bytes.size() - 1);
  EXPECT_EQ(DisaggLedger::adopt(pool, table, short_bytes).code(), StatusCode::kDataLoss);
  EXPECT_TRUE(untouched());
  // A digest that does not match the bytes.
  KvImportData bad_digest = good;
  bad_digest.digests[0] ^= 1;
  s = DisaggLedger::adopt(pool, table, bad_digest);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("digest"), std::string::npos) << s.message();
  // The good one: every byte lands.
  zero();
  ASSERT_TRUE(DisaggLedger::adopt(pool, table, good).is_ok());
  for (size_t k = 0; k < table.pages.size(); ++k) {
    EXPECT_EQ(std::memcmp(pool.page_data(table.pages[k]), good.bytes.data() + k * pool.page_bytes(),
                          static_cast<size_t>(pool.page_bytes())),
              0);
  }
}

}  // namespace
}  // namespace densa
