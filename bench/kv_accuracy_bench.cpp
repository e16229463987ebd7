// Accuracy of an FP8 e4m3 KV cache against a BF16 KV cache on both fixtures (HF F32 weights,
// fp32 compute): perplexity on the validation split (fixture README windowing) and, per scored
// position, KL(P_bf16 || P_x) of the next-token distributions: mean, 99.9th percentile, max,
// and the rate at which the top-1 token is the same. Static scales are calibrated on the
// first 2048 tokens of the training split. An F32 KV row shows where BF16 itself stands.
//
//   ./build-kv2/kv_accuracy_bench [models_dir [data_dir]]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/check.h"
#include "model/model_loader.h"
#include "quality/kv_calibration.h"
#include "quality/perplexity.h"

namespace densa {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  CHECK(in.good()) << "cannot read " << p.string();
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<TokenId> validation_ids(const fs::path& model_dir) {
  const std::string raw = read_file(model_dir / "golden" / "valid.ids.u16.bin");
  std::vector<TokenId> ids(raw.size() / 2);
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = static_cast<uint8_t>(raw[2 * i]) | (static_cast<uint8_t>(raw[2 * i + 1]) << 8);
  return ids;
}

// log-softmax of one row in double.
void log_softmax(const float* x, int n, std::vector<double>& out) {
  out.resize(n);
  double mx = x[0];
  for (int i = 0; i < n; ++i) mx = std::max(mx, static_cast<double>(x[i]));
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += std::exp(x[i] - mx);
  const double lse = mx + std::log(sum);
  for (int i = 0; i < n; ++i) out[i] = x[i] - lse;
}

struct Row {
  std::string name;
  PerplexityResult ppl;
  double kl_mean = 0, kl_p999 = 0, kl_max = 0, same_top1 = 0;
};

void run_model(const fs::path& models_dir, const fs::path& data_dir, const std::string& name,
               ThreadPool* pool) {
  auto loaded = load_model(models_dir / name / "hf");
  CHECK(loaded.is_ok()) << loaded.status().to_string();
  const ModelWeights& w = loaded.value();
  const int V = w.config.vocab_size;
  const std::vector<TokenId> ids = validation_ids(models_dir / name);
  const std::string train = read_file(data_dir / "tinystories" / "train.txt");
  std::vector<TokenId> calib = w.tokenizer->encode(std::string_view(train).substr(0, 20000), true);
  calib.resize(2048);
  const KvScales scales = calibrate_kv_scales(w, calib, KvCalibrationOptions{}, pool);

  PerplexityOptions base_opts;
  base_opts.kv_dtype = DType::kBF16;
  std::vector<std::vector<float>> base_logits;
  const PerplexityResult base = compute_perplexity(
      w, ids, base_opts, pool,
      [&](int, std::span<const float> l) { base_logits.emplace_back(l.begin(), l.end()); });
  const int ctx = base_opts.ctx;

  struct Config { std::string name; DType dtype; KvScaleMode mode; const KvScales* scales; };
  const Config configs[] = {
      {"f32", DType::kF32, KvScaleMode::kNone, nullptr},
      {"fp8_e4m3 static (calibrated)", DType::kFP8E4M3, KvScaleMode::kStatic, &scales},
      {"fp8_e4m3 dynamic", DType::kFP8E4M3, KvScaleMode::kDynamic, nullptr},
  };
  std::vector<Row> rows;
  rows.push_back(Row{"bf16 (baseline)", base, 0, 0, 0, 1});
  for (const Config& c : configs) {
    PerplexityOptions o;
    o.kv_dtype = c.dtype;
    o.kv_scale_mode = c.mode;
    o.kv_scales = c.scales;
    std::vector<double> kls;
    int64_t same = 0;
    std::vector<double> lp, lq;
    const PerplexityResult r = compute_perplexity(w, ids, o, pool, [&](int wi, std::span<const float> l) {
      const std::vector<float>& b = base_logits[wi];
      for (int p = 0; p + 1 < ctx; ++p) {
        const float* pb = b.data() + static_cast<size_t>(p) * V;
        const float* pq = l.data() + static_cast<size_t>(p) * V;
        log_softmax(pb, V, lp);
        log_softmax(pq, V, lq);
        double kl = 0;
        for (int i = 0; i < V; ++i) kl += std::exp(lp[i]) * (lp[i] - lq[i]);
        kls.push_back(std::max(kl, 0.0));
        same += std::max_element(pb, pb + V) - pb == std::max_element(pq, pq + V) - pq;
      }
    });
    Row row{c.name, r};
    double sum = 0;
    for (double k : kls) sum += k;
    row.kl_mean = sum / static_cast<double>(kls.size());
    std::sort(kls.begin(), kls.end());
    row.kl_p999 = kls[std::min(kls.size() - 1, static_cast<size_t>(std::ceil(0.999 * kls.size())) - 1)];
    row.kl_max = kls.back();
    row.same_top1 = static_cast<double>(same) / static_cast<double>(kls.size());
    rows.push_back(row);
  }
  std::printf("\n%s (%s)\n", name.c_str(), kv_cache_mode_line(DType::kFP8E4M3, KvScaleMode::kStatic, &scales).c_str());
  std::printf("| KV cache | PPL all (16,320 tok) | vs bf16 | PPL 2nd half | vs bf16 | mean KL | KL p99.9 | KL max | same top-1 |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    std::printf("| %s | %.4f | %+.3f%% | %.4f | %+.3f%% | %.3g | %.3g | %.3g | %.2f%% |\n", r.name.c_str(),
                r.ppl.ppl_all, 100.0 * (r.ppl.ppl_all / base.ppl_all - 1), r.ppl.ppl_second_half,
                100.0 * (r.ppl.ppl_second_half / base.ppl_second_half - 1), r.kl_mean, r.kl_p999,
                r.kl_max, 100.0 * r.same_top1);
  }
  std::fflush(stdout);
}

}  // namespace
}  // namespace densa

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  const fs::path repo = fs::path(__FILE__).parent_path().parent_path();
  const fs::path models = argc > 1 ? fs::path(argv[1]) : repo / ".." / "shared" / "models";
  const fs::path data = argc > 2 ? fs::path(argv[2]) : repo / ".." / "shared" / "data";
  densa::ThreadPool pool(0);
  const auto t0 = std::chrono::steady_clock::now();
  for (const char* m : {"tinystories-llama-1m", "tinystories-mixtral-3.6m"})
    densa::run_model(models, data, m, &pool);
  std::printf("\n(%.0f s)\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return 0;
}
