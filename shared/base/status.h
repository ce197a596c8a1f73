#pragma once
// Status / StatusOr: the error currency of Tessera. Expected failures (bad input, missing ids,
// a peer that went away, I/O) travel as values; exceptions from libraries are caught at the call
// site and converted. TSR_CHECK is reserved for programmer bugs, never for user input.

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace tessera {

enum class StatusCode {
  kOk,
  kInvalidArgument,  // the caller sent something malformed; message names the field
  kNotFound,         // an id that does not exist
  kAlreadyExists,
  kFailedPrecondition,  // valid request, wrong state (e.g. cancel a finished job)
  kUnavailable,         // a peer or service could not be reached
  kCancelled,
  kResourceExhausted,  // a documented limit was exceeded
  kPermissionDenied,   // the caller is known but not allowed (e.g. a revoked worker)
  kUnauthenticated,    // the caller did not prove who it is (no, unknown or expired token)
  kInternal,           // I/O failures and everything unexpected
  // A filesystem refused a write for want of room (ENOSPC, EDQUOT) or because it is read-only
  // (EROFS): an operational event to wait out, never the fault of the work being written.
  kStorageFull,
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string m) {
    return {StatusCode::kInvalidArgument, std::move(m)};
  }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
  static Status FailedPrecondition(std::string m) {
    return {StatusCode::kFailedPrecondition, std::move(m)};
  }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
  static Status ResourceExhausted(std::string m) {
    return {StatusCode::kResourceExhausted, std::move(m)};
  }
  static Status PermissionDenied(std::string m) {
    return {StatusCode::kPermissionDenied, std::move(m)};
  }
  static Status Unauthenticated(std::string m) {
    return {StatusCode::kUnauthenticated, std::move(m)};
  }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
  static Status StorageFull(std::string m) { return {StatusCode::kStorageFull, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;

  // Prefixes the message with context ("scene.camera: " + message), keeping the code.
  Status WithContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : value_(std::move(status)) {}  // NOLINT: implicit by design
  StatusOr(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(value_); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(value_); }

  T& value() & { return std::get<T>(value_); }
  const T& value() const& { return std::get<T>(value_); }
  T&& value() && { return std::get<T>(std::move(value_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<Status, T> value_;
};

[[noreturn]] void CheckFailed(const char* file, int line, const char* expr);

}  // namespace tessera

#define TSR_CONCAT_INNER(a, b) a##b
#define TSR_CONCAT(a, b) TSR_CONCAT_INNER(a, b)

#define TSR_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::tessera::Status tsr_status_ = (expr);    \
    if (!tsr_status_.ok()) return tsr_status_; \
  } while (0)

#define TSR_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

#define TSR_ASSIGN_OR_RETURN(lhs, expr) \
  TSR_ASSIGN_OR_RETURN_IMPL(TSR_CONCAT(tsr_statusor_, __LINE__), lhs, expr)

// Programmer-bug assertion; never use for user input.
#define TSR_CHECK(cond)                                             \
  do {                                                              \
    if (!(cond)) ::tessera::CheckFailed(__FILE__, __LINE__, #cond); \
  } while (0)
