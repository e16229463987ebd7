#include "engine/engine_impl.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "kv/kv_audit.h"

namespace densa {
namespace {

bool audit_env() {
  const char* v = std::getenv("DENSA_KV_AUDIT");
  return v != nullptr && v[0] != '\0' && std::string(v) != "0";
}

SchedulerConfig scheduler_config(const ModelConfig& model, const EngineConfig& c) {
  SchedulerConfig s;
  s.page_size = c.page_size;
  s.max_running_requests = c.max_running_requests;
  s.chunked_prefill_size = c.chunked_prefill_size;
  s.max_step_tokens = c.max_step_tokens;
  s.max_context_tokens = model.max_position_embeddings;
  s.eos_token_id = model.eos_token_id;
  s.enable_prefix_cache = c.enable_prefix_cache;
  return s;
}

FinishReason to_finish_reason(FinishCause c) {
  switch (c) {
    case FinishCause::kNone: return FinishReason::kNone;
    case FinishCause::kStop: return FinishReason::kStop;
    case FinishCause::kLength: return FinishReason::kLength;
    case FinishCause::kAborted: return FinishReason::kAborted;
    case FinishCause::kError: return FinishReason::kError;
  }
  return FinishReason::kError;
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::create(const ModelWeights& weights, const EngineConfig& config) {
  if (config.page_size < 1) return invalid_argument("page_size must be >= 1");
  if (config.max_running_requests < 1) return invalid_argument("max_running_requests must be >= 1");
  if (config.max_waiting_requests < 0) return invalid_argument("max_waiting_requests must be >= 0");
  if (config.chunked_prefill_size < 1) return invalid_argument("chunked_prefill_size must be >= 1");
  if (config.max_step_tokens < 1) return invalid_argument("max_step_tokens must be >= 1");
  if (config.kv_dtype != DType::kF32 && config.kv_dtype != DType::kBF16 &&
      config.kv_dtype != DType::kFP8E4M3) {
    return invalid_argument("unsupported KV dtype " + std::string(dtype_name(config.kv_dtype)));
  }
  const KvLayout layout = kv_layout_for(weights.config, config.page_size, config.kv_dtype);
  Result<PagePool> pool = PagePool::create(layout, config.kv_cache_bytes);
  if (!pool.is_ok()) return pool.status();
  return std::unique_ptr<Engine>(new EngineImpl(weights, config, std::move(pool).value()));
}

EngineImpl::EngineImpl(const ModelWeights& weights, const EngineConfig& config, PagePool pool)
    : weights_(weights),
      config_(config),
      audit_every_step_(config.audit_every_step || audit_env()),
      threads_(config.num_threads),
      pool_(std::move(pool)),
      cache_(config.page_size),
      scheduler_(scheduler_config(weights.config, config)),
      own_tracker_(config.integrity_tracker == nullptr && config.kv_integrity
                       ? std::make_unique<TagTracker>(*config.kv_integrity)
                       : nullptr),
      runner_(weights, &threads_,
              config.integrity_tracker != nullptr ? config.integrity_tracker
              : own_tracker_ != nullptr           ? static_cast<IntegrityTracker*>(own_tracker_.get())
                                                  : &noop_tracker_) {
  if (config.routing_stats && weights.config.is_moe()) {
    routing_ = std::make_unique<RoutingStats>(weights.config.num_layers, weights.config.num_experts,
                                              weights.config.num_experts_per_tok);
    runner_.set_routing_stats(routing_.get());
  }
  published_ = snapshot();
  thread_ = std::thread([this] { loop(); });
}

EngineImpl::~EngineImpl() { shutdown(); }

Result<std::shared_ptr<RequestStream>> EngineImpl::submit(GenerateRequest request) {
  const ModelConfig& mc = weights_.config;
  const int64_t num_prompt = static_cast<int64_t>(request.prompt.size());
  if (num_prompt == 0) return invalid_argument("prompt is empty");
  for (TokenId t : request.prompt) {
    if (t < 0 || t >= mc.vocab_size) {
      return invalid_argument("prompt token id " + std::to_string(t) + " outside the vocabulary of " +
                              std::to_string(mc.vocab_size));
    }
  }
  if (request.max_new_tokens < 1) return invalid_argument("max_new_tokens must be >= 1");
  if (request.num_top_logprobs > 20) return invalid_argument("num_top_logprobs must be <= 20");
  const int64_t num_total = num_prompt + request.max_new_tokens;
  if (num_total > mc.max_position_embeddings) {
    return out_of_range("prompt (" + std::to_string(num_prompt) + " tokens) plus max_new_tokens (" +
                        std::to_string(request.max_new_tokens) + ") exceeds the context of " +
                        std::to_string(mc.max_position_embeddings) + " tokens");
  }
  const int64_t pool_tokens = static_cast<int64_t>(pool_.num_total()) * config_.page_size;
  if (num_total > pool_tokens) {
    return out_of_range("prompt plus max_new_tokens (" + std::to_string(num_total) +
                        " tokens) exceeds the whole KV pool of " + std::to_string(pool_tokens) +
                        " tokens");
  }

  RequestParams params;
  params.sampling = request.sampling;
  params.max_new_tokens = request.max_new_tokens;
  params.ignore_eos = request.ignore_eos;
  params.stop_token_ids = std::move(request.stop_token_ids);
  params.num_top_logprobs = request.num_top_logprobs;
  params.kv_integrity = request.kv_integrity;

  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) return unavailable("engine is shut down");
  if (published_.num_waiting + static_cast<int32_t>(inbox_.size()) >= config_.max_waiting_requests) {
    return resource_exhausted("request queue is full (" + std::to_string(config_.max_waiting_requests) +
                              " waiting)");
  }
  const RequestId id = next_id_++;
  auto stream = std::make_shared<RequestStream>(id);
  inbox_.push_back({std::make_unique<Request>(id, std::move(request.prompt), std::move(params)), stream});
  cv_.notify_one();
  return stream;
}

void EngineImpl::cancel(RequestId id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) return;
  cancels_.push_back(id);
  cv_.notify_one();
}

std::optional<RoutingSnapshot> EngineImpl::routing_stats() const {
  if (routing_ == nullptr) return std::nullopt;
  return routing_->snapshot();
}

EngineStats EngineImpl::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  EngineStats s = published_;
  s.num_waiting += static_cast<int32_t>(inbox_.size());
  return s;
}

Status EngineImpl::audit() {
  std::future<Status> verdict;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) {
      if (thread_.joinable()) return unavailable("engine is shutting down");
      return audit_now();  // the engine thread is gone; its state is quiescent
    }
    audits_.emplace_back();
    verdict = audits_.back().get_future();
    cv_.notify_one();
  }
  return verdict.get();
}

Status EngineImpl::set_kv_integrity(const KvIntegrityPolicy& policy) {
  if (own_tracker_ == nullptr) return Engine::set_kv_integrity(policy);
  own_tracker_->set_policy(policy);
  return Status::ok();
}

std::optional<KvIntegrityPolicy> EngineImpl::kv_integrity() const {
  if (own_tracker_ == nullptr) return std::nullopt;
  return own_tracker_->policy();
}

void EngineImpl::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
}

Status EngineImpl::audit_now() const {
  const std::vector<const BlockTable*> tables = scheduler_.live_tables();
  const std::vector<PageId> cached = cache_.pages();
  DENSA_RETURN_IF_ERROR(kv_audit(pool_, tables, cached));
  return cache_.audit(pool_);
}

EngineStats EngineImpl::snapshot() const {
  EngineStats s;
  const SchedulerCounters& c = scheduler_.counters();
  s.num_running = scheduler_.num_running();
  s.num_waiting = scheduler_.num_waiting();
  s.kv_pages_total = pool_.num_total();
  s.kv_pages_used = pool_.num_used();
  s.kv_pages_cached = pool_.num_cached();
  s.prefix_cache_hit_tokens = c.prefix_cache_hit_tokens;
  s.prompt_tokens_total = c.prompt_tokens;
  s.generated_tokens_total = c.generated_tokens;
  s.num_preemptions = c.preemptions;
  s.requests_finished = c.finished;
  s.steps = num_steps_;
  s.kv_integrity_violations = num_integrity_violations_;
  return s;
}

void EngineImpl::emit(const RequestUpdate& u) {
  const auto it = streams_.find(u.id);
  CHECK(it != streams_.end()) << "no stream for request " << u.id;
  TokenEvent e;
  if (u.sampled) {
    e.token = u.sampled->token;
    e.logprob = u.sampled->logprob;
    e.top_logprobs = u.sampled->top_logprobs;
  }
  e.finish = to_finish_reason(u.finish);
  e.error = u.error;
  e.num_prompt_tokens = u.num_prompt_tokens;
  e.num_cached_tokens = u.num_cached_tokens;
  e.time = std::chrono::steady_clock::now();
  timelines_.event(u.id, e);
  it->second->push(std::move(e));
  if (u.finish != FinishCause::kNone) streams_.erase(it);
}

void EngineImpl::inject_fault(const StepPlan& plan, std::span<Request* const> requests) {
  std::vector<FaultTarget> targets;
  for (size_t k = 0; k < plan.chunks.size(); ++k) targets.push_back({requests[k]->id, &requests[k]->table});
  config_.fault_injector->maybe_inject(num_steps_, pool_, cache_, targets);
}

void EngineImpl::step() {
  pool_.set_step(num_steps_);  // page history events carry this step's number
  const auto step_begin = std::chrono::steady_clock::now();
  const StepPlan plan = scheduler_.plan_step(pool_, cache_);
  scheduler_.apply(plan, pool_, cache_);
  std::vector<Request*> requests;
  requests.reserve(plan.chunks.size());
  for (const ScheduledChunk& c : plan.chunks) requests.push_back(scheduler_.find(c.id));
  if (config_.fault_injector != nullptr) inject_fault(plan, requests);
  StepResult result = runner_.run(plan, requests, pool_);
  timelines_.step(plan.chunks, requests, step_begin, std::chrono::steady_clock::now());
  for (size_t k = 0; k < result.outcomes.size(); ++k) {
    Status& error = result.outcomes[k].error;
    if (error.is_ok()) continue;
    error = attribute_to_request(error, plan.chunks[k].id);
    ++num_integrity_violations_;
    std::fprintf(stderr, "densa: %s\n", error.message().c_str());
  }
  for (const RequestUpdate& u : scheduler_.commit(plan, result, pool_, cache_)) emit(u);
  ++num_steps_;
  if (audit_every_step_) {
    const Status s = audit_now();
    CHECK(s.is_ok()) << "after step " << num_steps_ << ": " << s.to_string();
  }
}

void EngineImpl::loop() {
  while (true) {
    std::vector<Submission> submissions;
    std::vector<RequestId> cancels;
    std::vector<std::promise<Status>> audits;
    bool stopping = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] {
        return stop_ || !inbox_.empty() || !cancels_.empty() || !audits_.empty() || !scheduler_.idle();
      });
      submissions.swap(inbox_);
      cancels.swap(cancels_);
      audits.swap(audits_);
      stopping = stop_;
    }
    for (Submission& s : submissions) {
      timelines_.submitted(s.request->id, s.request->arrival_time);
      streams_.emplace(s.request->id, std::move(s.stream));
      scheduler_.add(std::move(s.request));
    }
    for (RequestId id : cancels) {
      if (const std::optional<RequestUpdate> u = scheduler_.abort(id, pool_, cache_)) emit(*u);
    }
    if (stopping) {
      for (const RequestUpdate& u : scheduler_.abort_all(pool_, cache_)) emit(u);
    } else if (!scheduler_.idle()) {
      step();
    }
    for (std::promise<Status>& p : audits) p.set_value(audit_now());
    {
      std::lock_guard<std::mutex> lock(mu_);
      published_ = snapshot();
    }
    if (stopping) break;
  }
  // Audits that arrived after the last turn.
  std::lock_guard<std::mutex> lock(mu_);
  for (std::promise<Status>& p : audits_) p.set_value(unavailable("engine is shut down"));
  audits_.clear();
}

}  // namespace densa
