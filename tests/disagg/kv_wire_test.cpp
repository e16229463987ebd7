// disagg/kv_wire: the header round trip and the wire-bytes accounting that
// bench/kv_transfer_bench and densa_kv_transfer_bytes_total report: every page message is the
// 48-byte header plus one whole page in the receiver's format, so FP8 static is exactly half of
// BF16 plus the headers, and send_page_messages returns the sum.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <thread>

#include "disagg/kv_receiver.h"
#include "disagg/kv_sender.h"
#include "disagg/kv_wire.h"

namespace densa::disagg {
namespace {

KvLayout shape(int num_layers, int num_kv_heads, int head_dim, DType dtype, KvScaleMode mode) {
  KvLayout l;
  l.num_layers = num_layers;
  l.num_kv_heads = num_kv_heads;
  l.head_dim = head_dim;
  l.page_size = 16;
  l.dtype = dtype;
  l.scale_mode = mode;
  return l;
}

TEST(KvWire, HeaderRoundTrips) {
  KvPageHeader h;
  h.transfer_id = 0xabcdef1234;
  h.page_idx = 7;
  h.num_pages = 9;
  h.page_tag = 0x1234567;
  h.num_tokens = 5;
  h.digest = 0x0123456789abcdefu;
  h.payload_bytes = 393216;
  std::vector<uint8_t> buf(kKvPageHeaderBytes);
  write_page_header(h, buf);
  Result<KvPageHeader> back = read_page_header(buf);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->transfer_id, h.transfer_id);
  EXPECT_EQ(back->page_idx, h.page_idx);
  EXPECT_EQ(back->num_pages, h.num_pages);
  EXPECT_EQ(back->page_tag, h.page_tag);
  EXPECT_EQ(back->num_tokens, h.num_tokens);
  EXPECT_EQ(back->digest, h.digest);
  EXPECT_EQ(back->payload_bytes, h.payload_bytes);
}

TEST(KvWire, Fp8StaticPageIsHalfOfBf16PlusTheHeader) {
  // The MoE fixture's KV and a 24 x 4 x 128 model.
  for (const auto& [layers, heads, dim] : {std::tuple{4, 4, 16}, std::tuple{24, 4, 128}}) {
    const KvLayout bf16 = shape(layers, heads, dim, DType::kBF16, KvScaleMode::kNone);
    const KvLayout fp8 = shape(layers, heads, dim, DType::kFP8E4M3, KvScaleMode::kStatic);
    const KvLayout fp8_dynamic = shape(layers, heads, dim, DType::kFP8E4M3, KvScaleMode::kDynamic);
    EXPECT_EQ(bf16.page_bytes(), int64_t{layers} * 16 * 2 * heads * dim * 2);
    EXPECT_EQ(2 * fp8.page_bytes(), bf16.page_bytes());
    EXPECT_EQ(kv_page_message_bytes(fp8), static_cast<int64_t>(kKvPageHeaderBytes) + bf16.page_bytes() / 2);
    // Dynamic scales: one f32 per row of head_dim elements.
    EXPECT_EQ(fp8_dynamic.page_bytes(), fp8.page_bytes() + fp8.page_bytes() / dim * 4);
  }
}

TEST(KvWire, EveryMessageIsHeaderPlusAWholeReceiverPage) {
  const KvLayout from = shape(24, 4, 128, DType::kBF16, KvScaleMode::kNone);
  const std::vector<float> scales(24 * 2 * 4, 0.02f);
  const std::vector<uint8_t> page(static_cast<size_t>(from.page_bytes()), 0x3c);
  const std::vector<const uint8_t*> pages(3, page.data());
  const std::vector<uint32_t> tags = {1, 2, 3};
  for (const KvScaleMode mode : {KvScaleMode::kNone, KvScaleMode::kStatic, KvScaleMode::kDynamic}) {
    const KvLayout to = shape(24, 4, 128, mode == KvScaleMode::kNone ? DType::kBF16 : DType::kFP8E4M3, mode);
    const KvPageFormat to_format{to, mode == KvScaleMode::kStatic ? std::span<const float>(scales)
                                                                  : std::span<const float>()};
    // 2 full pages and a partial one: the partial page still goes whole.
    const auto messages = build_page_messages({from, {}}, pages, 2 * 16 + 5, to_format, 42, tags);
    ASSERT_EQ(messages.size(), 3u);
    for (const std::vector<uint8_t>& m : messages) {
      EXPECT_EQ(static_cast<int64_t>(m.size()), kv_page_message_bytes(to));
      Result<KvPageHeader> h = read_page_header(m);
      ASSERT_TRUE(h.is_ok());
      EXPECT_EQ(h->payload_bytes, static_cast<uint64_t>(to.page_bytes()));
    }
  }
}

TEST(KvWire, SendReturnsTheBytesOfEveryMessage) {
  setenv("UCX_TLS", "tcp", 1);
  Result<std::unique_ptr<UcxContext>> ctx = UcxContext::create();
  ASSERT_TRUE(ctx.is_ok()) << ctx.status().to_string();
  const KvLayout from = shape(4, 4, 16, DType::kBF16, KvScaleMode::kNone);
  const KvLayout to = shape(4, 4, 16, DType::kFP8E4M3, KvScaleMode::kStatic);
  const std::vector<float> scales(4 * 2 * 4, 0.02f);
  const std::vector<uint8_t> page(static_cast<size_t>(from.page_bytes()), 0x3c);
  const std::vector<const uint8_t*> pages(4, page.data());
  const std::vector<uint32_t> tags = {5, 6, 7, 8};
  const uint64_t id = 0x5151;
  const auto messages = build_page_messages({from, {}}, pages, 4 * 16, {to, scales}, id, tags);
  UcxWorkerPool pool(**ctx);
  Result<std::unique_ptr<KvReceiver>> receiver = KvReceiver::create(pool, id, tags, to.page_bytes());
  ASSERT_TRUE(receiver.is_ok()) << receiver.status().to_string();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  Result<int64_t> sent = int64_t{-1};
  std::thread sender([&] { sent = send_page_messages(pool, {id, (*receiver)->address(), tags}, messages, deadline); });
  Result<KvImportData> got = (*receiver)->receive(deadline, [] { return false; });
  std::atomic<bool> done{false};
  std::thread progress([&] {
    while (!done.load()) (*receiver)->progress();
  });
  sender.join();
  done = true;
  progress.join();
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  ASSERT_TRUE(sent.is_ok()) << sent.status().to_string();
  EXPECT_EQ(*sent, 4 * kv_page_message_bytes(to));
  EXPECT_EQ(*sent, 4 * (static_cast<int64_t>(kKvPageHeaderBytes) + from.page_bytes() / 2));
  EXPECT_TRUE(got->holds(4, to.page_bytes()));
  EXPECT_FALSE(got->holds(5, to.page_bytes()));
}

}  // namespace
}  // namespace densa::disagg
