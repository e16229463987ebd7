#include "cli/weight_options.h"

namespace densa::cli {

void add_weight_options(CLI::App* cmd, WeightArgs& args) {
  cmd->add_option("--weight-dtype", args.weight_dtype,
                  "quantize matrices on load: bf16 | fp8 | int4 | q8_0 | q4_0 (default: as stored)");
  cmd->add_option("--weight-group-size", args.weight_group_size, "INT4 group size")
      ->check(CLI::IsMember({32, 128}));
}

Result<LoadOptions> load_options_from(const WeightArgs& args) {
  LoadOptions opts;
  opts.weight_group_size = args.weight_group_size;
  if (args.weight_dtype.empty() || args.weight_dtype == "native") return opts;
  const std::string& d = args.weight_dtype;
  if (d == "bf16") opts.weight_dtype = DType::kBF16;
  else if (d == "fp8") opts.weight_dtype = DType::kFP8E4M3;
  else if (d == "int4") opts.weight_dtype = DType::kI4;
  else if (d == "q8_0") opts.weight_dtype = DType::kQ8_0;
  else if (d == "q4_0") opts.weight_dtype = DType::kQ4_0;
  else return invalid_argument("--weight-dtype must be bf16, fp8, int4, q8_0 or q4_0, not \"" + d + "\"");
  return opts;
}

}  // namespace densa::cli
