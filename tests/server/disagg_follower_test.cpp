// server/disagg_follower: a follower rank's transfer commands in one process, over real UCX
// (TCP): a decode-side "recv" answered by a real sender lands each page in the pool on
// "adopt" (digests re-checked there), and every malformed or out-of-order command gets an
// error reply naming what is wrong, never a crash or a thrown exception.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "disagg/kv_layout_descriptor.h"
#include "disagg/kv_sender.h"
#include "disagg/ucx_pool.h"
#include "disagg/ucx_worker.h"
#include "kv/page_digest.h"
#include "server/disagg_follower.h"

namespace densa::server {
namespace {

using nlohmann::json;

KvLayout layout() { return KvLayout{2, 1, 16, 4, DType::kBF16}; }

PagePool make_pool(int pages) {
  Result<PagePool> p = PagePool::create(layout(), layout().page_bytes() * pages);
  CHECK(p.is_ok()) << p.status().to_string();
  return std::move(p).value();
}

std::string run(DisaggFollower& f, const json& command, PagePool& pool) {
  const std::string text = command.dump();
  return f.handle(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()), pool);
}

std::unique_ptr<disagg::UcxContext> ucx() {
  setenv("UCX_TLS", "tcp", 1);
  Result<std::unique_ptr<disagg::UcxContext>> c = disagg::UcxContext::create();
  CHECK(c.is_ok()) << c.status().to_string();
  return std::move(c).value();
}

TEST(DisaggFollower, ReceivesAdoptsAndRecyclesOneTransfer) {
  const std::unique_ptr<disagg::UcxContext> context = ucx();
  DisaggFollower follower(*context, 1);
  PagePool decode = make_pool(4);
  BlockTable reserved;
  ASSERT_TRUE(decode.allocate_into(2, reserved));
  std::vector<int32_t> page_ids;
  for (PageId p : reserved.pages) page_ids.push_back(p.value);
  const uint64_t id = 77;
  const json recv = json::parse(run(follower, {{"op", "recv"}, {"transfer_id", id}, {"page_tags", reserved.tags},
                                               {"page_bytes", decode.page_bytes()}, {"timeout_ms", 20000}},
                                    decode));
  ASSERT_TRUE(recv.contains("address")) << recv.dump();
  // A second recv of the same transfer is refused.
  EXPECT_NE(run(follower, {{"op", "recv"}, {"transfer_id", id}, {"page_tags", reserved.tags},
                           {"page_bytes", decode.page_bytes()}, {"timeout_ms", 20000}},
                decode)
                .find("already under way"),
            std::string::npos);
  // The sender: a prefill pool with random pages, converted (same format) and sent.
  PagePool prefill = make_pool(4);
  BlockTable src;
  ASSERT_TRUE(prefill.allocate_into(2, src));
  std::mt19937 rng(5);
  std::vector<const uint8_t*> data;
  for (PageId p : src.pages) {
    for (int64_t i = 0; i < prefill.page_bytes(); ++i) prefill.page_data(p)[i] = static_cast<uint8_t>(rng() & 0x3f);
    data.push_back(prefill.page_data(p));
  }
  const disagg::KvPageFormat fmt{layout(), {}};
  const std::vector<std::vector<uint8_t>> messages =
      disagg::build_page_messages(fmt, data, 2 * layout().page_size, fmt, id, reserved.tags);
  disagg::UcxWorkerPool senders(*context);
  disagg::KvSendOrder order{id, *bytes_of_hex(recv["address"].get<std::string>()), reserved.tags};
  Result<int64_t> sent = disagg::send_page_messages(senders, order, messages,
                                                    std::chrono::steady_clock::now() + std::chrono::seconds(20));
  ASSERT_TRUE(sent.is_ok()) << sent.status().to_string();
  EXPECT_EQ(run(follower, {{"op", "adopt"}, {"transfer_id", id}, {"pages", page_ids}}, decode), "");
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(std::memcmp(decode.page_data(reserved.pages[k]), prefill.page_data(src.pages[k]),
                          static_cast<size_t>(decode.page_bytes())),
              0);
  }
  EXPECT_EQ(run(follower, {{"op", "done"}, {"transfer_id", id}, {"recycle", true}}, decode), "");
  // Gone after done: adopting it again is an error, ending it again a no-op.
  EXPECT_NE(run(follower, {{"op", "adopt"}, {"transfer_id", id}, {"pages", page_ids}}, decode).find("no transfer 77"),
            std::string::npos);
  EXPECT_EQ(run(follower, {{"op", "done"}, {"transfer_id", id}}, decode), "");
}

TEST(DisaggFollower, BadCommandsGetErrorRepliesNotCrashes) {
  const std::unique_ptr<disagg::UcxContext> context = ucx();
  DisaggFollower follower(*context, 1);
  PagePool pool = make_pool(4);
  auto raw = [&](const std::string& text) {
    return follower.handle(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()), pool);
  };
  auto error_of = [](const std::string& reply) {
    const json j = json::parse(reply, nullptr, false);
    return j.is_object() && j.contains("error") ? j["error"].get<std::string>() : std::string("(no error) ") + reply;
  };
  EXPECT_NE(error_of(raw("not json")).find("malformed disaggregation command"), std::string::npos);
  EXPECT_NE(error_of(raw("{}")).find("malformed"), std::string::npos);
  EXPECT_NE(error_of(run(follower, {{"op", "fly"}}, pool)).find("unknown disaggregation command 'fly'"), std::string::npos);
  // recv: page bytes other than this rank's pool's.
  EXPECT_NE(error_of(run(follower, {{"op", "recv"}, {"transfer_id", 1}, {"page_tags", {1}}, {"page_bytes", 3},
                                    {"timeout_ms", 100}},
                         pool))
                .find("page bytes 3 on rank 0"),
            std::string::npos);
  // send: a layout that is not a descriptor, a page outside the pool, a missing decode rank,
  // an address that is not hex.
  const json not_a_layout = {{"note", "no descriptor fields"}};
  json send = {{"op", "send"}, {"transfer_id", 2}, {"num_tokens", 4}, {"pages", {99}}, {"page_tags", {1}},
               {"layouts", {not_a_layout, not_a_layout}}, {"addresses", {"00", "00"}}, {"timeout_ms", 100}};
  EXPECT_NE(error_of(run(follower, send, pool)).find("KV layout descriptor"), std::string::npos);
  disagg::KvLayoutDescriptor d;
  d.layout = layout();
  send["layouts"] = {disagg::descriptor_to_json(d), disagg::descriptor_to_json(d)};
  EXPECT_NE(error_of(run(follower, send, pool)).find("page 99 outside the pool"), std::string::npos);
  send["addresses"] = {"00"};
  EXPECT_NE(error_of(run(follower, send, pool)).find("no decode rank for rank 1"), std::string::npos);
  send["addresses"] = {"00", "zz"};
  EXPECT_NE(error_of(run(follower, send, pool)).find("not hex"), std::string::npos);
  // adopt of a transfer never begun.
  EXPECT_NE(run(follower, {{"op", "adopt"}, {"transfer_id", 5}, {"pages", {0}}}, pool).find("no transfer 5"),
            std::string::npos);
}

}  // namespace
}  // namespace densa::server
