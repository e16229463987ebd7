// `densa capacity`: KV tokens and concurrent requests that fit a memory budget, for any model
// given as a config.json, an HF directory or a GGUF file.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/command.h"
#include "core/byte_size.h"
#include "tools/capacity/capacity.h"

namespace densa::cli {
namespace {

struct CapacityFlags {
  std::string model;
  std::string memory;
  std::string kv_memory;
  std::string weight_dtype = "bf16";
  std::string lm_head_dtype;
  std::string kv_dtype = "bf16";
  std::string kv_scales = "dynamic";
  int64_t context = 0;
  int32_t page_size = 16;
  int tp = 1;
  int ep = 1;
  std::string layout = "sglang";
  bool json = false;
};

[[noreturn]] void fail(const std::string& message, int code) {
  std::fprintf(stderr, "densa capacity: %s\n", message.c_str());
  throw CLI::RuntimeError(code);
}

// One of the names weight_format_name gives, else a usage error naming `flag`.
WeightFormat parse_weight_format(const char* flag, const std::string& name) {
  for (WeightFormat w : {WeightFormat::kBF16, WeightFormat::kFP8, WeightFormat::kINT4}) {
    if (name == weight_format_name(w)) return w;
  }
  fail(std::string(flag) + " must be bf16, fp8 or int4, not \"" + name + "\"", 2);
}

void run_capacity(const CapacityFlags& f) {
  CapacityRequest req;
  if (f.memory.empty() == f.kv_memory.empty()) fail("give exactly one of --memory and --kv-memory", 2);
  const std::string& budget_text = f.memory.empty() ? f.kv_memory : f.memory;
  Result<int64_t> budget = parse_byte_size(budget_text);
  if (!budget.is_ok()) fail(budget.status().message(), 2);
  (f.memory.empty() ? req.kv_memory_bytes : req.memory_bytes) = *budget;

  req.weight_format = parse_weight_format("--weight-dtype", f.weight_dtype);
  if (!f.lm_head_dtype.empty()) req.lm_head_format = parse_weight_format("--lm-head-dtype", f.lm_head_dtype);

  if (f.kv_dtype == "bf16") req.kv.dtype = DType::kBF16;
  else if (f.kv_dtype == "fp8") req.kv.dtype = DType::kFP8E4M3;
  else fail("--kv-dtype must be bf16 or fp8, not \"" + f.kv_dtype + "\"", 2);

  if (f.kv_scales == "static") req.kv.scale_mode = KvScaleMode::kStatic;
  else if (f.kv_scales == "dynamic") req.kv.scale_mode = KvScaleMode::kDynamic;
  else fail("--kv-scales must be static or dynamic, not \"" + f.kv_scales + "\"", 2);
  if (req.kv.dtype != DType::kFP8E4M3) req.kv.scale_mode = KvScaleMode::kNone;

  if (f.page_size <= 0) fail("--page-size must be positive", 2);
  if (f.context < 0) fail("--context must be positive", 2);
  req.kv.page_size = f.page_size;
  req.context_tokens = f.context;
  req.parallel = Parallelism{f.tp, f.ep,
                             f.layout == "densa" ? ParallelLayoutKind::kTpTimesEp : ParallelLayoutKind::kEpWithinTp};
  if (Status s = check_parallelism(req.parallel); !s.is_ok()) fail(s.message(), 2);

  Result<CapacityModel> model = load_capacity_model(f.model);
  if (!model.is_ok()) fail(model.status().message(), 1);
  Result<CapacityReport> report = plan_capacity(*model, req);
  if (!report.is_ok()) fail(report.status().message(), 1);
  const std::string out = f.json ? format_capacity_json(*report) : format_capacity_text(*report);
  std::fputs(out.c_str(), stdout);
}

const CommandRegistrar kRegister([](CLI::App& app) {
  auto f = std::make_shared<CapacityFlags>();
  CLI::App* cmd = app.add_subcommand("capacity", "KV tokens and concurrent requests that fit a memory budget");
  cmd->add_option("-m,--model", f->model, "config.json, Hugging Face directory or GGUF file")->required();
  cmd->add_option("--memory", f->memory, "total memory for weights + KV, e.g. 80GiB, 141G, 1128GB");
  cmd->add_option("--kv-memory", f->kv_memory, "KV budget directly (weights not subtracted)");
  cmd->add_option("--weight-dtype", f->weight_dtype, "bf16 | fp8 (128x128 block scales) | int4 (group 32)")
      ->capture_default_str();
  cmd->add_option("--lm-head-dtype", f->lm_head_dtype,
                  "bf16 | fp8 | int4 (group 32): the output projection's format, apart from --weight-dtype "
                  "(default: BF16, as checkpoints store it); a tied head is counted as its own copy");
  cmd->add_option("--kv-dtype", f->kv_dtype, "bf16 | fp8 (e4m3)")->capture_default_str();
  cmd->add_option("--kv-scales", f->kv_scales, "fp8 KV scales: static (per layer, head) | dynamic (per token)")
      ->capture_default_str();
  cmd->add_option("--context", f->context, "tokens per request (default: the model's context length)");
  cmd->add_option("--page-size", f->page_size, "tokens per KV page")->capture_default_str();
  cmd->add_option("--tp", f->tp,
                  "tensor-parallel ranks: weights and KV are given per rank, --memory is one rank's "
                  "(attention heads, dense / shared FFN and the vocab split; MLA latent KV replicated)");
  cmd->add_option("--ep", f->ep,
                  "expert-parallel ranks (--layout sglang: divides --tp) or groups (--layout densa): routed experts "
                  "split over them");
  cmd->add_option("--layout", f->layout,
                  "sglang: EP inside the TP group, tp ranks, vocab split (SGLang / vLLM) | densa: tp x ep ranks as "
                  "`densa serve --tp --ep` runs them, embeddings replicated, each expert split over tp")
      ->check(CLI::IsMember({"sglang", "densa"}))
      ->capture_default_str();
  cmd->add_flag("--json", f->json, "print JSON");
  cmd->callback([f] { run_capacity(*f); });
});

}  // namespace
}  // namespace densa::cli
