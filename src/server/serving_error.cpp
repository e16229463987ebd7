#include "server/serving_error.h"

#include "disagg/disagg_error.h"
#include "exec/kv_integrity.h"

namespace densa::server {

api::ApiError api_error(const Status& status, std::string param, std::string code) {
  api::ApiError e = api::error_for_status(status, std::move(param), std::move(code));
  if (e.code.empty() && is_kv_integrity_violation(status)) e.code = std::string(kKvIntegrityViolation);
  if (const std::string_view disagg = disagg::disagg_error_code(status); !disagg.empty()) {
    e.http_status = 502;  // the peer worker failed us
    e.type = "server_error";
    e.code = std::string(disagg);
    e.retry_after_s = 0;
  }
  return e;
}

}  // namespace densa::server
