#pragma once
// RequestLog: the structured request log, one JSON object per line for every finished API
// request (its id, route, status, token counts, finish reasons and per-choice stage times),
// appended to a file or stderr. Thread-safe; each line is written and flushed whole.
#include <cstdio>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace densa::server {

class RequestLog {
 public:
  // "-" writes to stderr; anything else is a file opened for appending.
  static Result<std::unique_ptr<RequestLog>> open(const std::string& path);
  ~RequestLog();
  RequestLog(const RequestLog&) = delete;
  RequestLog& operator=(const RequestLog&) = delete;

  void write(const nlohmann::json& line);

 private:
  RequestLog(FILE* file, bool owned) : file_(file), owned_(owned) {}
  std::mutex mu_;
  FILE* file_;
  bool owned_;
};

}  // namespace densa::server
