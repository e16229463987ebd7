#include "tools/model_files/quantize.h"

#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "io/gguf_file.h"
#include "io/gguf_writer.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "model/hf_moe_names.h"
#include "model/model_loader.h"
#include "model/quantize_weights.h"
#include "quant/dequantize.h"
#include "quant/fp8_block.h"
#include "tools/model_files/gguf_model_writer.h"

namespace densa {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

std::vector<uint8_t> bytes_of(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  return {b, b + n};
}

// ---- Hugging Face -> Hugging Face ----

// head_quantized: lm_head is stored in spec too, so compressed-tensors must not ignore it.
Json quantization_config(const WeightQuantSpec& spec, bool head_quantized) {
  if (spec.dtype == DType::kFP8E4M3) {
    return Json{{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"},
                {"weight_block_size", {kFp8BlockRows, kFp8BlockCols}}};
  }
  Json weights = {{"num_bits", 4}, {"type", "int"}, {"symmetric", true}, {"strategy", "group"},
                  {"group_size", spec.group_size}, {"dynamic", false}, {"actorder", nullptr}, {"observer", "minmax"}};
  return Json{{"quant_method", "compressed-tensors"},
              {"format", "pack-quantized"},
              {"quantization_status", "compressed"},
              {"config_groups", {{"group_0", {{"targets", {"Linear"}}, {"weights", weights},
                                              {"input_activations", nullptr}, {"output_activations", nullptr}}}}},
              {"ignore", head_quantized ? Json{"re:.*block_sparse_moe.gate$"}
                                        : Json{"lm_head", "re:.*block_sparse_moe.gate$"}},
              {"kv_cache_scheme", nullptr}};
}

// The tensors written for one quantized matrix `name` (without ".weight").
void append_matrix(std::vector<SafetensorsOut>& out, const std::string& name, const WeightView& v) {
  const std::vector<int64_t> shape = {v.rows, v.cols};
  switch (v.dtype) {
    case DType::kBF16:
      out.push_back({name + ".weight", "BF16", shape, bytes_of(v.data, static_cast<size_t>(v.bytes()))});
      return;
    case DType::kFP8E4M3: {
      const int64_t srows = fp8_block_scale_rows(v.rows), scols = fp8_block_scale_cols(v.cols);
      out.push_back({name + ".weight", "F8_E4M3", shape, bytes_of(v.data, static_cast<size_t>(v.bytes()))});
      out.push_back({name + ".weight_scale_inv", "F32", {srows, scols}, bytes_of(v.scales_f32, static_cast<size_t>(srows * scols) * 4)});
      return;
    }
    case DType::kI4: {
      CHECK(v.scales_bf16 != nullptr) << name << ": INT4 with f16 scales (repacked Q4_0) has no compressed-tensors form";
      CHECK(v.layout == WeightLayout::kRows) << name << ": INT4 in 8-row tiles (a load prepared for the kernels)";
      const int64_t groups = v.cols / v.scale_cols;
      const int32_t dims[2] = {static_cast<int32_t>(v.rows), static_cast<int32_t>(v.cols)};
      out.push_back({name + ".weight_packed", "I32", {v.rows, v.cols / 8}, bytes_of(v.data, static_cast<size_t>(v.bytes()))});
      out.push_back({name + ".weight_scale", "BF16", {v.rows, groups}, bytes_of(v.scales_bf16, static_cast<size_t>(v.rows * groups) * 2)});
      out.push_back({name + ".weight_shape", "I32", {2}, bytes_of(dims, 8)});
      return;
    }
    case DType::kI8:  // GGUF Q8_0 repacked, which a load for quantize never does
      CHECK(false) << name << ": INT8 (repacked Q8_0) has no compressed-tensors form";
      return;
    case DType::kA8K16: case DType::kA8K32: case DType::kA4K: case DType::kA4KIQ4:  // GGUF K-quants for the kernels, which a load for quantize never makes
    case DType::kA8G32: case DType::kA4G32: case DType::kA4IQ4: case DType::kA4MXFP4:
      CHECK(false) << name << ": affine 8-bit rows (repacked GGUF blocks) have no compressed-tensors form";
      return;
    case DType::kF32: case DType::kF16: case DType::kQ8_0: case DType::kQ4_0:
    case DType::kI32: case DType::kU8: break;
  }
}

Status copy_tensor(std::vector<SafetensorsOut>& out, const SafetensorsDir& st, const std::string& name) {
  DENSA_ASSIGN_OR_RETURN(SafetensorsTensor t, st.tensor(name));
  out.push_back({name, t.dtype_name, t.shape, bytes_of(t.data, t.nbytes)});
  return Status::ok();
}

int64_t dir_tensor_bytes(const fs::path& dir) {
  int64_t n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".safetensors") n += static_cast<int64_t>(fs::file_size(e.path(), ec));
  }
  return n;
}

Result<QuantizeReport> quantize_hf(const QuantizeOptions& opts, const WeightQuantSpec& spec,
                                   const std::optional<WeightQuantSpec>& head,
                                   const std::function<void(int, int)>& progress) {
  const fs::path& in = opts.input;
  DENSA_ASSIGN_OR_RETURN(ModelWeights w, load_model(in, LoadOptions{spec.dtype, spec.group_size, head, /*prepare_for_kernels=*/false}));
  DENSA_ASSIGN_OR_RETURN(SafetensorsDir st, SafetensorsDir::open(in));
  const ModelConfig& c = w.config;
  QuantizeReport report;
  std::vector<SafetensorsOut> out;
  std::vector<std::string> kept = {"model.embed_tokens.weight", "model.norm.weight"};
  if (!c.tie_word_embeddings && !head) kept.push_back("lm_head.weight");
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    kept.push_back(p + "input_layernorm.weight");
    kept.push_back(p + "post_attention_layernorm.weight");
    const LayerWeights& l = w.layers[static_cast<size_t>(i)];
    if (!l.bq.empty()) {
      for (const char* b : {"q", "k", "v"}) kept.push_back(p + "self_attn." + b + "_proj.bias");
    }
    if (!l.q_norm.empty()) {
      kept.push_back(p + "self_attn.q_norm.weight");
      kept.push_back(p + "self_attn.k_norm.weight");
    }
    if (c.is_mla()) {  // MLA's latent norms; DSA's indexer stays as stored
      if (c.mla.q_lora_rank > 0) kept.push_back(p + "self_attn.q_a_layernorm.weight");
      kept.push_back(p + "self_attn.kv_a_layernorm.weight");
    }
    if (c.is_dsa()) {
      for (const char* t : {"wq_b.weight", "wk.weight", "k_norm.weight", "k_norm.bias", "weights_proj.weight"}) {
        kept.push_back(p + "self_attn.indexer." + t);
      }
    }
    if (!c.is_moe_layer(i)) continue;
    const HfMoeNames moe = hf_moe_names(c);
    kept.push_back(p + moe.router + ".weight");
    if (!moe.router_bias.empty()) kept.push_back(p + moe.router_bias);
    if (c.shared_expert_gate) kept.push_back(p + moe.shared_gate + ".weight");
  }
  int total = static_cast<int>(kept.size()) + (head ? 1 : 0), done = 0;
  for_each_quantizable_matrix(w, [&](const std::string&, WeightView&) { ++total; });
  for (const std::string& name : kept) {
    DENSA_RETURN_IF_ERROR(copy_tensor(out, st, name));
    ++report.num_kept;
    if (progress) progress(++done, total);
  }
  for_each_quantizable_matrix(w, [&](const std::string& name, WeightView& v) {
    append_matrix(out, name, v);
    ++report.num_quantized;
    if (progress) progress(++done, total);
  });
  if (head) {  // converted on load (or kept, if already in the target)
    append_matrix(out, "lm_head", w.lm_head);
    ++report.num_quantized;
    if (progress) progress(++done, total);
  }

  std::error_code ec;
  fs::create_directories(opts.output, ec);
  if (ec) return not_found(opts.output.string() + ": cannot create directory: " + ec.message());
  DENSA_RETURN_IF_ERROR(write_safetensors(opts.output / "model.safetensors", out));
  // config.json with the quantization_config; every other non-weight file copied.
  std::ifstream cin(in / "config.json", std::ios::binary);
  std::ostringstream ss;
  ss << cin.rdbuf();
  Json config = Json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (!config.is_object()) return data_loss((in / "config.json").string() + ": not a JSON object");
  config.erase("quantization_config");
  if (spec.dtype != DType::kBF16) {
    config["quantization_config"] = quantization_config(spec, head && head->dtype == spec.dtype);
  }
  if (head && c.tie_word_embeddings) config["tie_word_embeddings"] = false;  // lm_head is its own tensor now
  if (spec.dtype == DType::kBF16) config["torch_dtype"] = "bfloat16";
  std::ofstream cout(opts.output / "config.json", std::ios::binary | std::ios::trunc);
  cout << config.dump(2) << "\n";
  if (!cout) return data_loss((opts.output / "config.json").string() + ": write failed");
  for (const auto& e : fs::directory_iterator(in, ec)) {
    const std::string fname = e.path().filename().string();
    if (!e.is_regular_file() || e.path().extension() == ".safetensors" || fname == "config.json" ||
        fname == "model.safetensors.index.json") {
      continue;
    }
    fs::copy_file(e.path(), opts.output / fname, fs::copy_options::overwrite_existing, ec);
    if (ec) return data_loss(e.path().string() + ": copy failed: " + ec.message());
    fs::permissions(opts.output / fname, fs::perms::owner_write, fs::perm_options::add, ec);  // rerunnable
  }
  report.input_weight_bytes = dir_tensor_bytes(in);
  report.output_weight_bytes = dir_tensor_bytes(opts.output);
  return report;
}

// ---- GGUF -> GGUF ----

// The matrices quantize_weights converts, by GGUF name.
bool gguf_quantizable(const std::string& name) {
  static const std::regex re(R"(blk\.\d+\.(attn_q|attn_k|attn_v|attn_output|ffn_gate|ffn_up|ffn_down|ffn_gate_exps|ffn_up_exps|ffn_down_exps)\.weight)");
  return std::regex_match(name, re);
}

// `name`'s data as `spec` ([rows, cols] = all but ne0, ne0), or the error naming it.
Result<GgufOutTensor> gguf_quantized(const fs::path& input, const std::string& name, const GgufTensor& t,
                                     const WeightQuantSpec& spec) {
  const WeightView v{.dtype = t.dtype, .rows = t.numel() / t.ne[0], .cols = t.ne[0], .data = t.data};
  Status s = check_quant_target(spec, v.rows, v.cols);
  if (!s.is_ok()) return invalid_argument(input.string() + ": tensor '" + t.name + "': " + s.message());
  const std::vector<float> values = dequantize_matrix(v);
  QuantizedMatrix q = quantize_matrix(values.data(), v.rows, v.cols, spec);
  return GgufOutTensor{name, *ggml_type_of(spec.dtype), t.ne, bytes_of(q.view.data, static_cast<size_t>(q.view.bytes()))};
}

Result<QuantizeReport> quantize_gguf(const QuantizeOptions& opts, const WeightQuantSpec& spec,
                                     const std::optional<WeightQuantSpec>& head,
                                     const std::function<void(int, int)>& progress) {
  DENSA_ASSIGN_OR_RETURN(GgufFile f, GgufFile::open(opts.input));
  QuantizeReport report;
  std::vector<GgufOutTensor> tensors;
  const auto& infos = f.tensor_infos();
  // A tied model (no output.weight) gets one, quantized from token_embd, right after it.
  const bool add_output = head && !f.has_tensor("output.weight");
  const int total = static_cast<int>(infos.size()) + (add_output ? 1 : 0);
  int done = 0;
  for (size_t i = 0; i < infos.size(); ++i) {
    DENSA_ASSIGN_OR_RETURN(GgufTensor t, f.tensor(infos[i].name));
    const bool is_head = head && t.name == "output.weight";
    if ((gguf_quantizable(t.name) || is_head) && t.ne.size() >= 2) {
      DENSA_ASSIGN_OR_RETURN(GgufOutTensor o, gguf_quantized(opts.input, t.name, t, is_head ? *head : spec));
      tensors.push_back(std::move(o));
      ++report.num_quantized;
    } else {
      tensors.push_back(GgufOutTensor{t.name, infos[i].ggml_type, t.ne, bytes_of(t.data, t.nbytes)});
      ++report.num_kept;
    }
    if (progress) progress(++done, total);
    if (add_output && t.name == "token_embd.weight") {
      DENSA_ASSIGN_OR_RETURN(GgufOutTensor o, gguf_quantized(opts.input, "output.weight", t, *head));
      tensors.push_back(std::move(o));
      ++report.num_quantized;
      if (progress) progress(++done, total);
    }
  }
  std::vector<std::pair<std::string, GgufValue>> metadata(f.metadata().begin(), f.metadata().end());
  for (auto& [key, value] : metadata) {
    if (key == "general.file_type") value.integer = spec.dtype == DType::kQ8_0 ? 7 : 2;  // MOSTLY_Q8_0 / MOSTLY_Q4_0
  }
  if (!f.find("general.file_type")) {
    GgufValue v;
    v.type = GgufType::kU32;
    v.integer = spec.dtype == DType::kQ8_0 ? 7 : 2;
    metadata.emplace_back("general.file_type", v);
  }
  if (opts.output.has_parent_path()) {
    std::error_code ec;
    fs::create_directories(opts.output.parent_path(), ec);
  }
  DENSA_RETURN_IF_ERROR(write_gguf(opts.output, metadata, tensors, f.alignment()));
  std::error_code ec;
  report.input_weight_bytes = static_cast<int64_t>(fs::file_size(opts.input, ec));
  report.output_weight_bytes = static_cast<int64_t>(fs::file_size(opts.output, ec));
  return report;
}

// ---- Hugging Face -> GGUF ----

Result<QuantizeReport> hf_to_gguf(const QuantizeOptions& opts, const std::optional<WeightQuantSpec>& head,
                                  const std::function<void(int, int)>& progress) {
  DType dtype;
  if (opts.to == "f32") {
    dtype = DType::kF32;
  } else if (opts.to == "f16") {
    dtype = DType::kF16;
  } else if (opts.to == "bf16") {
    dtype = DType::kBF16;
  } else if (opts.to == "q8_0") {
    dtype = DType::kQ8_0;
  } else if (opts.to == "q4_0") {
    dtype = DType::kQ4_0;
  } else {
    return invalid_argument("--to '" + opts.to + "': a .gguf output from a Hugging Face directory takes f32, f16, "
                            "bf16, q8_0 or q4_0");
  }
  DENSA_ASSIGN_OR_RETURN(ModelWeights w, load_model(opts.input, LoadOptions{.prepare_for_kernels = false}));
  if (opts.output.has_parent_path()) {
    std::error_code ec;
    fs::create_directories(opts.output.parent_path(), ec);
  }
  const std::optional<DType> head_dtype = head ? std::optional<DType>(head->dtype) : std::nullopt;
  DENSA_ASSIGN_OR_RETURN(GgufWriteReport r, write_model_gguf(w, opts.output, dtype, progress, head_dtype));
  QuantizeReport report;
  report.num_quantized = r.num_converted;
  report.num_kept = r.num_kept;
  std::error_code ec;
  report.input_weight_bytes = dir_tensor_bytes(opts.input);
  report.output_weight_bytes = static_cast<int64_t>(fs::file_size(opts.output, ec));
  return report;
}

// opts.lm_head as a spec (nullopt: keep lm_head as stored), checked against what the output
// can hold: `hf_body` is the body's format of an HF output, null for a GGUF output.
Result<std::optional<WeightQuantSpec>> lm_head_target(const QuantizeOptions& opts, const WeightQuantSpec* hf_body) {
  if (opts.lm_head.empty()) return std::optional<WeightQuantSpec>();
  Result<WeightQuantSpec> head = weight_quant_spec_from_name(opts.lm_head, opts.group_size);
  if (!head.is_ok()) return invalid_argument("--lm-head-dtype " + head.status().message());
  const std::string name = weight_quant_spec_name(*head);
  if (hf_body == nullptr) {
    if (head->dtype != DType::kBF16 && head->dtype != DType::kQ8_0 && head->dtype != DType::kQ4_0) {
      return invalid_argument("--lm-head-dtype " + name + ": a GGUF output holds lm_head as bf16, q8_0 or q4_0");
    }
    return std::optional<WeightQuantSpec>(*head);
  }
  const bool same = head->dtype == hf_body->dtype && (head->dtype != DType::kI4 || head->group_size == hf_body->group_size);
  if (head->dtype != DType::kBF16 && hf_body->dtype == DType::kBF16) {
    return invalid_argument("--lm-head-dtype " + name + ": a Hugging Face checkpoint written --to bf16 has no "
                            "quantization_config, so lm_head is bf16");
  }
  if (head->dtype != DType::kBF16 && !same) {
    return invalid_argument("--lm-head-dtype " + name + ": a Hugging Face checkpoint written --to " + opts.to +
                            " holds lm_head as bf16 or as " + weight_quant_spec_name(*hf_body) +
                            " (one quantization_config covers the whole file)");
  }
  return std::optional<WeightQuantSpec>(*head);
}

}  // namespace

Result<QuantizeReport> quantize_checkpoint(const QuantizeOptions& opts, const std::function<void(int, int)>& progress) {
  std::error_code ec;
  const bool hf = fs::is_directory(opts.input, ec);
  if (!hf && !fs::exists(opts.input, ec)) return not_found(opts.input.string() + ": no such file or directory");
  if (hf && opts.output.extension() == ".gguf") {
    DENSA_ASSIGN_OR_RETURN(std::optional<WeightQuantSpec> head, lm_head_target(opts, nullptr));
    return hf_to_gguf(opts, head, progress);
  }
  WeightQuantSpec spec;
  spec.group_size = opts.group_size;
  if (opts.to == "fp8") {
    spec.dtype = DType::kFP8E4M3;
  } else if (opts.to == "int4") {
    spec.dtype = DType::kI4;
  } else if (opts.to == "bf16") {
    spec.dtype = DType::kBF16;
  } else if (opts.to == "q8_0") {
    spec.dtype = DType::kQ8_0;
  } else if (opts.to == "q4_0") {
    spec.dtype = DType::kQ4_0;
  } else {
    return invalid_argument("--to '" + opts.to + "': expected fp8, int4, bf16 (Hugging Face) or q8_0, q4_0 (GGUF)");
  }
  DENSA_RETURN_IF_ERROR(check_quant_target(spec, 0, 0));
  const bool gguf_target = spec.dtype == DType::kQ8_0 || spec.dtype == DType::kQ4_0;
  if (hf && gguf_target) {
    return unimplemented("--to " + opts.to + " writes GGUF: give a .gguf output path (" + opts.output.string() +
                         " is taken as a Hugging Face directory), or use --to fp8|int4|bf16");
  }
  if (!hf && !gguf_target) {
    return unimplemented("--to " + opts.to + " writes a Hugging Face directory and needs one as input; " +
                         opts.input.string() + " is a GGUF file (use --to q8_0|q4_0)");
  }
  DENSA_ASSIGN_OR_RETURN(std::optional<WeightQuantSpec> head, lm_head_target(opts, hf ? &spec : nullptr));
  return hf ? quantize_hf(opts, spec, head, progress) : quantize_gguf(opts, spec, head, progress);
}

}  // namespace densa
