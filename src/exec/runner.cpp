#include "exec/runner.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "core/process_memory.h"
#include "kv/radix_cache.h"
#include "sample/sampler.h"

namespace densa {
namespace {

using Clock = std::chrono::steady_clock;

// Counts of NaN and of +-inf in one row of model logits (before any grammar mask).
struct NonFinite {
  int64_t nan = 0;
  int64_t inf = 0;
  int64_t first = -1;  // lowest token id with a non-finite logit
};

// One branch-free pass the compiler vectorizes (an all-ones exponent is NaN or inf), so the
// check costs a read of the row; the counting pass runs only on a row that fails it.
bool all_finite(std::span<const float> row) {
  uint32_t bad = 0;
  for (const float l : row) {
    const uint32_t bits = std::bit_cast<uint32_t>(l);
    bad |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  return bad == 0;
}

NonFinite count_non_finite(std::span<const float> row) {
  NonFinite n;
  if (all_finite(row)) return n;
  for (size_t i = 0; i < row.size(); ++i) {
    const float l = row[i];
    if (std::isfinite(l)) continue;
    if (std::isnan(l)) ++n.nan;
    else ++n.inf;
    if (n.first < 0) n.first = static_cast<int64_t>(i);
  }
  return n;
}

}  // namespace

KvLayout kv_layout_for(const ModelConfig& config, int32_t page_size, DType kv_dtype, bool static_scales) {
  KvLayout l;
  l.num_layers = config.num_layers;
  l.num_kv_heads = config.num_kv_heads;
  l.head_dim = config.head_dim;
  l.page_size = page_size;
  l.dtype = kv_dtype;
  l.scale_mode = kv_dtype != DType::kFP8E4M3 ? KvScaleMode::kNone
                 : static_scales               ? KvScaleMode::kStatic
                                               : KvScaleMode::kDynamic;
  if (config.is_mla()) {  // one latent row per token per layer instead of K/V per head
    l.num_kv_heads = 0;
    l.head_dim = 0;
    l.latent_dim = config.mla.kv_lora_rank + config.mla.qk_rope_head_dim;
  }
  if (config.is_dsa()) l.index_dim = config.dsa.index_head_dim;  // the indexer's FP8 keys
  return l;
}

Runner::Runner(const ModelWeights& weights, ThreadPool* threads, IntegrityTracker* tracker)
    : weights_(weights), threads_(threads), tracker_(tracker) {}

namespace {

// A batch on the wire between ranks: a kind word, then each int32 array as its length and
// its elements (host byte order: every rank of a group runs this same binary).
enum class BatchMessage : int32_t { kBatch = 1, kRelease = 2, kCheck = 3, kCommand = 4 };

void put_array(std::vector<uint8_t>& out, std::span<const int32_t> a) {
  const int32_t n = static_cast<int32_t>(a.size());
  const size_t at = out.size();
  out.resize(at + sizeof(n) + a.size_bytes());
  std::memcpy(out.data() + at, &n, sizeof(n));
  if (!a.empty()) std::memcpy(out.data() + at + sizeof(n), a.data(), a.size_bytes());
}

// Starts `out` as a message of `kind`.
void start_message(std::vector<uint8_t>& out, BatchMessage kind) {
  const int32_t k = static_cast<int32_t>(kind);
  out.assign(sizeof(k), 0);
  std::memcpy(out.data(), &k, sizeof(k));
}

// Reads one array at *pos; false when the message is shorter than it says.
bool get_array(const std::vector<uint8_t>& in, size_t* pos, std::vector<int32_t>* a) {
  int32_t n = 0;
  if (in.size() - *pos < sizeof(n)) return false;
  std::memcpy(&n, in.data() + *pos, sizeof(n));
  *pos += sizeof(n);
  if (n < 0 || (in.size() - *pos) / sizeof(int32_t) < static_cast<size_t>(n)) return false;
  a->resize(static_cast<size_t>(n));
  if (n > 0) std::memcpy(a->data(), in.data() + *pos, static_cast<size_t>(n) * sizeof(int32_t));
  *pos += static_cast<size_t>(n) * sizeof(int32_t);
  return true;
}

}  // namespace

KvView Runner::batch_view(PagePool& pool) const {
  KvView kv;
  kv.layout = pool.layout();
  kv.pool = pool.base();
  kv.block_table = block_table_;
  kv.block_offsets = block_offsets_;
  kv.static_scales = static_scales_.empty() ? nullptr : static_scales_.data();
  return kv;
}

void Runner::check_page(const PagePool& pool, int32_t page) const {
  if (page < 0 || page >= pool.num_total()) {
    parallel_->world->abort_group("page " + std::to_string(page) + " outside this rank's pool");
  }
}

void Runner::check_on_followers(const PagePool& pool, std::span<const BlockTable* const> tables,
                                std::span<const IntegrityOverride> overrides, std::span<Request* const> requests,
                                const KvIntegrityPolicy& policy, std::span<Status> verdicts) {
  Communicator& world = *parallel_->world;
  start_message(message_, BatchMessage::kCheck);
  const int32_t head[3] = {static_cast<int32_t>(policy.mode), policy.sample_every, policy.digest_every};
  put_array(message_, head);
  std::vector<int32_t> per_table;  // [override, num_tokens, request id low, high] per table
  for (size_t k = 0; k < tables.size(); ++k) {
    const uint64_t id = requests[k]->id.value;
    per_table.insert(per_table.end(), {static_cast<int32_t>(overrides[k]), tables[k]->num_tokens,
                                       static_cast<int32_t>(id & 0xffffffffu), static_cast<int32_t>(id >> 32)});
  }
  put_array(message_, per_table);
  std::vector<int32_t> refs;
  for (const BlockTable* t : tables) {
    static_assert(sizeof(PageId) == sizeof(int32_t));
    put_array(message_, {reinterpret_cast<const int32_t*>(t->pages.data()), t->pages.size()});
    put_array(message_, {reinterpret_cast<const int32_t*>(t->tags.data()), t->tags.size()});
    refs.clear();
    for (PageId p : t->pages) refs.push_back(pool.refcount(p));
    put_array(message_, refs);
  }
  world.broadcast(&message_, 0);
  const std::vector<int64_t> bad = world.all_gather(std::vector<int64_t>(tables.size(), 0));
  for (int r = 1; r < world.size(); ++r) {
    for (size_t k = 0; k < tables.size(); ++k) {
      if (bad[static_cast<size_t>(r) * tables.size() + k] == 0 || !verdicts[k].is_ok()) continue;
      verdicts[k] = Status(StatusCode::kDataLoss,
                           std::string(kKvIntegrityViolation) + ": on rank " + std::to_string(r) + " of " +
                               std::to_string(world.size()) +
                               ": this request's KV shard there failed its check (that rank's log names the page)");
    }
  }
}

void Runner::follower_check(PagePool& pool, size_t pos, FaultInjector* fault, int64_t step) {
  Communicator& world = *parallel_->world;
  std::vector<int32_t> head, per_table;
  if (!get_array(message_, &pos, &head) || head.size() != 3 || !get_array(message_, &pos, &per_table) ||
      per_table.size() % 4 != 0) {
    world.abort_group("a malformed integrity check message from the leader");
  }
  const size_t n = per_table.size() / 4;
  std::vector<BlockTable> tables(n);
  std::vector<int32_t> pages, tags, refs;
  for (size_t k = 0; k < n; ++k) {
    if (!get_array(message_, &pos, &pages) || !get_array(message_, &pos, &tags) || !get_array(message_, &pos, &refs) ||
        pages.size() != tags.size() || pages.size() != refs.size()) {
      world.abort_group("a malformed integrity check message from the leader");
    }
    for (size_t i = 0; i < pages.size(); ++i) {
      check_page(pool, pages[i]);
      tables[k].append(PageId{pages[i]}, static_cast<uint32_t>(tags[i]));
      pool.mirror_page(PageId{pages[i]}, static_cast<uint32_t>(tags[i]), refs[i]);
    }
    tables[k].num_tokens = per_table[4 * k + 1];
  }
  if (pos != message_.size()) world.abort_group("a malformed integrity check message from the leader");
  if (fault != nullptr) {
    std::vector<FaultTarget> targets(n);
    for (size_t k = 0; k < n; ++k) {
      targets[k].request_id = static_cast<uint32_t>(per_table[4 * k + 2]) |
                              static_cast<uint64_t>(static_cast<uint32_t>(per_table[4 * k + 3])) << 32;
      targets[k].table = &tables[k];
    }
    RadixCache unused(pool.layout().page_size);  // a bit flip touches bytes only
    fault->maybe_inject(step, pool, unused, targets);
  }
  if (!follower_tracker_) follower_tracker_ = std::make_unique<TagTracker>();
  follower_tracker_->set_policy(KvIntegrityPolicy{static_cast<KvIntegrityMode>(head[0]), head[1], head[2]});
  std::vector<const BlockTable*> views(n);
  std::vector<IntegrityOverride> overrides(n);
  for (size_t k = 0; k < n; ++k) {
    views[k] = &tables[k];
    overrides[k] = static_cast<IntegrityOverride>(per_table[4 * k]);
  }
  std::vector<Status> verdicts(n, Status::ok());
  follower_tracker_->verify_batch(pool, views, overrides, verdicts);
  std::vector<int64_t> bad(n, 0);
  for (size_t k = 0; k < n; ++k) {
    if (verdicts[k].is_ok()) continue;
    bad[k] = 1;
    std::fprintf(stderr, "densa: rank %d: %s\n", world.world_rank(), verdicts[k].message().c_str());
  }
  world.all_gather(bad);
}

void Runner::follow(PagePool& pool, FaultInjector* fault) {
  CHECK(parallel_ != nullptr && parallel_->world != nullptr && !parallel_->leader()) << "follow() is a follower's";
  CHECK(fault == nullptr || fault->fault() == KvFault::kBitFlip) << "a follower's pages take only bit flips";
  Communicator& world = *parallel_->world;
  for (int64_t step = 0;; ++step) {
    world.broadcast(&message_, 0, /*wait_forever=*/true);
    int32_t kind = 0;
    if (message_.size() < sizeof(kind)) world.abort_group("a batch message of " + std::to_string(message_.size()) + " bytes");
    std::memcpy(&kind, message_.data(), sizeof(kind));
    if (kind == static_cast<int32_t>(BatchMessage::kRelease)) return;
    size_t pos = sizeof(kind);
    if (kind == static_cast<int32_t>(BatchMessage::kCheck)) {
      follower_check(pool, pos, fault, step);
      continue;
    }
    if (kind == static_cast<int32_t>(BatchMessage::kCommand)) {
      const std::span<const uint8_t> payload(message_.data() + pos, message_.size() - pos);
      std::string reply = command_handler_ ? command_handler_(payload, pool)
                                           : "no command handler on rank " + std::to_string(world.world_rank());
      gather_strings(reply);
      continue;
    }
    if (kind != static_cast<int32_t>(BatchMessage::kBatch) || !get_array(message_, &pos, &tokens_) ||
        !get_array(message_, &pos, &positions_) || !get_array(message_, &pos, &seq_idx_) ||
        !get_array(message_, &pos, &block_table_) || !get_array(message_, &pos, &block_offsets_) ||
        !get_array(message_, &pos, &logit_rows_) || !get_array(message_, &pos, &stats_flag_) ||
        stats_flag_.size() != 1 || pos != message_.size() || positions_.size() != tokens_.size() ||
        seq_idx_.size() != tokens_.size()) {
      world.abort_group("a malformed batch message from the leader");
    }
    for (int32_t p : block_table_) check_page(pool, p);
    const KvView kv = batch_view(pool);
    for (int32_t r : logit_rows_) {
      if (r < 0 || static_cast<size_t>(r) >= tokens_.size()) world.abort_group("a logit row outside the batch");
    }
    // A vocabulary-parallel lm_head: this rank's slice of the logits takes part in the sum. A
    // whole one: no logits here, but the leader's logit rows, so the last layer runs the same
    // rows (and collectives) on every rank.
    const int32_t vocab = weights_.config.vocab_size;
    if (weights_.lm_head.rows != vocab) {
      logits_.resize(logit_rows_.size() * static_cast<size_t>(vocab));
      forward(weights_, ForwardBatch{tokens_, positions_, seq_idx_, logit_rows_}, kv, scratch_, threads_, logits_.data());
    } else {
      forward(weights_, ForwardBatch{tokens_, positions_, seq_idx_, logit_rows_}, kv, scratch_, threads_, nullptr);
    }
    ++batches_;
    if (stats_flag_[0] != 0) gather_stats();
  }
}

void Runner::gather_stats() {
  Communicator& world = *parallel_->world;
  const double comm = parallel_->busy_seconds();
  const std::vector<int64_t> all = world.all_gather(std::vector<int64_t>{
      resident_bytes(), weights_.weight_bytes(), static_cast<int64_t>(comm * 1e6), batches_});
  rank_stats_.assign(static_cast<size_t>(world.size()), RankStats{});
  for (int r = 0; r < world.size(); ++r) {
    const int64_t* v = all.data() + static_cast<size_t>(r) * 4;
    rank_stats_[static_cast<size_t>(r)] = RankStats{r, v[0], v[1], static_cast<double>(v[2]) / 1e6, v[3]};
  }
}

std::vector<std::string> Runner::gather_strings(const std::string& mine) {
  Communicator& world = *parallel_->world;
  const std::vector<int64_t> lengths = world.all_gather(static_cast<int64_t>(mine.size()));
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  const size_t words = static_cast<size_t>((longest + 7) / 8);
  std::vector<int64_t> packed(words, 0);
  if (!mine.empty()) std::memcpy(packed.data(), mine.data(), mine.size());
  const std::vector<int64_t> all = words == 0 ? std::vector<int64_t>() : world.all_gather(packed);
  std::vector<std::string> out(lengths.size());
  for (size_t r = 0; r < lengths.size(); ++r) {
    out[r].assign(reinterpret_cast<const char*>(all.data() + r * words), static_cast<size_t>(lengths[r]));
  }
  return out;
}

std::vector<std::string> Runner::command_followers(std::span<const uint8_t> payload) {
  if (!spans_ranks()) return {};
  CHECK(parallel_->leader()) << "command_followers() is the leader's";
  start_message(message_, BatchMessage::kCommand);
  message_.insert(message_.end(), payload.begin(), payload.end());
  parallel_->world->broadcast(&message_, 0);
  std::vector<std::string> replies = gather_strings("");
  replies.erase(replies.begin());
  return replies;
}

void Runner::release_followers() {
  if (parallel_ == nullptr || !parallel_->spans_ranks() || !parallel_->leader()) return;
  start_message(message_, BatchMessage::kRelease);
  parallel_->world->broadcast(&message_, 0);
}

void Runner::check_integrity(const StepPlan& plan, std::span<Request* const> requests, PagePool& pool,
                             StepResult& result) {
  const size_t num_chunks = plan.chunks.size();
  bool reads_cached = false;
  bool any_forced = false;  // a request asked for the check whatever the tracker's policy
  for (size_t k = 0; k < num_chunks; ++k) {
    reads_cached = reads_cached || plan.chunks[k].begin > 0;
    any_forced = any_forced || requests[k]->params.kv_integrity == true;
  }
  if (tracker_ != nullptr && reads_cached && (any_forced || tracker_->active())) {
    const Clock::time_point check_begin = Clock::now();  // two clock reads, only when checking
    std::vector<const BlockTable*> tables(num_chunks);
    std::vector<IntegrityOverride> overrides(num_chunks, IntegrityOverride::kDefault);
    for (size_t k = 0; k < num_chunks; ++k) {
      tables[k] = &requests[k]->table;
      const std::optional<bool> o = requests[k]->params.kv_integrity;
      if (o) overrides[k] = *o ? IntegrityOverride::kOn : IntegrityOverride::kOff;
    }
    std::vector<Status> verdicts(num_chunks, Status::ok());
    tracker_->verify_batch(pool, tables, overrides, verdicts);
    if (spans_ranks()) {
      if (const std::optional<KvIntegrityPolicy> pol = tracker_->policy_for_followers()) {
        check_on_followers(pool, tables, overrides, requests, *pol, verdicts);
      }
    }
    for (size_t k = 0; k < num_chunks; ++k) result.outcomes[k].error = verdicts[k];
    result.integrity_check_us = std::chrono::duration<double, std::micro>(Clock::now() - check_begin).count();
  }
}

int32_t Runner::assemble_batch(const StepPlan& plan, std::span<Request* const> requests, const PagePool& pool,
                               std::span<const ChunkOutcome> outcomes) {
  tokens_.clear();
  positions_.clear();
  seq_idx_.clear();
  logit_rows_.clear();
  logit_chunk_.clear();
  block_table_.clear();
  block_offsets_.assign(1, 0);
  int32_t num_seqs = 0;
  for (size_t k = 0; k < plan.chunks.size(); ++k) {
    if (!outcomes[k].error.is_ok()) continue;
    const ScheduledChunk& c = plan.chunks[k];
    const Request& r = *requests[k];
    CHECK(r.id == c.id && c.begin + c.num_tokens <= r.num_tokens()) << "chunk / request mismatch";
    CHECK(r.table.capacity_tokens(pool.layout().page_size) >= c.begin + c.num_tokens)
        << "request " << r.id << " lacks pages for its chunk";
    for (int32_t t = c.begin; t < c.begin + c.num_tokens; ++t) {
      tokens_.push_back(r.tokens[t]);
      positions_.push_back(t);
      seq_idx_.push_back(num_seqs);
    }
    if (c.sample) {
      logit_rows_.push_back(static_cast<int32_t>(tokens_.size()) - 1);
      logit_chunk_.push_back(static_cast<int32_t>(k));
    }
    for (PageId p : r.table.pages) block_table_.push_back(p.value);
    block_offsets_.push_back(static_cast<int32_t>(block_table_.size()));
    ++num_seqs;
  }
  return num_seqs;
}

void Runner::send_batch() {
  start_message(message_, BatchMessage::kBatch);
  put_array(message_, tokens_);
  put_array(message_, positions_);
  put_array(message_, seq_idx_);
  put_array(message_, block_table_);
  put_array(message_, block_offsets_);
  put_array(message_, logit_rows_);
  const Clock::time_point now = Clock::now();
  stats_flag_.assign(1, now - last_stats_ >= std::chrono::seconds(1) ? 1 : 0);
  if (stats_flag_[0] != 0) last_stats_ = now;
  put_array(message_, stats_flag_);
  parallel_->world->broadcast(&message_, 0);
}

void Runner::forward_batch(PagePool& pool) {
  const int32_t vocab = weights_.config.vocab_size;
  logits_.resize(logit_rows_.size() * static_cast<size_t>(vocab));
  const KvView kv = batch_view(pool);
  if (spans_ranks()) send_batch();
  const Clock::time_point forward_begin = routing_ != nullptr ? Clock::now() : Clock::time_point{};
  scratch_.time_experts = routing_ != nullptr;
  forward(weights_, ForwardBatch{tokens_, positions_, seq_idx_, logit_rows_}, kv, scratch_, threads_,
          logits_.data());
  ++batches_;
  if (spans_ranks() && stats_flag_[0] != 0) gather_stats();
  if (routing_ != nullptr) {
    const double forward_s = std::chrono::duration<double>(Clock::now() - forward_begin).count();
    routing_->record_step(scratch_.selected_experts, static_cast<int64_t>(tokens_.size()), scratch_.expert_seconds,
                          forward_s);
  }
}

void Runner::fill_constraint_masks(std::span<Request* const> requests) {
  // Constrained rows' masks first, in parallel: each depends only on its own request's
  // matcher (the compiled grammars they share are immutable), so a batch of constrained
  // requests costs its slowest masks, not their sum, and no mask depends on the batch.
  const size_t words = (static_cast<size_t>(weights_.config.vocab_size) + 63) / 64;
  mask_row_.assign(logit_rows_.size(), -1);
  std::vector<TokenConstraint*> constrained;
  bool distinct = true;
  for (size_t j = 0; j < logit_rows_.size(); ++j) {
    TokenConstraint* c = requests[logit_chunk_[j]]->params.constraint.get();
    if (c == nullptr) continue;
    distinct = distinct && std::find(constrained.begin(), constrained.end(), c) == constrained.end();
    mask_row_[j] = static_cast<int32_t>(constrained.size());
    constrained.push_back(c);
  }
  mask_.assign(constrained.size() * words, 0);
  auto fill = [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k)
      constrained[static_cast<size_t>(k)]->fill_allowed(std::span<uint64_t>(mask_.data() + k * words, words));
  };
  // (A request with two logit rows in one step would have its matcher read twice at once.)
  if (distinct && constrained.size() > 1 && threads_ != nullptr)
    threads_->parallel_for_dynamic(static_cast<int64_t>(constrained.size()), fill);
  else
    fill(0, static_cast<int64_t>(constrained.size()));
}

void Runner::sample_rows(std::span<Request* const> requests, int32_t num_seqs, StepResult& result) {
  const int32_t vocab = weights_.config.vocab_size;
  const size_t words = (static_cast<size_t>(vocab) + 63) / 64;
  for (size_t j = 0; j < logit_rows_.size(); ++j) {
    const std::span<const float> logits_row(logits_.data() + j * vocab, static_cast<size_t>(vocab));
    Request& r = *requests[logit_chunk_[j]];
    // Refuse, never scrub: a NaN or inf logit means the forward pass went wrong for this row
    // (bad weights, an overflow, KV that is not what it should be). Sampling around it would
    // hand the client a token drawn from garbage; the request fails instead, naming the batch
    // it ran in, and the other rows of the batch (checked on their own) go on.
    if (const NonFinite bad = count_non_finite(logits_row); bad.first >= 0) {
      ChunkOutcome& o = result.outcomes[logit_chunk_[j]];
      o.nonfinite_logits = true;
      o.error = internal_error(
          "non-finite logits: " + std::to_string(bad.nan) + " NaN and " + std::to_string(bad.inf) + " inf of " +
          std::to_string(vocab) + " (first at token " + std::to_string(bad.first) + ") after " +
          std::to_string(r.num_generated()) + " generated tokens, in a batch of " + std::to_string(num_seqs) +
          " sequences, " + std::to_string(tokens_.size()) + " tokens and " + std::to_string(logit_rows_.size()) +
          " logit rows; the request is refused rather than sampled");
      continue;
    }
    std::span<const float> row = logits_row;
    if (r.params.constraint != nullptr) {
      // Masked sampling: the forbidden tokens' logits become -inf in a copy, so sampling,
      // logprobs and the seed's draws see only what the grammar allows.
      const std::span<const uint64_t> mask(mask_.data() + static_cast<size_t>(mask_row_[j]) * words, words);
      masked_.resize(static_cast<size_t>(vocab));
      if (apply_token_mask(logits_row, mask, masked_) == 0) {
        result.outcomes[logit_chunk_[j]].error = internal_error(
            "the request's output constraint allows no next token after " + std::to_string(r.num_generated()) +
            " generated tokens");
        continue;
      }
      row = masked_;
    }
    SampledToken s;
    s.token = r.sampler.sample(row);
    if (r.params.constraint != nullptr) {
      if (Status st = r.params.constraint->accept(s.token); !st.is_ok()) {
        result.outcomes[logit_chunk_[j]].error = st;
        continue;
      }
    }
    if (r.params.num_top_logprobs >= 0) {
      s.logprob = token_logprob(row, s.token);
      s.top_logprobs = top_logprobs(row, r.params.num_top_logprobs);
    }
    result.outcomes[logit_chunk_[j]].sampled = std::move(s);
  }
}

StepResult Runner::run(const StepPlan& plan, std::span<Request* const> requests, PagePool& pool) {
  const size_t num_chunks = plan.chunks.size();
  CHECK(requests.size() == num_chunks) << "one request per chunk";
  StepResult result;
  result.outcomes.resize(num_chunks);
  // The integrity seam: before a batch that reads KV written by earlier steps.
  check_integrity(plan, requests, pool, result);
  const int32_t num_seqs = assemble_batch(plan, requests, pool, result.outcomes);
  if (tokens_.empty()) return result;
  forward_batch(pool);
  fill_constraint_masks(requests);
  sample_rows(requests, num_seqs, result);
  return result;
}

}  // namespace densa
