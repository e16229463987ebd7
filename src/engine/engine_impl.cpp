#include "engine/engine_impl.h"
#include "engine/kv_index_widths.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kv/kv_audit.h"
#include "kv/page_digest.h"

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

}  // namespace

namespace {

// The KV pool both a leader and its followers reserve, with the checks that come before it.
Result<PagePool> create_pool(const ModelWeights& weights, const EngineConfig& config) {
  if (config.page_size < 1) return invalid_argument("page_size must be >= 1");
  if (config.max_running_requests < 1) return invalid_argument("max_running_requests must be >= 1");
  if (config.max_waiting_requests < 0) return invalid_argument("max_waiting_requests must be >= 0");
  if (config.chunked_prefill_size < 1) return invalid_argument("chunked_prefill_size must be >= 1");
  if (config.max_step_tokens < 1) return invalid_argument("max_step_tokens must be >= 1");
  if (config.kv_dtype != DType::kF32 && config.kv_dtype != DType::kBF16 &&
      config.kv_dtype != DType::kFP8E4M3) {
    return invalid_argument("unsupported KV dtype " + std::string(dtype_name(config.kv_dtype)));
  }
  if (config.kv_scales && config.kv_dtype != DType::kFP8E4M3) {
    return invalid_argument("static KV scales need an fp8 KV cache");
  }
  const KvLayout layout = kv_layout_for(weights.config, config.page_size, config.kv_dtype, config.kv_scales.has_value());
  if (config.kv_scales) {
    DENSA_RETURN_IF_ERROR(validate_kv_scales(*config.kv_scales, layout.num_layers, kv_scale_heads(layout)));
  }
  // Every index the pool's size flows through, checked before the pool is reserved.
  if (layout.page_bytes() > 0 && config.kv_cache_bytes > 0) {
    KvIndexBounds bounds;
    bounds.num_pages = config.kv_cache_bytes / layout.page_bytes();
    bounds.max_running_requests = config.max_running_requests;
    bounds.max_request_tokens =
        std::min<int64_t>(weights.config.max_position_embeddings, bounds.num_pages * int64_t{config.page_size});
    bounds.max_step_tokens = config.max_step_tokens;
    DENSA_RETURN_IF_ERROR(check_kv_index_widths(layout, bounds));
  }
  Result<PagePool> pool = PagePool::create(layout, config.kv_cache_bytes);
  if (!pool.is_ok()) return pool.status();
  // Every rank must have the same pages: the leader's block tables name them.
  if (config.parallel != nullptr && config.parallel->spans_ranks()) {
    const std::vector<int64_t> pages = config.parallel->world->all_gather(pool.value().num_total());
    for (size_t r = 1; r < pages.size(); ++r) {
      if (pages[r] != pages[0]) {
        return invalid_argument("KV pools differ across ranks: rank 0 has " + std::to_string(pages[0]) +
                                " pages, rank " + std::to_string(r) + " has " + std::to_string(pages[r]));
      }
    }
  }
  return pool;
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::create(const ModelWeights& weights, const EngineConfig& config) {
  if (config.parallel != nullptr && !config.parallel->leader()) {
    return invalid_argument("an engine runs on world rank 0; the other ranks run run_engine_follower");
  }
  Result<PagePool> pool = create_pool(weights, config);
  if (!pool.is_ok()) return pool.status();
  return std::unique_ptr<Engine>(new EngineImpl(weights, config, std::move(pool).value()));
}

Status run_engine_follower(const ModelWeights& weights, const EngineConfig& config) {
  if (config.parallel == nullptr || config.parallel->leader()) {
    return invalid_argument("run_engine_follower is for ranks other than world rank 0");
  }
  Result<PagePool> pool = create_pool(weights, config);
  if (!pool.is_ok()) return pool.status();
  ThreadPool threads(config.num_threads);
  Runner runner(weights, &threads, nullptr);
  if (config.kv_scales) runner.set_static_kv_scales(config.kv_scales->values);  // this rank's heads
  runner.set_parallel(config.parallel);
  runner.set_command_handler(config.follower_command);
  runner.follow(pool.value(), config.fault_injector);
  return Status::ok();
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
                                                  : &noop_tracker_),
      layout_(pool_.layout()),
      static_scales_(layout_.scale_mode == KvScaleMode::kStatic ? config.kv_scales->values : std::vector<float>{}) {
  runner_.set_static_kv_scales(static_scales_);
  runner_.set_parallel(config.parallel);
  if (config.routing_stats && weights.config.is_moe()) {
    routing_ = std::make_unique<RoutingStats>(weights.config.num_layers, weights.config.num_experts,
                                              weights.config.num_experts_per_tok);
    runner_.set_routing_stats(routing_.get());
  }
  published_ = snapshot();
  thread_ = std::thread([this] { loop(); });
}

EngineImpl::~EngineImpl() { shutdown(); }

Result<RequestParams> EngineImpl::validate(const GenerateRequest& request, int64_t num_prompt) const {
  const ModelConfig& mc = weights_.config;
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
  params.stop_token_ids = request.stop_token_ids;
  params.num_top_logprobs = request.num_top_logprobs;
  params.kv_integrity = request.kv_integrity;
  params.export_kv = request.export_kv;
  params.constraint = request.constraint;
  params.cache_salt = request.cache_salt;
  params.inject_fault = request.inject_fault;
  return params;
}

Result<std::shared_ptr<RequestStream>> EngineImpl::submit(GenerateRequest request) {
  Result<RequestParams> params = validate(request, static_cast<int64_t>(request.prompt.size()));
  if (!params.is_ok()) return params.status();

  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) return unavailable("engine is shut down");
  if (published_.num_waiting + static_cast<int32_t>(inbox_.size()) >= config_.max_waiting_requests) {
    return resource_exhausted("request queue is full (" + std::to_string(config_.max_waiting_requests) +
                              " waiting)");
  }
  const RequestId id(next_id_++);
  auto stream = std::make_shared<RequestStream>(id);
  inbox_.emplace_back(
      Submission{std::make_unique<Request>(id, std::move(request.prompt), std::move(params).value()), stream});
  ++queued_submissions_;
  cv_.notify_one();
  return stream;
}

Result<std::pair<KvImport, std::shared_ptr<RequestStream>>> EngineImpl::begin_import(GenerateRequest request,
                                                                                     int32_t num_tokens) {
  const int64_t num_prompt = static_cast<int64_t>(request.prompt.size());
  Result<RequestParams> params = validate(request, num_prompt);
  if (!params.is_ok()) return params.status();
  if (num_tokens < 1 || num_tokens >= num_prompt) {
    return invalid_argument("imported KV must cover 1.." + std::to_string(num_prompt - 1) + " prompt tokens, not " +
                            std::to_string(num_tokens));
  }
  std::future<Result<KvImport>> reply;
  std::shared_ptr<RequestStream> stream;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return unavailable("engine is shut down");
    const RequestId id(next_id_++);
    stream = std::make_shared<RequestStream>(id);
    ImportBegin b;
    b.submission = {std::make_unique<Request>(id, std::move(request.prompt), std::move(params).value()), stream};
    b.num_tokens = num_tokens;
    reply = b.reply.get_future();
    inbox_.emplace_back(std::move(b));
    cv_.notify_one();
  }
  Result<KvImport> reserved = reply.get();
  if (!reserved.is_ok()) return reserved.status();
  return std::make_pair(std::move(reserved).value(), std::move(stream));
}

void EngineImpl::finish_import(RequestId id, KvImportData data) {
  std::lock_guard<std::mutex> lock(mu_);
  inbox_.emplace_back(ImportEnd{id, Status::ok(), std::move(data)});
  cv_.notify_one();
}

void EngineImpl::fail_import(RequestId id, Status error) {
  CHECK(!error.is_ok()) << "fail_import needs an error";
  std::lock_guard<std::mutex> lock(mu_);
  inbox_.emplace_back(ImportEnd{id, std::move(error), {}});
  cv_.notify_one();
}

size_t EngineImpl::followers() const {
  return config_.parallel != nullptr && config_.parallel->spans_ranks()
             ? static_cast<size_t>(config_.parallel->world->size() - 1)
             : 0;
}

std::future<std::vector<std::string>> EngineImpl::run_on_followers(std::vector<uint8_t> payload) {
  std::promise<std::vector<std::string>> reply;
  std::future<std::vector<std::string>> result = reply.get_future();
  std::lock_guard<std::mutex> lock(mu_);
  if (followers() == 0 || stop_) {
    reply.set_value(std::vector<std::string>(followers(), "engine is shut down"));
    return result;
  }
  inbox_.emplace_back(FollowerCommand{std::move(payload), std::move(reply)});
  cv_.notify_one();
  return result;
}

void EngineImpl::release_export(RequestId id) {
  std::lock_guard<std::mutex> lock(mu_);
  inbox_.emplace_back(ExportRelease{id});
  cv_.notify_one();
}

void EngineImpl::cancel(RequestId id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) return;
  inbox_.emplace_back(Cancel{id});
  cv_.notify_one();
}

std::optional<RoutingSnapshot> EngineImpl::routing_stats() const {
  if (routing_ == nullptr) return std::nullopt;
  return routing_->snapshot();
}

EngineStats EngineImpl::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  EngineStats s = published_;
  s.num_waiting += queued_submissions_;
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
    AuditRequest a;
    verdict = a.verdict.get_future();
    inbox_.emplace_back(std::move(a));
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
  if (thread_.joinable()) {
    thread_.join();
    runner_.release_followers();  // after the last step; once, as the thread joins once
  }
}

Status EngineImpl::audit_now() const {
  std::vector<const BlockTable*> tables = scheduler_.live_tables();
  ledger_.tables(tables);
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
  s.nonfinite_logit_rows = num_nonfinite_logit_rows_;
  s.ranks = runner_.rank_stats();
  s.tokens_in_flight = scheduler_.num_live_tokens();
  s.kv_pages_pinned += ledger_.pinned_pages();
  s.tokens_in_flight += ledger_.import_tokens();
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
  e.finish = u.finish;
  e.error = u.error;
  e.num_prompt_tokens = u.num_prompt_tokens;
  e.num_cached_tokens = u.num_cached_tokens;
  e.time = std::chrono::steady_clock::now();
  if (u.exported) {
    auto x = std::make_shared<KvExport>();
    x->id = u.id;
    x->layout = layout_;
    x->pages = u.exported->pages;
    x->num_tokens = u.exported->num_tokens;
    for (PageId p : x->pages) x->data.push_back(pool_.page_data(p));
    x->static_scales = static_scales_;
    ledger_.pin_export(u.id, *u.exported);
    e.kv_export = std::move(x);
  }
  timelines_.event(u.id, e);
  it->second->push(std::move(e));
  if (u.finish != FinishReason::kNone) streams_.erase(it);
}

void EngineImpl::inject_fault(const StepPlan& plan, std::span<Request* const> requests) {
  std::vector<FaultTarget> targets;
  for (size_t k = 0; k < plan.chunks.size(); ++k) targets.push_back({requests[k]->id.value, &requests[k]->table});
  config_.fault_injector->maybe_inject(num_steps_, pool_, cache_, targets);
}

void EngineImpl::inject_request_faults(const StepPlan& plan, std::span<Request* const> requests) {
  bool any = false;
  for (size_t k = 0; k < plan.chunks.size() && !any; ++k) any = requests[k]->params.inject_fault.has_value();
  if (!any) return;  // the previous batch it remembers stays older than this one: still safe for bit flips
  std::vector<FaultTarget> targets;
  std::vector<std::optional<KvFault>> faults;
  for (size_t k = 0; k < plan.chunks.size(); ++k) {
    targets.push_back({requests[k]->id.value, &requests[k]->table});
    faults.push_back(requests[k]->params.inject_fault);
  }
  for (size_t k : request_faults_.maybe_inject(pool_, cache_, targets, faults)) {
    std::fprintf(stderr, "densa: injected KV fault %s into request %llu at step %lld (asked for by the request)\n",
                 kv_fault_name(*faults[k]), static_cast<unsigned long long>(targets[k].request_id),
                 static_cast<long long>(num_steps_));
    requests[k]->params.inject_fault.reset();
  }
}

StepRecord EngineImpl::step_record(const StepPlan& plan, std::span<Request* const> requests,
                                   const StepResult& result) const {
  StepRecord r;
  r.step = num_steps_;
  r.num_seqs = static_cast<int32_t>(plan.chunks.size());
  for (size_t k = 0; k < plan.chunks.size(); ++k) {
    const ScheduledChunk& c = plan.chunks[k];
    r.num_tokens += c.num_tokens;
    r.num_kv_tokens += c.begin + c.num_tokens;
    if (c.num_tokens == 1 && c.begin >= requests[k]->num_prompt_tokens) ++r.num_decode_seqs;
  }
  r.integrity_check_us = result.integrity_check_us;
  return r;
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
  inject_request_faults(plan, requests);
  StepResult result = runner_.run(plan, requests, pool_);
  timelines_.step(plan.chunks, requests, step_begin, std::chrono::steady_clock::now());
  StepRecord record;
  if (config_.step_observer != nullptr) record = step_record(plan, requests, result);  // before commit frees requests
  for (size_t k = 0; k < result.outcomes.size(); ++k) {
    Status& error = result.outcomes[k].error;
    if (error.is_ok()) continue;
    error = attribute_to_request(error, plan.chunks[k].id.value);
    if (result.outcomes[k].nonfinite_logits) {
      ++num_nonfinite_logit_rows_;
    } else {
      ++num_integrity_violations_;
    }
    std::fprintf(stderr, "densa: %s\n", error.message().c_str());
  }
  for (const RequestUpdate& u : scheduler_.commit(plan, result, pool_, cache_)) emit(u);
  if (config_.step_observer != nullptr) {
    record.begin = step_begin;
    record.end = std::chrono::steady_clock::now();
    config_.step_observer->on_step(record);
  }
  ++num_steps_;
  if (audit_every_step_) {
    const Status s = audit_now();
    CHECK(s.is_ok()) << "after step " << num_steps_ << ": " << s.to_string();
  }
}

void EngineImpl::end_request(RequestId id, std::shared_ptr<RequestStream>& stream, int32_t num_prompt,
                             FinishReason finish, Status error) {
  TokenEvent e;
  e.finish = finish;
  e.error = std::move(error);
  e.num_prompt_tokens = num_prompt;
  e.time = std::chrono::steady_clock::now();
  stream->push(std::move(e));
}

void EngineImpl::begin_import_now(ImportBegin& b) {
  b.reply.set_value(ledger_.reserve_import(std::move(b.submission.request), std::move(b.submission.stream),
                                           b.num_tokens, config_.page_size, pool_, cache_));
}

void EngineImpl::end_import_now(ImportEnd& e) {
  std::optional<DisaggLedger::Import> taken = ledger_.take_import(e.id);
  if (!taken) return;  // cancelled meanwhile: pages already freed
  DisaggLedger::Import& im = *taken;
  Request& r = *im.request;
  Status s = e.error;
  if (s.is_ok() && !e.data.followers_adopt.empty()) {  // every rank takes its shard before this one
    const std::vector<std::string> replies = runner_.command_followers(e.data.followers_adopt);
    for (size_t r = 0; r < replies.size() && s.is_ok(); ++r) {
      if (!replies[r].empty()) s = data_loss("kv_transfer_failed: rank " + std::to_string(r + 1) + ": " + replies[r]);
    }
  }
  if (s.is_ok()) s = DisaggLedger::adopt(pool_, r.table, e.data);
  if (!s.is_ok()) {
    pool_.release_all(r.table.pages);
    r.table.clear();
    end_request(r.id, im.stream, r.num_prompt_tokens, FinishReason::kError, std::move(s));
    return;
  }
  r.num_computed_tokens = r.table.num_tokens = im.num_tokens;
  timelines_.submitted(r.id, r.arrival_time);
  if (RequestTimeline* t = timelines_.find(r.id)) {
    t->kv_transfer_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - im.began).count();
  }
  streams_.emplace(r.id, std::move(im.stream));
  scheduler_.add(std::move(im.request));
}

void EngineImpl::cancel_now(RequestId id) {
  if (ledger_.release_export(id, pool_)) return;  // finished: its export unpinned
  if (std::optional<DisaggLedger::Import> im = ledger_.cancel_import(id, pool_)) {
    end_request(id, im->stream, im->request->num_prompt_tokens, FinishReason::kAborted, Status::ok());
    return;
  }
  if (const std::optional<RequestUpdate> u = scheduler_.abort(id, pool_, cache_)) emit(*u);
}

void EngineImpl::handle(Command& command, bool stopping, std::vector<std::promise<Status>>& audits) {
  std::visit(
      [&](auto& c) {
        using T = std::decay_t<decltype(c)>;
        if constexpr (std::is_same_v<T, Submission>) {
          timelines_.submitted(c.request->id, c.request->arrival_time);
          streams_.emplace(c.request->id, std::move(c.stream));
          scheduler_.add(std::move(c.request));
        } else if constexpr (std::is_same_v<T, Cancel>) {
          cancel_now(c.id);
        } else if constexpr (std::is_same_v<T, AuditRequest>) {
          audits.push_back(std::move(c.verdict));
        } else if constexpr (std::is_same_v<T, ImportBegin>) {
          if (stopping) {
            c.reply.set_value(unavailable("engine is shut down"));
          } else {
            begin_import_now(c);
          }
        } else if constexpr (std::is_same_v<T, ImportEnd>) {
          end_import_now(c);
        } else if constexpr (std::is_same_v<T, ExportRelease>) {
          ledger_.release_export(c.id, pool_);
        } else {
          static_assert(std::is_same_v<T, FollowerCommand>);
          c.reply.set_value(stopping ? std::vector<std::string>(followers(), "engine is shut down")
                                     : runner_.command_followers(c.payload));
        }
      },
      command);
}

void EngineImpl::refuse(Command& command) {
  if (auto* a = std::get_if<AuditRequest>(&command)) a->verdict.set_value(unavailable("engine is shut down"));
  if (auto* b = std::get_if<ImportBegin>(&command)) b->reply.set_value(unavailable("engine is shut down"));
  if (auto* f = std::get_if<FollowerCommand>(&command)) {
    f->reply.set_value(std::vector<std::string>(followers(), "engine is shut down"));
  }
}

void EngineImpl::loop() {
  while (true) {
    std::vector<Command> commands;
    bool stopping = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !inbox_.empty() || !scheduler_.idle(); });
      commands.swap(inbox_);
      queued_submissions_ = 0;
      stopping = stop_;
    }
    std::vector<std::promise<Status>> audits;
    for (Command& c : commands) handle(c, stopping, audits);
    if (stopping) {
      for (const RequestUpdate& u : scheduler_.abort_all(pool_, cache_)) emit(u);
      for (DisaggLedger::Import& im : ledger_.release_all(pool_)) {
        end_request(im.request->id, im.stream, im.request->num_prompt_tokens, FinishReason::kAborted, Status::ok());
      }
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
  // Commands that arrived after the last turn.
  std::lock_guard<std::mutex> lock(mu_);
  for (Command& c : inbox_) refuse(c);
  inbox_.clear();
  queued_submissions_ = 0;
}

}  // namespace densa
