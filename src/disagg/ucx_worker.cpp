#include "disagg/ucx_worker.h"

#include <ucp/api/ucp.h>

#include <thread>

namespace densa::disagg {
namespace {

Status ucx_error(const std::string& what, ucs_status_t s) {
  return unavailable(what + ": " + ucs_status_string(s));
}

}  // namespace

Result<std::unique_ptr<UcxContext>> UcxContext::create() {
  ucp_config_t* config = nullptr;
  ucs_status_t s = ucp_config_read(nullptr, nullptr, &config);
  if (s != UCS_OK) return ucx_error("UCX configuration", s);
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_TAG;
  params.mt_workers_shared = 1;  // workers live on different threads
  ucp_context_h ctx = nullptr;
  s = ucp_init(&params, config, &ctx);
  ucp_config_release(config);
  if (s != UCS_OK) return ucx_error("UCX init", s);
  return std::unique_ptr<UcxContext>(new UcxContext(ctx));
}

UcxContext::~UcxContext() { ucp_cleanup(ctx_); }

Result<std::unique_ptr<UcxWorker>> UcxWorker::create(const UcxContext& context) {
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  // One thread at a time, but not always the same one: a pooled worker serves transfers run
  // by different threads (the pool's mutex orders the hand-overs).
  params.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  ucp_worker_h worker = nullptr;
  ucs_status_t s = ucp_worker_create(context.handle(), &params, &worker);
  if (s != UCS_OK) return ucx_error("UCX worker", s);
  ucp_address_t* addr = nullptr;
  size_t len = 0;
  s = ucp_worker_get_address(worker, &addr, &len);
  if (s != UCS_OK) {
    ucp_worker_destroy(worker);
    return ucx_error("UCX worker address", s);
  }
  std::vector<uint8_t> address(reinterpret_cast<const uint8_t*>(addr), reinterpret_cast<const uint8_t*>(addr) + len);
  ucp_worker_release_address(worker, addr);
  return std::unique_ptr<UcxWorker>(new UcxWorker(worker, std::move(address)));
}

UcxWorker::~UcxWorker() {
  cancel_pending();
  if (ep_ != nullptr) {
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    void* r = ucp_ep_close_nbx(ep_, &param);
    if (r != nullptr && !UCS_PTR_IS_ERR(r)) {
      // A forced close does not wait for the peer; bounded all the same.
      const auto deadline = Clock::now() + std::chrono::seconds(2);
      while (ucp_request_check_status(r) == UCS_INPROGRESS && Clock::now() < deadline) ucp_worker_progress(worker_);
      ucp_request_free(r);
    }
  }
  ucp_worker_destroy(worker_);
}

Status UcxWorker::connect(std::span<const uint8_t> peer_address) {
  CHECK(ep_ == nullptr) << "UcxWorker connects once";
  if (peer_address.empty()) return unavailable("empty UCX peer address");
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  params.address = reinterpret_cast<const ucp_address_t*>(peer_address.data());
  // Peer failure detection where the transport has it (tcp, RDMA); shared memory has none,
  // so there the endpoint runs without it and the transfer's deadline bounds every wait.
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  ucs_status_t s = ucp_ep_create(worker_, &params, &ep_);
  if (s != UCS_OK) {
    params.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    s = ucp_ep_create(worker_, &params, &ep_);
  }
  if (s != UCS_OK) {
    ep_ = nullptr;
    return ucx_error("UCX connect", s);
  }
  peer_.assign(peer_address.begin(), peer_address.end());
  return Status::ok();
}

Result<size_t> UcxWorker::post_send(uint64_t tag, std::span<const uint8_t> buffer) {
  CHECK(ep_ != nullptr) << "post_send before connect";
  ucp_request_param_t param{};
  void* r = ucp_tag_send_nbx(ep_, buffer.data(), buffer.size(), tag, &param);
  Op op;
  if (UCS_PTR_IS_ERR(r)) return ucx_error("UCX send", UCS_PTR_STATUS(r));
  op.request = r;
  op.done = r == nullptr;
  op.bytes = buffer.size();
  ops_.push_back(std::move(op));
  return ops_.size() - 1;
}

Result<size_t> UcxWorker::post_recv(uint64_t tag, std::span<uint8_t> buffer) {
  ucp_request_param_t param{};
  void* r = ucp_tag_recv_nbx(worker_, buffer.data(), buffer.size(), tag, ~uint64_t{0}, &param);
  if (UCS_PTR_IS_ERR(r)) return ucx_error("UCX receive", UCS_PTR_STATUS(r));
  Op op;
  op.request = r;
  op.is_recv = true;
  op.done = r == nullptr;
  op.bytes = buffer.size();
  ops_.push_back(std::move(op));
  return ops_.size() - 1;
}

bool UcxWorker::progress() { return ucp_worker_progress(worker_) != 0; }

void UcxWorker::wait_idle() { std::this_thread::sleep_for(std::chrono::microseconds(50)); }

std::optional<Result<size_t>> UcxWorker::op_result(size_t i) {
  Op& op = ops_[i];
  if (!op.done) {
    ucs_status_t s;
    if (op.is_recv) {
      ucp_tag_recv_info_t info{};
      s = ucp_tag_recv_request_test(op.request, &info);
      if (s == UCS_OK) op.bytes = info.length;
    } else {
      s = ucp_request_check_status(op.request);
    }
    if (s == UCS_INPROGRESS) return std::nullopt;
    if (s != UCS_OK) op.status = ucx_error(op.is_recv ? "UCX receive" : "UCX send", s);
    ucp_request_free(op.request);
    op.request = nullptr;
    op.done = true;
  }
  if (!op.status.is_ok()) return Result<size_t>(op.status);
  return Result<size_t>(op.bytes);
}

void UcxWorker::cancel_pending() {
  for (Op& op : ops_) {
    if (op.done || op.request == nullptr) continue;
    ucp_request_cancel(worker_, op.request);
  }
  for (Op& op : ops_) {
    if (op.done || op.request == nullptr) continue;
    // A cancelled receive completes at once; a send to a dead peer errors out. Bounded wait.
    const auto deadline = Clock::now() + std::chrono::seconds(2);
    while (ucp_request_check_status(op.request) == UCS_INPROGRESS && Clock::now() < deadline) {
      ucp_worker_progress(worker_);
    }
    if (ucp_request_check_status(op.request) != UCS_INPROGRESS) ucp_request_free(op.request);
    op.request = nullptr;
    op.done = true;
    op.status = unavailable("cancelled");
  }
}

Status UcxWorker::wait_request(void* r, Clock::time_point deadline, const char* what) {
  if (r == nullptr) return Status::ok();
  if (UCS_PTR_IS_ERR(r)) {
    broken_ = true;
    return ucx_error(what, UCS_PTR_STATUS(r));
  }
  ucs_status_t s;
  while ((s = ucp_request_check_status(r)) == UCS_INPROGRESS) {
    if (Clock::now() >= deadline) {
      // Freed while in flight, UCX releases the request when it completes; the worker is
      // not reused, and its destructor force-closes the endpoint.
      ucp_request_free(r);
      broken_ = true;
      return unavailable(std::string("timed out: ") + what);
    }
    if (ucp_worker_progress(worker_) == 0) wait_idle();
  }
  ucp_request_free(r);
  if (s != UCS_OK) broken_ = true;
  return s == UCS_OK ? Status::ok() : ucx_error(what, s);
}

Status UcxWorker::flush_endpoint(Clock::time_point deadline) {
  if (ep_ == nullptr) return Status::ok();
  ucp_request_param_t param{};
  return wait_request(ucp_ep_flush_nbx(ep_, &param), deadline, "UCX flush");
}

Status UcxWorker::close_endpoint(Clock::time_point deadline) {
  if (ep_ == nullptr) return Status::ok();
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = 0;  // flush: everything sent has reached the peer
  void* r = ucp_ep_close_nbx(ep_, &param);
  ep_ = nullptr;
  peer_.clear();
  return wait_request(r, deadline, "UCX close");
}

bool UcxWorker::reusable() {
  if (broken_) return false;
  for (size_t i = 0; i < ops_.size(); ++i) {
    std::optional<Result<size_t>> r = op_result(i);
    if (!r || !r->is_ok()) return false;
  }
  return !has_unmatched_message();
}

bool UcxWorker::has_unmatched_message() {
  ucp_worker_progress(worker_);
  ucp_tag_recv_info_t info{};
  // Tag mask 0 matches every tag; remove = 0 leaves the message where it is.
  return ucp_tag_probe_nb(worker_, 0, 0, 0, &info) != nullptr;
}

void UcxWorker::clear_ops() {
  for (const Op& op : ops_) CHECK(op.done && op.request == nullptr) << "clear_ops with an op in flight";
  ops_.clear();
}

}  // namespace densa::disagg
