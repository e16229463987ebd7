// `densa serve`: the OpenAI-compatible HTTP server on one engine. SIGINT / SIGTERM stop it
// gracefully: no new connections, open streams end, the engine drains and shuts down.
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include "cli/command.h"
#include "cli/model_path.h"
#include "cli/parallel_options.h"
#include "cli/stop_signals.h"
#include "cli/weight_options.h"
#include "core/byte_size.h"
#include "core/process_memory.h"
#include "disagg/kv_wire.h"
#include "disagg/ucx_worker.h"
#include "engine/engine.h"
#include "model/model_loader.h"
#include "quality/canary.h"
#include "quality/kv_calibration.h"
#include "server/disagg_follower.h"
#include "server/http_server.h"
#include "server/kv_integrity_admin.h"
#include "server/metrics.h"

namespace densa::cli {
namespace {

struct ServeArgs {
  std::string model;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;
  std::string kv_cache_memory = "64MiB";
  std::string kv_dtype = "bf16";
  int page_size = 16;
  int max_running_requests = 64;
  int max_queue = 1024;
  int chunked_prefill_size = 256;
  int max_step_tokens = 1024;
  int threads = 0;
  bool no_prefix_cache = false;
  std::string kv_integrity = "off";
  bool routing_stats = false;
  std::string request_log;
  std::string canary;
  double canary_every_s = 60;
  double canary_max_kl = CanaryThresholds{}.max_kl;
  double canary_max_ppl_delta = CanaryThresholds{}.max_ppl_delta;
  int test_degrade_weights_bits = 0;
  bool test_allow_fault_injection = false;
  std::string served_model_name;
  std::string role = "both";
  int disagg_timeout_ms = 30000;
  int disagg_ucx_workers = 16;
  int disagg_ucx_idle_ms = 60000;
  std::string kv_scales = "dynamic";
  std::string chat_template;
  std::string tool_parser;
  std::string reasoning_parser;
  // Resource limits (server/README.md "Limits").
  std::string max_body_bytes = "16MiB";
  std::string max_header_bytes = "64KiB";
  double http_read_timeout_s = 10;
  double http_write_timeout_s = 10;
  int http_keep_alive_timeout_s = 2;
  int http_threads = 0;
  int64_t template_max_steps = jinja::RenderLimits{}.max_steps;
  std::string template_max_output_bytes = "16MiB";
  int64_t grammar_max_elements = static_cast<int64_t>(grammar::CompileLimits{}.max_elements);
  int64_t grammar_max_positions = static_cast<int64_t>(grammar::CompileLimits{}.max_positions);
  WeightArgs weights;
  ParallelArgs parallel;
};

Result<server::ServeRole> parse_role(const std::string& role) {
  if (role == "both") return server::ServeRole::kBoth;
  if (role == "prefill") return server::ServeRole::kPrefill;
  if (role == "decode") return server::ServeRole::kDecode;
  return invalid_argument("--role must be both, prefill or decode, not \"" + role + "\"");
}

// --kv-scales: dynamic (per-token scales beside the page) | calibrate[=FILE] (a calibration
// pass over FILE's text, or the built-in passage) | checkpoint (k_scale / v_scale tensors).
Result<std::optional<KvScales>> kv_scales_from_flag(const std::string& flag, const ModelWeights& weights, DType kv_dtype) {
  if (flag == "dynamic") return std::optional<KvScales>();
  if (kv_dtype != DType::kFP8E4M3) return invalid_argument("--kv-scales " + flag + " needs --kv-dtype fp8");
  if (flag == "checkpoint") {
    if (weights.config.is_mla()) {
      return invalid_argument("--kv-scales checkpoint: an MLA checkpoint carries no latent KV cache scales densa "
                              "reads; use --kv-scales calibrate[=FILE] or dynamic");
    }
    Result<std::optional<KvScales>> s = read_checkpoint_kv_scales(weights);
    if (!s.is_ok()) return s.status();
    if (!s->has_value()) return not_found("--kv-scales checkpoint: the model has no k_scale / v_scale tensors");
    return s;
  }
  if (flag == "calibrate" || flag.rfind("calibrate=", 0) == 0) {
    std::vector<TokenId> tokens;
    if (flag.size() > std::string("calibrate=").size() - 1 && flag != "calibrate") {
      const std::string file = flag.substr(std::string("calibrate=").size());
      std::ifstream in(file);
      if (!in) return not_found("--kv-scales: cannot read " + file);
      const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      tokens = weights.tokenizer->encode(text, true);
    }
    ThreadPool pool(0);
    KvCalibrationOptions opts;
    // Calibration only, never the checkpoint's scales: kv_scales_for_model prefers those.
    KvScales scales = tokens.empty()
                          ? calibrate_kv_scales(weights, weights.tokenizer->encode(std::string(kv_calibration_builtin_text()), true),
                                                opts, &pool)
                          : calibrate_kv_scales(weights, tokens, opts, &pool);
    return std::optional<KvScales>(std::move(scales));
  }
  return invalid_argument("--kv-scales must be dynamic, calibrate[=FILE] or checkpoint, not \"" + flag + "\"");
}

int fail(const std::string& message) {
  std::fprintf(stderr, "densa serve: %s\n", message.c_str());
  return 1;
}

// The byte-size limits of `serve` as parsed from their flags.
struct ServeLimits {
  int64_t max_body = 0;
  int64_t max_header = 0;
  int64_t template_out = 0;
};

// `*cfg` and `*limits` from the flags; 0, or 1 once the flag at fault is named on stderr.
int engine_config_from_args(const ServeArgs& a, EngineConfig* cfg, ServeLimits* limits) {
  Result<int64_t> kv_bytes = parse_byte_size(a.kv_cache_memory);
  if (!kv_bytes.is_ok()) return fail("--kv-cache-memory: " + kv_bytes.status().message());
  cfg->kv_cache_bytes = *kv_bytes;
  Result<int64_t> max_body = parse_byte_size(a.max_body_bytes);
  if (!max_body.is_ok()) return fail("--max-body-bytes: " + max_body.status().message());
  if (*max_body < 1) return fail("--max-body-bytes must be at least 1 byte");
  Result<int64_t> max_header = parse_byte_size(a.max_header_bytes);
  if (!max_header.is_ok()) return fail("--max-header-bytes: " + max_header.status().message());
  if (*max_header < 256) return fail("--max-header-bytes must be at least 256 bytes");
  Result<int64_t> template_out = parse_byte_size(a.template_max_output_bytes);
  if (!template_out.is_ok()) return fail("--template-max-output-bytes: " + template_out.status().message());
  if (*template_out < 1) return fail("--template-max-output-bytes must be at least 1 byte");
  std::optional<DType> kv_dtype = dtype_from_name(a.kv_dtype);
  if (!kv_dtype) return fail("--kv-dtype must be bf16, f32 or fp8, not \"" + a.kv_dtype + "\"");
  cfg->kv_dtype = *kv_dtype;
  cfg->page_size = a.page_size;
  cfg->max_running_requests = a.max_running_requests;
  cfg->max_waiting_requests = a.max_queue;
  cfg->chunked_prefill_size = a.chunked_prefill_size;
  cfg->max_step_tokens = a.max_step_tokens;
  cfg->num_threads = a.threads;
  cfg->enable_prefix_cache = !a.no_prefix_cache;
  cfg->routing_stats = a.routing_stats;
  limits->max_body = *max_body;
  limits->max_header = *max_header;
  limits->template_out = *template_out;
  Result<KvIntegrityPolicy> integrity = server::parse_kv_integrity_policy(a.kv_integrity);
  if (!integrity.is_ok()) return fail("--kv-integrity: " + integrity.status().message());
  cfg->kv_integrity = *integrity;  // always set, so POST /admin/kv-integrity can switch it
  return 0;
}

// With --tp / --ep: refuses what a parallel group cannot serve yet (calibrated KV scales, the
// canary, a disagg role whose transfers outlast --comm-timeout-ms) and an unknown role; 0, or 1
// once named on stderr.
int check_parallel_flags(const ServeArgs& a) {
  if (a.kv_scales != "dynamic" && a.kv_scales != "checkpoint") {
    return fail("--kv-scales " + a.kv_scales + " with --tp / --ep: calibration runs the whole model in one "
                "process; use checkpoint (each rank reads its own heads' scales) or dynamic");
  }
  if (!a.canary.empty()) return fail("--canary with --tp / --ep is not supported yet (the probe runs one process)");
  if (Result<server::ServeRole> r = parse_role(a.role); !r.is_ok()) return fail(r.status().message());
  if (a.role != "both" && a.parallel.comm_timeout_ms <= a.disagg_timeout_ms) {
    // A follower's share of a transfer runs inside a collective the leader waits on.
    return fail("--role " + a.role + " with --tp / --ep needs --comm-timeout-ms (" +
                std::to_string(a.parallel.comm_timeout_ms) + ") above --disagg-timeout-ms (" +
                std::to_string(a.disagg_timeout_ms) + ")");
  }
  return 0;
}

// A follower rank (world rank `world_rank`): its slice of every batch rank 0 runs, until rank
// 0's engine shuts down; as a prefill or decode worker it also moves its own KV shard
// (server/disagg_follower.h). Returns the process's exit code.
int run_follower(const ServeArgs& a, int world_rank, const ModelWeights& weights, EngineConfig& cfg) {
  std::unique_ptr<disagg::UcxContext> ucx;
  std::unique_ptr<server::DisaggFollower> disagg;
  if (a.role != "both") {
    Result<std::unique_ptr<disagg::UcxContext>> u = disagg::UcxContext::create();
    if (!u.is_ok()) return fail(u.status().message());
    ucx = std::move(u).value();
    disagg = std::make_unique<server::DisaggFollower>(
        *ucx, world_rank, cfg.kv_scales ? cfg.kv_scales->values : std::vector<float>());
    cfg.follower_command = [&disagg](std::span<const uint8_t> payload, PagePool& pool) {
      return disagg->handle(payload, pool);
    };
  }
  if (Status s = run_engine_follower(weights, cfg); !s.is_ok()) return fail("rank follower: " + s.message());
  return 0;
}

// The HTTP server's configuration from the flags, for `role` with `ucx` (null when colocated).
server::HttpServerConfig http_config_from_args(const ServeArgs& a, const std::string& path, server::ServeRole role,
                                               const disagg::UcxContext* ucx, const ParallelSetup& group,
                                               const ServeLimits& limits) {
  server::HttpServerConfig scfg;
  scfg.host = a.host;
  scfg.port = a.port;
  scfg.api_key = a.api_key;
  scfg.served_model_name =
      a.served_model_name.empty() ? std::filesystem::path(path).filename().replace_extension().string() : a.served_model_name;
  scfg.page_size = a.page_size;
  scfg.num_http_threads = a.http_threads > 0 ? a.http_threads : std::min(a.max_running_requests + 16, 512);
  scfg.request_log_path = a.request_log;
  scfg.role = role;
  scfg.ucx = ucx;
  scfg.disagg_timeout_ms = a.disagg_timeout_ms;
  scfg.disagg_ucx_workers = a.disagg_ucx_workers;
  scfg.disagg_ucx_idle_ms = a.disagg_ucx_idle_ms;
  scfg.disagg_group_size = group.active() ? group.comms.layout.world() : 1;
  scfg.chat = {a.chat_template, a.tool_parser, a.reasoning_parser, {}};
  scfg.max_body_bytes = static_cast<size_t>(limits.max_body);
  scfg.max_header_bytes = static_cast<size_t>(limits.max_header);
  scfg.chat.render_limits.max_steps = a.template_max_steps;
  scfg.chat.render_limits.max_output_bytes = static_cast<size_t>(limits.template_out);
  scfg.read_timeout_ms = static_cast<int>(a.http_read_timeout_s * 1000);
  scfg.write_timeout_ms = static_cast<int>(a.http_write_timeout_s * 1000);
  scfg.keep_alive_timeout_s = a.http_keep_alive_timeout_s;
  scfg.grammar.max_elements = static_cast<size_t>(a.grammar_max_elements);
  scfg.grammar.max_positions = static_cast<size_t>(a.grammar_max_positions);
  scfg.allow_fault_injection = a.test_allow_fault_injection;
  return scfg;
}

// The tokenizer and chat format the server resolved, on stderr.
void log_chat_format(const ModelWeights& weights, const server::ChatFormat& chat) {
  std::fprintf(stderr, "densa serve: tokenizer %s (%d tokens); chat template: %s; tool parser: %s; reasoning parser: %s\n",
               weights.tokenizer->kind().c_str(), weights.tokenizer->vocab_size(), chat.origin.c_str(),
               chat.tool_parser.empty() ? "none" : chat.tool_parser.c_str(),
               chat.reasoning_parser.empty() ? "none" : chat.reasoning_parser.c_str());
}

// Quality canary (quality/canary.h): the probe scored at the serving precision and on a BF16
// copy of the checkpoint this process holds (`*baseline_weights`), on its own low-priority thread
// (`*canary`), each reading reported to `http`'s metrics. Fails, starting nothing, when the
// probe, the memory for the copy or the copy itself is missing.
Status start_canary(const ServeArgs& a, const std::string& path, const ModelWeights& weights, DType kv_dtype,
                    server::HttpServer& http, std::unique_ptr<ModelWeights>* baseline_weights,
                    std::unique_ptr<CanaryThread>* canary) {
  Status ready = Status::ok();
  Result<std::vector<TokenId>> probe = load_canary_probe(weights, a.canary);
  if (!probe.is_ok()) ready = probe.status();
  if (ready.is_ok()) ready = check_canary_baseline_memory(weights);
  if (ready.is_ok()) {
    LoadOptions baseline_opts;
    baseline_opts.weight_dtype = DType::kBF16;
    // BF16 / F16 products with the served weights' arithmetic.
    baseline_opts.bf16_f32_activations = weights.half_float_amx == AmxUse::kOff;
    Result<ModelWeights> baseline = load_model(path, baseline_opts);
    if (baseline.is_ok()) *baseline_weights = std::make_unique<ModelWeights>(std::move(baseline).value());
    else ready = baseline.status();
  }
  if (!ready.is_ok()) return ready;
  server::Metrics& metrics = http.metrics();
  *canary = std::make_unique<CanaryThread>(
      CanaryPath{&weights, kv_dtype}, CanaryPath{baseline_weights->get(), DType::kBF16}, std::move(probe).value(),
      CanaryThresholds{a.canary_max_kl, a.canary_max_ppl_delta},
      std::chrono::milliseconds(static_cast<int64_t>(a.canary_every_s * 1000)),
      [&metrics, runs = int64_t{0}, was_degraded = false](const Result<CanaryReading>& r) mutable {
        if (!r.is_ok()) {
          std::fprintf(stderr, "densa serve: canary failed: %s\n", r.status().message().c_str());
          return;
        }
        metrics.set_quality({++runs, r->kl_mean, r->ppl_serving, r->ppl_baseline, r->ppl_delta_ratio, r->degraded});
        if (runs == 1 || r->degraded != was_degraded)
          std::fprintf(stderr, "densa serve: canary %s: KL %.4g nats, PPL %.4f vs baseline %.4f (%+.2f%%)\n",
                       r->degraded ? "DEGRADED" : "ok", r->kl_mean, r->ppl_serving, r->ppl_baseline,
                       100.0 * r->ppl_delta_ratio);
        was_degraded = r->degraded;
      });
  return Status::ok();
}

int run_serve(const ServeArgs& a) {
  const std::string path = a.model.empty() ? default_model_path() : a.model;
  EngineConfig cfg;
  ServeLimits limits;
  if (int rc = engine_config_from_args(a, &cfg, &limits); rc != 0) return rc;

  Result<LoadOptions> load_opts = load_options_from(a.weights);
  if (!load_opts.is_ok()) return fail(load_opts.status().message());
  // Tensor / expert parallel: every rank loads its slice; rank 0 serves, the others follow.
  Result<std::unique_ptr<ParallelSetup>> parallel = setup_parallel(a.parallel);
  if (!parallel.is_ok()) return fail(parallel.status().message());
  const ParallelSetup& group = **parallel;
  if (group.active()) {
    if (int rc = check_parallel_flags(a); rc != 0) return rc;
    load_opts->parallel = group.comms.layout;
    cfg.parallel = &group.comms;
  }
  Result<ModelWeights> loaded = load_model(path, load_opts.value());
  if (!loaded.is_ok()) return fail(loaded.status().message());
  if (a.test_degrade_weights_bits > 0) {
    if (Status s = degrade_weights_for_test(loaded.value(), a.test_degrade_weights_bits); !s.is_ok())
      return fail("--test-degrade-weights-bits: " + s.message());
    std::fprintf(stderr, "densa serve: TEST ONLY: weights rounded to %d bits per value\n", a.test_degrade_weights_bits);
  }
  const ModelWeights& weights = loaded.value();
  if (!weights.tokenizer) return fail(path + ": model has no tokenizer");
  std::fprintf(stderr, "densa serve: %s\n", weight_precision_line(weights).c_str());
  // Static FP8 KV scales: on every rank, each its own kv heads' (a follower's runner needs them).
  Result<std::optional<KvScales>> scales = kv_scales_from_flag(a.kv_scales, weights, cfg.kv_dtype);
  if (!scales.is_ok()) return fail("--kv-scales: " + scales.status().message());
  cfg.kv_scales = *scales;
  if (group.active()) {
    const ParallelLayout& l = group.comms.layout;
    std::fprintf(stderr, "densa serve: rank %d of %d (tp %d/%d, ep %d/%d): %s; weights %lld bytes as stored; RSS %lld MiB\n",
                 l.world_rank(), l.world(), l.tp_rank, l.tp, l.ep_rank, l.ep, weight_memory_line(weights).c_str(),
                 static_cast<long long>(weights.weight_bytes()), static_cast<long long>(resident_bytes() >> 20));
    if (!group.leader()) return run_follower(a, l.world_rank(), weights, cfg);
  } else {
    std::fprintf(stderr, "densa serve: %s\n", weight_memory_line(weights).c_str());
  }
  Result<server::ServeRole> role = parse_role(a.role);
  if (!role.is_ok()) return fail(role.status().message());
  const KvScaleMode scale_mode = kv_layout_for(weights.config, a.page_size, cfg.kv_dtype, cfg.kv_scales.has_value()).scale_mode;
  std::fprintf(stderr, "densa serve: %s\n",
               kv_cache_mode_line(cfg.kv_dtype, scale_mode, cfg.kv_scales ? &*cfg.kv_scales : nullptr).c_str());

  // Block the stop signals before any thread starts, so only the waiter below receives them.
  const sigset_t stop_signals = block_stop_signals();
  // After the mask: UCX starts its own threads, which must not take the stop signals.
  std::unique_ptr<disagg::UcxContext> ucx;
  if (*role != server::ServeRole::kBoth) {
    Result<std::unique_ptr<disagg::UcxContext>> u = disagg::UcxContext::create();
    if (!u.is_ok()) return fail(u.status().message());
    ucx = std::move(u).value();
  }

  Result<std::unique_ptr<Engine>> engine = Engine::create(weights, cfg);
  if (!engine.is_ok()) return fail("engine: " + engine.status().message());
  if (*role != server::ServeRole::kBoth) {
    // A prefill / decode worker moves a request's KV in one transfer, whose pages are indexed
    // by a narrower field than the pool's (disagg/kv_wire.h).
    const int64_t pool_tokens = int64_t{(*engine)->stats().kv_pages_total} * a.page_size;
    const int64_t longest = std::min<int64_t>(weights.config.max_position_embeddings, pool_tokens);
    if (Status s = disagg::check_transfer_page_index_width(longest, a.page_size); !s.is_ok()) {
      (*engine)->shutdown();
      return fail(s.message());
    }
  }

  const server::HttpServerConfig scfg = http_config_from_args(a, path, *role, ucx.get(), group, limits);
  server::HttpServer http(**engine, weights, scfg);
  if (Status s = http.bind(); !s.is_ok()) {
    (*engine)->shutdown();
    return fail(s.message());
  }
  log_chat_format(weights, http.chat_format());
  std::unique_ptr<ModelWeights> canary_baseline;
  std::unique_ptr<CanaryThread> canary;
  if (!a.canary.empty()) {
    if (Status ready = start_canary(a, path, weights, cfg.kv_dtype, http, &canary_baseline, &canary); !ready.is_ok()) {
      (*engine)->shutdown();
      return fail("--canary: " + ready.message());
    }
  }
  const EngineStats stats = (*engine)->stats();
  std::fprintf(stderr, "densa serve: model %s (%s), KV %d pages x %d tokens (%s), role %s, listening on http://%s:%d\n",
               scfg.served_model_name.c_str(), path.c_str(), stats.kv_pages_total, a.page_size, a.kv_dtype.c_str(),
               a.role.c_str(), a.host.c_str(), http.bound_port());

  // stop(): open streams end; run() returns once handlers have finished.
  run_until_stop_signal(stop_signals, "densa serve", [&] { http.run(); }, [&] { http.stop(); });
  if (canary) canary->stop();
  (*engine)->shutdown();
  std::fprintf(stderr, "densa serve: stopped\n");
  return 0;
}

// The model, where to listen, and the engine (KV cache, weights, parallelism, batching).
void add_engine_options(CLI::App* cmd, ServeArgs& a) {
  cmd->add_option("-m,--model", a.model, "GGUF file or Hugging Face directory (default: the MoE fixture in models/)");
  cmd->add_option("--host", a.host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", a.port, "port to listen on (0: any free port, named on the \"listening on\" line)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--api-key", a.api_key, "require 'Authorization: Bearer KEY' on /v1/*");
  cmd->add_option("--kv-cache-memory", a.kv_cache_memory, "KV pool size, e.g. 64MiB, 2GiB")->capture_default_str();
  cmd->add_option("--kv-dtype", a.kv_dtype, "KV cache dtype: bf16 | f32 | fp8 (see --kv-scales)")->capture_default_str();
  add_weight_options(cmd, a.weights);
  add_parallel_options(cmd, a.parallel);
  cmd->add_option("--page-size", a.page_size,
                  "tokens per KV page (prefix sharing is by whole pages; larger pages decode long contexts "
                  "faster; a prefill and a decode worker must agree)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_option("--max-running-requests", a.max_running_requests, "requests in the running batch at once; the rest wait")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  cmd->add_option("--max-queue", a.max_queue, "waiting requests beyond which requests get 429")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--chunked-prefill-size", a.chunked_prefill_size,
                  "most prompt tokens of one request per step (longer prompts prefill in chunks)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--max-step-tokens", a.max_step_tokens, "token budget of one batch")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("-t,--threads", a.threads, "kernel threads (0 = all cores)")->capture_default_str();
  cmd->add_flag("--no-prefix-cache", a.no_prefix_cache, "disable the radix prefix cache");
  cmd->add_option("--kv-integrity", a.kv_integrity,
                  "KV integrity check before batches read cached KV: off | on (page tags, every batch) | "
                  "sample=N (1 batch in N) | digest[=N] (tags plus a page re-hash, on 1 checked batch in N)")
      ->capture_default_str();
}

// The served model's name and its chat format (template, tool-call and reasoning parsers).
void add_chat_options(CLI::App* cmd, ServeArgs& a) {
  cmd->add_option("--served-model-name", a.served_model_name, "model id clients use (default: the file name)");
  cmd->add_option("--chat-template", a.chat_template,
                  "Jinja chat template file to use instead of the model's own (the plain fallback serves models "
                  "that ship none)");
  cmd->add_option("--tool-parser", a.tool_parser,
                  "tool-call format of the model's output: kimi_k2, glm45, deepseek_v3, deepseek_v31, hermes, qwen3, "
                  "qwen3_coder, or none (default: guessed from the chat template)");
  cmd->add_option("--reasoning-parser", a.reasoning_parser,
                  "thinking format: qwen3, deepseek_r1, deepseek_v31, glm45, kimi_k2, or none (default: guessed from "
                  "the chat template)");
}

// Routing stats, the request log, the quality canary, and the hidden test-only flags.
void add_monitoring_options(CLI::App* cmd, ServeArgs& a) {
  cmd->add_flag("--routing-stats", a.routing_stats, "record MoE routing load per step (/metrics densa_moe_*)");
  cmd->add_option("--request-log", a.request_log, "one JSON line per finished request to FILE ('-' = stderr)");
  cmd->add_option("--canary", a.canary, "quality canary: probe text FILE scored at serving precision vs a BF16 copy");
  cmd->add_option("--canary-every", a.canary_every_s, "seconds between canary scorings (the first runs at start)")
      ->check(CLI::Range(0.01, 86400.0))
      ->capture_default_str();
  cmd->add_option("--canary-max-kl", a.canary_max_kl, "mean KL (nats) above which densa_quality_degraded is 1")
      ->capture_default_str();
  cmd->add_option("--canary-max-ppl-delta", a.canary_max_ppl_delta,
                  "relative perplexity increase above which densa_quality_degraded is 1")
      ->capture_default_str();
  cmd->add_option("--test-degrade-weights-bits", a.test_degrade_weights_bits,
                  "TESTS ONLY: round every matrix to this many bits (2 = visibly broken)")
      ->check(CLI::Range(2, 8))
      ->group("");
  cmd->add_flag("--test-allow-fault-injection", a.test_allow_fault_injection,
                "TESTS ONLY: serve the request extension densa_inject_fault (the request's own KV is broken on "
                "purpose, for the integrity checks and bench/soak.sh to catch)")
      ->group("");
}

// Prefill / decode disaggregation: the role and the KV transfers' limits.
void add_disagg_options(CLI::App* cmd, ServeArgs& a) {
  cmd->add_option("--role", a.role,
                  "both (colocated) | prefill (computes prompts, pushes KV over UCX) | decode (needs the "
                  "X-Densa-Prefill-Url header, which densa router sets)")
      ->capture_default_str();
  cmd->add_option("--disagg-timeout-ms", a.disagg_timeout_ms, "limit of every wait of a KV transfer")
      ->check(CLI::Range(1, 3600000))
      ->capture_default_str();
  cmd->add_option("--disagg-ucx-workers", a.disagg_ucx_workers,
                  "idle UCX workers kept between KV transfers (a prefill worker's stay connected to the "
                  "receiver they last served); 0: a fresh worker per transfer")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  cmd->add_option("--disagg-ucx-idle-ms", a.disagg_ucx_idle_ms,
                  "an idle pooled UCX worker is closed after this long, with the fds and the connections "
                  "(to restarted peers too) it holds")
      ->check(CLI::Range(1, 86400000))
      ->capture_default_str();
}

// Resource limits (server/README.md "Limits"); each refusal names the flag that sets it.
void add_limit_options(CLI::App* cmd, ServeArgs& a) {
  cmd->add_option("--max-body-bytes", a.max_body_bytes, "largest request body, e.g. 16MiB (beyond: 413)")
      ->capture_default_str();
  cmd->add_option("--max-header-bytes", a.max_header_bytes,
                  "largest request line + headers in all (beyond: 431; one header line is limited to 8 KiB)")
      ->capture_default_str();
  cmd->add_option("--http-read-timeout", a.http_read_timeout_s,
                  "seconds a client may send nothing mid-request before its connection is closed")
      ->check(CLI::Range(0.001, 3600.0))
      ->capture_default_str();
  cmd->add_option("--http-write-timeout", a.http_write_timeout_s,
                  "seconds a client may read nothing of a response before its connection is closed")
      ->check(CLI::Range(0.001, 3600.0))
      ->capture_default_str();
  cmd->add_option("--http-keep-alive-timeout", a.http_keep_alive_timeout_s,
                  "seconds an idle keep-alive connection is kept open")
      ->check(CLI::Range(0, 3600))
      ->capture_default_str();
  cmd->add_option("--http-threads", a.http_threads,
                  "connections served at once (each stream holds one; more wait for a free one); "
                  "0: max-running-requests + 16, at most 512")
      ->check(CLI::Range(0, 1 << 16))
      ->capture_default_str();
  cmd->add_option("--template-max-steps", a.template_max_steps,
                  "most statements + expressions one chat template render evaluates (beyond: 400)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
      ->capture_default_str();
  cmd->add_option("--template-max-output-bytes", a.template_max_output_bytes,
                  "largest rendered chat prompt, and any one string a template builds (beyond: 400)")
      ->capture_default_str();
  cmd->add_option("--grammar-max-elements", a.grammar_max_elements,
                  "largest response_format / tool-call grammar after expanding repetitions (beyond: 400)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 32))
      ->capture_default_str();
  cmd->add_option("--grammar-max-positions", a.grammar_max_positions,
                  "most token-mask positions one grammar precomputes (compile time grows with them; beyond: 400)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 32))
      ->capture_default_str();
}

// `serve` and its options, registered in --help order; every option binds to a field of the one
// ServeArgs, which the callback keeps alive.
const CommandRegistrar kRegister([](CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server");
  add_engine_options(cmd, *a);
  add_chat_options(cmd, *a);
  add_monitoring_options(cmd, *a);
  add_disagg_options(cmd, *a);
  cmd->add_option("--kv-scales", a->kv_scales,
                  "fp8 KV scales: dynamic (per token) | calibrate[=FILE] (static, from a calibration pass over "
                  "FILE's text or a built-in passage) | checkpoint (static: the k_scale / v_scale tensors)")
      ->capture_default_str();
  add_limit_options(cmd, *a);
  cmd->callback([a] {
    if (int rc = run_serve(*a); rc != 0) throw CLI::RuntimeError(rc);
  });
});

}  // namespace
}  // namespace densa::cli
