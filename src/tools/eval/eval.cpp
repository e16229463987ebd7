#include "tools/eval/eval.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <random>
#include <string_view>

#include "kernels/matmul.h"
#include "model/model_loader.h"
#include "quality/kv_calibration.h"
#include "quality/perplexity.h"
#include "quant/int4_group.h"
#include "quant/quantize_matrix.h"

namespace densa {

std::vector<std::pair<int, int>> eval_buckets(int ctx) {
  const int last = ctx - 2;  // the last scored position
  std::vector<int> edges = {0, ctx / 8, ctx / 4, ctx / 2};
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  std::vector<std::pair<int, int>> out;
  for (size_t i = 0; i < edges.size(); ++i) {
    const int lo = edges[i];
    const int hi = i + 1 < edges.size() ? edges[i + 1] - 1 : last;
    if (lo <= hi && lo <= last) out.emplace_back(lo, std::min(hi, last));
  }
  return out;
}

KlStats summarize_kl(std::vector<double> kl, int64_t num_same_top1) {
  KlStats s;
  s.num_tokens = static_cast<int64_t>(kl.size());
  if (kl.empty()) return s;
  std::sort(kl.begin(), kl.end());
  const auto at = [&](double q) {  // linear interpolation between order statistics
    const double rank = q * static_cast<double>(kl.size() - 1);
    const size_t lo = static_cast<size_t>(rank);
    const size_t hi = std::min(lo + 1, kl.size() - 1);
    return kl[lo] + (kl[hi] - kl[lo]) * (rank - static_cast<double>(lo));
  };
  s.mean = std::accumulate(kl.begin(), kl.end(), 0.0) / static_cast<double>(kl.size());
  s.median = at(0.5);
  s.p99 = at(0.99);
  s.p999 = at(0.999);
  s.max = kl.back();
  s.same_top1 = static_cast<double>(num_same_top1) / static_cast<double>(kl.size());
  return s;
}

std::pair<double, double> delta_ppl_ci(std::span<const double> base_nll, std::span<const double> cand_nll,
                                       int64_t tokens_per_window, int num_resamples, uint64_t seed) {
  const size_t n = base_nll.size();
  if (n == 0 || cand_nll.size() != n || tokens_per_window <= 0) return {0, 0};
  const double count = static_cast<double>(n * tokens_per_window);
  const double point = std::exp(std::accumulate(cand_nll.begin(), cand_nll.end(), 0.0) / count) -
                       std::exp(std::accumulate(base_nll.begin(), base_nll.end(), 0.0) / count);
  if (num_resamples < 2 || n < 2) return {point, point};
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> pick(0, n - 1);
  std::vector<double> deltas(num_resamples);
  for (double& d : deltas) {
    double sb = 0, sc = 0;
    for (size_t i = 0; i < n; ++i) {
      const size_t w = pick(rng);
      sb += base_nll[w];
      sc += cand_nll[w];
    }
    d = std::exp(sc / count) - std::exp(sb / count);
  }
  std::sort(deltas.begin(), deltas.end());
  const auto at = [&](double q) {
    const double rank = q * static_cast<double>(deltas.size() - 1);
    const size_t lo = static_cast<size_t>(rank);
    const size_t hi = std::min(lo + 1, deltas.size() - 1);
    return deltas[lo] + (deltas[hi] - deltas[lo]) * (rank - static_cast<double>(lo));
  };
  return {std::min(at(0.025), point), std::max(at(0.975), point)};
}

namespace {

// The weights-name suffix that keeps BF16 matrices on fp32 activations (eval.h).
constexpr std::string_view kExactX = "+x-f32";
bool exact_x(const std::string& name) { return name.ends_with(kExactX); }

// "BODY" or "BODY+head-HEAD", either optionally + "+x-f32" (eval.h); plain int4 means group 128
// in both places.
// "file:PATH" names another checkpoint of the same model, loaded as stored (eval.h).
constexpr std::string_view kFilePrefix = "file:";

Result<LoadOptions> weight_option(const std::string& full) {
  if (full.starts_with(kFilePrefix)) {
    if (full.size() == kFilePrefix.size()) return invalid_argument("weights 'file:': no path after 'file:'");
    return LoadOptions{.bf16_f32_activations = exact_x(full)};
  }
  std::string name = exact_x(full) ? full.substr(0, full.size() - kExactX.size()) : full;
  // +int4-LAYOUT (before +x-f32): how INT4 g32 / Q4_0 matrices are held, which decides their
  // kernel's rounding (--int4-layout; default the kernels' choice).
  std::optional<WeightLayout> int4_layout;
  if (const size_t l = name.find("+int4-"); l != std::string::npos) {
    const std::string layout = name.substr(l + 6);
    int4_layout = int4_layout_from_name(layout);
    if (!int4_layout) return invalid_argument("weights '" + full + "': +int4-" + layout + " (rows, tiles8 or tiles16)");
    if (!matmul_runs_int4_layout(*int4_layout)) {
      return invalid_argument("weights '" + full + "': this CPU's kernels do not run INT4 " + layout);
    }
    name = name.substr(0, l);
  }
  constexpr std::string_view kHead = "+head-";
  const size_t at = name.find(kHead);
  const std::string body = name.substr(0, at);
  LoadOptions o;
  if (body != "f32" && body != "native") {
    Result<WeightQuantSpec> spec = weight_quant_spec_from_name(body, 128);
    if (!spec.is_ok()) {
      return invalid_argument("weights '" + name + "': the body format " + spec.status().message() +
                              " (or native, f32)");
    }
    o.weight_dtype = spec->dtype;
    o.weight_group_size = spec->group_size;
  }
  if (at != std::string::npos) {
    const std::string head = name.substr(at + kHead.size());
    Result<WeightQuantSpec> spec = weight_quant_spec_from_name(head, 128);
    if (!spec.is_ok()) return invalid_argument("weights '" + name + "': the lm_head format " + spec.status().message());
    o.lm_head = *spec;
  }
  o.bf16_f32_activations = exact_x(full);
  o.int4_layout = int4_layout;
  return o;
}

// Sets the KV fields of `o` for a KV name. Static FP8 scales come from the checkpoint, else a
// calibration pass over the binary's built-in passage (never the evaluated text); `w` null
// only validates the name.
Status kv_option(const std::string& name, PerplexityOptions& o, const ModelWeights* w, ThreadPool* pool,
                 std::optional<KvScales>& scales) {
  if (name == "f32") {
    o.kv_dtype = DType::kF32;
  } else if (name == "bf16") {
    o.kv_dtype = DType::kBF16;
  } else if (name == "fp8-dynamic") {
    o.kv_dtype = DType::kFP8E4M3;
    o.kv_scale_mode = KvScaleMode::kDynamic;
  } else if (name == "fp8") {
    o.kv_dtype = DType::kFP8E4M3;
    o.kv_scale_mode = KvScaleMode::kStatic;
    if (w) {
      DENSA_ASSIGN_OR_RETURN(KvScales s, kv_scales_for_model(*w, {}, KvCalibrationOptions{}, pool));
      scales = std::move(s);
      o.kv_scales = &*scales;
    }
  } else {
    return invalid_argument("unknown kv '" + name + "' (f32|bf16|fp8|fp8-dynamic)");
  }
  return Status::ok();
}

// Per-window sums for one combination: NLL overall and per bucket.
struct WindowNll {
  std::vector<double> all;                  // [windows]
  std::vector<std::vector<double>> bucket;  // [buckets][windows]
};

// Baseline log-probs, one [ctx-1, vocab] float block per window, in an unnamed temp file.
class LogProbStore {
 public:
  LogProbStore() : file_(std::tmpfile()) {}
  ~LogProbStore() {
    if (file_) std::fclose(file_);
  }
  bool ok() const { return file_ != nullptr; }
  bool write(int64_t window, std::span<const float> rows) {
    return seek(window, rows.size()) && std::fwrite(rows.data(), sizeof(float), rows.size(), file_) == rows.size();
  }
  bool read(int64_t window, std::span<float> rows) {
    return seek(window, rows.size()) && std::fread(rows.data(), sizeof(float), rows.size(), file_) == rows.size();
  }

 private:
  bool seek(int64_t window, size_t n) {
    return fseeko(file_, static_cast<off_t>(window * static_cast<int64_t>(n) * sizeof(float)), SEEK_SET) == 0;
  }
  std::FILE* file_;
};

struct RunState {
  const EvalConfig& cfg;
  std::span<const TokenId> ids;
  ThreadPool* pool;
  std::vector<std::pair<int, int>> buckets;
  int ctx = 0, vocab = 0, num_windows = 0;
  LogProbStore store;
  WindowNll base_nll;
};

int bucket_of(const std::vector<std::pair<int, int>>& buckets, int pos) {
  for (size_t b = 0; b < buckets.size(); ++b) {
    if (pos >= buckets[b].first && pos <= buckets[b].second) return static_cast<int>(b);
  }
  return -1;
}

// One pass of one combination; record=true writes the baseline store instead of comparing.
Status run_combo(RunState& st, const ModelWeights& w, const EvalCombo& combo, bool record, EvalComboResult& out) {
  PerplexityOptions po;
  po.ctx = st.ctx;
  po.max_windows = st.cfg.max_windows;
  std::optional<KvScales> scales;
  DENSA_RETURN_IF_ERROR(kv_option(combo.kv, po, &w, st.pool, scales));
  const int rows = st.ctx - 1, vocab = st.vocab, nb = static_cast<int>(st.buckets.size());
  WindowNll nll{std::vector<double>(st.num_windows, 0.0),
                std::vector<std::vector<double>>(nb, std::vector<double>(st.num_windows, 0.0))};
  std::vector<float> mine(static_cast<size_t>(rows) * vocab), base(mine.size());
  std::vector<double> kl_all;
  std::vector<std::vector<double>> kl_bucket(nb);
  int64_t same_all = 0;
  std::vector<int64_t> same_bucket(nb, 0);
  bool io_ok = true;
  const auto t0 = std::chrono::steady_clock::now();
  const PerplexityResult pr = compute_perplexity(
      w, st.ids, po, st.pool, [&](int wi, std::span<const float> logits) {
        const TokenId* window = st.ids.data() + static_cast<int64_t>(wi) * st.ctx;
        for (int p = 0; p < rows; ++p) {
          const std::span<const float> row = logits.subspan(static_cast<size_t>(p) * vocab, vocab);
          const double l = -log_softmax_at(row, window[p + 1]);
          nll.all[wi] += l;
          if (int b = bucket_of(st.buckets, p); b >= 0) nll.bucket[b][wi] += l;
          log_softmax_row(row, std::span<float>(mine).subspan(static_cast<size_t>(p) * vocab, vocab));
        }
        if (record) {
          io_ok = io_ok && st.store.write(wi, mine);
          return;
        }
        io_ok = io_ok && st.store.read(wi, base);
        for (int p = 0; p < rows; ++p) {
          const std::span<const float> lb(base.data() + static_cast<size_t>(p) * vocab, vocab);
          const std::span<const float> lc(mine.data() + static_cast<size_t>(p) * vocab, vocab);
          const double kl = kl_divergence(lb, lc);
          const bool same = std::max_element(lb.begin(), lb.end()) - lb.begin() ==
                            std::max_element(lc.begin(), lc.end()) - lc.begin();
          kl_all.push_back(kl);
          same_all += same;
          if (int b = bucket_of(st.buckets, p); b >= 0) {
            kl_bucket[b].push_back(kl);
            same_bucket[b] += same;
          }
        }
      });
  if (!io_ok) return data_loss("eval: reading or writing the baseline log-prob temp file failed");
  out.combo = combo;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.ppl = pr.ppl_all;
  out.ppl_second_half = pr.ppl_second_half;
  out.num_tokens = pr.num_scored_all;
  if (record) {
    st.base_nll = std::move(nll);
    return Status::ok();
  }
  const int R = st.cfg.bootstrap_resamples;
  std::tie(out.delta_ppl_lo, out.delta_ppl_hi) = delta_ppl_ci(st.base_nll.all, nll.all, rows, R, st.cfg.seed);
  // Both from the per-window sums, added in the same order: exactly 0 for identical runs.
  const double count = static_cast<double>(static_cast<int64_t>(st.num_windows) * rows);
  out.delta_ppl = std::exp(std::accumulate(nll.all.begin(), nll.all.end(), 0.0) / count) -
                  std::exp(std::accumulate(st.base_nll.all.begin(), st.base_nll.all.end(), 0.0) / count);
  out.kl = summarize_kl(std::move(kl_all), same_all);
  for (int b = 0; b < nb; ++b) {
    EvalBucket eb;
    eb.pos_lo = st.buckets[b].first;
    eb.pos_hi = st.buckets[b].second;
    const int per_window = eb.pos_hi - eb.pos_lo + 1;
    eb.num_tokens = static_cast<int64_t>(per_window) * st.num_windows;
    const double n = static_cast<double>(eb.num_tokens);
    const auto& cb = nll.bucket[b];
    const auto& bb = st.base_nll.bucket[b];
    eb.ppl = std::exp(std::accumulate(cb.begin(), cb.end(), 0.0) / n);
    eb.ppl_baseline = std::exp(std::accumulate(bb.begin(), bb.end(), 0.0) / n);
    eb.delta_ppl = eb.ppl - eb.ppl_baseline;
    std::tie(eb.delta_ppl_lo, eb.delta_ppl_hi) = delta_ppl_ci(bb, cb, per_window, R, st.cfg.seed + 1 + b);
    eb.kl = summarize_kl(std::move(kl_bucket[b]), same_bucket[b]);
    out.buckets.push_back(std::move(eb));
  }
  return Status::ok();
}

}  // namespace

Result<EvalReport> run_eval(const EvalConfig& cfg, std::span<const TokenId> ids, ThreadPool* pool,
                            const std::function<void(const std::string&)>& log) {
  if (cfg.ctx < 4) return invalid_argument("--ctx must be at least 4");
  int num_windows = static_cast<int>(ids.size() / cfg.ctx);
  if (cfg.max_windows > 0) num_windows = std::min(num_windows, cfg.max_windows);
  if (num_windows < 1) {
    return invalid_argument("the text has " + std::to_string(ids.size()) + " tokens: less than one window of " +
                            std::to_string(cfg.ctx));
  }
  // Validate every name before loading anything.
  PerplexityOptions probe;
  std::optional<KvScales> no_scales;
  for (const std::string& wn : cfg.weights) DENSA_RETURN_IF_ERROR(weight_option(wn).status());
  DENSA_RETURN_IF_ERROR(weight_option(cfg.baseline.weights).status());
  for (const std::string& kn : cfg.kv) DENSA_RETURN_IF_ERROR(kv_option(kn, probe, nullptr, pool, no_scales));
  DENSA_RETURN_IF_ERROR(kv_option(cfg.baseline.kv, probe, nullptr, pool, no_scales));

  RunState st{cfg, ids, pool};
  st.ctx = cfg.ctx;
  st.num_windows = num_windows;
  st.buckets = eval_buckets(cfg.ctx);
  if (!st.store.ok()) return data_loss("eval: cannot create a temporary file for the baseline log-probs");

  EvalReport report;
  report.model_path = cfg.model_path;
  report.baseline = cfg.baseline;
  report.ctx = cfg.ctx;
  report.num_windows = num_windows;
  report.bootstrap_resamples = cfg.bootstrap_resamples;

  // Weights in load order: the baseline's first, each loaded once for all its KV choices.
  std::vector<std::string> weight_order = {cfg.baseline.weights};
  for (const std::string& wn : cfg.weights) {
    if (std::find(weight_order.begin(), weight_order.end(), wn) == weight_order.end()) weight_order.push_back(wn);
  }
  std::vector<EvalComboResult> others;
  for (const std::string& wn : weight_order) {
    const bool has_baseline = wn == cfg.baseline.weights;
    const bool listed = std::find(cfg.weights.begin(), cfg.weights.end(), wn) != cfg.weights.end();
    const std::string path = wn.starts_with(kFilePrefix) ? wn.substr(kFilePrefix.size()) : cfg.model_path;
    log("loading " + path + " with weights " + wn);
    Result<ModelWeights> loaded = load_model(path, weight_option(wn).value());
    if (!loaded.is_ok()) {
      if (has_baseline) return Status(loaded.status().code(), "baseline weights " + wn + ": " + loaded.status().message());
      for (const std::string& kn : cfg.kv) {
        EvalComboResult r;
        r.combo = {wn, kn};
        r.error = loaded.status().message();
        others.push_back(std::move(r));
      }
      continue;
    }
    const ModelWeights& w = loaded.value();
    if (cfg.ctx > w.config.max_position_embeddings) {
      return invalid_argument("--ctx " + std::to_string(cfg.ctx) + " exceeds the model's context " +
                              std::to_string(w.config.max_position_embeddings));
    }
    st.vocab = report.vocab = w.config.vocab_size;
    if (has_baseline) {
      log("baseline " + cfg.baseline.name() + ": " + std::to_string(num_windows) + " windows of " +
          std::to_string(cfg.ctx));
      EvalComboResult ignored;
      DENSA_RETURN_IF_ERROR(run_combo(st, w, cfg.baseline, /*record=*/true, ignored));
      // The baseline against itself (a rerun): KL 0 and delta 0 if the forward is deterministic.
      EvalComboResult self;
      DENSA_RETURN_IF_ERROR(run_combo(st, w, cfg.baseline, false, self));
      self.is_baseline = true;
      report.results.push_back(std::move(self));
    }
    if (!listed) continue;
    for (const std::string& kn : cfg.kv) {
      const EvalCombo combo{wn, kn};
      if (has_baseline && kn == cfg.baseline.kv) continue;
      log("candidate " + combo.name());
      EvalComboResult r;
      if (Status s = run_combo(st, w, combo, false, r); !s.is_ok()) {
        r.combo = combo;
        r.error = s.message();
      }
      others.push_back(std::move(r));
    }
  }
  for (EvalComboResult& r : others) report.results.push_back(std::move(r));
  return report;
}

Result<std::vector<TokenId>> eval_load_ids(const std::string& model_path, const std::string& text_path,
                                           const std::string& ids_path) {
  if (!ids_path.empty()) {
    std::ifstream in(ids_path, std::ios::binary);
    if (!in) return not_found(ids_path + ": cannot open");
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (bytes.size() % 2 != 0) return invalid_argument(ids_path + ": odd size for uint16 token ids");
    std::vector<TokenId> ids(bytes.size() / 2);
    for (size_t i = 0; i < ids.size(); ++i) {
      ids[i] = static_cast<uint8_t>(bytes[2 * i]) | (static_cast<uint8_t>(bytes[2 * i + 1]) << 8);
    }
    return ids;
  }
  std::ifstream in(text_path, std::ios::binary);
  if (!in) return not_found(text_path + ": cannot open");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!text.empty() && text.back() == '\n') text.pop_back();
  std::error_code ec;
  const std::filesystem::path sp = std::filesystem::path(model_path) / "tokenizer.model";
  if (std::filesystem::is_regular_file(sp, ec)) {
    DENSA_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::from_sentencepiece_file(sp));
    return tok.encode(text, /*add_bos=*/true);
  }
  DENSA_ASSIGN_OR_RETURN(ModelWeights w, load_model(model_path));
  if (!w.tokenizer) return invalid_argument(model_path + ": model has no tokenizer; pass --ids");
  return w.tokenizer->encode(text, /*add_bos=*/true);
}

// ---- output ----

namespace {

using json = nlohmann::json;

json kl_json(const KlStats& k) {
  return {{"num_tokens", k.num_tokens}, {"mean", k.mean}, {"median", k.median}, {"p99", k.p99},
          {"p999", k.p999},             {"max", k.max},   {"same_top1", k.same_top1}};
}

std::string f(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

std::string delta_text(double d, double lo, double hi) {
  return f("%+.4f", d) + " [" + f("%+.4f", lo) + ", " + f("%+.4f", hi) + "]";
}

}  // namespace

nlohmann::json eval_json(const EvalReport& r) {
  json j = {{"tool", "densa eval"},
            {"model", r.model_path},
            {"baseline", r.baseline.name()},
            {"ctx", r.ctx},
            {"num_windows", r.num_windows},
            {"vocab", r.vocab},
            {"kl", "per token KL(P_baseline || P_candidate) in nats over the full vocabulary"},
            {"delta_ppl_ci", "95% percentile bootstrap over windows (paired), " +
                                 std::to_string(r.bootstrap_resamples) + " resamples"}};
  json arr = json::array();
  for (const EvalComboResult& c : r.results) {
    json e = {{"weights", c.combo.weights}, {"kv", c.combo.kv}, {"is_baseline", c.is_baseline}};
    if (!c.error.empty()) {
      e["error"] = c.error;
      arr.push_back(std::move(e));
      continue;
    }
    e["ppl"] = c.ppl;
    e["ppl_second_half"] = c.ppl_second_half;
    e["num_tokens"] = c.num_tokens;
    e["delta_ppl"] = c.delta_ppl;
    e["delta_ppl_ci95"] = {c.delta_ppl_lo, c.delta_ppl_hi};
    e["kl"] = kl_json(c.kl);
    e["seconds"] = c.seconds;
    json buckets = json::array();
    for (const EvalBucket& b : c.buckets) {
      buckets.push_back({{"pos_lo", b.pos_lo}, {"pos_hi", b.pos_hi}, {"num_tokens", b.num_tokens},
                         {"ppl", b.ppl}, {"ppl_baseline", b.ppl_baseline}, {"delta_ppl", b.delta_ppl},
                         {"delta_ppl_ci95", {b.delta_ppl_lo, b.delta_ppl_hi}}, {"kl", kl_json(b.kl)}});
    }
    e["by_position"] = std::move(buckets);
    arr.push_back(std::move(e));
  }
  j["results"] = std::move(arr);
  return j;
}

std::string eval_markdown(const EvalReport& r) {
  std::string o = "| weights / kv | PPL | PPL (2nd half) | ΔPPL vs " + r.baseline.name() +
                  " [95% CI] | KL mean | KL median | KL p99 | KL p99.9 | KL max | same top-1 |\n"
                  "|---|---|---|---|---|---|---|---|---|---|\n";
  for (const EvalComboResult& c : r.results) {
    if (!c.error.empty()) {
      o += "| " + c.combo.name() + " | n/a: " + c.error + " | | | | | | | | |\n";
      continue;
    }
    o += "| " + c.combo.name() + (c.is_baseline ? " (baseline)" : "") + " | " + f("%.4f", c.ppl) + " | " +
         f("%.4f", c.ppl_second_half) + " | " + delta_text(c.delta_ppl, c.delta_ppl_lo, c.delta_ppl_hi) + " | " +
         f("%.3g", c.kl.mean) + " | " + f("%.3g", c.kl.median) + " | " + f("%.3g", c.kl.p99) + " | " +
         f("%.3g", c.kl.p999) + " | " + f("%.3g", c.kl.max) + " | " + f("%.2f%%", 100 * c.kl.same_top1) + " |\n";
  }
  o += "\nBy context position (predicting token's position in the " + std::to_string(r.ctx) + "-token window):\n\n";
  o += "| weights / kv | positions | PPL | ΔPPL [95% CI] | KL mean | KL p99 | KL max | same top-1 |\n"
       "|---|---|---|---|---|---|---|---|\n";
  for (const EvalComboResult& c : r.results) {
    for (const EvalBucket& b : c.buckets) {
      o += "| " + c.combo.name() + " | " + std::to_string(b.pos_lo) + "-" + std::to_string(b.pos_hi) + " | " +
           f("%.4f", b.ppl) + " | " + delta_text(b.delta_ppl, b.delta_ppl_lo, b.delta_ppl_hi) + " | " +
           f("%.3g", b.kl.mean) + " | " + f("%.3g", b.kl.p99) + " | " + f("%.3g", b.kl.max) + " | " +
           f("%.2f%%", 100 * b.kl.same_top1) + " |\n";
    }
  }
  o += "\n" + std::to_string(r.num_windows) + " windows of " + std::to_string(r.ctx) +
       " tokens; KL = KL(P_baseline || P_candidate) per token over the full vocabulary (nats); ΔPPL CI: paired "
       "bootstrap over windows.\n";
  return o;
}

std::string eval_table(const EvalReport& r) {
  std::string o;
  char line[512];
  int width = 16;  // the name column fits the longest combination ("int4-g32+head-fp8/bf16*")
  for (const EvalComboResult& c : r.results) width = std::max(width, static_cast<int>(c.combo.name().size()) + 1);
  width = std::min(width, 64);
  std::snprintf(line, sizeof(line), "%-*s %10s %10s %30s %10s %10s %10s %10s %8s\n", width, "weights/kv", "PPL",
                "PPL(half)", "dPPL [95% CI]", "KL mean", "KL p99", "KL p99.9", "KL max", "top-1");
  o += line;
  for (const EvalComboResult& c : r.results) {
    const std::string name = c.combo.name() + (c.is_baseline ? "*" : "");
    if (!c.error.empty()) {
      std::snprintf(line, sizeof(line), "%-*s n/a: %s\n", width, name.c_str(), c.error.c_str());
      o += line;
      continue;
    }
    std::snprintf(line, sizeof(line), "%-*s %10.4f %10.4f %30s %10.3g %10.3g %10.3g %10.3g %7.2f%%\n", width,
                  name.c_str(), c.ppl, c.ppl_second_half,
                  delta_text(c.delta_ppl, c.delta_ppl_lo, c.delta_ppl_hi).c_str(), c.kl.mean, c.kl.p99, c.kl.p999,
                  c.kl.max, 100 * c.kl.same_top1);
    o += line;
    for (const EvalBucket& b : c.buckets) {
      const std::string pos = "  pos " + std::to_string(b.pos_lo) + "-" + std::to_string(b.pos_hi);
      std::snprintf(line, sizeof(line), "%-*s %10.4f %10s %30s %10.3g %10.3g %10.3g %10.3g %7.2f%%\n", width,
                    pos.c_str(), b.ppl, "", delta_text(b.delta_ppl, b.delta_ppl_lo, b.delta_ppl_hi).c_str(),
                    b.kl.mean, b.kl.p99, b.kl.p999, b.kl.max, 100 * b.kl.same_top1);
      o += line;
    }
  }
  o += "(* = baseline " + r.baseline.name() + ", rerun against itself; " + std::to_string(r.num_windows) +
       " windows of " + std::to_string(r.ctx) + ")\n";
  return o;
}

}  // namespace densa
