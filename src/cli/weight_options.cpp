#include "cli/weight_options.h"

#include "kernels/matmul.h"
#include "quant/int4_group.h"
#include "quant/quantize_matrix.h"

namespace densa::cli {

void add_weight_options(CLI::App* cmd, WeightArgs& args) {
  cmd->add_option("--weight-dtype", args.weight_dtype,
                  "quantize attention / FFN / expert matrices on load: bf16 | fp8 | int4 | int4-g32 | int4-g128 | "
                  "q8_0 | q4_0 (default: as stored)");
  cmd->add_option("--weight-group-size", args.weight_group_size, "INT4 group size of plain \"int4\"")
      ->check(CLI::IsMember({32, 128}))
      ->capture_default_str();
  cmd->add_option("--lm-head-dtype", args.lm_head_dtype,
                  "precision of the output projection (lm_head), apart from --weight-dtype: same names "
                  "(default: as stored; checkpoints usually keep it BF16). A tied lm_head gets its own "
                  "copy; the embeddings stay as stored");
  cmd->add_option("--int4-layout", args.int4_layout,
                  "INT4 g32 matrices (and GGUF Q4_0) in memory: tiles (the fastest tiles here: tiles16 where "
                  "AVX-512 VNNI with BF16 or AVX2 runs, else tiles8) | tiles16 (16-row tiles: exact group sums, "
                  "GEMMs on AMX-INT8, AVX-512 VNNI without it, AVX2 without AVX-512) | tiles8 (8-row tiles the "
                  "AVX-512 kernel with GFNI streams in one pass) | rows (row-major). rows and tiles8 give the same "
                  "results, tiles16 rounds differently (on AVX2 without AVX-512, rows runs tiles16's arithmetic)")
      ->check(CLI::IsMember({"tiles", "tiles16", "tiles8", "rows"}))
      ->capture_default_str();
  cmd->add_option("--int8-layout", args.int8_layout,
                  "W8A8 matrices (GGUF Q8_0, and the K-quant / IQ4 / MXFP4 forms of --ggml-blocks) in memory: "
                  "tiles (16-row tiles: exact sums per group on AVX-512 VNNI or AVX2, GEMMs on AMX-INT8 where the "
                  "CPU has it) | rows (row-major, the per-lane kernels: results differ in rounding; on AVX2 without "
                  "AVX-512 rows run the tiles' arithmetic)")
      ->check(CLI::IsMember({"tiles", "rows"}))
      ->capture_default_str();
  cmd->add_option("--ggml-blocks", args.ggml_blocks,
                  "GGUF K-quant, IQ4 and MXFP4 matrices in memory: packed (the file's exact values as codes with fp32 "
                  "group scales and mins, int8 x on AVX-512 VNNI: 4-bit codes for Q4_K / Q4_1 / IQ4 / MXFP4, 5-6 bits "
                  "per weight; 8-bit codes for the others, 9-10) | affine8 (8-bit codes for all) | f32 (the same "
                  "values as fp32: 32 bits per weight, fp32 x)")
      ->check(CLI::IsMember({"packed", "affine8", "f32"}))
      ->capture_default_str();
  cmd->add_option("--bf16-activations", args.bf16_activations,
                  "BF16 and F16 matrices: auto (where the CPU grants AMX-BF16, x is rounded to bf16 and the "
                  "products run on AMX tiles, as GPU engines and llama.cpp compute BF16 / F16 models; else fp32 "
                  "x) | f32 (always fp32 x and exact products on FMAs: several times slower prefill)")
      ->check(CLI::IsMember({"auto", "f32"}))
      ->capture_default_str();
}

Result<LoadOptions> load_options_from(const WeightArgs& args) {
  LoadOptions opts;
  opts.weight_group_size = args.weight_group_size;
  if (args.int4_layout != "tiles") {
    const WeightLayout l = int4_layout_from_name(args.int4_layout).value();  // CLI11 checked the name
    if (!matmul_runs_int4_layout(l)) {
      return invalid_argument("--int4-layout " + args.int4_layout + ": this CPU's kernels do not run that layout" +
                   (l == WeightLayout::kInt4Tiles8 ? " (it needs AVX-512 with VBMI and GFNI)" : " (it needs AVX-512 VNNI)"));
    }
    opts.int4_layout = l;
  }
  opts.int8_tiles = args.int8_layout != "rows";
  opts.ggml_blocks = args.ggml_blocks == "f32"       ? GgmlBlockForm::kF32
                     : args.ggml_blocks == "affine8" ? GgmlBlockForm::kAffine8
                                                     : GgmlBlockForm::kPacked;
  opts.bf16_f32_activations = args.bf16_activations == "f32";
  auto parse = [&](const std::string& flag, const std::string& name) -> Result<WeightQuantSpec> {
    Result<WeightQuantSpec> spec = weight_quant_spec_from_name(name, args.weight_group_size);
    if (!spec.is_ok()) return invalid_argument(flag + " " + spec.status().message());
    return spec;
  };
  if (!args.weight_dtype.empty() && args.weight_dtype != "native") {
    DENSA_ASSIGN_OR_RETURN(WeightQuantSpec body, parse("--weight-dtype", args.weight_dtype));
    opts.weight_dtype = body.dtype;
    opts.weight_group_size = body.group_size;
  }
  if (!args.lm_head_dtype.empty() && args.lm_head_dtype != "native") {
    DENSA_ASSIGN_OR_RETURN(opts.lm_head, parse("--lm-head-dtype", args.lm_head_dtype));
  }
  return opts;
}

std::string weight_precision_line(const ModelWeights& w) {
  auto name = [](const WeightView& v) {
    // GGUF Q4_0 / Q8_0 repacked at load keep their GGUF names.
    if (v.scales_f16 != nullptr) return std::string(weight_view_format_name(v));
    return weight_quant_spec_name({v.dtype, static_cast<int>(v.scale_cols)});
  };
  std::string body = "none";
  auto half = [](DType t) { return t == DType::kBF16 || t == DType::kF16; };
  bool bf16 = half(w.lm_head.dtype);
  if (!w.layers.empty()) {
    const LayerWeights& l = w.layers[0];
    for (const WeightView* v : {&l.wq, &l.q_a, &l.kv_a}) {
      if (!v->empty()) {
        body = name(*v) + (v->layout == WeightLayout::kInt4Tiles8    ? " in 8-row tiles"
                           : v->layout == WeightLayout::kInt8Tiles16 || v->layout == WeightLayout::kInt4Tiles16 ||
                                   v->layout == WeightLayout::kAffineTiles16
                               ? " in 16-row tiles"
                                                                       : "");
        bf16 = bf16 || half(v->dtype);
        break;
      }
    }
  }
  return "weights " + body + ", lm_head " + name(w.lm_head) +
         (w.lm_head.data == w.tok_embeddings.data ? " (tied to the embeddings)" : "") +
         (!bf16                  ? ""
          : matmul_bf16_on_amx(w.half_float_amx) ? "; BF16 / F16 matrices on AMX tiles, x rounded to bf16"
                                 : "; BF16 / F16 matrices with fp32 x");
}

std::string weight_memory_line(const ModelWeights& w) {
  const size_t mib = (w.arena.allocated() + (size_t{1} << 19)) >> 20;
  const std::string mode = transparent_huge_pages_mode();
  return std::to_string(mib) + " MiB of weights in the huge-page arena (transparent huge pages: " + mode +
         (mode == "always" || mode == "madvise" ? ")" : "; the arena falls back to 4 KiB pages)");
}

}  // namespace densa::cli
