// A GGUF that `densa quantize` writes from a Qwen3-vocabulary checkpoint tokenizes like
// llama.cpp on the same file and like Hugging Face tokenizers on the source tokenizer.json.
//
// The checkpoint: `densa gen-model --arch qwen3_moe --tokenizer <Qwen3's tokenizer dir>` (HF),
// then `densa quantize IN OUT.gguf --to bf16` (tokenizer.ggml.model gpt2, pre qwen2). Three
// tokenizers encode the same strings (tests/data/text/tokenizer_strings.jsonl, the corpus and
// paragraphs of it, as the HfTokenizer tests use):
//   llama.cpp: libllama from the pinned npm package @node-llama-cpp/linux-x64 (node-llama-cpp's
//              prebuilt CPU binaries; tests/oracles), loaded with dlopen, the model opened
//              vocab_only, llama_tokenize(add_special, parse_special = true);
//   densa:     load_tokenizer(OUT.gguf);
//   HF:        @anush008/tokenizers on the source tokenizer.json (tests/text/tokenizer_oracle.cjs).
// HF always splits added tokens out of the text, so llama.cpp runs with parse_special = true.
//
// Two documented differences, asserted exactly rather than skipped:
//  * a GGUF vocabulary carries no normalizer (llama.cpp applies none; densa's GGUF reader
//    follows it), and Qwen3's tokenizer.json declares NFC. So against HF the GGUF side is
//    given NFC(input); for the inputs already in NFC (most of the set) that is the input.
//  * llama.cpp (llama-vocab.cpp of the pinned build) turns every token whose text is one of
//    a list of end-of-generation spellings into a control token, whatever the file says; in
//    Qwen3's vocabulary only "</s>" (128247) is such a text, and it is an ordinary BPE token
//    (HF and densa encode "</s>" as "</", "s", ">"). With parse_special llama.cpp then splits
//    it out of the text as one token. On inputs holding "</s>" the test asserts llama.cpp's
//    ids are exactly densa's encoding of the pieces around each "</s>" joined by 128247.
// On every other input densa, llama.cpp and HF agree id for id.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "e2e/server_process.h"
#include "io/gguf_file.h"
#include "io/gguf_writer.h"
#include "mla_checkpoints.h"
#include "model/model_loader.h"
#include "test_util.h"
#include "text/tokenizer_loader.h"
#include "tokenizer_oracle_util.h"
#include "tools/model_files/quantize.h"

namespace densa {
namespace {

namespace fs = std::filesystem;

// llama.h's llama_model_params of the llama.cpp the pinned package was built from (its
// llama.cpp.info.json names the release); checked against llama_model_default_params().
struct LlamaModelParams {
  void* devices;
  const void* tensor_buft_overrides;
  int32_t n_gpu_layers;
  int32_t split_mode;
  int32_t load_mode;
  int32_t lazy_mode;
  int32_t main_gpu;
  const float* tensor_split;
  void* progress_callback;
  void* progress_callback_user_data;
  const void* kv_overrides;
  bool vocab_only;
  bool check_tensors;
  bool use_extra_bufts;
  bool no_host;
  bool no_alloc;
  bool load_mtp;
};

// libllama's C API, the few entry points the test needs.
class LlamaCpp {
 public:
  bool open(const fs::path& bins, std::string* err) {
    for (const char* lib : {"libggml-base.so", "libggml.v0.5.0.so", "libllama.v0.5.0.so"}) {
      void* h = dlopen((bins / lib).c_str(), RTLD_NOW | RTLD_GLOBAL);
      if (h == nullptr) {
        *err = std::string(lib) + ": " + dlerror();
        return false;
      }
      handle_ = h;
    }
    bool ok = true;
    auto sym = [&](const char* name) {
      void* p = dlsym(handle_, name);
      if (p == nullptr) {
        *err += std::string(" missing ") + name;
        ok = false;
      }
      return p;
    };
    backend_init_ = reinterpret_cast<void (*)()>(sym("llama_backend_init"));
    log_set_ = reinterpret_cast<void (*)(void (*)(int, const char*, void*), void*)>(sym("llama_log_set"));
    default_params_ = reinterpret_cast<LlamaModelParams (*)()>(sym("llama_model_default_params"));
    load_ = reinterpret_cast<void* (*)(const char*, LlamaModelParams)>(sym("llama_model_load_from_file"));
    free_ = reinterpret_cast<void (*)(void*)>(sym("llama_model_free"));
    get_vocab_ = reinterpret_cast<const void* (*)(const void*)>(sym("llama_model_get_vocab"));
    n_tokens_ = reinterpret_cast<int32_t (*)(const void*)>(sym("llama_vocab_n_tokens"));
    n_params_ = reinterpret_cast<uint64_t (*)(const void*)>(sym("llama_model_n_params"));
    void* ggml = dlopen((bins / "libggml.v0.5.0.so").c_str(), RTLD_NOW | RTLD_GLOBAL);
    load_backends_ = reinterpret_cast<void (*)(const char*)>(ggml == nullptr ? nullptr : dlsym(ggml, "ggml_backend_load_all_from_path"));
    if (load_backends_ == nullptr) {
      *err += " missing ggml_backend_load_all_from_path";
      ok = false;
    }
    bins_ = bins;
    tokenize_ = reinterpret_cast<int32_t (*)(const void*, const char*, int32_t, int32_t*, int32_t, bool, bool)>(
        sym("llama_tokenize"));
    return ok;
  }

  // Opens `gguf` vocab-only (no compute backend needed), or whole with ggml's CPU backend
  // (ggml picks the variant built for this CPU: AVX2, AVX-512, AMX, ...); the default
  // parameters must look like the struct above.
  bool load(const fs::path& gguf, bool vocab_only, std::string* err) {
    log_set_([](int, const char*, void*) {}, nullptr);
    if (!vocab_only && !backends_loaded_) {
      load_backends_(bins_.c_str());
      backends_loaded_ = true;
    }
    backend_init_();
    if (model_ != nullptr) free_(model_);
    model_ = nullptr;
    LlamaModelParams p = default_params_();
    if (p.devices != nullptr || p.n_gpu_layers != -1 || p.main_gpu != 0 || p.tensor_split != nullptr ||
        p.kv_overrides != nullptr || p.vocab_only || !p.use_extra_bufts) {
      *err = "llama_model_default_params() does not match llama_model_params as declared here";
      return false;
    }
    p.vocab_only = vocab_only;
    model_ = load_(gguf.c_str(), p);
    if (model_ == nullptr) {
      *err = "llama_model_load_from_file failed on " + gguf.string();
      return false;
    }
    vocab_ = get_vocab_(model_);
    return true;
  }
  ~LlamaCpp() {
    if (model_ != nullptr) free_(model_);
  }

  int n_tokens() const { return n_tokens_(vocab_); }
  uint64_t n_params() const { return n_params_(model_); }

  std::vector<TokenId> tokenize(const std::string& s, bool add_special) const {
    std::vector<int32_t> out(s.size() + 8);
    int32_t n = tokenize_(vocab_, s.data(), static_cast<int32_t>(s.size()), out.data(), static_cast<int32_t>(out.size()),
                          add_special, /*parse_special=*/true);
    if (n < 0) {
      out.resize(static_cast<size_t>(-n));
      n = tokenize_(vocab_, s.data(), static_cast<int32_t>(s.size()), out.data(), static_cast<int32_t>(out.size()),
                    add_special, true);
    }
    EXPECT_GE(n, 0) << "llama_tokenize failed";
    out.resize(static_cast<size_t>(std::max(n, 0)));
    return {out.begin(), out.end()};
  }

 private:
  void* handle_ = nullptr;
  void* model_ = nullptr;
  const void* vocab_ = nullptr;
  void (*backend_init_)() = nullptr;
  void (*log_set_)(void (*)(int, const char*, void*), void*) = nullptr;
  LlamaModelParams (*default_params_)() = nullptr;
  void* (*load_)(const char*, LlamaModelParams) = nullptr;
  void (*free_)(void*) = nullptr;
  const void* (*get_vocab_)(const void*) = nullptr;
  int32_t (*n_tokens_)(const void*) = nullptr;
  uint64_t (*n_params_)(const void*) = nullptr;
  void (*load_backends_)(const char*) = nullptr;
  fs::path bins_;
  bool backends_loaded_ = false;
  int32_t (*tokenize_)(const void*, const char*, int32_t, int32_t*, int32_t, bool, bool) = nullptr;
};

const std::string kForcedControl = "</s>";
constexpr TokenId kForcedControlId = 128247;

std::string show(const std::vector<TokenId>& ids) { return nlohmann::json(ids).dump(); }

fs::path llama_bins() {
  return fs::path(DENSA_ORACLES_DIR) / "node_modules" / "@node-llama-cpp" / "linux-x64" / "bins" / "linux-x64";
}

// The pinned llama.cpp oracle, opened (the build installs it).
::testing::AssertionResult open_llama(LlamaCpp& llama) {
  const fs::path bins = llama_bins();
  if (!fs::exists(bins / "libllama.v0.5.0.so")) {
    return ::testing::AssertionFailure() << bins << " (the build installs the test oracles)";
  }
  std::string err;
  if (!llama.open(bins, &err)) return ::testing::AssertionFailure() << err;
  return ::testing::AssertionSuccess();
}

TEST(GgufVocabLlamaCpp, QuantizedQwen3GgufTokenizesLikeLlamaCppAndHf) {
  const fs::path bins = llama_bins();
  ASSERT_TRUE(fs::exists(bins / "libllama.v0.5.0.so")) << bins << " (the build installs the test oracles)";
  const fs::path src = testing::real_tokenizer_dir("qwen3");
  const fs::path work = fs::temp_directory_path() / ("densa_llamacpp_vocab_" + std::to_string(::getpid()));
  fs::remove_all(work);
  fs::create_directories(work);
  const fs::path hf = work / "qwen3-moe-hf", gguf = work / "qwen3-moe.gguf";
  int rc = 0;
  std::string log = testing::run_command(std::string(DENSA_BINARY) +
                                         " gen-model --arch qwen3_moe --hidden 64 --layers 1 --heads 2 --kv-heads 1 "
                                         "--ffn 64 --experts 4 --top-k 2 --format hf --dtype bf16 --tokenizer " +
                                         testing::shell_quote(src.string()) + " " + testing::shell_quote(hf.string()) + " 2>&1",
                                         &rc);
  ASSERT_EQ(rc, 0) << log;
  log = testing::run_command(std::string(DENSA_BINARY) + " quantize " + testing::shell_quote(hf.string()) + " " +
                                 testing::shell_quote(gguf.string()) + " --to bf16 2>&1",
                             &rc);
  ASSERT_EQ(rc, 0) << log;

  LlamaCpp llama;
  std::string err;
  ASSERT_TRUE(llama.open(bins, &err)) << err;
  ASSERT_TRUE(llama.load(gguf, /*vocab_only=*/true, &err)) << err;
  EXPECT_EQ(llama.n_tokens(), 151669);
  auto densa_tok = load_tokenizer(gguf);
  ASSERT_TRUE(densa_tok.is_ok()) << densa_tok.status().to_string();
  const Tokenizer& tok = densa_tok->tokenizer;
  ASSERT_EQ(tok.vocab().pieces[kForcedControlId], "</s>");
  ASSERT_EQ(tok.vocab().types[kForcedControlId], TokenType::kNormal);

  const std::vector<std::string> inputs = tokenizer_test_inputs();
  for (bool add_special : {false, true}) {
    SCOPED_TRACE(add_special ? "add_special" : "no add_special");
    const auto hf_ids = oracle_encode("hf " + (src / "tokenizer.json").string() + (add_special ? " 1" : " 0"), inputs);
    ASSERT_EQ(hf_ids.size(), inputs.size());
    size_t vs_llama = 0, vs_hf = 0, not_nfc = 0, raw_differs = 0, forced = 0;
    const std::vector<TokenId> specials_only = tok.encode("", add_special);
    for (size_t i = 0; i < inputs.size(); ++i) {
      const std::string& s = inputs[i];
      // Both GGUF tokenizers on the same bytes: equal, whatever the input, except that
      // llama.cpp parses "</s>" as a control token (see the top of the file): for those inputs
      // its ids are densa's of the pieces around each "</s>", joined by the token.
      const std::vector<TokenId> d = tok.encode(s, add_special), l = llama.tokenize(s, add_special);
      std::vector<TokenId> want_l = d;
      if (s.find(kForcedControl) != std::string::npos) {
        ++forced;
        want_l = specials_only;
        size_t from = 0;
        for (size_t at; (at = s.find(kForcedControl, from)) != std::string::npos; from = at + kForcedControl.size()) {
          const std::vector<TokenId> piece = tok.encode(s.substr(from, at - from), false);
          want_l.insert(want_l.end(), piece.begin(), piece.end());
          want_l.push_back(kForcedControlId);
        }
        const std::vector<TokenId> tail = tok.encode(s.substr(from), false);
        want_l.insert(want_l.end(), tail.begin(), tail.end());
      }
      if (l != want_l && ++vs_llama <= 5) {
        ADD_FAILURE() << "densa vs llama.cpp on the GGUF, input " << i << " " << nlohmann::json(s).dump()
                      << "\n densa     " << show(want_l) << "\n llama.cpp " << show(l);
      }
      // Against HF on the source: equal on the NFC form (the same input when it is in NFC);
      // llama.cpp only where it does not override "</s>".
      const std::string n = nfc(s);
      const bool is_nfc = n == s;
      if (!is_nfc) {
        ++not_nfc;
        if (d != hf_ids[i]) ++raw_differs;
      }
      const std::vector<TokenId> dn = is_nfc ? d : tok.encode(n, add_special);
      const bool check_llama = s.find(kForcedControl) == std::string::npos;
      const std::vector<TokenId> ln = !check_llama ? hf_ids[i] : is_nfc ? l : llama.tokenize(n, add_special);
      if ((dn != hf_ids[i] || ln != hf_ids[i]) && ++vs_hf <= 5) {
        ADD_FAILURE() << "GGUF vs HF, input " << i << (is_nfc ? "" : " (GGUF side given its NFC form)") << " "
                      << nlohmann::json(s).dump() << "\n densa     " << show(dn) << "\n llama.cpp " << show(ln)
                      << "\n HF        " << show(hf_ids[i]);
      }
    }
    EXPECT_EQ(vs_llama, 0u) << "of " << inputs.size();
    EXPECT_EQ(vs_hf, 0u) << "of " << inputs.size();
    std::printf("[ note ] %zu inputs: densa (GGUF) == llama.cpp (GGUF) == HF (source) id for id; %zu hold \"</s>\", "
                "which llama.cpp alone parses as a control token; %zu are not NFC, on whose raw bytes the GGUF "
                "ids differ from HF's for %zu (no normalizer in GGUF)\n",
                inputs.size(), forced, not_nfc, raw_differs);
    EXPECT_GT(forced, 0u);  // the set exercises both differences it documents
    EXPECT_GT(not_nfc, 0u);  // the set exercises the difference it documents
  }
  fs::remove_all(work);
}

// The GGUFs gen-model writes for the Qwen3-MoE and DeepSeek-V3 shapes (with their real
// vocabularies) load whole in llama.cpp, which checks every tensor's name and shape against its
// qwen3moe / deepseek2 definitions; its parameter count equals gen-model's (deepseek2's
// attn_k_b + attn_v_b hold exactly kv_b_proj's parameters).
TEST(GgufVocabLlamaCpp, GenModelFamilyGgufsLoadInLlamaCpp) {
  LlamaCpp llama;
  ASSERT_TRUE(open_llama(llama));
  std::string err;
  struct Case { const char* arch; const char* tokenizer; const char* shape; int vocab; };
  for (const Case& k : {Case{"qwen3_moe", "qwen3", "--heads 4 --kv-heads 2 --head-dim 48 --ffn 192 --moe-ffn 64", 151669},
                        Case{"deepseek_v3", "deepseek_v3",
                             "--heads 4 --ffn 192 --moe-ffn 64 --expert-groups 4 --topk-groups 2 --dense-layers 1", 128815}}) {
    SCOPED_TRACE(k.arch);
    const fs::path gguf = fs::temp_directory_path() / ("densa_llamacpp_" + std::string(k.arch) + "_" + std::to_string(::getpid()) + ".gguf");
    int rc = 0;
    const std::string log = testing::run_command(
        std::string(DENSA_BINARY) + " gen-model --arch " + k.arch + " --hidden 128 --layers 3 --experts 8 --top-k 2 " + k.shape +
            " --format gguf --dtype bf16 --tokenizer " + testing::shell_quote(testing::real_tokenizer_dir(k.tokenizer).string()) +
            " " + testing::shell_quote(gguf.string()) + " 2>&1",
        &rc);
    ASSERT_EQ(rc, 0) << log;
    const size_t at = log.find("parameters: total ");
    ASSERT_NE(at, std::string::npos) << log;
    const uint64_t total = std::stoull(log.substr(at + 18));
    ASSERT_TRUE(llama.load(gguf, /*vocab_only=*/false, &err)) << err;
    EXPECT_EQ(llama.n_tokens(), k.vocab);
    EXPECT_EQ(llama.n_params(), total);
    fs::remove(gguf);
  }
}

// The production families' GGUFs as `densa quantize` writes them from their reference
// checkpoints load whole in llama.cpp: GLM-5 (MLA + DSA) as glm-dsa with its indexer tensors,
// Kimi-K2.5's text model and GLM-4.7-Flash as deepseek2 (vision tower and NextN layer left out).
// llama.cpp checks every tensor's name and shape and every required key against its own
// definitions of those architectures, and its parameter count equals densa's. The reference
// checkpoints carry no tokenizer, so each file gets gen-model's byte-level vocabulary of the
// same size (tokenizer.* keys only; llama.cpp reads no tensor of a vocabulary).
TEST(GgufVocabLlamaCpp, ProductionFamilyGgufsLoadInLlamaCpp) {
  LlamaCpp llama;
  ASSERT_TRUE(open_llama(llama));
  std::string err;
  const fs::path work = testing::fresh_temp_dir("densa_llamacpp_families_", "work");
  const fs::path vocab_gguf = work / "bytes_vocab.gguf";
  int rc = 0;
  std::string log = testing::run_command(std::string(DENSA_BINARY) +
                                             " gen-model --arch llama --hidden 64 --layers 1 --heads 2 --kv-heads 1 --ffn 64 "
                                             "--vocab 1024 --format gguf --dtype f32 --tokenizer bytes " +
                                             testing::shell_quote(vocab_gguf.string()) + " 2>&1",
                                         &rc);
  ASSERT_EQ(rc, 0) << log;
  Result<GgufFile> vocab = GgufFile::open(vocab_gguf);
  ASSERT_TRUE(vocab.is_ok()) << vocab.status().to_string();
  const fs::path refs = fs::path(DENSA_SOURCE_DIR) / "tests/data/reference";
  struct Case { std::string family; fs::path hf; std::string arch; };
  const std::vector<Case> cases = {{"glm_moe_dsa", refs / "glm_moe_dsa", "glm-dsa"},
                                   {"kimi_k25", testing::wrap_as_kimi_k25(testing::deepseek_v3_ref_dir(), "llamacpp"), "deepseek2"},
                                   {"glm4_moe_lite", testing::wrap_as_glm4_moe_lite("llamacpp"), "deepseek2"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.family);
    const fs::path written = work / (c.family + ".gguf");
    Result<QuantizeReport> rep = quantize_checkpoint(QuantizeOptions{c.hf, written, "bf16", 128, ""});
    ASSERT_TRUE(rep.is_ok()) << rep.status().to_string();
    Result<GgufFile> f = GgufFile::open(written);
    ASSERT_TRUE(f.is_ok()) << f.status().to_string();
    EXPECT_EQ(f->get_string("general.architecture"), c.arch);
    std::vector<std::pair<std::string, GgufValue>> metadata;
    for (const auto& [key, value] : f->metadata()) {
      if (key.rfind("tokenizer.", 0) != 0) metadata.emplace_back(key, value);
    }
    for (const auto& [key, value] : vocab->metadata()) {
      if (key.rfind("tokenizer.", 0) == 0) metadata.emplace_back(key, value);
    }
    std::vector<GgufOutTensor> tensors;
    for (const GgufTensorInfo& info : f->tensor_infos()) {
      Result<GgufTensorBytes> b = f->tensor_bytes(info.name);
      ASSERT_TRUE(b.is_ok()) << b.status().to_string();
      tensors.push_back({info.name, info.ggml_type, info.ne, std::vector<uint8_t>(b->data, b->data + b->nbytes)});
    }
    const fs::path with_vocab = work / (c.family + "_vocab.gguf");
    ASSERT_TRUE(write_gguf(with_vocab, metadata, tensors).is_ok());
    Result<ModelWeights> densa_load = load_model(with_vocab);
    ASSERT_TRUE(densa_load.is_ok()) << densa_load.status().to_string();
    ASSERT_TRUE(llama.load(with_vocab, /*vocab_only=*/false, &err)) << err;
    EXPECT_EQ(llama.n_tokens(), 1024);
    EXPECT_EQ(llama.n_params(), static_cast<uint64_t>(densa_load->num_params()));
  }
  fs::remove_all(cases[1].hf);
  fs::remove_all(cases[2].hf);
  fs::remove_all(work);
}

}  // namespace
}  // namespace densa
