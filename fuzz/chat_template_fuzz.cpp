// The real chat templates (the fixtures' templates folder, DENSA_TEMPLATES_DIR) rendered by
// text/jinja with fuzzed variables: byte 0 picks the template, byte 1 sets
// add_generation_prompt (bit 0) and enable_thinking (bit 1), the rest is the variables as JSON
// (messages, tools, ... of any shape). Every render gives text or an error naming the problem
// (a template's own raise_exception included), never a crash; output stays in the limit.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "jinja_fuzz_util.h"
#include "text/jinja/template.h"

namespace {

std::vector<densa::jinja::Template> load_templates() {
  namespace fs = std::filesystem;
  std::vector<fs::path> paths;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(DENSA_TEMPLATES_DIR, ec)) {
    if (e.path().extension() == ".jinja") paths.push_back(e.path());
  }
  std::sort(paths.begin(), paths.end());
  std::vector<densa::jinja::Template> out;
  for (const fs::path& p : paths) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    auto t = densa::jinja::Template::parse(ss.str());
    if (!t.is_ok()) {
      std::fprintf(stderr, "chat_template fuzz: %s does not parse: %s\n", p.c_str(), t.status().to_string().c_str());
      std::abort();
    }
    out.push_back(std::move(t).value());
  }
  if (out.empty()) {
    std::fprintf(stderr, "chat_template fuzz: no .jinja templates in %s\n", DENSA_TEMPLATES_DIR);
    std::abort();
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace densa;
  using ojson = nlohmann::ordered_json;
  static const std::vector<jinja::Template> templates = load_templates();
  if (size < 2) return 0;
  const jinja::Template& t = templates[data[0] % templates.size()];
  ojson vars = ojson::parse(std::string_view(reinterpret_cast<const char*>(data + 2), size - 2), nullptr,
                            /*allow_exceptions=*/false);
  if (!vars.is_object()) return 0;
  if (!vars.contains("add_generation_prompt")) vars["add_generation_prompt"] = (data[1] & 1) != 0;
  if (!vars.contains("enable_thinking")) vars["enable_thinking"] = (data[1] & 2) != 0;
  if (!vars.contains("bos_token")) vars["bos_token"] = "<s>";
  if (!vars.contains("eos_token")) vars["eos_token"] = "</s>";
  jinja::RenderLimits limits;
  limits.max_steps = 200'000;
  limits.max_output_bytes = 1 << 20;
  limits.now_unix = 1'700'000'000;
  fuzz::check_render(t.render(vars, limits), limits);
  return 0;
}
