#pragma once
// What a Jinja render promises for any template and variables, checked by the jinja and
// chat_template targets: output within the limit, or a clear error that is either bad input
// or an exhausted limit (never a crash, never another kind of failure).
#include <cstdio>
#include <string>

#include "core/status.h"
#include "fuzz_util.h"
#include "text/jinja/template.h"

namespace densa::fuzz {

inline void check_render(const Result<std::string>& out, const jinja::RenderLimits& limits) {
  if (verbose()) std::fprintf(stderr, "render: %s\n", out.status().to_string().substr(0, 200).c_str());
  if (out.is_ok()) {
    FUZZ_ASSERT(out->size() <= limits.max_output_bytes);
  } else {
    FUZZ_ASSERT(!out.status().message().empty());
    FUZZ_ASSERT(out.status().code() == StatusCode::kInvalidArgument ||
                out.status().code() == StatusCode::kResourceExhausted);
  }
}

}  // namespace densa::fuzz
