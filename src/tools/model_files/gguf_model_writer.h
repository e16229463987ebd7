#pragma once
// Writes a loaded model as a GGUF file in llama.cpp's layout: architecture name and
// "{arch}.*" metadata from model/gguf_config.h, tensors under llama.cpp's names
// (token_embd, blk.N.attn_q, blk.N.ffn_gate_exps stacked [n_expert, rows, cols], exp_probs_b,
// *_shexp, attn_q_a / attn_kv_a_mqa / attn_kv_b plus the split attn_k_b / attn_v_b of
// deepseek2, ...). Families: qwen3moe, qwen2moe, glm4moe, deepseek2 (Q/K rows kept in the
// checkpoint's order, as llama.cpp's converter does for them).
//
// Dtypes: `matrix_dtype` F32 / F16 / BF16 / Q8_0 / Q4_0 for the matrices quantize-on-load
// converts (attention, dense FFN, experts, shared expert, MLA projections). Embeddings,
// lm_head and routers take the same dtype when it is a float type and stay as stored
// (F32 if stored in a non-GGUF format) for Q8_0 / Q4_0; norms, biases, correction biases
// and the shared-expert gate are F32. So a BF16 checkpoint written as BF16 loads back bit
// for bit, and one written as Q8_0 loads like load_model(hf, {kQ8_0}). `lm_head_dtype` (F32 /
// F16 / BF16 / Q8_0 / Q4_0) overrides output.weight's dtype; a tied model then gets an
// output.weight of its own (token_embd stays as above), which llama.cpp reads as untied.
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "io/gguf_file.h"
#include "model/model_weights.h"
#include "text/tokenizer.h"

namespace densa {

struct GgufWriteReport {
  int num_converted = 0;  // matrices converted to matrix_dtype
  int num_kept = 0;       // every other tensor written
};

// Appends tokenizer.ggml.* for `tok` as llama.cpp reads them: "gpt2" (byte-level BPE whose
// split patterns are a known pre type) or "llama" (SentencePiece); BOS / EOS ids already in
// `md` are replaced by the tokenizer's. unimplemented for tokenizers with no GGUF form.
Status append_tokenizer_metadata(const Tokenizer& tok, std::vector<std::pair<std::string, GgufValue>>& md);

// progress(done, total) after each tensor is prepared.
Result<GgufWriteReport> write_model_gguf(const ModelWeights& w, const std::filesystem::path& path, DType matrix_dtype,
                                         const std::function<void(int, int)>& progress = nullptr,
                                         std::optional<DType> lm_head_dtype = std::nullopt);

}  // namespace densa
