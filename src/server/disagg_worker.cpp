#include "server/disagg_worker.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <future>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "disagg/disagg_error.h"
#include "disagg/kv_receiver.h"
#include "disagg/kv_sender.h"
#include "disagg/kv_wire.h"
#include "kv/block_table.h"
#include "server/completion_handler.h"
#include "server/disagg_follower.h"
#include "server/serving_context.h"
#include "server/serving_error.h"

namespace densa::server {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

void send_status(httplib::Response& res, const Status& s) { api::send_error(res, api_error(s)); }

// Page ids as the follower commands carry them.
std::vector<int32_t> page_values(std::span<const PageId> pages) {
  std::vector<int32_t> out;
  for (PageId p : pages) out.push_back(p.value);
  return out;
}

// A follower's reply (server/disagg_follower.h): "" or JSON; kv_transfer_failed naming the
// rank (world rank index + 1) when it is an error or not JSON. Never throws.
Status follower_reply_status(size_t index, const std::string& reply) {
  if (reply.empty()) return Status::ok();
  const json j = json::parse(reply, nullptr, false);
  const std::string rank = "rank " + std::to_string(index + 1) + ": ";
  if (!j.is_object()) return disagg::kv_transfer_failed(rank + reply);
  if (j.contains("error")) return disagg::kv_transfer_failed(rank + (j["error"].is_string() ? j["error"].get<std::string>() : reply));
  return Status::ok();
}

}  // namespace

std::string DisaggMetrics::render(const EngineStats& stats) const {
  std::string out;
  out += "# HELP densa_tokens_in_flight Prompt and generated tokens of live requests (imports included).\n"
         "# TYPE densa_tokens_in_flight gauge\ndensa_tokens_in_flight " +
         std::to_string(stats.tokens_in_flight) + "\n";
  out += "# HELP densa_kv_transfer_bytes_total KV transfer bytes on the wire (sent or received).\n"
         "# TYPE densa_kv_transfer_bytes_total counter\ndensa_kv_transfer_bytes_total " +
         std::to_string(kv_transfer_bytes.load()) + "\n";
  out += "# HELP densa_kv_transfer_failures_total KV transfers that failed.\n"
         "# TYPE densa_kv_transfer_failures_total counter\ndensa_kv_transfer_failures_total " +
         std::to_string(kv_transfer_failures.load()) + "\n";
  if (const disagg::UcxWorkerPool* pool = ucx_pool.load()) {
    const disagg::UcxWorkerPool::Counts c = pool->counts();
    auto metric = [&](const char* name, const char* type, const char* help, uint64_t v) {
      out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " +
             std::to_string(v) + "\n";
    };
    metric("densa_ucx_workers_created_total", "counter", "UCX workers created for KV transfers.", c.created);
    metric("densa_ucx_workers_reused_total", "counter", "KV transfers served by a pooled UCX worker.", c.reused);
    metric("densa_ucx_workers_discarded_total", "counter",
           "UCX workers destroyed after a transfer instead of pooled (failed, timed out or not clean).",
           c.discarded);
    metric("densa_ucx_workers_expired_total", "counter",
           "Idle pooled UCX workers closed (past --disagg-ucx-idle-ms, or beyond --disagg-ucx-workers).", c.expired);
    metric("densa_ucx_workers_idle", "gauge", "UCX workers pooled for later transfers.", c.idle);
    metric("densa_ucx_workers_live", "gauge", "UCX workers alive (idle or carrying a transfer); each holds fds.",
           c.live());
  }
  return out;
}

const char* serve_role_name(ServeRole role) {
  switch (role) {
    case ServeRole::kBoth: return "both";
    case ServeRole::kPrefill: return "prefill";
    case ServeRole::kDecode: return "decode";
  }
  return "both";
}

namespace {
disagg::UcxWorkerPool::Limits pool_limits(int idle_workers, int idle_ms) {
  disagg::UcxWorkerPool::Limits l;
  l.max_idle = static_cast<size_t>(std::max(idle_workers, 0));
  l.max_idle_age = std::chrono::milliseconds(std::max(idle_ms, 0));
  return l;
}
}  // namespace

DisaggWorker::DisaggWorker(ServingContext& ctx, ServeRole role, const disagg::UcxContext* ucx, int timeout_ms,
                           int ucx_idle_workers, int ucx_idle_ms, int group_size)
    : ctx_(ctx),
      role_(role),
      ucx_(ucx),
      ucx_pool_(ucx != nullptr ? std::make_unique<disagg::UcxWorkerPool>(*ucx, pool_limits(ucx_idle_workers, ucx_idle_ms))
                               : nullptr),
      timeout_ms_(timeout_ms),
      group_size_(std::max(group_size, 1)),
      descriptor_(disagg::describe_kv(ctx.weights, ctx.engine.kv_layout(), ctx.engine.kv_static_scales())) {
  CHECK(role == ServeRole::kBoth || ucx != nullptr) << "a " << serve_role_name(role) << " worker needs UCX";
  ctx_.disagg_metrics.ucx_pool = ucx_pool_.get();
}

DisaggWorker::~DisaggWorker() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return num_threads_ == 0; });
  ctx_.disagg_metrics.ucx_pool = nullptr;
}

void DisaggWorker::register_routes(httplib::Server& http) {
  http.Get("/disagg/v1/layout", [this](const httplib::Request&, httplib::Response& res) { handle_layout(res); });
  if (role_ == ServeRole::kPrefill) {
    http.Post("/disagg/v1/prefill", [this](const httplib::Request& req, httplib::Response& res) {
      try {
        handle_prefill(req, res);
      } catch (const std::exception& e) {
        send_status(res, invalid_argument(std::string("bad prefill order: ") + e.what()));
      }
    });
  }
}

Result<std::vector<std::string>> DisaggWorker::on_followers(const json& command) const {
  const std::string text = command.dump();
  std::vector<std::string> replies = ctx_.engine.run_on_followers(std::vector<uint8_t>(text.begin(), text.end())).get();
  if (replies.size() != static_cast<size_t>(group_size_ - 1)) {
    return disagg::kv_transfer_failed(std::to_string(replies.size()) + " of " + std::to_string(group_size_ - 1) +
                                      " follower ranks answered");
  }
  for (size_t r = 0; r < replies.size(); ++r) DENSA_RETURN_IF_ERROR(follower_reply_status(r, replies[r]));
  return replies;
}

void DisaggWorker::handle_layout(httplib::Response& res) const {
  json body = disagg::descriptor_to_json(descriptor_);
  body["role"] = serve_role_name(role_);
  res.status = 200;
  res.set_content(body.dump(), "application/json");
}

// ---- prefill role ----

namespace {

// The "send" command of a prefill group's followers: the exported pages, the decode ranks'
// layouts and addresses, and the time left until `deadline` (at least 1 ms).
std::string follower_send_command(const KvExport& exported, const disagg::KvSendOrder& order, const json& layouts,
                                  const std::vector<std::string>& addresses, Clock::time_point deadline) {
  const std::vector<int32_t> pages = page_values(exported.pages);
  const int64_t left_ms =
      std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
  return json({{"op", "send"},
               {"transfer_id", order.transfer_id},
               {"num_tokens", exported.num_tokens},
               {"pages", pages},
               {"page_tags", order.page_tags},
               {"layouts", layouts},
               {"addresses", addresses},
               {"timeout_ms", left_ms}})
      .dump();
}

// The followers' replies to "send": their wire bytes added to `*bytes`, or the first failing
// rank's error. Never throws (the export is still pinned while it runs).
Status sum_follower_wire_bytes(const std::vector<std::string>& replies, int64_t* bytes) {
  Status failed;
  for (size_t r = 0; r < replies.size(); ++r) {
    failed = follower_reply_status(r, replies[r]);
    if (!failed.is_ok()) break;
    const json j = json::parse(replies[r], nullptr, false);
    if (!j.is_object() || !j.contains("wire_bytes") || !j["wire_bytes"].is_number_integer()) {
      failed = disagg::kv_transfer_failed("rank " + std::to_string(r + 1) + ": no wire_bytes in " + replies[r]);
      break;
    }
    *bytes += j["wire_bytes"].get<int64_t>();
  }
  return failed;
}

}  // namespace

std::shared_ptr<const KvExport> DisaggWorker::wait_for_export(RequestStream& stream, Clock::time_point deadline,
                                                              Status* failed) {
  std::shared_ptr<const KvExport> exported;
  while (true) {
    if (Clock::now() >= deadline || ctx_.stopping.load()) {
      ctx_.engine.cancel(stream.id());  // also unpins an export that finishes meanwhile
      *failed = disagg::kv_transfer_failed("prefill did not finish within " + std::to_string(timeout_ms_) + " ms");
      break;
    }
    std::optional<TokenEvent> e = stream.next(std::chrono::milliseconds(20));
    if (!e || e->finish == FinishReason::kNone) continue;
    if (e->kv_export) {
      exported = e->kv_export;
    } else {
      *failed = disagg::kv_transfer_failed("prefill failed: " +
                                           (e->error.is_ok() ? std::string("aborted") : e->error.message()));
    }
    break;
  }
  return exported;
}

void DisaggWorker::handle_prefill(const httplib::Request& req, httplib::Response& res) {
  const json order_json = json::parse(req.body);
  const auto deadline = Clock::now() + std::chrono::milliseconds(
                                           std::min<int64_t>(timeout_ms_, order_json.value("timeout_ms", timeout_ms_)));
  const std::vector<TokenId> tokens = order_json.at("tokens").get<std::vector<TokenId>>();
  disagg::KvSendOrder order;
  order.transfer_id = order_json.at("transfer_id").get<uint64_t>();
  order.page_tags = order_json.at("page_tags").get<std::vector<uint32_t>>();
  const std::optional<std::vector<uint8_t>> address = bytes_of_hex(order_json.at("ucx_address").get<std::string>());
  if (!address || address->empty()) return send_status(res, invalid_argument("ucx_address is not a hex string"));
  order.peer_address = *address;
  // A decode group sends every rank's address; this group's rank r serves decode rank r.
  const std::vector<std::string> addresses = order_json.contains("ucx_addresses")
                                                 ? order_json["ucx_addresses"].get<std::vector<std::string>>()
                                                 : std::vector<std::string>{order_json.at("ucx_address").get<std::string>()};
  if (addresses.size() != static_cast<size_t>(group_size_)) {
    ctx_.disagg_metrics.count_failure();
    return send_status(res, disagg::kv_layout_mismatch(
                                "the decode side runs " + std::to_string(addresses.size()) + " rank(s), this prefill side " +
                                std::to_string(group_size_) + ": each rank sends its own KV shard to the rank of the "
                                "same index, so both need the same --tp and --ep"));
  }
  Result<disagg::KvLayoutDescriptor> decode = disagg::descriptor_from_json(order_json.at("layout"));
  if (!decode.is_ok()) return send_status(res, decode.status());
  if (Status s = disagg::check_compatible(descriptor_, *decode); !s.is_ok()) {
    ctx_.disagg_metrics.count_failure();
    return send_status(res, s);
  }
  // A group: decode rank r's layout (its own static scales), checked like rank 0's.
  const json layouts = order_json.contains("layouts") ? order_json["layouts"] : json::array({order_json.at("layout")});
  if (layouts.size() != addresses.size()) {
    return send_status(res, invalid_argument("the order has " + std::to_string(addresses.size()) + " addresses and " +
                                             std::to_string(layouts.size()) + " layouts"));
  }
  for (size_t r = 1; r < layouts.size(); ++r) {
    Result<disagg::KvLayoutDescriptor> d = disagg::descriptor_from_json(layouts[r]);
    Status s = d.is_ok() ? disagg::check_compatible(descriptor_, *d) : d.status();
    if (!s.is_ok()) {
      ctx_.disagg_metrics.count_failure();
      return send_status(res, Status(s.code(), "decode rank " + std::to_string(r) + ": " + s.message()));
    }
  }
  const int64_t num_pages = pages_for_tokens(static_cast<int64_t>(tokens.size()), descriptor_.layout.page_size);
  if (tokens.empty() || static_cast<int64_t>(order.page_tags.size()) != num_pages) {
    return send_status(res, invalid_argument(std::to_string(tokens.size()) + " tokens need " +
                                             std::to_string(num_pages) + " page tags, got " +
                                             std::to_string(order.page_tags.size())));
  }

  GenerateRequest g;
  g.prompt = tokens;
  g.max_new_tokens = 1;
  g.ignore_eos = true;
  g.export_kv = true;
  g.cache_salt = order_json.value("cache_salt", std::string());
  Result<std::shared_ptr<RequestStream>> stream = ctx_.engine.submit(std::move(g));
  if (!stream.is_ok()) return send_status(res, stream.status());
  Status failed;
  const std::shared_ptr<const KvExport> exported = wait_for_export(**stream, deadline, &failed);
  if (!exported) {
    ctx_.disagg_metrics.count_failure();
    return send_status(res, failed);
  }
  // A group: every other rank converts and sends its own shard of the same pages meanwhile
  // (they stay pinned until all have answered).
  std::future<std::vector<std::string>> followers;
  if (group_size_ > 1) {
    const std::string command = follower_send_command(*exported, order, layouts, addresses, deadline);
    followers = ctx_.engine.run_on_followers(std::vector<uint8_t>(command.begin(), command.end()));
  }
  const disagg::KvPageFormat from{exported->layout, exported->static_scales};
  const disagg::KvPageFormat to{decode->layout, decode->static_scales};
  const std::vector<std::vector<uint8_t>> messages =
      disagg::build_page_messages(from, exported->data, exported->num_tokens, to, order.transfer_id, order.page_tags);
  int64_t follower_bytes = 0;
  Status followers_failed;
  if (followers.valid()) followers_failed = sum_follower_wire_bytes(followers.get(), &follower_bytes);
  ctx_.engine.release_export(exported->id);  // the messages are copies, and every rank has sent
  if (!followers_failed.is_ok()) {
    ctx_.disagg_metrics.count_failure();
    std::fprintf(stderr, "densa serve: %s\n", followers_failed.message().c_str());
    return send_status(res, followers_failed);
  }
  // Fault injection for tests: hold the converted pages this long before sending, so a test
  // can kill this worker mid-transfer. Unset in production.
  if (const char* delay = std::getenv("DENSA_DISAGG_SEND_DELAY_MS")) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(delay)));
  }
  Result<int64_t> sent = disagg::send_page_messages(*ucx_pool_, order, messages, deadline);
  if (!sent.is_ok()) {
    ctx_.disagg_metrics.count_failure();
    std::fprintf(stderr, "densa serve: %s\n", sent.status().message().c_str());
    return send_status(res, sent.status());
  }
  ctx_.disagg_metrics.count_bytes(*sent + follower_bytes);
  res.status = 200;
  res.set_content(
      json({{"num_pages", messages.size()}, {"num_tokens", tokens.size()}, {"wire_bytes", *sent + follower_bytes}})
          .dump(),
      "application/json");
}

// ---- decode role ----

namespace {

// A decode group's order: the followers' addresses (their replies to "recv") after rank 0's as
// "ucx_addresses", and each rank's layout (rank 0's with the rank's own static scales) as
// "layouts".
void add_follower_receivers(json& order, const std::vector<std::string>& replies) {
  json addresses = json::array({order["ucx_address"]});
  json layouts = json::array({order["layout"]});  // each rank's: rank 0's with its own static scales
  for (const std::string& r : replies) {
    const json reply = json::parse(r);
    addresses.push_back(reply.at("address"));
    json layout = order["layout"];
    if (reply.contains("static_scales")) layout["static_scales"] = reply["static_scales"];
    layouts.push_back(std::move(layout));
  }
  order["ucx_addresses"] = addresses;
  order["layouts"] = layouts;
}

// The prefill worker's answer to an order.
struct PrefillReply {
  int status = 0;  // 0: no HTTP response
  std::string body;
  std::string error;
};

// POSTs `body` (the order) to the prefill worker at `prefill_url`, every timeout set to the time
// left until `deadline`.
PrefillReply post_prefill_order(const std::string& prefill_url, const std::string& body, Clock::time_point deadline) {
  PrefillReply r;
  httplib::Client client(prefill_url);
  const auto seconds = std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now()).count();
  const time_t sec = static_cast<time_t>(std::max<int64_t>(seconds, 0) / 1000000);
  const time_t usec = static_cast<time_t>(std::max<int64_t>(seconds, 0) % 1000000);
  client.set_connection_timeout(sec, usec);
  client.set_tcp_nodelay(true);
  client.set_read_timeout(sec, usec);
  client.set_write_timeout(sec, usec);
  httplib::Result res = client.Post("/disagg/v1/prefill", body, "application/json");
  if (!res) {
    r.error = "prefill worker " + prefill_url + " unreachable or gone (" + httplib::to_string(res.error()) + ")";
    return r;
  }
  r.status = res->status;
  r.body = res->body;
  return r;
}

// The error a reply other than 200 stands for: the prefill side's kv_layout_mismatch as
// invalid_argument, its other disagg errors as they are, anything else kv_transfer_failed.
Status prefill_reply_error(const PrefillReply& r) {
  if (r.status == 0) return disagg::kv_transfer_failed(r.error);
  std::string message = "prefill worker answered HTTP " + std::to_string(r.status);
  try {
    const std::string m = json::parse(r.body).at("error").at("message").get<std::string>();
    const Status peer(StatusCode::kUnavailable, m);
    if (disagg::disagg_error_code(peer) == disagg::kKvLayoutMismatch) return Status(StatusCode::kInvalidArgument, m);
    if (!disagg::disagg_error_code(peer).empty()) return peer;
    message += ": " + m;
  } catch (const std::exception&) {
  }
  return disagg::kv_transfer_failed(message);
}

}  // namespace

Result<std::shared_ptr<RequestStream>> DisaggWorker::submit(GenerateRequest request, const std::string& prefill_url) {
  CHECK(role_ == ServeRole::kDecode) << "DisaggWorker::submit on a " << serve_role_name(role_) << " worker";
  if (request.prompt.size() < 2) return ctx_.engine.submit(std::move(request));  // no KV worth moving
  std::vector<TokenId> tokens(request.prompt.begin(), request.prompt.end() - 1);
  std::string salt = request.cache_salt;  // the prefill worker's cache keeps the tenant apart too
  auto begun = ctx_.engine.begin_import(std::move(request), static_cast<int32_t>(tokens.size()));
  if (!begun.is_ok()) return begun.status();
  auto [import, stream] = std::move(begun).value();
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++num_threads_;
  }
  std::thread([this, import = std::move(import), tokens = std::move(tokens), prefill_url,
               salt = std::move(salt)]() mutable {
    run_import(std::move(import), std::move(tokens), std::move(prefill_url), salt);
    std::lock_guard<std::mutex> lock(mu_);
    --num_threads_;
    cv_.notify_all();
  }).detach();
  return stream;
}

void DisaggWorker::run_import(KvImport import, std::vector<TokenId> tokens, std::string prefill_url,
                              const std::string& cache_salt) {
  Status s;
  try {
    s = import_pages(import, tokens, prefill_url, cache_salt);
  } catch (const std::exception& e) {
    s = disagg::kv_transfer_failed(std::string("unexpected reply from the prefill worker: ") + e.what());
  }
  if (!s.is_ok()) {
    if (disagg::disagg_error_code(s).empty()) s = disagg::kv_transfer_failed(s.message());
    ctx_.disagg_metrics.count_failure();
    std::fprintf(stderr, "densa serve: request %llu: %s\n", static_cast<unsigned long long>(import.id.value),
                 s.message().c_str());
    ctx_.engine.fail_import(import.id, std::move(s));
  }
}

Status DisaggWorker::import_pages(const KvImport& import, const std::vector<TokenId>& tokens,
                                  const std::string& prefill_url, const std::string& cache_salt) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms_);
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  const uint64_t transfer_id = (salt + counter.fetch_add(1) * 0x9e3779b97f4a7c15ull) & disagg::kKvTransferIdMask;
  const int64_t page_bytes = descriptor_.layout.page_bytes();
  Result<std::unique_ptr<disagg::KvReceiver>> receiver =
      disagg::KvReceiver::create(*ucx_pool_, transfer_id, import.tags, page_bytes);
  if (!receiver.is_ok()) return receiver.status();
  json order = {{"tokens", tokens},
                {"transfer_id", transfer_id},
                {"ucx_address", hex_of((*receiver)->address())},
                {"page_tags", import.tags},
                {"layout", disagg::descriptor_to_json(descriptor_)},
                {"timeout_ms", timeout_ms_},
                {"cache_salt", cache_salt}};
  // A decode group: every other rank posts its own receives first, and its address joins the
  // order; whatever happens below, they are told when the transfer is over (`done`), and
  // recycle their UCX worker only when the prefill side confirmed its flush.
  struct FollowersDone {
    const DisaggWorker* worker = nullptr;  // null: one process, nothing to tell
    uint64_t transfer_id = 0;
    bool recycle = false;
    ~FollowersDone() {  // may run while an exception unwinds: nothing may escape
      if (worker == nullptr) return;
      try {
        const Result<std::vector<std::string>> r =
            worker->on_followers(json({{"op", "done"}, {"transfer_id", transfer_id}, {"recycle", recycle}}));
        if (!r.is_ok()) {
          std::fprintf(stderr, "densa serve: ending a transfer on the other ranks: %s\n", r.status().message().c_str());
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "densa serve: ending a transfer on the other ranks: %s\n", e.what());
      }
    }
  } followers_done;
  if (group_size_ > 1) {
    followers_done = {this, transfer_id, false};
    Result<std::vector<std::string>> replies = on_followers(json({{"op", "recv"},
                                                                  {"transfer_id", transfer_id},
                                                                  {"page_tags", import.tags},
                                                                  {"page_bytes", page_bytes},
                                                                  {"timeout_ms", timeout_ms_}}));
    if (!replies.is_ok()) return replies.status();
    add_follower_receivers(order, *replies);
  }
  // The control-plane call runs beside the data plane: this thread keeps the receiver's
  // worker progressing (UCX wire-up and the sender's flush need it) until both are done.
  std::shared_future<PrefillReply> reply = std::async(std::launch::async, [&, body = order.dump()] {
    return post_prefill_order(prefill_url, body, deadline);
  });
  auto reply_ready = [&] { return reply.wait_for(std::chrono::seconds(0)) == std::future_status::ready; };
  auto reply_failed = [&] { return prefill_reply_error(reply.get()); };

  // A reply before every page arrived ends the wait unless it is a 200 (pages in flight).
  Result<KvImportData> received =
      (*receiver)->receive(deadline, [&] { return ctx_.stopping.load() || (reply_ready() && reply.get().status != 200); });
  if (!received.is_ok()) {
    if (reply_ready() && reply.get().status != 200) return reply_failed();
    return received.status();
  }
  // Every page arrived and passed its header, tag and digest checks: the engine may adopt them
  // now (it re-checks tags and digests). The prefill worker's answer only confirms its flush.
  const int64_t wire_bytes = static_cast<int64_t>(import.tags.size()) *
                             (static_cast<int64_t>(disagg::kKvPageHeaderBytes) + page_bytes) * group_size_;
  ctx_.disagg_metrics.count_bytes(wire_bytes);
  KvImportData data = std::move(received).value();
  if (group_size_ > 1) {  // every rank adopts its own shard before rank 0 does
    const std::vector<int32_t> pages = page_values(import.pages);
    const std::string adopt = json({{"op", "adopt"}, {"transfer_id", transfer_id}, {"pages", pages}}).dump();
    data.followers_adopt.assign(adopt.begin(), adopt.end());
  }
  ctx_.engine.finish_import(import.id, std::move(data));

  // Until that answer, this worker keeps progressing (the sender's flush may need it); only
  // then is nothing of this transfer on the way, and the worker may serve the next one.
  while (!reply_ready()) {
    if (Clock::now() >= deadline || ctx_.stopping.load()) {
      std::fprintf(stderr, "densa serve: request %llu: pages imported, but no answer from the prefill worker in time\n",
                   static_cast<unsigned long long>(import.id.value));
      return Status::ok();  // the receiver's worker is destroyed, not pooled
    }
    (*receiver)->progress();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  if (reply.get().status == 200) {
    (*receiver)->recycle();
    followers_done.recycle = true;
  } else {
    std::fprintf(stderr, "densa serve: request %llu: pages imported, then the prefill worker reported: %s\n",
                 static_cast<unsigned long long>(import.id.value), reply_failed().message().c_str());
  }
  return Status::ok();
}

}  // namespace densa::server
