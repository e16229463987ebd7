#pragma once
// The deepseek_v3 PyTorch-reference checkpoint (tests/data/reference/deepseek_v3) re-wrapped in
// the layouts of the families that run the DeepSeek-V3 computation, written into a fresh
// temp directory per call, for the tests of several folders (model, cli, e2e):
//   wrap_as_kimi_k25       Kimi-K2.5 / K2.6: config under text_config, tensors under
//                          "language_model.", vision-tower / projector / NextN tensors beside
//   wrap_as_glm4_moe_lite  GLM-4.7-Flash: transformers v5 keys, a NextN layer
//   wrap_with_nextn_layer  any HF directory plus one NextN/MTP layer
// The same weights, so every wrapped load computes the deepseek_v3 golden logits.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "test_util.h"

namespace densa::testing {

inline std::filesystem::path deepseek_v3_ref_dir() {
  return std::filesystem::path(DENSA_SOURCE_DIR) / "tests/data/reference/deepseek_v3";
}

// A fresh directory of this process named `prefix` + `name`.
inline std::filesystem::path fresh_temp_dir(const std::string& prefix, const std::string& name) {
  const std::filesystem::path d =
      std::filesystem::temp_directory_path() / (prefix + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

// The extra tensors a Kimi-K2.5 checkpoint holds: a few vision-tower / projector tensors and a
// NextN layer at index num_layers (eh_proj, enorm, hnorm, shared_head, a decoder-layer part).
inline std::vector<SafetensorsOut> kimi_k25_extra_tensors(int num_layers, int hidden) {
  auto bf16 = [](std::string name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return SafetensorsOut{std::move(name), "BF16", shape, std::vector<uint8_t>(static_cast<size_t>(2 * n), 0x3f)};
  };
  const std::string mtp = "language_model.model.layers." + std::to_string(num_layers) + ".";
  return {bf16("vision_tower.patch_embed.proj.weight", {32, 3, 2, 2}),
          bf16("vision_tower.encoder.blocks.0.wqkv.weight", {96, 32}),
          bf16("mm_projector.proj.0.weight", {hidden, 128}),
          bf16("mm_projector.pre_norm.weight", {128}),
          bf16(mtp + "eh_proj.weight", {hidden, 2 * hidden}),
          bf16(mtp + "enorm.weight", {hidden}),
          bf16(mtp + "hnorm.weight", {hidden}),
          bf16(mtp + "shared_head.norm.weight", {hidden}),
          bf16(mtp + "input_layernorm.weight", {hidden}),
          bf16(mtp + "self_attn.kv_a_layernorm.weight", {32})};
}

// Writes `src` (a DeepSeek-V3 HF dir) as a Kimi-K2.5 dir: config under text_config (plus one
// NextN layer), tensors renamed, extra vision / MTP tensors added (unless `extras` is false), and
// `extra_name` added as one more tensor when given.
inline std::filesystem::path wrap_as_kimi_k25(const std::filesystem::path& src, const std::string& name, bool extras = true,
                          const std::string& extra_name = "") {
  const std::filesystem::path out = fresh_temp_dir("densa_kimi_k25_", name);
  nlohmann::json text = read_json(src / "config.json");
  nlohmann::json quant;
  if (text.contains("quantization_config")) {
    quant = text["quantization_config"];
    text.erase("quantization_config");
  }
  text["model_type"] = "kimi_k2";
  text["num_nextn_predict_layers"] = 1;
  nlohmann::json cfg = {{"architectures", {"KimiK25ForConditionalGeneration"}},
                        {"model_type", "kimi_k25"},
                        {"bos_token_id", text["bos_token_id"]},
                        {"eos_token_id", text["eos_token_id"]},
                        {"text_config", text},
                        {"vision_config", {{"model_type", "kimi_k25_vision"}, {"patch_size", 14}}}};
  if (!quant.is_null()) cfg["text_config"]["quantization_config"] = quant;  // where Kimi keeps it
  std::ofstream(out / "config.json") << cfg.dump(2);
  Result<SafetensorsDir> st = SafetensorsDir::open(src);
  CHECK(st.is_ok()) << st.status().to_string();
  std::vector<SafetensorsOut> tensors;
  for (const SafetensorsTensor* t : st->all_tensors()) {
    tensors.push_back({"language_model." + t->name, t->dtype_name, t->shape,
                       std::vector<uint8_t>(t->data, t->data + t->nbytes)});
  }
  if (extras) {
    for (auto& t : kimi_k25_extra_tensors(text["num_hidden_layers"].get<int>(), text["hidden_size"].get<int>())) {
      tensors.push_back(std::move(t));
    }
  }
  if (!extra_name.empty()) tensors.push_back({extra_name, "BF16", {4}, std::vector<uint8_t>(8, 0)});
  const Status s = write_safetensors(out / "model.safetensors", tensors);
  CHECK(s.is_ok()) << s.to_string();
  return out;
}

// The deepseek_v3 reference checkpoint under a Glm4MoeLite config: architecture renamed,
// rope_scaling moved into rope_parameters (with rope_theta), first_k_dense_replace given as
// mlp_layer_types; tensors unchanged plus a NextN layer.
inline std::filesystem::path wrap_as_glm4_moe_lite(const std::string& name) {
  const std::filesystem::path out = fresh_temp_dir("densa_glm4_moe_lite_", name);
  nlohmann::json cfg = read_json(deepseek_v3_ref_dir() / "config.json");
  cfg["architectures"] = {"Glm4MoeLiteForCausalLM"};
  cfg["model_type"] = "glm4_moe_lite";
  nlohmann::json rope = cfg["rope_scaling"];
  rope["rope_type"] = rope["type"];
  rope.erase("type");
  rope["rope_theta"] = cfg["rope_theta"];
  cfg["rope_parameters"] = rope;
  cfg.erase("rope_scaling");
  cfg.erase("rope_theta");
  cfg.erase("first_k_dense_replace");
  cfg["mlp_layer_types"] = {"dense", "sparse", "sparse"};
  cfg["num_nextn_predict_layers"] = 1;
  std::ofstream(out / "config.json") << cfg.dump(2);
  Result<SafetensorsDir> st = SafetensorsDir::open(deepseek_v3_ref_dir());
  CHECK(st.is_ok()) << st.status().to_string();
  std::vector<SafetensorsOut> tensors;
  for (const SafetensorsTensor* t : st->all_tensors()) {
    tensors.push_back({t->name, t->dtype_name, t->shape, std::vector<uint8_t>(t->data, t->data + t->nbytes)});
  }
  tensors.push_back({"model.layers.3.eh_proj.weight", "BF16", {64, 128}, std::vector<uint8_t>(64 * 128 * 2, 0)});
  tensors.push_back({"model.layers.3.shared_head.norm.weight", "BF16", {64}, std::vector<uint8_t>(128, 0)});
  const Status s = write_safetensors(out / "model.safetensors", tensors);
  CHECK(s.is_ok()) << s.to_string();
  return out;
}

// `src` (an HF directory without NextN layers) with one NextN/MTP layer added at index
// num_hidden_layers, as GLM-5 / DeepSeek-V3 checkpoints ship it: num_nextn_predict_layers 1 and
// that layer's eh_proj / enorm / hnorm / shared_head.norm tensors (zeros: never loaded).
inline std::filesystem::path wrap_with_nextn_layer(const std::filesystem::path& src, const std::string& name) {
  const std::filesystem::path out = fresh_temp_dir("densa_nextn_", name);
  nlohmann::json cfg = read_json(src / "config.json");
  cfg["num_nextn_predict_layers"] = 1;
  const int64_t hidden = cfg["hidden_size"].get<int64_t>();
  const std::string mtp = "model.layers." + std::to_string(cfg["num_hidden_layers"].get<int>()) + ".";
  std::ofstream(out / "config.json") << cfg.dump(2);
  Result<SafetensorsDir> st = SafetensorsDir::open(src);
  CHECK(st.is_ok()) << st.status().to_string();
  std::vector<SafetensorsOut> tensors;
  for (const SafetensorsTensor* t : st->all_tensors()) {
    tensors.push_back({t->name, t->dtype_name, t->shape, std::vector<uint8_t>(t->data, t->data + t->nbytes)});
  }
  auto zeros = [](int64_t n) { return std::vector<uint8_t>(static_cast<size_t>(2 * n), 0); };
  tensors.push_back({mtp + "eh_proj.weight", "BF16", {hidden, 2 * hidden}, zeros(2 * hidden * hidden)});
  for (const char* part : {"enorm.weight", "hnorm.weight", "shared_head.norm.weight"}) {
    tensors.push_back({mtp + part, "BF16", {hidden}, zeros(hidden)});
  }
  const Status s = write_safetensors(out / "model.safetensors", tensors);
  CHECK(s.is_ok()) << s.to_string();
  return out;
}

// A family's checkpoint for `densa serve` (glm_moe_dsa and the other references copied,
// kimi_k25 / glm4_moe_lite re-wrapped) in a fresh temp dir, with the shared SentencePiece
// tokenizer of the fixtures beside it as its tokenizer.model: the references ship none, and
// serve needs one.
inline std::filesystem::path serve_checkpoint(const std::string& name) {
  namespace fs = std::filesystem;
  fs::path dir;
  if (name == "kimi_k25") {
    dir = wrap_as_kimi_k25(deepseek_v3_ref_dir(), "serve");
  } else if (name == "glm4_moe_lite") {
    dir = wrap_as_glm4_moe_lite("serve");
  } else {
    dir = fresh_temp_dir("densa_serve_", name);
    const fs::path src = fs::path(DENSA_SOURCE_DIR) / "tests/data/reference" / name;
    for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(src / f, dir / f);
  }
  fs::copy_file(models_dir() / "tokenizer" / "tokenizer.model", dir / "tokenizer.model",
                fs::copy_options::overwrite_existing);
  return dir;
}

}  // namespace densa::testing
