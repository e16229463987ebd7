#pragma once
// gen-model's tensors, independent of the file format: the logical tensors of a model (HF
// names with their GGUF names and shapes), their seeded values, and how each is encoded as one
// or more stored parts for a target format. The writers (gen_model.cpp) lay the parts out.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/model_config.h"
#include "text/tokenizer.h"

namespace densa::gen_model_internal {

enum class Role { kMatrix, kEmbedding, kHead, kRouter, kNorm, kBias };


// A GGUF tensor computed from another tensor's values (deepseek2's split kv_b_proj).
enum class Derive { kNone, kKB, kVB };

// One logical tensor (Hugging Face naming; a norm or bias is rows = 1).
struct LogicalTensor {
  std::string hf_name;   // without ".weight" (a kBias: the whole name); names the value stream
  std::string gguf_name; // with ".weight"; stacked experts share it; "" = HF only
  int64_t rows = 0, cols = 0;
  Role role = Role::kMatrix;
  int expert_idx = -1;       // >= 0: slice expert_idx of a GGUF stacked tensor
  int gguf_permute_heads = 0;  // Q/K: heads whose rows GGUF interleaves
  int head_dim = 0;
  Derive derive = Derive::kNone;  // != kNone: GGUF only, values derived from hf_name's
  std::vector<int64_t> gguf_ne;   // the GGUF shape when not [cols, rows]
};

// The float type values are rounded to before storing: the checkpoint's own float type.
enum class BaseType { kF32, kF16, kBF16 };

// One stored piece of a logical tensor in a file.
struct Part {
  std::string suffix;          // HF: ".weight", ".weight_scale_inv", ...; GGUF: ""
  std::string st_dtype;        // safetensors dtype name (HF)
  uint32_t ggml_type = 0;      // GGUF
  std::vector<int64_t> shape;  // outermost first
  int64_t nbytes = 0;
};

struct Target {
  bool gguf = true;
  BaseType base = BaseType::kBF16;
  DType matrix = DType::kBF16;  // attention, FFN, experts (GGUF: also embeddings and lm_head)
  std::optional<DType> head;    // lm_head, when chosen apart (GenModelOptions::lm_head_dtype)
  int group_size = 32;
  bool byte_vocab = false;      // GenModelOptions::tokenizer == "bytes"
  const Tokenizer* tokenizer = nullptr;  // a real tokenizer for GGUF's tokenizer.ggml.*
  std::string chat_template;             // with it: tokenizer.chat_template
};

// A tensor written to the HF files only / the GGUF file only.
bool hf_only(const LogicalTensor& t);
bool gguf_only(const LogicalTensor& t);

// Every logical tensor of the model `c` describes, in file order.
std::vector<LogicalTensor> model_tensors(const ModelConfig& c);
// The tensor's seeded values (HF row order), rounded to `base`.
std::vector<float> tensor_values(const LogicalTensor& t, uint64_t seed, BaseType base);
// tensor_values, or for a derived tensor the values rearranged from its source's.
std::vector<float> logical_values(const LogicalTensor& t, const ModelConfig& c, uint64_t seed, BaseType base);
// The stored parts of `t` for the target (a weight, its scales, ...).
std::vector<Part> parts_of(const Target& tg, const LogicalTensor& t);
// The dtype `t` is stored in for the target.
DType stored_dtype(const Target& tg, const LogicalTensor& t);
// The bytes of each part of parts_of(tg, t), from fp32 values (HF row order).
std::vector<std::vector<uint8_t>> encode(const Target& tg, const LogicalTensor& t, const std::vector<float>& values);

}  // namespace densa::gen_model_internal
