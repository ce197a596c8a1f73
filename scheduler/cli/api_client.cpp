#include "scheduler/cli/api_client.h"

#include <httplib.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "shared/base/file_io.h"
#include "shared/base/yaml_util.h"

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
  if (code == "unauthenticated" || http_status == 401) return StatusCode::kUnauthenticated;
  if (code == "cancelled") return StatusCode::kCancelled;
  if (code == "storage_full" || http_status == 507) return StatusCode::kStorageFull;
  // A 503 from a live scheduler is still an answer, not "cannot reach": keep it kInternal so the
  // user sees the server's own message.
  return StatusCode::kInternal;
}

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::string(value) : std::string();
}

// The first line of a token file, without surrounding blanks.
StatusOr<std::string> ReadTokenFile(const std::string& path, const std::string& field) {
  StatusOr<std::string> text = file_io::ReadAll(path);
  if (!text.ok()) return Status::InvalidArgument(field + ": cannot read " + path);
  std::string token = text->substr(0, text->find('\n'));
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
  if (token.empty()) return Status::InvalidArgument(field + ": " + path + " is empty");
  return token;
}

std::string ConfigPath() {
  if (std::string explicit_path = Env("TESSERA_CONFIG"); !explicit_path.empty()) {
    return explicit_path;
  }
  if (std::string xdg = Env("XDG_CONFIG_HOME"); !xdg.empty()) {
    return xdg + "/tessera/config.yaml";
  }
  if (std::string home = Env("HOME"); !home.empty()) return home + "/.config/tessera/config.yaml";
  return "";
}

}  // namespace

StatusOr<Connection> ResolveConnection(Connection c) {
  if (c.server.empty()) c.server = Env("TESSERA_SERVER");
  if (c.token.empty()) c.token = Env("TESSERA_TOKEN");
  if (c.token.empty() && !Env("TESSERA_TOKEN_FILE").empty()) {
    TSR_ASSIGN_OR_RETURN(c.token, ReadTokenFile(Env("TESSERA_TOKEN_FILE"), "TESSERA_TOKEN_FILE"));
  }
  if (c.ca_file.empty()) c.ca_file = Env("TESSERA_CA_FILE");

  const std::string path = ConfigPath();
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool required = !Env("TESSERA_CONFIG").empty();
  if (!path.empty() && (required || fs::exists(path, ec))) {
    StatusOr<std::string> text = file_io::ReadAll(path);
    if (!text.ok()) return Status::InvalidArgument("config " + path + ": cannot read it");
    TSR_ASSIGN_OR_RETURN(YAML::Node root, yaml::Parse(*text, "config " + path));
    if (!root.IsNull() && !root.IsMap()) {
      return Status::InvalidArgument("config " + path +
                                     ": expected a map (server, token, token_file, ca_file)");
    }
    std::map<std::string, std::string> values;
    for (const auto& kv : root) {
      const std::string key = kv.first.Scalar();
      if (key != "server" && key != "token" && key != "token_file" && key != "ca_file") {
        return Status::InvalidArgument("config " + path + ": " + key +
                                       ": unknown key (server, token, token_file, ca_file)");
      }
      if (!kv.second.IsScalar()) {
        return Status::InvalidArgument("config " + path + ": " + key + ": expected text");
      }
      values[key] = kv.second.Scalar();
    }
    // Relative paths in the file are relative to the file.
    auto beside = [&](const std::string& p) {
      return fs::path(p).is_absolute() ? p : (fs::path(path).parent_path() / p).string();
    };
    if (c.server.empty()) c.server = values["server"];
    if (c.token.empty()) c.token = values["token"];
    if (c.token.empty() && !values["token_file"].empty()) {
      TSR_ASSIGN_OR_RETURN(
          c.token, ReadTokenFile(beside(values["token_file"]), "config " + path + ": token_file"));
    }
    if (c.ca_file.empty() && !values["ca_file"].empty()) c.ca_file = beside(values["ca_file"]);
  }
  if (c.server.empty()) c.server = kDefaultServer;
  return c;
}

ApiClient::ApiClient(const Connection& connection) : url_(connection.server) {
  while (!url_.empty() && url_.back() == '/') url_.pop_back();
  http_ = std::make_unique<httplib::Client>(url_);
  if (!connection.token.empty()) {
    http_->set_bearer_token_auth(connection.token);
    authenticated_ = true;
  }
  if (!connection.ca_file.empty()) http_->set_ca_cert_path(connection.ca_file);
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

StatusOr<uint64_t> ApiClient::Download(const std::string& path, const std::string& target) {
  if (!http_->is_valid()) {
    return Status::InvalidArgument("--server: '" + url_ + "' is not an http:// or https:// URL");
  }
  const std::string part = target + ".part";
  std::ofstream out;
  std::string error_body;
  int status = 0;
  uint64_t bytes = 0;
  httplib::Result result = http_->Get(
      path,
      [&](const httplib::Response& response) {
        status = response.status;
        if (status == 200) out.open(part, std::ios::binary | std::ios::trunc);
        return status != 200 || static_cast<bool>(out);
      },
      [&](const char* data, size_t length) {
        if (status != 200) {
          error_body.append(data, length);
          return true;
        }
        out.write(data, static_cast<std::streamsize>(length));
        bytes += length;
        return static_cast<bool>(out);
      });
  out.close();
  std::error_code ec;
  if (!result || status != 200 || !out) std::filesystem::remove(part, ec);
  if (!result) {
    if (status == 200) return Status::Internal("cannot write " + part);
    return Status::Unavailable(TransportReason(result.error()));
  }
  if (status != 200) return Decode("GET", path, status, error_body).status();
  if (!out) return Status::Internal("cannot write " + part);
  std::filesystem::rename(part, target, ec);
  if (ec) return Status::Internal("cannot write " + target + ": " + ec.message());
  return bytes;
}

StatusOr<json> ApiClient::Post(const std::string& path, const json& body,
                               const std::string& idempotency_key) {
  if (!http_->is_valid()) {
    return Status::InvalidArgument("--server: '" + url_ + "' is not an http:// or https:// URL");
  }
  std::string text;
  try {
    text = body.dump();
  } catch (const json::exception& e) {
    // Text that is not UTF-8 cannot be JSON: say so instead of sending nothing.
    return Status::InvalidArgument(std::string("the request holds text that is not UTF-8 (") +
                                   e.what() + ")");
  }
  httplib::Headers headers;
  if (!idempotency_key.empty()) headers.emplace("Idempotency-Key", idempotency_key);
  httplib::Result result = http_->Post(path, headers, text, "application/json");
  if (!result) return Status::Unavailable(TransportReason(result.error()));
  return Decode("POST", path, result->status, result->body);
}

StatusOr<json> ApiClient::PutBytes(const std::string& path, const std::string& bytes) {
  if (!http_->is_valid()) {
    return Status::InvalidArgument("--server: '" + url_ + "' is not an http:// or https:// URL");
  }
  httplib::Result result = http_->Put(path, bytes, "application/octet-stream");
  if (!result) return Status::Unavailable(TransportReason(result.error()));
  return Decode("PUT", path, result->status, result->body);
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

EventWatch::EventWatch(const Connection& connection, std::function<bool(const json&)> match)
    : connection_(connection), match_(std::move(match)) {
  thread_ = std::thread([this] { Run(); });
}

EventWatch::EventWatch(const Connection& connection, int64_t job_id)
    : EventWatch(connection, [job_id](const json& event) {
        return event.value("job_id", int64_t{0}) == job_id;
      }) {}

EventWatch::~EventWatch() {
  stop_.store(true);
  {
    std::lock_guard lock(mu_);
    if (http_) http_->stop();  // ends a blocked read
  }
  if (thread_.joinable()) thread_.join();
}

bool EventWatch::Wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  const bool woken = cv_.wait_for(lock, timeout, [this] { return woken_; });
  woken_ = false;
  return woken;
}

void EventWatch::Run() {
  while (!stop_.load()) {
    {
      std::lock_guard lock(mu_);
      http_ = std::make_unique<httplib::Client>(connection_.server);
      http_->set_connection_timeout(kConnectTimeoutSeconds, 0);
      http_->set_read_timeout(20, 0);  // the stream sends a keep-alive every 15 s
      if (!connection_.token.empty()) http_->set_bearer_token_auth(connection_.token);
      if (!connection_.ca_file.empty()) http_->set_ca_cert_path(connection_.ca_file);
    }
    buffer_.clear();
    http_->Get(
        "/api/v1/events", httplib::Headers{},
        [this](const httplib::Response& response) {
          live_.store(response.status == 200);
          return response.status == 200;
        },
        [this](const char* data, size_t size) {
          Parse(data, size);
          return !stop_.load();
        });
    live_.store(false);
    // Whatever happened meanwhile is unknown: let the waiter look once.
    {
      std::lock_guard lock(mu_);
      woken_ = true;
    }
    cv_.notify_all();
    for (int i = 0; i < 10 && !stop_.load(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

void EventWatch::Parse(const char* data, size_t size) {
  buffer_.append(data, size);
  for (size_t end; (end = buffer_.find("\n\n")) != std::string::npos;) {
    const std::string event = buffer_.substr(0, end);
    buffer_.erase(0, end + 2);
    std::string kind, payload;
    size_t start = 0;
    while (start < event.size()) {
      size_t eol = event.find('\n', start);
      if (eol == std::string::npos) eol = event.size();
      const std::string line = event.substr(start, eol - start);
      if (line.rfind("event: ", 0) == 0) kind = line.substr(7);
      if (line.rfind("data: ", 0) == 0) payload += line.substr(6);
      start = eol + 1;
    }
    if (kind.empty()) continue;  // a keep-alive comment
    json parsed = json::parse(payload, nullptr, /*allow_exceptions=*/false);
    if (kind == "missed" || (parsed.is_object() && match_(parsed))) {
      {
        std::lock_guard lock(mu_);
        woken_ = true;
      }
      cv_.notify_all();
    }
  }
}

std::string UnreachableMessage(const std::string& server_url, const Status& status) {
  return "cannot reach the Tessera scheduler at " + server_url + " (" + status.message() +
         "); is it running? (tessera up)";
}

}  // namespace tessera::cli
