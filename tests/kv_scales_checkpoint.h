#pragma once
// A copy of an HF checkpoint with static fp8 KV scales added as the checkpoint would carry
// them: per layer k_scale / v_scale tensors of one value per kv head (F32), calibrated on the
// whole model (quality/kv_calibration.h, the built-in text), so each head's scale differs. For
// the tests of `--kv-scales checkpoint` under tensor parallelism (tests/mpi, tests/e2e).
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/thread_pool.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "mla_checkpoints.h"
#include "model/model_loader.h"
#include "quality/kv_calibration.h"

namespace densa::testing {

inline std::filesystem::path checkpoint_with_kv_scales(const std::filesystem::path& src, const std::string& name) {
  namespace fs = std::filesystem;
  Result<ModelWeights> whole = load_model(src);
  CHECK(whole.is_ok()) << whole.status().to_string();
  ThreadPool threads(1);
  const KvScales calibrated = calibrate_kv_scales(
      whole.value(), whole.value().tokenizer->encode(std::string(kv_calibration_builtin_text()), true),
      KvCalibrationOptions{}, &threads);
  const fs::path dir = fresh_temp_dir("densa_kv_scales_", name);
  for (const char* f : {"config.json", "tokenizer.model"}) fs::copy_file(src / f, dir / f);
  Result<SafetensorsDir> st = SafetensorsDir::open(src);
  CHECK(st.is_ok()) << st.status().to_string();
  std::vector<SafetensorsOut> tensors;
  for (const SafetensorsTensor* t : st->all_tensors()) {
    tensors.push_back({t->name, t->dtype_name, t->shape, std::vector<uint8_t>(t->data, t->data + t->nbytes)});
  }
  const int H = calibrated.num_kv_heads;
  for (int l = 0; l < calibrated.num_layers; ++l) {
    for (int which = 0; which < 2; ++which) {
      std::vector<uint8_t> bytes(static_cast<size_t>(4 * H));
      std::memcpy(bytes.data(), calibrated.values.data() + (static_cast<size_t>(l) * 2 + which) * H, bytes.size());
      tensors.push_back({"model.layers." + std::to_string(l) + ".self_attn." + (which ? "v_scale" : "k_scale"), "F32",
                         {H}, std::move(bytes)});
    }
  }
  const Status s = write_safetensors(dir / "model.safetensors", tensors);
  CHECK(s.is_ok()) << s.to_string();
  return dir;
}

}  // namespace densa::testing
