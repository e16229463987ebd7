#include "server/disagg_follower.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <nlohmann/json.hpp>
#include <thread>

#include "disagg/kv_layout_descriptor.h"
#include "disagg/kv_receiver.h"
#include "disagg/kv_sender.h"
#include "engine/disagg_ledger.h"

namespace densa::server {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string error_reply(const std::string& message) { return json({{"error", message}}).dump(); }

std::vector<PageId> page_ids(const json& j, const PagePool& pool) {
  std::vector<PageId> out;
  for (const json& p : j) {
    const int32_t id = p.get<int32_t>();
    if (id < 0 || id >= pool.num_total()) throw std::out_of_range("page " + std::to_string(id) + " outside the pool");
    out.push_back(PageId{id});
  }
  return out;
}

}  // namespace

std::string hex_of(std::span<const uint8_t> bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (uint8_t b : bytes) {
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

std::optional<std::vector<uint8_t>> bytes_of_hex(const std::string& s) {
  if (s.size() % 2 != 0) return std::nullopt;
  std::vector<uint8_t> out(s.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    int v = 0;
    for (int j = 0; j < 2; ++j) {
      const char c = s[2 * i + j];
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (d < 0) return std::nullopt;
      v = v * 16 + d;
    }
    out[i] = static_cast<uint8_t>(v);
  }
  return out;
}

// One decode-side transfer on this rank: its receiver, progressed by `thread` until the
// leader says done (or the deadline passes), and what arrived.
struct DisaggFollower::Transfer {
  std::unique_ptr<disagg::KvReceiver> receiver;
  Clock::time_point deadline;
  std::thread thread;
  std::mutex mu;
  std::condition_variable cv;
  std::optional<Result<KvImportData>> received;  // set once by the thread
  std::atomic<bool> stop{false};                 // done / abandoned: the thread returns

  void run() {
    Result<KvImportData> r = receiver->receive(deadline, [&] { return stop.load(); });
    {
      std::lock_guard<std::mutex> lock(mu);
      received.emplace(std::move(r));
    }
    cv.notify_all();
    // Keep answering the sender's flush until the leader confirms it (or gives up).
    while (!stop.load() && Clock::now() < deadline) {
      receiver->progress();
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
};

DisaggFollower::DisaggFollower(const disagg::UcxContext& ucx, int world_rank, std::vector<float> static_scales)
    : world_rank_(world_rank), static_scales_(std::move(static_scales)), ucx_pool_(ucx) {}

DisaggFollower::~DisaggFollower() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, t] : transfers_) {
    t->stop = true;
    if (t->thread.joinable()) t->thread.join();
  }
}

std::string DisaggFollower::handle(std::span<const uint8_t> payload, PagePool& pool) {
  const std::string text(reinterpret_cast<const char*>(payload.data()), payload.size());
  try {
    const std::string op = json::parse(text).at("op").get<std::string>();
    if (op == "send") return send(text, pool);
    if (op == "recv") return receive(text, pool);
    if (op == "adopt") return adopt(text, pool);
    if (op == "done") return done(text);
    return error_reply("unknown disaggregation command '" + op + "'");
  } catch (const std::exception& e) {
    return error_reply(std::string("malformed disaggregation command: ") + e.what());
  }
}

std::string DisaggFollower::send(const std::string& payload, PagePool& pool) {
  const json j = json::parse(payload);
  const auto deadline = Clock::now() + std::chrono::milliseconds(j.at("timeout_ms").get<int64_t>());
  disagg::KvSendOrder order;
  order.transfer_id = j.at("transfer_id").get<uint64_t>();
  order.page_tags = j.at("page_tags").get<std::vector<uint32_t>>();
  const std::vector<std::string> addresses = j.at("addresses").get<std::vector<std::string>>();
  const json& layouts = j.at("layouts");
  if (world_rank_ >= static_cast<int>(addresses.size()) || world_rank_ >= static_cast<int>(layouts.size())) {
    return error_reply("no decode rank for rank " + std::to_string(world_rank_));
  }
  const std::optional<std::vector<uint8_t>> address = bytes_of_hex(addresses[static_cast<size_t>(world_rank_)]);
  if (!address || address->empty()) return error_reply("a decode rank's UCX address is not hex");
  order.peer_address = *address;
  Result<disagg::KvLayoutDescriptor> to = disagg::descriptor_from_json(layouts[static_cast<size_t>(world_rank_)]);
  if (!to.is_ok()) return error_reply(to.status().message());
  const std::vector<PageId> pages = page_ids(j.at("pages"), pool);
  if (pages.size() != order.page_tags.size()) return error_reply("pages and page_tags differ in length");
  std::vector<const uint8_t*> data;
  for (PageId p : pages) data.push_back(pool.page_data(p));
  const disagg::KvPageFormat from{pool.layout(), static_scales_};
  const disagg::KvPageFormat into{to->layout, to->static_scales};
  const std::vector<std::vector<uint8_t>> messages = disagg::build_page_messages(
      from, data, j.at("num_tokens").get<int32_t>(), into, order.transfer_id, order.page_tags);
  Result<int64_t> sent = disagg::send_page_messages(ucx_pool_, order, messages, deadline);
  if (!sent.is_ok()) return error_reply(sent.status().message());
  return json({{"wire_bytes", *sent}}).dump();
}

std::string DisaggFollower::receive(const std::string& payload, PagePool& pool) {
  const json j = json::parse(payload);
  const uint64_t id = j.at("transfer_id").get<uint64_t>();
  {  // commands run one at a time: nothing can begin this id between here and the emplace
    std::lock_guard<std::mutex> lock(mu_);
    if (transfers_.count(id) != 0) return error_reply("transfer " + std::to_string(id) + " is already under way");
  }
  auto t = std::make_unique<Transfer>();
  t->deadline = Clock::now() + std::chrono::milliseconds(j.at("timeout_ms").get<int64_t>());
  const int64_t page_bytes = j.at("page_bytes").get<int64_t>();
  if (page_bytes != pool.page_bytes()) {
    return error_reply("page bytes " + std::to_string(page_bytes) + " on rank 0, " + std::to_string(pool.page_bytes()) +
                       " here");
  }
  Result<std::unique_ptr<disagg::KvReceiver>> receiver =
      disagg::KvReceiver::create(ucx_pool_, id, j.at("page_tags").get<std::vector<uint32_t>>(), page_bytes);
  if (!receiver.is_ok()) return error_reply(receiver.status().message());
  t->receiver = std::move(receiver).value();
  const std::string address = hex_of(t->receiver->address());
  std::lock_guard<std::mutex> lock(mu_);
  Transfer* raw = t.get();
  t->thread = std::thread([raw] { raw->run(); });
  transfers_.emplace(id, std::move(t));
  json reply = {{"address", address}};
  if (!static_scales_.empty()) reply["static_scales"] = static_scales_;
  return reply.dump();
}

std::string DisaggFollower::adopt(const std::string& payload, PagePool& pool) {
  const json j = json::parse(payload);
  const uint64_t id = j.at("transfer_id").get<uint64_t>();
  Transfer* t = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = transfers_.find(id);
    if (it == transfers_.end()) return "no transfer " + std::to_string(id) + " on this rank";
    t = it->second.get();
  }
  const std::vector<PageId> pages = page_ids(j.at("pages"), pool);
  std::unique_lock<std::mutex> lock(t->mu);
  t->cv.wait_until(lock, t->deadline + std::chrono::milliseconds(100), [&] { return t->received.has_value(); });
  if (!t->received) return "the pages did not arrive before the transfer's deadline";
  if (!t->received->is_ok()) return t->received->status().message();
  const Status written = DisaggLedger::write_pages(pool, pages, t->received->value());
  return written.is_ok() ? "" : written.message();
}

std::string DisaggFollower::done(const std::string& payload) {
  const json j = json::parse(payload);
  const uint64_t id = j.at("transfer_id").get<uint64_t>();
  std::unique_ptr<Transfer> t;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = transfers_.find(id);
    if (it == transfers_.end()) return "";  // never began here (its recv failed): nothing to stop
    t = std::move(it->second);
    transfers_.erase(it);
  }
  t->stop = true;
  if (t->thread.joinable()) t->thread.join();
  if (j.value("recycle", false)) t->receiver->recycle();
  return "";
}

}  // namespace densa::server
