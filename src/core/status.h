#pragma once
// Status and Result<T>: how densa reports what the outside world can break (files, configs,
// HTTP bodies, transfers). Programmer errors use CHECK instead (core/check.h).
#include <string>
#include <utility>
#include <variant>

#include "core/check.h"

namespace densa {

enum class StatusCode {
  kOk,
  kInvalidArgument,   // bad user input (flags, JSON, prompt)
  kNotFound,          // missing file, tensor, model
  kDataLoss,          // truncated / corrupt file, bad digest
  kUnimplemented,     // valid but unsupported (dtype, architecture)
  kOutOfRange,        // exceeds a limit (context, pool)
  kResourceExhausted, // queue full, out of memory budget
  kUnavailable,       // peer dead, timeout
  kAborted,           // request cancelled or failed an integrity check
  kInternal,
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok() { return {}; }

  bool is_ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status data_loss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status out_of_range(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status resource_exhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
inline Status unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status internal_error(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// Result<T> holds a T or a non-ok Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(implicit)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(implicit)
    CHECK(!std::get<Status>(v_).is_ok()) << "Result constructed from an ok Status";
  }

  bool is_ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOkStatus;
    return is_ok() ? kOkStatus : std::get<Status>(v_);
  }
  T& value() & {
    CHECK(is_ok()) << status().to_string();
    return std::get<T>(v_);
  }
  const T& value() const& {
    CHECK(is_ok()) << status().to_string();
    return std::get<T>(v_);
  }
  T&& value() && {
    CHECK(is_ok()) << status().to_string();
    return std::get<T>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace densa

// Propagate a non-ok Status from an expression returning Status.
#define DENSA_RETURN_IF_ERROR(expr)              \
  do {                                           \
    ::densa::Status densa_status_ = (expr);      \
    if (!densa_status_.is_ok()) return densa_status_; \
  } while (0)

#define DENSA_CONCAT_INNER(a, b) a##b
#define DENSA_CONCAT(a, b) DENSA_CONCAT_INNER(a, b)
// `DENSA_ASSIGN_OR_RETURN(auto x, make_x());` binds the value or returns the Status.
#define DENSA_ASSIGN_OR_RETURN(lhs, expr)                                  \
  auto DENSA_CONCAT(densa_result_, __LINE__) = (expr);                     \
  if (!DENSA_CONCAT(densa_result_, __LINE__).is_ok())                      \
    return DENSA_CONCAT(densa_result_, __LINE__).status();                 \
  lhs = std::move(DENSA_CONCAT(densa_result_, __LINE__)).value()
