#pragma once
// Runs the Python Jinja2 reference (tests/text/jinja_reference.py, HF's apply_chat_template
// environment) on a batch of cases and densa's engine on the same cases.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/jinja/template.h"

namespace densa::testing {

struct RenderOutcome {
  bool ok = false;
  std::string text;  // the output, or the error message
};

// One case: {"template": source, "vars": {...}, "now": unix seconds (optional)}.
inline std::vector<RenderOutcome> reference_render(const nlohmann::ordered_json& cases) {
  const std::string dir = std::filesystem::temp_directory_path() / ("densa_jinja_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string in = dir + "/cases.json", out = dir + "/results.json";
  std::ofstream(in, std::ios::binary) << cases.dump();
  const std::string cmd = std::string("/usr/bin/python3 ") + DENSA_SOURCE_DIR + "/tests/text/jinja_reference.py < " +
                          in + " > " + out;
  const int rc = std::system(cmd.c_str());
  std::vector<RenderOutcome> results;
  EXPECT_EQ(rc, 0) << "the Jinja2 reference failed to run (needs /usr/bin/python3 with python3-jinja2): " << cmd;
  if (rc != 0) return results;
  std::ifstream r(out, std::ios::binary);
  const nlohmann::json parsed = nlohmann::json::parse(r);
  for (const auto& e : parsed) {
    RenderOutcome o;
    o.ok = e["ok"].get<bool>();
    o.text = o.ok ? e["output"].get<std::string>() : e["error"].get<std::string>();
    results.push_back(std::move(o));
  }
  std::filesystem::remove_all(dir);
  EXPECT_EQ(results.size(), cases.size());
  return results;
}

inline RenderOutcome densa_render(const nlohmann::ordered_json& c, jinja::RenderLimits limits = {}) {
  Result<jinja::Template> t = jinja::Template::parse(c["template"].get<std::string>());
  if (!t.is_ok()) return {false, t.status().message()};
  if (c.contains("now")) limits.now_unix = c["now"].get<int64_t>();
  Result<std::string> s = t->render(c["vars"], limits);
  if (!s.is_ok()) return {false, s.status().message()};
  return {true, *s};
}

// Python's raise_exception(msg) shows as "TemplateError: msg" from the reference.
inline std::string raised_message(const std::string& reference_error) {
  const std::string prefix = "TemplateError: ";
  return reference_error.rfind(prefix, 0) == 0 ? reference_error.substr(prefix.size()) : std::string();
}

}  // namespace densa::testing
