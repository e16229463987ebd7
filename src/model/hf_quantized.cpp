#include "model/hf_quantized.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "quant/fp8_block.h"
#include "quant/int4_group.h"

namespace densa {
namespace {

using Json = nlohmann::json;

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// FP8 block scales: copies a F32/BF16/F16 tensor of `n` elements into an owned fp32 buffer
// (1 scale per 16384 weights, so the copy costs nothing worth saving).
Result<const float*> scales_to_f32(const SafetensorsTensor& t, int64_t n, ModelWeights& owner, const std::string& what) {
  if (t.numel() != n) return data_loss(what + ": has " + std::to_string(t.numel()) + " elements, expected " + std::to_string(n));
  auto* out = reinterpret_cast<float*>(owner.alloc_owned(static_cast<size_t>(n) * 4));
  if (t.dtype_name == "F32") {
    std::memcpy(out, t.data, static_cast<size_t>(n) * 4);
  } else if (t.dtype_name == "BF16" || t.dtype_name == "F16") {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, t.data + 2 * i, 2);
      out[i] = t.dtype_name == "BF16" ? bf16_to_f32(h) : f16_to_f32(h);
    }
  } else {
    return unimplemented(what + ": scale dtype " + t.dtype_name + " (supported: F32, BF16, F16)");
  }
  return static_cast<const float*>(out);
}

// INT4 group scales as bf16 bits (WeightView::scales_bf16). BF16 tensors are used where they lie
// in the mapping, no copy (a copy only if the file puts them at an odd address, which neither
// the safetensors library nor densa's writer does). F32 / F16 are rounded to bf16 (to nearest
// even) into a buffer owned by `owner`: every weight then differs from the checkpoint's value by
// at most 2^-9 of itself (INT4 rounding itself is up to half a step, s / 2), so such checkpoints
// load close to, not bit for bit as, what they store.
Result<const uint16_t*> int4_scales_bf16(const SafetensorsTensor& t, int64_t n, ModelWeights& owner,
                                         const std::string& what) {
  if (t.numel() != n) return data_loss(what + ": has " + std::to_string(t.numel()) + " elements, expected " + std::to_string(n));
  if (t.dtype_name == "BF16" && reinterpret_cast<uintptr_t>(t.data) % alignof(uint16_t) == 0) {
    return reinterpret_cast<const uint16_t*>(t.data);
  }
  auto* out = reinterpret_cast<uint16_t*>(owner.alloc_owned(static_cast<size_t>(n) * 2));
  if (t.dtype_name == "BF16") {
    std::memcpy(out, t.data, static_cast<size_t>(n) * 2);
  } else if (t.dtype_name == "F32") {
    for (int64_t i = 0; i < n; ++i) {
      float f;
      std::memcpy(&f, t.data + 4 * i, 4);
      out[i] = f32_to_bf16(f);
    }
  } else if (t.dtype_name == "F16") {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, t.data + 2 * i, 2);
      out[i] = f32_to_bf16(f16_to_f32(h));
    }
  } else {
    return unimplemented(what + ": scale dtype " + t.dtype_name + " (supported: BF16, F32, F16)");
  }
  return static_cast<const uint16_t*>(out);
}

Result<HfQuantConfig> parse_compressed_tensors(const Json& q, const std::string& origin) {
  HfQuantConfig c;
  c.method = HfQuantMethod::kInt4Packed;
  if (q.value("format", "") != "pack-quantized") {
    return unimplemented(origin + ": compressed-tensors format '" + q.value("format", "") +
                         "' (supported: pack-quantized)");
  }
  const auto groups = q.find("config_groups");
  if (groups == q.end() || !groups->is_object() || groups->empty()) {
    return invalid_argument(origin + ": quantization_config.config_groups missing");
  }
  for (const auto& [gname, g] : groups->items()) {
    const auto wt = g.find("weights");
    if (wt == g.end() || !wt->is_object()) return invalid_argument(origin + ": config_groups." + gname + ".weights missing");
    const Json& w = *wt;
    if (w.value("num_bits", 0) != 4 || w.value("type", "") != "int" || !w.value("symmetric", false) ||
        w.value("strategy", "") != "group") {
      return unimplemented(origin + ": config_groups." + gname +
                           ".weights must be 4-bit symmetric int with strategy group");
    }
    const int gs = w.value("group_size", 0);
    if (gs <= 0 || gs % 8 != 0) return invalid_argument(origin + ": bad group_size " + std::to_string(gs));
    if (c.group_size != 0 && c.group_size != gs) return unimplemented(origin + ": config groups with different group sizes");
    c.group_size = gs;
    const auto act = g.find("input_activations");
    if (act != g.end() && !act->is_null()) return unimplemented(origin + ": activation quantization (W4A16 only)");
  }
  return c;
}

}  // namespace

Result<HfQuantConfig> parse_hf_quant_config(const std::filesystem::path& config_json) {
  const std::string origin = config_json.string();
  std::ifstream in(config_json, std::ios::binary);
  if (!in) return not_found(origin + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  const Json j = Json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return data_loss(origin + ": not a JSON object");
  // A multimodal wrapper (Kimi-K2.5) may keep it in its text_config instead.
  const Json* qp = j.contains("quantization_config") ? &j["quantization_config"] : nullptr;
  const auto text = j.find("text_config");
  if (text != j.end() && text->is_object() && text->contains("quantization_config")) {
    const Json& inner = (*text)["quantization_config"];
    if (qp != nullptr && !qp->is_null() && *qp != inner) {
      return invalid_argument(origin + ": quantization_config and text_config.quantization_config differ");
    }
    qp = &inner;
  }
  if (qp == nullptr || qp->is_null()) return HfQuantConfig{};
  const Json& q = *qp;
  if (!q.is_object()) return invalid_argument(origin + ": quantization_config is not an object");
  const std::string method = q.value("quant_method", "");
  if (method == "compressed-tensors") return parse_compressed_tensors(q, origin);
  if (method == "fp8") {
    HfQuantConfig c;
    c.method = HfQuantMethod::kFp8Block;
    if (q.value("fmt", "e4m3") != "e4m3") return unimplemented(origin + ": fp8 fmt '" + q.value("fmt", "") + "' (supported: e4m3)");
    const auto bs = q.find("weight_block_size");
    if (bs == q.end() || !bs->is_array() || bs->size() != 2 || !(*bs)[0].is_number_integer() ||
        !(*bs)[1].is_number_integer() || (*bs)[0].get<int64_t>() <= 0 || (*bs)[1].get<int64_t>() <= 0) {
      return unimplemented(origin + ": fp8 without a 2-D weight_block_size (per-tensor FP8 is not supported)");
    }
    c.block_rows = (*bs)[0].get<int64_t>();
    c.block_cols = (*bs)[1].get<int64_t>();
    return c;
  }
  return unimplemented(origin + ": quantization_config.quant_method '" + method +
                       "' (supported: fp8, compressed-tensors)");
}

Result<std::optional<WeightView>> load_hf_quantized_matrix(const SafetensorsDir& st, const HfQuantConfig& qc,
                                                           const std::string& weight_name, int64_t rows,
                                                           int64_t cols, ModelWeights& owner) {
  const std::string origin = st.dir().string();
  const std::vector<int64_t> expected = {rows, cols};
  if (st.has_tensor(weight_name)) {
    DENSA_ASSIGN_OR_RETURN(SafetensorsTensor t, st.tensor(weight_name));
    if (t.dtype != DType::kFP8E4M3) return std::optional<WeightView>();
    const std::string what = origin + ": tensor '" + weight_name + "'";
    if (qc.method != HfQuantMethod::kFp8Block) return invalid_argument(what + " is F8_E4M3 but config.json has no fp8 quantization_config");
    if (t.shape != expected) return invalid_argument(what + " has shape " + shape_str(t.shape) + " but the config expects " + shape_str(expected));
    const std::string sname = weight_name + "_scale_inv";
    DENSA_ASSIGN_OR_RETURN(SafetensorsTensor s, st.tensor(sname));
    const int64_t srows = (rows + qc.block_rows - 1) / qc.block_rows, scols = (cols + qc.block_cols - 1) / qc.block_cols;
    if (s.shape != std::vector<int64_t>{srows, scols}) {
      return invalid_argument(origin + ": tensor '" + sname + "' has shape " + shape_str(s.shape) + ", expected " +
                              shape_str({srows, scols}));
    }
    DENSA_ASSIGN_OR_RETURN(const float* scales, scales_to_f32(s, srows * scols, owner, origin + ": tensor '" + sname + "'"));
    WeightView v = fp8_block_view(t.data, scales, rows, cols);
    v.scale_rows = qc.block_rows;
    v.scale_cols = qc.block_cols;
    return std::optional<WeightView>(v);
  }
  const std::string pname = weight_name + "_packed";
  if (!st.has_tensor(pname)) return std::optional<WeightView>();
  const std::string what = origin + ": tensor '" + pname + "'";
  if (qc.method != HfQuantMethod::kInt4Packed) return invalid_argument(what + " found but config.json has no compressed-tensors quantization_config");
  DENSA_ASSIGN_OR_RETURN(SafetensorsTensor p, st.tensor(pname));
  if (p.dtype != DType::kI32 || p.shape != std::vector<int64_t>{rows, cols / 8} || cols % 8 != 0) {
    return invalid_argument(what + " is " + p.dtype_name + " " + shape_str(p.shape) + ", expected I32 " + shape_str({rows, cols / 8}));
  }
  const std::string shname = weight_name + "_shape";
  if (st.has_tensor(shname)) {
    DENSA_ASSIGN_OR_RETURN(SafetensorsTensor sh, st.tensor(shname));
    std::vector<int64_t> dims;
    for (int64_t i = 0; i < sh.numel(); ++i) {
      if (sh.dtype_name == "I32") { int32_t d; std::memcpy(&d, sh.data + 4 * i, 4); dims.push_back(d); }
      else if (sh.dtype_name == "I64") { int64_t d; std::memcpy(&d, sh.data + 8 * i, 8); dims.push_back(d); }
    }
    if (dims != expected) return invalid_argument(origin + ": tensor '" + shname + "' says " + shape_str(dims) + ", expected " + shape_str(expected));
  }
  const std::string sname = weight_name + "_scale";
  DENSA_ASSIGN_OR_RETURN(SafetensorsTensor s, st.tensor(sname));
  const int64_t group = qc.group_size;
  if (cols % group != 0 || s.shape != std::vector<int64_t>{rows, cols / group}) {
    return invalid_argument(origin + ": tensor '" + sname + "' has shape " + shape_str(s.shape) + ", expected " +
                            shape_str({rows, cols / group}) + " for group size " + std::to_string(group));
  }
  DENSA_ASSIGN_OR_RETURN(const uint16_t* scales,
                         int4_scales_bf16(s, rows * (cols / group), owner, origin + ": tensor '" + sname + "'"));
  return std::optional<WeightView>(int4_group_view(p.data, scales, rows, cols, group));
}

}  // namespace densa
