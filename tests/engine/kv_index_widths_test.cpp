// The start-up index-width check: configurations whose pool, request or batch would overflow
// an index type are refused before anything is allocated, naming the index and its width;
// the configurations densa ships and tests with pass.
#include <gtest/gtest.h>

#include <chrono>

#include "disagg/kv_wire.h"
#include "engine/engine.h"
#include "engine/engine_test_util.h"
#include "engine/kv_index_widths.h"
#include "exec/runner.h"

namespace densa {
namespace {

KvLayout gqa(int page_size, int layers = 32, int kv_heads = 8, int head_dim = 128) {
  KvLayout l;
  l.num_layers = layers;
  l.num_kv_heads = kv_heads;
  l.head_dim = head_dim;
  l.page_size = page_size;
  l.dtype = DType::kBF16;
  return l;
}

KvIndexBounds bounds(int64_t pages, int64_t running, int64_t request_tokens, int64_t step_tokens = 1024) {
  return {pages, running, request_tokens, step_tokens};
}

TEST(KvIndexWidths, ShippedConfigurationsPass) {
  // A 2 TiB pool of a 32-layer 8-head model in pages of 16, 64k requests, 4096 in a batch.
  const KvLayout l = gqa(16);
  const int64_t pages = (int64_t{2} << 40) / l.page_bytes();
  EXPECT_TRUE(check_kv_index_widths(l, bounds(pages, 4096, 65536)).is_ok());
  EXPECT_TRUE(check_kv_index_widths(l, bounds(1, 1, 16)).is_ok());
}

TEST(KvIndexWidths, PageIdsPastInt32AreRefused) {
  const KvLayout l = gqa(1, 1, 1, 8);
  EXPECT_TRUE(check_kv_index_widths(l, bounds(int64_t{1} << 31, 1, 16)).is_ok());  // ids up to 2^31 - 1
  const Status s = check_kv_index_widths(l, bounds((int64_t{1} << 31) + 1, 1, 16));
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("page id"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("int32"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("2147483648"), std::string::npos) << s.message();
}

TEST(KvIndexWidths, PoolByteOffsetsPastInt64AreRefused) {
  // 2^25 pages of 2^39 bytes (128 layers x 4096 slots x 128 rows x 8 KiB): the pool's last
  // byte is at 2^64 - 1, past int64.
  const KvLayout l = gqa(4096, 128, 64, 4096);
  ASSERT_EQ(l.page_bytes(), int64_t{1} << 39);
  EXPECT_TRUE(check_kv_index_widths(l, bounds(int64_t{1} << 23, 1, 4096)).is_ok());
  const Status s = check_kv_index_widths(l, bounds(int64_t{1} << 25, 1, 4096));
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("byte offset"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("int64"), std::string::npos) << s.message();
}

TEST(KvIndexWidths, RequestSlotsAndBatchBlockTablesPastInt32AreRefused) {
  const KvLayout l = gqa(16);
  // A request slot count rounds up to whole pages: 2^31 - 1 tokens need 2^31 slots.
  Status s = check_kv_index_widths(l, bounds(int64_t{1} << 27, 1, (int64_t{1} << 31) - 1));
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("token slots"), std::string::npos) << s.message();
  // 65536 requests of 1M tokens in pages of 16 concatenate 2^32 block-table entries per
  // batch (shared prefix pages count once per sequence), though the pool has far fewer pages.
  s = check_kv_index_widths(l, bounds(int64_t{1} << 20, 65536, int64_t{1} << 20));
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("block-table offset"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("int32"), std::string::npos) << s.message();
  EXPECT_TRUE(check_kv_index_widths(l, bounds(int64_t{1} << 20, 2047, int64_t{1} << 20)).is_ok());
}

TEST(KvIndexWidths, EngineRefusesAnOverflowingPoolWithoutReservingIt) {
  const ModelWeights& w = testing::moe_f16();
  EngineConfig c;
  c.page_size = 16;
  c.kv_dtype = DType::kBF16;
  const int64_t page_bytes = kv_layout_for(w.config, c.page_size, c.kv_dtype).page_bytes();
  c.kv_cache_bytes = ((int64_t{1} << 31) + 7) * page_bytes;  // never reserved: the check comes first
  const auto begin = std::chrono::steady_clock::now();
  auto e = Engine::create(w, c);
  ASSERT_FALSE(e.is_ok());
  EXPECT_EQ(e.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(e.status().message().find("page id"), std::string::npos) << e.status().message();
  EXPECT_NE(e.status().message().find("int32"), std::string::npos) << e.status().message();
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(5));
}

TEST(KvIndexWidths, TransferPageIndexIs24Bits) {
  EXPECT_TRUE(disagg::check_transfer_page_index_width(int64_t{1} << 24, 1).is_ok());
  const Status s = disagg::check_transfer_page_index_width((int64_t{1} << 24) + 1, 1);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("24-bit"), std::string::npos) << s.message();
  EXPECT_TRUE(disagg::check_transfer_page_index_width((int64_t{1} << 24) + 1, 2).is_ok());
}

}  // namespace
}  // namespace densa
