#include "tools/model_files/gguf_model_writer.h"

#include <cstring>

#include "io/gguf_file.h"
#include "io/gguf_writer.h"
#include "model/gguf_config.h"
#include "quant/quantize_matrix.h"
#include "text/tokenizer.h"

namespace densa {
namespace {

bool is_float(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

uint32_t ggml_type(DType t) {
  const std::optional<uint32_t> id = ggml_type_of(t);
  CHECK(id.has_value()) << "no ggml type for " << dtype_name(t);
  return *id;
}

// llama_ftype of a file whose large matrices are `t`.
uint32_t file_type(DType t) {
  switch (t) {
    case DType::kF32: return 0;
    case DType::kF16: return 1;
    case DType::kQ4_0: return 2;
    case DType::kQ8_0: return 7;
    case DType::kBF16: return 32;
    case DType::kFP8E4M3: case DType::kI4: case DType::kI8: case DType::kI32: case DType::kU8:
    case DType::kA8K16: case DType::kA8K32: case DType::kA4K: case DType::kA4KIQ4: case DType::kA8G32: case DType::kA4G32: case DType::kA4IQ4: case DType::kA4MXFP4: break;
  }
  return 0;
}

// fp32 [rows, cols] -> the bytes of `t` (a float type or Q8_0 / Q4_0; cols % 32 == 0 for those).
std::vector<uint8_t> encode(const float* f, int64_t rows, int64_t cols, DType t) {
  const int64_t n = rows * cols;
  std::vector<uint8_t> out;
  if (t == DType::kF32) {
    out.resize(static_cast<size_t>(n) * 4);
    std::memcpy(out.data(), f, out.size());
  } else if (t == DType::kF16) {
    out.resize(static_cast<size_t>(n) * 2);
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t h = f32_to_f16(f[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  } else {
    const QuantizedMatrix q = quantize_matrix(f, rows, cols, WeightQuantSpec{t, 128});
    const auto* p = static_cast<const uint8_t*>(q.view.data);
    out.assign(p, p + q.view.bytes());
  }
  return out;
}

// One matrix's bytes in `t`: copied when already stored so, else through fp32.
std::vector<uint8_t> matrix_bytes(const WeightView& v, DType t) {
  if (v.dtype == t && !v.has_scales()) {
    const auto* p = static_cast<const uint8_t*>(v.data);
    return {p, p + v.bytes()};
  }
  const std::vector<float> f = dequantize_matrix(v);
  return encode(f.data(), v.rows, v.cols, t);
}

class TensorList {
 public:
  TensorList(DType matrix_dtype) : matrix_dtype_(matrix_dtype) {}

  // A large matrix (converted to matrix_dtype); stacked when views has several (experts).
  Status big(const std::string& name, const std::vector<WeightView>& views) {
    for (const WeightView& v : views) {
      Status s = check_target(v.rows, v.cols, matrix_dtype_);
      if (!s.is_ok()) return invalid_argument("tensor '" + name + "': " + s.message());
    }
    add(name, views, matrix_dtype_);
    ++report.num_converted;
    return Status::ok();
  }
  // A matrix in a dtype of its own choosing (lm_head with --lm-head-dtype).
  Status as(const std::string& name, const WeightView& v, DType t) {
    Status s = check_target(v.rows, v.cols, t);
    if (!s.is_ok()) return invalid_argument("tensor '" + name + "': " + s.message());
    add(name, {v}, t);
    ++report.num_converted;
    return Status::ok();
  }
  // Embeddings, lm_head, router: the float target, or as stored beside Q8_0 / Q4_0.
  void kept(const std::string& name, const WeightView& v) {
    add(name, {v}, is_float(matrix_dtype_) ? matrix_dtype_ : (is_float(v.dtype) ? v.dtype : DType::kF32));
    ++report.num_kept;
  }
  void vec(const std::string& name, const std::vector<float>& v) {
    tensors.push_back({name, ggml_type(DType::kF32), {static_cast<int64_t>(v.size())},
                       encode(v.data(), 1, static_cast<int64_t>(v.size()), DType::kF32)});
    ++report.num_kept;
  }
  // fp32 values of `count` stacked [rows, cols] matrices, in matrix_dtype when it can hold
  // them (Q8_0 / Q4_0 need cols % 32 == 0), else F32.
  void values(const std::string& name, const std::vector<float>& f, int64_t count, int64_t rows, int64_t cols) {
    const DType t = check_target(rows, cols, matrix_dtype_).is_ok() ? matrix_dtype_ : DType::kF32;
    tensors.push_back({name, ggml_type(t), {cols, rows, count}, encode(f.data(), count * rows, cols, t)});
    ++report.num_kept;
  }

  std::vector<GgufOutTensor> tensors;
  GgufWriteReport report;

 private:
  static Status check_target(int64_t rows, int64_t cols, DType t) {
    return is_float(t) ? Status::ok() : check_quant_target(WeightQuantSpec{t, 128}, rows, cols);
  }
  void add(const std::string& name, const std::vector<WeightView>& views, DType t) {
    GgufOutTensor o{name, ggml_type(t), {views[0].cols, views[0].rows}, {}};
    if (views.size() > 1) o.ne.push_back(static_cast<int64_t>(views.size()));
    for (const WeightView& v : views) {
      const std::vector<uint8_t> b = matrix_bytes(v, t);
      o.bytes.insert(o.bytes.end(), b.begin(), b.end());
    }
    tensors.push_back(std::move(o));
  }
  DType matrix_dtype_;
};

// attn_kv_b's split form that current llama.cpp requires in place of attn_kv_b: attn_k_b
// [heads, kv_lora_rank, nope] (each head's nope rows transposed) and attn_v_b [heads, v,
// kv_lora_rank], in the file's matrix type where its blocks fit those rows, else F32.
void add_split_kv_b(TensorList& t, int i, const ModelConfig& c, const WeightView& kv_b) {
  const int64_t heads = c.num_heads, C = c.mla.kv_lora_rank, nope = c.mla.qk_nope_head_dim, v = c.mla.v_head_dim;
  const std::vector<float> f = dequantize_matrix(kv_b);  // [heads*(nope + v), C]
  std::vector<float> k_b(static_cast<size_t>(heads * C * nope)), v_b(static_cast<size_t>(heads * v * C));
  for (int64_t h = 0; h < heads; ++h) {
    const float* rows = f.data() + h * (nope + v) * C;
    for (int64_t d = 0; d < nope; ++d) {
      for (int64_t col = 0; col < C; ++col) k_b[static_cast<size_t>((h * C + col) * nope + d)] = rows[d * C + col];
    }
    std::copy(rows + nope * C, rows + (nope + v) * C, v_b.begin() + h * v * C);
  }
  t.values(gguf_blk(i, "attn_k_b"), k_b, heads, C, nope);
  t.values(gguf_blk(i, "attn_v_b"), v_b, heads, v, C);
}

Status add_layer(TensorList& t, const ModelWeights& w, int i) {
  const ModelConfig& c = w.config;
  const LayerWeights& l = w.layers[static_cast<size_t>(i)];
  const std::string blk = "blk." + std::to_string(i) + ".";
  t.vec(gguf_blk(i, "attn_norm"), l.attn_norm);
  if (c.is_mla()) {
    if (l.q_a.empty()) {
      DENSA_RETURN_IF_ERROR(t.big(gguf_blk(i, "attn_q"), {l.wq}));
    } else {
      DENSA_RETURN_IF_ERROR(t.big(gguf_blk(i, "attn_q_a"), {l.q_a}));
      t.vec(gguf_blk(i, "attn_q_a_norm"), l.q_a_norm);
      DENSA_RETURN_IF_ERROR(t.big(gguf_blk(i, "attn_q_b"), {l.q_b}));
    }
    DENSA_RETURN_IF_ERROR(t.big(gguf_blk(i, "attn_kv_a_mqa"), {l.kv_a}));
    t.vec(gguf_blk(i, "attn_kv_a_norm"), l.kv_a_norm);
    // Only the split: llama.cpp (deepseek2 and glm-dsa) refuses a file that also holds
    // attn_kv_b (a tensor it does not take), and densa rebuilds kv_b from the split.
    add_split_kv_b(t, i, c, l.kv_b);
    if (c.is_dsa()) {  // llama.cpp's glm-dsa indexer names
      t.kept(blk + "indexer.attn_q_b.weight", l.idx_wq_b);  // the indexer stays as stored, as in HF quantize
      t.kept(blk + "indexer.attn_k.weight", l.idx_wk);
      t.vec(blk + "indexer.k_norm.weight", l.idx_k_norm_w);
      t.vec(blk + "indexer.k_norm.bias", l.idx_k_norm_b);
      t.kept(blk + "indexer.proj.weight", l.idx_weights_proj);
    }
  } else {
    DENSA_RETURN_IF_ERROR(t.big(gguf_blk(i, "attn_q"), {l.wq}));
    DENSA_RETURN_IF_ERROR(t.big(gguf_blk(i, "attn_k"), {l.wk}));
    DENSA_RETURN_IF_ERROR(t.big(gguf_blk(i, "attn_v"), {l.wv}));
    if (!l.bq.empty()) {
      t.vec(blk + "attn_q.bias", l.bq);
      t.vec(blk + "attn_k.bias", l.bk);
      t.vec(blk + "attn_v.bias", l.bv);
    }
    if (!l.q_norm.empty()) {
      t.vec(gguf_blk(i, "attn_q_norm"), l.q_norm);
      t.vec(gguf_blk(i, "attn_k_norm"), l.k_norm);
    }
  }
  DENSA_RETURN_IF_ERROR(t.big(gguf_blk(i, "attn_output"), {l.wo}));
  t.vec(gguf_blk(i, "ffn_norm"), l.ffn_norm);
  if (!c.is_moe_layer(i)) {
    DENSA_RETURN_IF_ERROR(t.big(gguf_blk(i, "ffn_gate"), {l.w_gate}));
    DENSA_RETURN_IF_ERROR(t.big(gguf_blk(i, "ffn_up"), {l.w_up}));
    DENSA_RETURN_IF_ERROR(t.big(gguf_blk(i, "ffn_down"), {l.w_down}));
    return Status::ok();
  }
  t.kept(gguf_blk(i, "ffn_gate_inp"), l.router);
  if (!l.router_bias.empty()) t.vec(blk + "exp_probs_b.bias", l.router_bias);
  DENSA_RETURN_IF_ERROR(t.big(gguf_blk(i, "ffn_gate_exps"), l.expert_gate));
  DENSA_RETURN_IF_ERROR(t.big(gguf_blk(i, "ffn_up_exps"), l.expert_up));
  DENSA_RETURN_IF_ERROR(t.big(gguf_blk(i, "ffn_down_exps"), l.expert_down));
  if (!l.shared_gate.empty()) {
    DENSA_RETURN_IF_ERROR(t.big(gguf_blk(i, "ffn_gate_shexp"), {l.shared_gate}));
    DENSA_RETURN_IF_ERROR(t.big(gguf_blk(i, "ffn_up_shexp"), {l.shared_up}));
    DENSA_RETURN_IF_ERROR(t.big(gguf_blk(i, "ffn_down_shexp"), {l.shared_down}));
  }
  if (!l.shared_expert_gate.empty()) t.vec(gguf_blk(i, "ffn_gate_inp_shexp"), l.shared_expert_gate);
  return Status::ok();
}


}  // namespace

Status append_tokenizer_metadata(const Tokenizer& tok, std::vector<std::pair<std::string, GgufValue>>& md) {
  const auto str = [&](const char* key, std::string v) {
    GgufValue g;
    g.type = GgufType::kString;
    g.str = std::move(v);
    md.emplace_back(key, std::move(g));
  };
  const auto u32 = [&](const char* key, int64_t v) {
    GgufValue g;
    g.type = GgufType::kU32;
    g.integer = v;
    md.emplace_back(key, std::move(g));
  };
  const auto flag = [&](const char* key, bool v) {
    GgufValue g;
    g.type = GgufType::kBool;
    g.integer = v ? 1 : 0;
    md.emplace_back(key, std::move(g));
  };
  const auto strings = [&](const char* key, std::vector<std::string> v) {
    GgufValue g;
    g.type = GgufType::kArray;
    g.elem_type = GgufType::kString;
    g.strings = std::move(v);
    md.emplace_back(key, std::move(g));
  };
  const auto ints = [&](const char* key, GgufType t, std::vector<int64_t> v) {
    GgufValue g;
    g.type = GgufType::kArray;
    g.elem_type = t;
    g.integers = std::move(v);
    md.emplace_back(key, std::move(g));
  };
  const TokenizerVocab& v = tok.vocab();
  if (const GgufBpeExport* ex = tok.gguf_export()) {
    str("tokenizer.ggml.model", "gpt2");
    str("tokenizer.ggml.pre", ex->pre);
    strings("tokenizer.ggml.tokens", ex->tokens);
    strings("tokenizer.ggml.merges", ex->merges);
    ints("tokenizer.ggml.token_type", GgufType::kI32, std::vector<int64_t>(ex->token_types.begin(), ex->token_types.end()));
  } else if (tok.kind() == "sentencepiece") {
    str("tokenizer.ggml.model", "llama");
    strings("tokenizer.ggml.tokens", v.pieces);
    GgufValue scores;
    scores.type = GgufType::kArray;
    scores.elem_type = GgufType::kF32;
    scores.reals.assign(v.scores.begin(), v.scores.end());
    md.emplace_back("tokenizer.ggml.scores", std::move(scores));
    std::vector<int64_t> types;
    for (TokenType t : v.types) types.push_back(static_cast<int64_t>(t));
    ints("tokenizer.ggml.token_type", GgufType::kI32, std::move(types));
    u32("tokenizer.ggml.unknown_token_id", v.unk_id);
  } else {
    return unimplemented("the " + tok.kind() + " tokenizer has no GGUF form (only byte-level BPE with a known pre type, "
                         "or SentencePiece)");
  }
  const auto replace_id = [&](const char* key, TokenId id) {
    if (id < 0) return;  // keep the config's id
    std::erase_if(md, [key](const auto& kv) { return kv.first == key; });
    u32(key, id);
  };
  replace_id("tokenizer.ggml.bos_token_id", v.bos_id);
  replace_id("tokenizer.ggml.eos_token_id", v.eos_id);
  const std::vector<TokenId> specials_only = tok.encode("", /*add_special_tokens=*/true);
  const size_t bos_count = tok.add_bos() ? 1 : 0;
  flag("tokenizer.ggml.add_bos_token", tok.add_bos());
  flag("tokenizer.ggml.add_eos_token", v.eos_id >= 0 && specials_only.size() > bos_count && specials_only.back() == v.eos_id);
  return Status::ok();
}

Result<GgufWriteReport> write_model_gguf(const ModelWeights& w, const std::filesystem::path& path, DType matrix_dtype,
                                         const std::function<void(int, int)>& progress,
                                         std::optional<DType> lm_head_dtype) {
  for (const DType t : {matrix_dtype, lm_head_dtype.value_or(matrix_dtype)}) {
    if (!is_float(t) && t != DType::kQ8_0 && t != DType::kQ4_0) {
      return invalid_argument("GGUF matrices can be f32, f16, bf16, q8_0 or q4_0, not " + std::string(dtype_name(t)));
    }
  }
  const ModelConfig& c = w.config;
  DENSA_ASSIGN_OR_RETURN(auto metadata, gguf_model_metadata(c, file_type(matrix_dtype)));
  if (!w.chat_template.empty()) {
    GgufValue v;
    v.type = GgufType::kString;
    v.str = w.chat_template;
    metadata.emplace_back("tokenizer.chat_template", std::move(v));
  }
  if (w.tokenizer) DENSA_RETURN_IF_ERROR(append_tokenizer_metadata(*w.tokenizer, metadata));
  TensorList t(matrix_dtype);
  const int total = 3 + c.num_layers;
  int done = 0;
  t.kept("token_embd.weight", w.tok_embeddings);
  t.vec("output_norm.weight", w.final_norm);
  if (lm_head_dtype) {
    if (Status s = t.as("output.weight", w.lm_head, *lm_head_dtype); !s.is_ok()) {
      return invalid_argument(w.source + ": " + s.message());
    }
  } else if (!c.tie_word_embeddings) {
    t.kept("output.weight", w.lm_head);
  }
  if (progress) progress(done += 3, total);
  for (int i = 0; i < c.num_layers; ++i) {
    Status s = add_layer(t, w, i);
    if (!s.is_ok()) return invalid_argument(w.source + ": " + s.message());
    if (progress) progress(++done, total);
  }
  DENSA_RETURN_IF_ERROR(write_gguf(path, metadata, t.tensors));
  return t.report;
}

}  // namespace densa
