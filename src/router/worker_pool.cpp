#include "router/worker_pool.h"

#include <algorithm>
#include <charconv>
#include <utility>

#include "core/check.h"

namespace densa::router {

const char* worker_role_name(WorkerRole role) {
  switch (role) {
    case WorkerRole::kPrefill: return "prefill";
    case WorkerRole::kDecode: return "decode";
  }
  return "?";
}

Result<WorkerUrl> parse_worker_url(std::string_view url) {
  const std::string quoted = "'" + std::string(url) + "'";
  constexpr std::string_view kScheme = "http://";
  if (url.rfind(kScheme, 0) != 0) return invalid_argument("worker URL " + quoted + " must start with http://");
  std::string_view rest = url.substr(kScheme.size());
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos) return invalid_argument("worker URL " + quoted + " must not have a path");
  const size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return invalid_argument("worker URL " + quoted + " needs host:port");
  const std::string_view host = rest.substr(0, colon);
  const std::string_view port_text = rest.substr(colon + 1);
  int port = 0;
  const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port < 1 || port > 65535)
    return invalid_argument("worker URL " + quoted + " has a bad port");
  WorkerUrl w;
  w.host = std::string(host);
  w.port = port;
  w.origin = "http://" + w.host + ":" + std::to_string(port);
  return w;
}

Result<std::vector<WorkerUrl>> parse_worker_list(std::string_view comma_list) {
  std::vector<WorkerUrl> out;
  size_t start = 0;
  while (start <= comma_list.size()) {
    const size_t comma = std::min(comma_list.find(',', start), comma_list.size());
    const std::string_view item = comma_list.substr(start, comma - start);
    start = comma + 1;
    if (item.empty()) continue;
    Result<WorkerUrl> w = parse_worker_url(item);
    if (!w.is_ok()) return w.status();
    for (const WorkerUrl& seen : out)
      if (seen.origin == w->origin) return invalid_argument("worker URL '" + w->origin + "' is listed twice");
    out.push_back(std::move(w).value());
  }
  if (out.empty()) return invalid_argument("no worker URL given");
  return out;
}

WorkerPool::WorkerPool(std::vector<WorkerUrl> prefill, std::vector<WorkerUrl> decode) {
  for (WorkerUrl& u : prefill) workers_.push_back(Worker{std::move(u), WorkerRole::kPrefill});
  for (WorkerUrl& u : decode) workers_.push_back(Worker{std::move(u), WorkerRole::kDecode});
}

std::vector<WorkerId> WorkerPool::ids(WorkerRole role) const {
  std::vector<WorkerId> out;
  for (size_t i = 0; i < workers_.size(); ++i)
    if (workers_[i].role == role) out.push_back(WorkerId(static_cast<int32_t>(i)));
  return out;
}

std::optional<WorkerId> WorkerPool::pick(WorkerRole role, std::span<const WorkerId> exclude) {
  const std::vector<WorkerId> members = ids(role);
  if (members.empty()) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  size_t& cursor = role == WorkerRole::kPrefill ? next_prefill_ : next_decode_;
  std::optional<size_t> best;  // position within `members`
  for (size_t k = 0; k < members.size(); ++k) {
    const size_t pos = (cursor + k) % members.size();
    const WorkerId id = members[pos];
    const Worker& w = workers_[id.value];
    if (!w.healthy || std::find(exclude.begin(), exclude.end(), id) != exclude.end()) continue;
    // Strictly fewer tokens wins, so the first of equals in round-robin order stays.
    if (!best || w.tokens_in_flight < workers_[members[*best].value].tokens_in_flight) best = pos;
  }
  if (!best) return std::nullopt;
  cursor = (*best + 1) % members.size();
  return members[*best];
}

void WorkerPool::add_load(WorkerId id, int64_t tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  Worker& w = workers_.at(id.value);
  w.tokens_in_flight += tokens;
  ++w.requests_in_flight;
}

void WorkerPool::remove_load(WorkerId id, int64_t tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  Worker& w = workers_.at(id.value);
  CHECK(w.requests_in_flight > 0 && w.tokens_in_flight >= tokens) << "remove_load without add_load";
  w.tokens_in_flight -= tokens;
  --w.requests_in_flight;
}

void WorkerPool::mark_failed(WorkerId id, std::string reason, std::chrono::milliseconds hold) {
  std::lock_guard<std::mutex> lock(mu_);
  Worker& w = workers_.at(id.value);
  w.healthy = false;
  w.held_until = Clock::now() + hold;
  ++w.failures;
  w.last_error = std::move(reason);
}

void WorkerPool::set_probe_result(WorkerId id, bool healthy, std::string reason) {
  std::lock_guard<std::mutex> lock(mu_);
  Worker& w = workers_.at(id.value);
  if (healthy && Clock::now() < w.held_until) return;
  w.healthy = healthy;
  if (!healthy) w.last_error = std::move(reason);
}

bool WorkerPool::any_healthy(WorkerRole role) const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::any_of(workers_.begin(), workers_.end(), [&](const Worker& w) { return w.role == role && w.healthy; });
}

std::vector<WorkerSnapshot> WorkerPool::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<WorkerSnapshot> out;
  for (size_t i = 0; i < workers_.size(); ++i) {
    const Worker& w = workers_[i];
    out.push_back(WorkerSnapshot{WorkerId(static_cast<int32_t>(i)), w.role, w.url.origin, w.healthy, w.tokens_in_flight,
                                 w.requests_in_flight, w.failures, w.healthy ? std::string() : w.last_error});
  }
  return out;
}

LoadLease::LoadLease(WorkerPool& pool, WorkerId id, int64_t tokens) : pool_(&pool), id_(id), tokens_(tokens) {
  pool.add_load(id, tokens);
}

LoadLease& LoadLease::operator=(LoadLease&& other) noexcept {
  if (this != &other) {
    release();
    pool_ = std::exchange(other.pool_, nullptr);
    id_ = other.id_;
    tokens_ = other.tokens_;
  }
  return *this;
}

void LoadLease::release() {
  if (pool_) std::exchange(pool_, nullptr)->remove_load(id_, tokens_);
}

}  // namespace densa::router
