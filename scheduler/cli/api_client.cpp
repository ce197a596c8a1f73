#include "scheduler/cli/api_client.h"

#include <httplib.h>

#include <cstdlib>

namespace tessera::cli {

namespace {

constexpr int kConnectTimeoutSeconds = 3;
constexpr int kReadTimeoutSeconds = 60;  // a large submission is expanded before the answer

std::string TransportReason(httplib::Error error) {
  switch (error) {
    case httplib::Error::Connection:
      return "connection refused";
    case httplib::Error::ConnectionTimeout:
      return "connection timed out";
    case httplib::Error::Read:
      return "no response";
    case httplib::Error::Write:
      return "could not send the request";
    case httplib::Error::SSLConnection:
      return "TLS handshake failed";
    case httplib::Error::SSLServerVerification:
      return "TLS certificate not trusted";
    default:
      return httplib::to_string(error);
  }
}

StatusCode CodeFromApi(int http_status, const std::string& code) {
  if (code == "invalid_argument" || http_status == 400) return StatusCode::kInvalidArgument;
  if (code == "not_found" || http_status == 404) return StatusCode::kNotFound;
  if (code == "already_exists") return StatusCode::kAlreadyExists;
  if (code == "failed_precondition" || http_status == 409) return StatusCode::kFailedPrecondition;
  if (code == "resource_exhausted" || http_status == 413) return StatusCode::kResourceExhausted;
  if (code == "permission_denied" || http_status == 403) return StatusCode::kPermissionDenied;
  if (code == "cancelled") return StatusCode::kCancelled;
  // A 503 from a live scheduler is still an answer, not "cannot reach": keep it kInternal so the
  // user sees the server's own message.
  return StatusCode::kInternal;
}

}  // namespace

std::string DefaultServerUrl() {
  const char* env = std::getenv("TESSERA_SERVER");
  return (env != nullptr && *env != '\0') ? std::string(env) : std::string(kDefaultServer);
}

ApiClient::ApiClient(std::string server_url) : url_(std::move(server_url)) {
  while (!url_.empty() && url_.back() == '/') url_.pop_back();
  http_ = std::make_unique<httplib::Client>(url_);
  http_->set_connection_timeout(kConnectTimeoutSeconds, 0);
  http_->set_read_timeout(kReadTimeoutSeconds, 0);
  http_->set_write_timeout(kReadTimeoutSeconds, 0);
}

ApiClient::~ApiClient() = default;

StatusOr<json> ApiClient::Get(const std::string& path) {
  if (!http_->is_valid()) {
    return Status::InvalidArgument("--server: '" + url_ + "' is not an http:// or https:// URL");
  }
  httplib::Result result = http_->Get(path);
  if (!result) return Status::Unavailable(TransportReason(result.error()));
  return Decode("GET", path, result->status, result->body);
}

StatusOr<json> ApiClient::Post(const std::string& path, const json& body) {
  if (!http_->is_valid()) {
    return Status::InvalidArgument("--server: '" + url_ + "' is not an http:// or https:// URL");
  }
  httplib::Result result = http_->Post(path, body.dump(), "application/json");
  if (!result) return Status::Unavailable(TransportReason(result.error()));
  return Decode("POST", path, result->status, result->body);
}

StatusOr<json> ApiClient::Delete(const std::string& path) {
  if (!http_->is_valid()) {
    return Status::InvalidArgument("--server: '" + url_ + "' is not an http:// or https:// URL");
  }
  httplib::Result result = http_->Delete(path);
  if (!result) return Status::Unavailable(TransportReason(result.error()));
  return Decode("DELETE", path, result->status, result->body);
}

StatusOr<json> ApiClient::Decode(const std::string& method, const std::string& path,
                                 int http_status, const std::string& body) const {
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (http_status >= 200 && http_status < 300) {
    if (parsed.is_discarded() || !parsed.is_object()) {
      return Status::Internal(method + " " + path +
                              ": the server sent a reply that is not a "
                              "JSON object (HTTP " +
                              std::to_string(http_status) + ")");
    }
    return parsed;
  }
  std::string message;
  std::string code;
  if (parsed.is_object()) {
    if (parsed.contains("error") && parsed["error"].is_string()) message = parsed["error"];
    if (parsed.contains("code") && parsed["code"].is_string()) code = parsed["code"];
  }
  if (message.empty()) {
    message = method + " " + path + " failed with HTTP " + std::to_string(http_status);
  }
  return Status(CodeFromApi(http_status, code), message);
}

std::string UnreachableMessage(const std::string& server_url, const Status& status) {
  return "cannot reach the Tessera scheduler at " + server_url + " (" + status.message() +
         "); is it running? (tessera up)";
}

}  // namespace tessera::cli
