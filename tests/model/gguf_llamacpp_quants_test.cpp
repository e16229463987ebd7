// GGUF files written by llama.cpp's own quantizer (llama_model_quantize, what llama-quantize
// runs: libllama of the pinned npm package @node-llama-cpp/linux-x64, tests/oracles), in the
// mixes people download (Q4_K_M, Q5_K_M, Q6_K, Q3_K_M, Q2_K, IQ4_XS, MXFP4_MOE), from a
// generated Mixtral-shaped F16 checkpoint whose widths (256, 512) let the K-quants and IQ4_XS
// reach every matrix:
//  - every tensor of a type densa holds as affine rows converts, in both widths, to exactly
//    the values llama.cpp's own ggml dequantizer (dequantize_row_<type> of libggml-base) gives
//    for the file's bytes, up to the sign of an exact zero;
//  - the file loads (default form) with its matrices as affine rows, and its logits are as close
//    to the F16 checkpoint's as those of the same file held as fp32 (KL and top-1 per format).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "e2e/server_process.h"
#include "io/gguf_file.h"
#include "io/test_file_writers.h"
#include "model/model_loader.h"
#include "quality/generator.h"
#include "quant/affine_rows.h"
#include "quant/ggml_blocks.h"
#include "test_util.h"

namespace densa {
namespace {

namespace fs = std::filesystem;

fs::path llama_bins() {
  return fs::path(DENSA_ORACLES_DIR) / "node_modules" / "@node-llama-cpp" / "linux-x64" / "bins" / "linux-x64";
}

// llama_model_quantize_params: the leading fields set here, the rest kept from
// llama_model_quantize_default_params() as opaque bytes (the struct is returned through a hidden
// pointer, so a larger buffer than the library's struct is safe).
struct QuantizeParams {
  int32_t nthread;
  int32_t ftype;
  uint8_t rest[248];
};

class Ggml {
 public:
  bool open(std::string* err) {
    for (const char* lib : {"libggml-base.so", "libggml.v0.5.0.so", "libllama.v0.5.0.so"}) {
      void* h = dlopen((llama_bins() / lib).c_str(), RTLD_NOW | RTLD_GLOBAL);
      if (h == nullptr) {
        *err = std::string(lib) + ": " + dlerror();
        return false;
      }
      (std::string(lib) == "libggml-base.so" ? base_ : llama_) = h;
    }
    backend_init_ = reinterpret_cast<void (*)()>(dlsym(llama_, "llama_backend_init"));
    default_params_ = reinterpret_cast<QuantizeParams (*)()>(dlsym(llama_, "llama_model_quantize_default_params"));
    quantize_ = reinterpret_cast<uint32_t (*)(const char*, const char*, const QuantizeParams*)>(
        dlsym(llama_, "llama_model_quantize"));
    if (backend_init_ == nullptr || default_params_ == nullptr || quantize_ == nullptr) {
      *err = "libllama lacks the quantize entry points";
      return false;
    }
    backend_init_();
    return true;
  }

  // llama-quantize IN OUT FTYPE.
  bool quantize(const fs::path& in, const fs::path& out, int32_t ftype, std::string* err) {
    QuantizeParams p = default_params_();
    if (p.nthread != 0 || (p.ftype != 7 && p.ftype != 9)) {
      *err = "llama_model_quantize_default_params() is not the struct declared here";
      return false;
    }
    p.nthread = 2;
    p.ftype = ftype;
    if (quantize_(in.c_str(), out.c_str(), &p) != 0) {
      *err = "llama_model_quantize failed for ftype " + std::to_string(ftype);
      return false;
    }
    return true;
  }

  // ggml's dequantize_row_<name> of n elements.
  bool dequantize(const std::string& name, const uint8_t* blocks, int64_t n, float* out) {
    auto fn = reinterpret_cast<void (*)(const void*, float*, int64_t)>(dlsym(base_, ("dequantize_row_" + name).c_str()));
    if (fn == nullptr) return false;
    fn(blocks, out, n);
    return true;
  }

 private:
  void* base_ = nullptr;
  void* llama_ = nullptr;
  void (*backend_init_)() = nullptr;
  QuantizeParams (*default_params_)() = nullptr;
  uint32_t (*quantize_)(const char*, const char*, const QuantizeParams*) = nullptr;
};

struct Ftype {
  const char* name;
  int32_t id;  // llama_ftype
};
constexpr Ftype kFtypes[] = {{"Q4_K_M", 15}, {"Q5_K_M", 17}, {"Q6_K", 18}, {"Q3_K_M", 12},
                             {"Q2_K", 10},   {"IQ4_XS", 30}, {"MXFP4_MOE", 38}};

// The F16 source: a Mixtral shape with hidden 256, expert FFN 512, byte vocabulary (llama.cpp
// needs one to load the file).
const fs::path& f16_model() {
  static const fs::path path = [] {
    const fs::path dir = testing::fresh_temp_dir("llamacpp_quants");
    const fs::path p = dir / "f16.gguf";
    int rc = 0;
    const std::string log = testing::run_command(
        std::string(DENSA_BINARY) +
            " gen-model --arch mixtral --hidden 256 --layers 2 --heads 4 --kv-heads 2 --ffn 512 --experts 4 "
            "--top-k 2 --vocab 512 --max-context 256 --seed 5 --dtype f16 --format gguf --tokenizer bytes " +
            testing::shell_quote(p.string()) + " 2>&1",
        &rc);
    EXPECT_EQ(rc, 0) << log;
    return p;
  }();
  return path;
}

class GgufLlamaCppQuants : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ggml_ = new Ggml;
    std::string err;
    ASSERT_TRUE(fs::exists(llama_bins() / "libllama.v0.5.0.so")) << llama_bins() << " (the build installs the test oracles)";
    ASSERT_TRUE(ggml_->open(&err)) << err;
    for (const Ftype& f : kFtypes) {
      const fs::path out = f16_model().parent_path() / (std::string(f.name) + ".gguf");
      ASSERT_TRUE(ggml_->quantize(f16_model(), out, f.id, &err)) << err;
      files_[f.name] = out;
    }
  }
  static Ggml* ggml_;
  static std::map<std::string, fs::path> files_;
};

Ggml* GgufLlamaCppQuants::ggml_ = nullptr;
std::map<std::string, fs::path> GgufLlamaCppQuants::files_;

TEST_F(GgufLlamaCppQuants, EveryBlockTensorConvertsToGgmlsValues) {
  std::map<std::string, int> tensors_per_type;
  for (const auto& [ftype, path] : files_) {
    auto f = GgufFile::open(path);
    ASSERT_TRUE(f.is_ok()) << f.status().to_string();
    for (const GgufTensorInfo& info : f->tensor_infos()) {
      const GgmlBlockFormat* fm = ggml_block_format(info.ggml_type);
      if (fm == nullptr) continue;  // f32 / f16 / q8_0 / q4_0: densa's own DTypes
      auto t = f->tensor_bytes(info.name);
      ASSERT_TRUE(t.is_ok()) << t.status().to_string();
      const int64_t cols = t->ne[0];
      int64_t n = 1;
      for (int64_t d : t->ne) n *= d;
      std::vector<float> want(static_cast<size_t>(n));
      ASSERT_TRUE(ggml_->dequantize(fm->name, t->data, n, want.data())) << fm->name;
      ++tensors_per_type[fm->name];
      ASSERT_EQ(cols % kAffineBlock, 0) << info.name;
      for (AffineWidth width : {AffineWidth::kPacked, AffineWidth::kWide}) {
        const DType dt = *affine_dtype_for_ggml(info.ggml_type, width);
        std::vector<uint8_t> rows(static_cast<size_t>(n / cols * dtype_row_bytes(dt, cols)));
        ASSERT_TRUE(affine_from_ggml(info.ggml_type, dt, t->data, n / cols, cols, rows.data())) << info.name;
        std::vector<float> got(static_cast<size_t>(cols));
        int bad = 0;
        for (int64_t r = 0; r < n / cols; ++r) {
          affine_dequantize(dt, rows.data() + r * dtype_row_bytes(dt, cols), 0, cols, got.data());
          for (int64_t k = 0; k < cols; ++k) {
            const float w = want[static_cast<size_t>(r * cols + k)];
            if (bits_from_f32(got[k]) != bits_from_f32(w) && !(got[k] == 0.0f && w == 0.0f) && bad++ < 3) {
              ADD_FAILURE() << ftype << " " << info.name << " (" << fm->name << " as " << dtype_name(dt) << ") row "
                            << r << " col " << k << ": " << got[k] << " vs ggml " << w;
            }
          }
        }
        EXPECT_EQ(bad, 0) << ftype << " " << info.name;
      }
    }
  }
  // The mixes hold every type the issue names.
  for (const char* t : {"q4_K", "q5_K", "q6_K", "q3_K", "q2_K", "iq4_xs", "mxfp4"}) {
    EXPECT_GT(tensors_per_type[t], 0) << t;
  }
}

struct Closeness {
  double kl = 0;    // mean KL(base || q) per position
  double top1 = 0;  // positions with the same argmax
};

Closeness closeness(const std::vector<float>& base, const std::vector<float>& lq, int64_t vocab) {
  EXPECT_EQ(lq.size(), base.size());
  Closeness c;
  const int64_t positions = static_cast<int64_t>(base.size()) / vocab;
  for (int64_t p = 0; p < positions; ++p) {
    const float* a = base.data() + p * vocab;
    const float* b = lq.data() + p * vocab;
    double ma = a[0], mb = b[0];
    int64_t ia = 0, ib = 0;
    for (int64_t v = 1; v < vocab; ++v) {
      if (a[v] > ma) ma = a[v], ia = v;
      if (b[v] > mb) mb = b[v], ib = v;
    }
    c.top1 += ia == ib;
    double sa = 0, sb = 0;
    for (int64_t v = 0; v < vocab; ++v) sa += std::exp(a[v] - ma), sb += std::exp(b[v] - mb);
    for (int64_t v = 0; v < vocab; ++v) {
      const double la = a[v] - ma - std::log(sa), lb = b[v] - mb - std::log(sb);
      c.kl += std::exp(la) * (la - lb);
    }
  }
  c.kl /= static_cast<double>(positions);
  c.top1 /= static_cast<double>(positions);
  return c;
}

TEST_F(GgufLlamaCppQuants, FilesLoadAsAffineRowsWithLogitsCloseToF16) {
  auto f16 = load_model(f16_model());
  ASSERT_TRUE(f16.is_ok()) << f16.status().to_string();
  std::vector<TokenId> tokens;
  for (int i = 0; i < 48; ++i) tokens.push_back(static_cast<TokenId>((i * 37 + 11) % 512));
  ThreadPool pool(0);
  const std::vector<float> base = prompt_logits(*f16, tokens, DType::kF32, &pool);
  const int64_t vocab = f16->config.vocab_size;
  for (const auto& [ftype, path] : files_) {
    auto q = load_model(path);
    ASSERT_TRUE(q.is_ok()) << ftype << ": " << q.status().to_string();
    int affine = 0, nibbles = 0;
    for (const LayerWeights& l : q->layers) {
      for (const auto* stack : {&l.expert_gate, &l.expert_up, &l.expert_down}) {
        for (const WeightView& v : *stack) {
          affine += is_affine_rows(v.dtype);
          nibbles += is_affine_nibbles(v.dtype);
        }
      }
    }
    EXPECT_GT(affine, 0) << ftype << ": expert matrices held as affine rows";
    if (std::string(ftype) == "Q4_K_M" || std::string(ftype) == "IQ4_XS" || std::string(ftype) == "MXFP4_MOE") {
      EXPECT_GT(nibbles, 0) << ftype << ": 4-bit formats in 4-bit rows";
    }
    auto qf = load_model(path, LoadOptions{.ggml_blocks = GgmlBlockForm::kF32});
    ASSERT_TRUE(qf.is_ok()) << ftype << ": " << qf.status().to_string();
    const Closeness c = closeness(base, prompt_logits(*q, tokens, DType::kF32, &pool), vocab);
    const Closeness cf = closeness(base, prompt_logits(*qf, tokens, DType::kF32, &pool), vocab);
    std::printf("%s: KL vs F16 %.5f, same top-1 %.3f (as fp32: %.5f, %.3f); %d affine expert matrices (%d 4-bit)\n",
                ftype.c_str(), c.kl, c.top1, cf.kl, cf.top1, affine, nibbles);
    // The file's own loss (fp32 form: its exact values, fp32 products) is that of a 2-6 bit
    // format on random weights; the affine rows add only int8 activation rounding to it. A wrong
    // scale, min or code order would add far more (KL > 0.1, top-1 near chance).
    EXPECT_LT(cf.kl, 0.25) << ftype;
    EXPECT_NEAR(c.kl, cf.kl, 0.15 * cf.kl + 0.002) << ftype;
    EXPECT_GT(c.top1, cf.top1 - 0.1) << ftype;
  }
}

}  // namespace
}  // namespace densa
