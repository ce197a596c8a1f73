#include "scheduler/api/reply.h"

namespace tessera::api {

using nlohmann::json;

int HttpCode(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition:
      return 409;
    case StatusCode::kResourceExhausted:
      return 413;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kUnauthenticated:
      return 401;
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kStorageFull:
      return 507;  // Insufficient Storage
    case StatusCode::kCancelled:
    case StatusCode::kInternal:
      return 500;
  }
  return 500;
}

void Reply(http::Response& res, int code, const json& body) {
  res.status = code;
  res.SetContent(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void ReplyError(http::Response& res, const Status& status) {
  http::SetError(res, HttpCode(status.code()), StatusCodeName(status.code()), status.message());
}

std::optional<int64_t> WholeNumber(const std::string& text) {
  // Digits only (an optional sign first): stoll would skip leading spaces and accept "+".
  size_t i = !text.empty() && text[0] == '-' ? 1 : 0;
  if (i == text.size() || text.size() > 20) return std::nullopt;
  for (size_t j = i; j < text.size(); ++j) {
    if (text[j] < '0' || text[j] > '9') return std::nullopt;
  }
  try {
    return static_cast<int64_t>(std::stoll(text));
  } catch (const std::exception&) {  // out of range
    return std::nullopt;
  }
}

StatusOr<int64_t> ParseInt(const std::string& text, const std::string& field, int64_t min,
                           int64_t max) {
  if (std::optional<int64_t> v = WholeNumber(text); v && *v >= min && *v <= max) return *v;
  return Status::InvalidArgument(field + ": expected a whole number in [" + std::to_string(min) +
                                 ", " + std::to_string(max) + "], got '" + text.substr(0, 64) +
                                 "'");
}

StatusOr<int64_t> ParseId(const std::string& text) {
  if (std::optional<int64_t> id = WholeNumber(text); id && *id > 0) return *id;
  return Status::InvalidArgument("id: '" + text.substr(0, 64) + "' is not a positive integer");
}

}  // namespace tessera::api
