// `densa generate`: one prompt from the command line, text streamed to stdout.
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "cli/model_path.h"
#include "cli/weight_options.h"
#include "model/model_loader.h"
#include "quality/generator.h"
#include "text/tokenizer_loader.h"

namespace densa::cli {
namespace {

struct GenerateArgs {
  std::string model;
  std::string prompt = "Once upon a time";
  int max_new_tokens = 64;
  int threads = 0;
  float temperature = 0.0f;
  int top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  uint64_t seed = 0;
  bool ignore_eos = false;
  std::string tokenizer;  // tokenizer file or model dir overriding the model's own
  WeightArgs weights;
};

int run_generate(const GenerateArgs& a) {
  const std::string path = a.model.empty() ? default_model_path() : a.model;
  Result<LoadOptions> load_opts = load_options_from(a.weights);
  if (!load_opts.is_ok()) {
    std::fprintf(stderr, "densa generate: %s\n", load_opts.status().message().c_str());
    return 1;
  }
  Result<ModelWeights> loaded = load_model(path, load_opts.value());
  if (!loaded.is_ok()) {
    std::fprintf(stderr, "densa generate: %s\n", loaded.status().message().c_str());
    return 1;
  }
  const ModelWeights& w = loaded.value();
  std::unique_ptr<Tokenizer> own_tokenizer;
  if (!a.tokenizer.empty()) {
    Result<LoadedTokenizer> t = load_tokenizer(a.tokenizer);
    if (!t.is_ok()) {
      std::fprintf(stderr, "densa generate: %s\n", t.status().message().c_str());
      return 1;
    }
    own_tokenizer = std::make_unique<Tokenizer>(std::move(t).value().tokenizer);
  }
  if (!own_tokenizer && !w.tokenizer) {
    std::fprintf(stderr, "densa generate: %s: model has no tokenizer (pass --tokenizer)\n", path.c_str());
    return 1;
  }
  const Tokenizer& tok = own_tokenizer ? *own_tokenizer : *w.tokenizer;
  std::vector<TokenId> ids = tok.encode(a.prompt, /*add_bos=*/true);
  if (static_cast<int>(ids.size()) >= w.config.max_position_embeddings) {
    std::fprintf(stderr, "densa generate: prompt is %zu tokens, context is %d\n", ids.size(),
                 w.config.max_position_embeddings);
    return 1;
  }
  GenerateOptions opts;
  opts.max_new_tokens = a.max_new_tokens;
  opts.sampling = SamplingParams{a.temperature, a.top_k, a.top_p, a.min_p, a.seed};
  opts.stop_at_eos = !a.ignore_eos;
  ThreadPool pool(a.threads);

  std::vector<TokenId> all = ids;
  size_t printed = tok.decode(all).size();
  std::cout << a.prompt << std::flush;
  generate(w, ids, opts, &pool, [&](TokenId id, std::span<const float>) {
    all.push_back(id);
    const std::string text = tok.decode(all);
    if (text.size() > printed) std::cout << text.substr(printed) << std::flush;
    printed = text.size();
    return true;
  });
  std::cout << std::endl;
  return 0;
}

const CommandRegistrar kRegister([](CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "generate text for one prompt");
  cmd->add_option("-m,--model", args->model, "GGUF file or Hugging Face directory (default: the MoE fixture in models/)");
  cmd->add_option("-p,--prompt", args->prompt, "prompt text")->capture_default_str();
  cmd->add_option("-n,--max-tokens", args->max_new_tokens, "tokens to generate")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("-t,--threads", args->threads, "worker threads (0 = all cores)")->capture_default_str();
  cmd->add_option("--temperature,--temp", args->temperature, "0 = greedy")
      ->check(CLI::Range(0.0f, 100.0f))
      ->capture_default_str();
  cmd->add_option("--top-k", args->top_k, "keep the K most likely tokens (0 = off)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--top-p", args->top_p, "keep the most likely tokens whose probabilities sum to P (1 = off)")
      ->check(CLI::Range(0.0f, 1.0f))
      ->capture_default_str();
  cmd->add_option("--min-p", args->min_p, "drop tokens less likely than P x the most likely one (0 = off)")
      ->check(CLI::Range(0.0f, 1.0f))
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "sampling seed")->capture_default_str();
  cmd->add_flag("--ignore-eos", args->ignore_eos, "keep generating past </s>");
  cmd->add_option("--tokenizer", args->tokenizer,
                  "tokenizer (tokenizer.json, tiktoken.model, tokenizer.model, GGUF or model dir) to use instead of the model's own");
  add_weight_options(cmd, args->weights);
  cmd->callback([args] {
    if (int rc = run_generate(*args); rc != 0) throw CLI::RuntimeError(rc);
  });
});

}  // namespace
}  // namespace densa::cli
