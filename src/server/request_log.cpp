#include "server/request_log.h"

#include <cerrno>
#include <cstring>
#include <memory>

#include "server/openai_response.h"

namespace densa::server {

Result<std::unique_ptr<RequestLog>> RequestLog::open(const std::string& path) {
  if (path == "-") return std::unique_ptr<RequestLog>(new RequestLog(stderr, false));
  FILE* f = std::fopen(path.c_str(), "a");
  if (f == nullptr) return unavailable("cannot open request log " + path + ": " + std::strerror(errno));
  return std::unique_ptr<RequestLog>(new RequestLog(f, true));
}

RequestLog::~RequestLog() {
  if (owned_) std::fclose(file_);
}

void RequestLog::write(const nlohmann::json& line) {
  const std::string text = dump_json(line) + "\n";
  std::lock_guard<std::mutex> lock(mu_);
  std::fwrite(text.data(), 1, text.size(), file_);
  std::fflush(file_);
}

}  // namespace densa::server
