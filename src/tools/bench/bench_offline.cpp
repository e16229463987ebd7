#include "tools/bench/bench_offline.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <thread>
#include <limits>
#include <numeric>

#include <nlohmann/json.hpp>

#include "core/cpu_features.h"
#include "engine/engine.h"
#include "exec/runner.h"
#include "kernels/matmul.h"
#include "kv/contiguous_kv_cache.h"
#include "model/forward.h"
#include "quant/quantize_matrix.h"

namespace densa::bench {
namespace {

using Clock = std::chrono::steady_clock;

double process_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Random ids in [3, vocab) (skips the usual unk/bos/eos), BOS first.
std::vector<TokenId> random_prompt(const ModelConfig& c, int len, uint64_t& state) {
  std::vector<TokenId> p(static_cast<size_t>(len));
  p[0] = c.bos_token_id;
  const uint64_t span = c.vocab_size > 3 ? static_cast<uint64_t>(c.vocab_size - 3) : 1;
  for (int i = 1; i < len; ++i) p[i] = static_cast<TokenId>(3 + splitmix64(state) % span);
  return p;
}

// Bytes a matrix occupies in memory as stored, scales included.
int64_t matrix_bytes(const WeightView& v) { return v.empty() ? 0 : v.bytes() + v.scale_bytes(); }

// Bytes of routed expert e of a layer; 0 in a dense layer (DeepSeek-V3 / GLM's leading
// layers have no experts).
int64_t expert_bytes(const LayerWeights& l, size_t e) {
  if (e >= l.expert_gate.size()) return 0;
  return matrix_bytes(l.expert_gate[e]) + matrix_bytes(l.expert_up[e]) + matrix_bytes(l.expert_down[e]);
}

// Weight bytes a decode step reads besides the routed experts: attention (MLA: its
// projections, and kv_b_proj as the absorbed products read it: split in fp32 where the kernels
// run, as stored otherwise), dense FFN, router, shared expert, norms, lm_head, and the
// embedding rows of `batch` tokens.
int64_t fixed_step_bytes(const ModelWeights& w, int batch) {
  const ModelConfig& c = w.config;
  int64_t n = matrix_bytes(w.lm_head) + static_cast<int64_t>(w.final_norm.size()) * 4;
  n += batch * (w.tok_embeddings.rows > 0 ? matrix_bytes(w.tok_embeddings) / w.tok_embeddings.rows : 0);
  for (const LayerWeights& l : w.layers) {
    for (const WeightView* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down, &l.router, &l.q_a, &l.q_b,
                                &l.kv_a, &l.shared_gate, &l.shared_up, &l.shared_down}) {
      n += matrix_bytes(*m);
    }
    n += l.mla_uv_t.empty() ? matrix_bytes(l.kv_b) : matrix_bytes(l.mla_uk) + matrix_bytes(l.mla_uv_t);
    n += 2 * int64_t{c.hidden_size} * 4;
  }
  return n;
}

int64_t all_weight_bytes(const ModelWeights& w) {
  int64_t n = fixed_step_bytes(w, 0) + matrix_bytes(w.tok_embeddings);
  for (const LayerWeights& l : w.layers) {
    for (size_t e = 0; e < l.expert_gate.size(); ++e) n += expert_bytes(l, e);
  }
  return n;
}

// KV bytes of one token, all layers, dynamic FP8 scales included: a one-token page of the
// runtime's layout (K and V per KV head, or MLA's latent row).
int64_t kv_token_bytes(const ModelConfig& c, DType kv) { return kv_layout_for(c, 1, kv).page_bytes(); }

// Replays every sequence (prompt + generated tokens fed back during decode) through
// model::forward and returns, per decode step and layer, how many distinct experts the batch
// routed to ([steps][layers]). Step j feeds generated token j at position prompt_len + j.
std::vector<std::vector<int>> routed_experts_per_step(const ModelWeights& w,
                                                      const std::vector<std::vector<TokenId>>& prompts,
                                                      const std::vector<std::vector<TokenId>>& generated,
                                                      DType kv_dtype, int num_threads) {
  const ModelConfig& c = w.config;
  const int b = static_cast<int>(prompts.size());
  const int p = static_cast<int>(prompts[0].size());
  int steps = std::numeric_limits<int>::max();
  for (const auto& g : generated) steps = std::min(steps, static_cast<int>(g.size()) - 1);
  steps = std::max(steps, 0);
  const int len = p + steps;
  const int top_k = c.num_experts_per_tok;
  // used[step][layer][expert]
  std::vector<std::vector<std::vector<uint8_t>>> used(
      static_cast<size_t>(steps),
      std::vector<std::vector<uint8_t>>(static_cast<size_t>(c.num_layers), std::vector<uint8_t>(c.num_experts, 0)));
  ThreadPool pool(num_threads);
  ForwardScratch scratch;
  scratch.full_last_layer = true;  // the last layer's routing for every token, not only logit rows
  const int group = std::max(1, 4096 / std::max(len, 1));
  for (int first = 0; first < b; first += group) {
    const int n_seq = std::min(group, b - first);
    // The runtime's layout (MLA: one latent row per token per layer), one page per sequence.
    const ContiguousKvCache cache(kv_layout_for(c, len, kv_dtype), n_seq);
    std::vector<TokenId> tokens;
    std::vector<int32_t> positions, seq_idx;
    for (int s = 0; s < n_seq; ++s) {
      for (int i = 0; i < len; ++i) {
        tokens.push_back(i < p ? prompts[first + s][i] : generated[first + s][i - p]);
        positions.push_back(i);
        seq_idx.push_back(s);
      }
    }
    forward(w, ForwardBatch{tokens, positions, seq_idx, {}}, cache.view(), scratch, &pool, nullptr);
    const int64_t n = static_cast<int64_t>(tokens.size());
    for (int l = 0; l < c.num_layers; ++l) {
      for (int s = 0; s < n_seq; ++s) {
        for (int j = 0; j < steps; ++j) {
          const int64_t t = static_cast<int64_t>(s) * len + p + j;
          for (int k = 0; k < top_k; ++k) {
            const int e = scratch.selected_experts[(static_cast<int64_t>(l) * n + t) * top_k + k];
            if (e >= 0) used[j][l][e] = 1;  // -1: a dense layer (DeepSeek-V3 / GLM's first layers)
          }
        }
      }
    }
  }
  std::vector<std::vector<int>> counts(static_cast<size_t>(steps), std::vector<int>(static_cast<size_t>(c.num_layers)));
  for (int j = 0; j < steps; ++j) {
    for (int l = 0; l < c.num_layers; ++l) counts[j][l] = std::accumulate(used[j][l].begin(), used[j][l].end(), 0);
  }
  return counts;
}

// The bytes a decode step reads (weights, KV) and the bandwidth they imply, over the steps of
// the last repeat, whose prompts and generated tokens are given.
void fill_step_bytes(const ModelWeights& w, const BenchOfflineConfig& cfg,
                     const std::vector<std::vector<TokenId>>& prompts,
                     const std::vector<std::vector<TokenId>>& generated, BenchOfflineReport& rep) {
  const ModelConfig& c = w.config;
  const int steps = cfg.gen_len - 1;
  const double fixed = static_cast<double>(fixed_step_bytes(w, cfg.batch));
  double experts = 0, expert_layers = 0;
  if (c.is_moe() && steps > 0) {
    if (cfg.batch == 1 && cfg.parallel == nullptr) {
      // One token per step routes to exactly top_k distinct experts in every layer.
      for (const LayerWeights& l : w.layers) experts += static_cast<double>(expert_bytes(l, 0)) * c.num_experts_per_tok;
      rep.experts_per_layer_step = c.num_experts_per_tok;
      rep.routing_measured = true;
    } else if (cfg.routing_replay && cfg.parallel == nullptr) {
      const std::vector<std::vector<int>> counts =
          routed_experts_per_step(w, prompts, generated, cfg.kv_dtype, cfg.num_threads);
      for (const auto& step : counts) {
        for (size_t l = 0; l < step.size(); ++l) {
          experts += static_cast<double>(step[l]) * static_cast<double>(expert_bytes(w.layers[l], 0));
          expert_layers += step[l];
        }
      }
      experts /= static_cast<double>(counts.size());
      int moe_layers = 0;
      for (int l = 0; l < c.num_layers; ++l) moe_layers += c.is_moe_layer(l) ? 1 : 0;
      rep.experts_per_layer_step = expert_layers / static_cast<double>(counts.size()) / std::max(moe_layers, 1);
      rep.routing_measured = true;
    } else {
      // Every expert this process holds (all of them, unless expert parallel).
      int held = 0;
      for (const LayerWeights& l : w.layers) {
        for (size_t e = 0; e < l.expert_gate.size(); ++e) {
          experts += static_cast<double>(expert_bytes(l, e));
          held += l.expert_gate[e].empty() ? 0 : 1;
        }
      }
      int moe_layers = 0;
      for (int l = 0; l < c.num_layers; ++l) moe_layers += c.is_moe_layer(l) ? 1 : 0;
      rep.experts_per_layer_step = static_cast<double>(held) / std::max(moe_layers, 1);
    }
  }
  rep.weight_bytes_per_step = fixed + experts;
  if (steps > 0) {
    // Step j attends over prompt_len + j + 1 positions of every sequence.
    const double avg_ctx = cfg.prompt_len + 0.5 * (steps - 1) + 1;
    rep.kv_bytes_per_step = avg_ctx * cfg.batch * static_cast<double>(kv_token_bytes(c, cfg.kv_dtype));
  }
  if (rep.decode_step_ms > 0) {
    rep.weight_gbs = rep.weight_bytes_per_step / (rep.decode_step_ms * 1e-3) / 1e9;
    rep.total_gbs = (rep.weight_bytes_per_step + rep.kv_bytes_per_step) / (rep.decode_step_ms * 1e-3) / 1e9;
  }
}

}  // namespace

EngineConfig bench_offline_engine_config(const ModelWeights& w, const BenchOfflineConfig& cfg) {
  EngineConfig ec;
  ec.kv_dtype = cfg.kv_dtype;
  ec.num_threads = cfg.num_threads;
  ec.page_size = cfg.page_size;
  ec.enable_prefix_cache = false;
  ec.max_running_requests = cfg.batch;
  ec.max_waiting_requests = std::max(cfg.batch, 1024);
  const int64_t all_prompt = int64_t{cfg.batch} * cfg.prompt_len;
  ec.max_step_tokens = cfg.max_step_tokens > 0 ? cfg.max_step_tokens
                                               : static_cast<int>(std::clamp<int64_t>(all_prompt, 1024, 16384));
  ec.chunked_prefill_size = std::min(cfg.prompt_len, ec.max_step_tokens);
  const int64_t pages_per_seq = (cfg.prompt_len + cfg.gen_len + ec.page_size - 1) / ec.page_size + 1;
  ec.kv_cache_bytes = (cfg.batch * pages_per_seq + 4) * ec.page_size * kv_token_bytes(w.config, cfg.kv_dtype);
  ec.parallel = cfg.parallel;
  return ec;
}

Result<BenchOfflineReport> run_bench_offline(const ModelWeights& w, const BenchOfflineConfig& cfg) {
  const ModelConfig& c = w.config;
  if (cfg.batch < 1 || cfg.prompt_len < 1 || cfg.gen_len < 1 || cfg.repeats < 1) {
    return invalid_argument("--batch, --prompt-len, --gen-len and --repeats must be >= 1");
  }
  if (cfg.prompt_len + cfg.gen_len > c.max_position_embeddings) {
    return out_of_range("--prompt-len + --gen-len = " + std::to_string(cfg.prompt_len + cfg.gen_len) +
                        " exceeds the model context " + std::to_string(c.max_position_embeddings));
  }
  const EngineConfig ec = bench_offline_engine_config(w, cfg);
  const int64_t all_prompt = int64_t{cfg.batch} * cfg.prompt_len;
  DENSA_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::create(w, ec));
  auto comm_busy = [&] { return cfg.parallel != nullptr ? cfg.parallel->busy_seconds() : 0.0; };

  BenchOfflineReport rep;
  rep.config = cfg;
  rep.model = w.source;
  rep.kernels = std::string(cpu_isa_name(cpu_isa())) + (matmul_fp8_on_amx() ? "+amx" : "");
  rep.bf16_activations = matmul_bf16_on_amx(w.half_float_amx) ? "bf16" : "f32";
  rep.weight_dtype = std::string(weight_view_format_name(w.layers.empty() ? w.lm_head : w.layers[0].wq));
  rep.lm_head_dtype = std::string(weight_view_format_name(w.lm_head));
  rep.total_params = w.num_params();
  rep.prompt_tokens = all_prompt;
  rep.weight_bytes_all = all_weight_bytes(w);
  uint64_t state = cfg.seed * 0x2545f4914f6cdd1dull + 1;
  const int threads =
      cfg.num_threads > 0 ? cfg.num_threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  rep.num_threads = threads;

  // One request through the whole path first (thread pool start, page faults of the mapping).
  auto run_once = [&](int batch, int plen, int glen, std::vector<std::vector<TokenId>>& prompts,
                      std::vector<std::vector<TokenId>>& generated) -> Result<BenchOfflineRun> {
    prompts.clear();
    generated.assign(static_cast<size_t>(batch), {});
    for (int r = 0; r < batch; ++r) prompts.push_back(random_prompt(c, plen, state));
    std::vector<std::shared_ptr<RequestStream>> streams;
    const double cpu0 = process_cpu_s();
    const double comm0 = comm_busy();
    const Clock::time_point t0 = Clock::now();
    for (int r = 0; r < batch; ++r) {
      GenerateRequest req;
      req.prompt = prompts[r];
      req.sampling.temperature = 0;
      req.max_new_tokens = glen;
      req.ignore_eos = true;
      DENSA_ASSIGN_OR_RETURN(std::shared_ptr<RequestStream> s, engine->submit(std::move(req)));
      streams.push_back(std::move(s));
    }
    std::vector<std::vector<Clock::time_point>> times(static_cast<size_t>(batch));
    for (int r = 0; r < batch; ++r) {
      while (true) {
        std::optional<TokenEvent> e = streams[r]->next(std::chrono::milliseconds(600000));
        if (!e) return unavailable("bench offline: no event for 10 minutes");
        if (e->finish == FinishReason::kError || e->finish == FinishReason::kAborted) {
          return internal_error("bench offline: request failed: " + e->error.message());
        }
        if (e->token) {
          generated[r].push_back(*e->token);
          times[r].push_back(e->time);
        }
        if (e->finish != FinishReason::kNone) break;
      }
    }
    BenchOfflineRun run;
    run.cpu_s = process_cpu_s() - cpu0;
    run.comm_s = comm_busy() - comm0;  // the engine thread's collectives; it idles once the last token is out
    Clock::time_point t1 = t0, t_end = t0;
    for (const auto& t : times) {
      if (t.empty()) return internal_error("bench offline: a request generated no token");
      t1 = std::max(t1, t.front());
      t_end = std::max(t_end, t.back());
      run.generated_tokens += static_cast<int64_t>(t.size());
    }
    for (const auto& t : times) {
      const int64_t after = std::count_if(t.begin(), t.end(), [&](Clock::time_point x) { return x > t1; });
      run.decode_tokens += after;
      run.decode_steps = std::max(run.decode_steps, after);
    }
    run.wall_s = seconds(t_end - t0);
    run.cpu_share = run.wall_s > 0 ? run.cpu_s / (run.wall_s * threads) : 0;
    run.prefill_s = seconds(t1 - t0);
    run.prefill_tok_s = run.prefill_s > 0 ? static_cast<double>(batch) * plen / run.prefill_s : 0;
    run.decode_s = seconds(t_end - t1);
    run.decode_tok_s = run.decode_s > 0 ? static_cast<double>(run.decode_tokens) / run.decode_s : 0;
    return run;
  };

  std::vector<std::vector<TokenId>> prompts, generated;
  DENSA_RETURN_IF_ERROR(run_once(1, std::min(cfg.prompt_len, 16), std::min(cfg.gen_len, 2), prompts, generated).status());
  std::vector<double> prefill, decode, step_ms, share, comm;
  for (int i = 0; i < cfg.repeats; ++i) {
    DENSA_ASSIGN_OR_RETURN(BenchOfflineRun run, run_once(cfg.batch, cfg.prompt_len, cfg.gen_len, prompts, generated));
    prefill.push_back(run.prefill_tok_s);
    share.push_back(run.cpu_share);
    comm.push_back(run.wall_s > 0 ? run.comm_s / run.wall_s : 0);
    if (run.decode_steps > 0) {
      decode.push_back(run.decode_tok_s);
      step_ms.push_back(1e3 * run.decode_s / static_cast<double>(run.decode_steps));
    }
    rep.runs.push_back(run);
  }
  engine->shutdown();
  rep.prefill_tok_s = median(prefill);
  rep.decode_tok_s = median(decode);
  rep.decode_step_ms = median(step_ms);
  rep.cpu_share = median(share);
  rep.comm_share = median(comm);
  rep.tp = w.parallel.tp;
  rep.ep = w.parallel.ep;

  fill_step_bytes(w, cfg, prompts, generated, rep);
  return rep;
}

std::string bench_offline_json(const BenchOfflineReport& r) {
  nlohmann::ordered_json j;
  const BenchOfflineConfig& c = r.config;
  j["model"] = r.model;
  j["weight_dtype"] = r.weight_dtype;
  j["lm_head_dtype"] = r.lm_head_dtype;
  j["kv_dtype"] = std::string(dtype_name(c.kv_dtype));
  j["total_params"] = r.total_params;
  j["batch"] = c.batch;
  j["prompt_len"] = c.prompt_len;
  j["gen_len"] = c.gen_len;
  j["repeats"] = c.repeats;
  j["threads"] = r.num_threads;
  j["kernels"] = r.kernels;
  j["bf16_activations"] = r.bf16_activations;
  j["page_size"] = r.config.page_size;
  j["cpu_share"] = r.cpu_share;
  j["tp"] = r.tp;
  j["ep"] = r.ep;
  j["comm_share"] = r.comm_share;
  j["prompt_tokens"] = r.prompt_tokens;
  j["prefill_tok_s"] = r.prefill_tok_s;
  j["decode_tok_s"] = r.decode_tok_s;
  j["decode_step_ms"] = r.decode_step_ms;
  j["weight_bytes_all"] = r.weight_bytes_all;
  j["weight_bytes_per_step"] = r.weight_bytes_per_step;
  j["experts_per_layer_step"] = r.experts_per_layer_step;
  j["routing_measured"] = r.routing_measured;
  j["kv_bytes_per_step"] = r.kv_bytes_per_step;
  j["weight_gbs"] = r.weight_gbs;
  j["total_gbs"] = r.total_gbs;
  j["runs"] = nlohmann::ordered_json::array();
  for (const BenchOfflineRun& run : r.runs) {
    j["runs"].push_back({{"prefill_s", run.prefill_s}, {"prefill_tok_s", run.prefill_tok_s},
                         {"decode_s", run.decode_s}, {"decode_tokens", run.decode_tokens},
                         {"decode_steps", run.decode_steps}, {"decode_tok_s", run.decode_tok_s},
                         {"generated_tokens", run.generated_tokens}, {"wall_s", run.wall_s},
                         {"cpu_s", run.cpu_s}, {"cpu_share", run.cpu_share}, {"comm_s", run.comm_s}});
  }
  return j.dump(2);
}

std::string bench_offline_summary(const BenchOfflineReport& r) {
  const BenchOfflineConfig& c = r.config;
  char buf[1024];
  std::snprintf(buf, sizeof buf,
                "model %s (%.1fM params, weights %s, lm_head %s, KV %s), batch %d, prompt %d, gen %d, %d repeats "
                "(median)\n"
                "prefill: %.1f tok/s\n"
                "decode:  %.2f tok/s aggregate, %.2f ms/step\n"
                "bytes per decode step: weights %.1f MB (all weights %.1f MB%s), KV %.1f MB\n"
                "achieved: weights %.2f GB/s, weights + KV %.2f GB/s\n"
                "CPU share: %.2f of %d threads' cores (process CPU time / (wall x threads)); kernels %s, BF16 / F16 "
                "matrices' x %s\n",
                r.model.c_str(), r.total_params / 1e6, r.weight_dtype.c_str(), r.lm_head_dtype.c_str(),
                std::string(dtype_name(c.kv_dtype)).c_str(), c.batch, c.prompt_len, c.gen_len, c.repeats,
                r.prefill_tok_s, r.decode_tok_s, r.decode_step_ms, r.weight_bytes_per_step / 1e6,
                r.weight_bytes_all / 1e6,
                r.experts_per_layer_step > 0
                    ? (", " + std::to_string(r.experts_per_layer_step).substr(0, 4) + " experts/layer/step" +
                       (r.routing_measured ? " routed" : " assumed")).c_str()
                    : "",
                r.kv_bytes_per_step / 1e6, r.weight_gbs, r.total_gbs, r.cpu_share, r.num_threads, r.kernels.c_str(),
                r.bf16_activations.c_str());
  std::string out = buf;
  if (r.tp * r.ep > 1) {
    std::snprintf(buf, sizeof buf,
                  "parallel: tp %d x ep %d ranks; rank 0 spent %.1f%% of the wall time in collectives; weights and "
                  "bytes above are rank 0's slice\n",
                  r.tp, r.ep, 100.0 * r.comm_share);
    out += buf;
  }
  return out;
}

}  // namespace densa::bench
