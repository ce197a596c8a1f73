#pragma once
// ApiClient: the CLI's only door to the scheduler's HTTP API v1. Every call returns the decoded
// JSON body or a Status whose code says who is at fault:
//   kUnavailable      the scheduler could not be reached (message: the reason, e.g. "connection
//                     refused"); the CLI turns it into one "cannot reach" line and exit code 3
//   kInvalidArgument  the server rejected the request as malformed (HTTP 400)
//   kNotFound         HTTP 404
//   other codes       the API's own "code" field when known, else kInternal
// Not thread-safe: one client per thread.

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "shared/status.h"

namespace httplib {
class Client;
}

namespace tessera::cli {

using json = nlohmann::json;

inline constexpr char kDefaultServer[] = "http://127.0.0.1:8470";

// The --server default: $TESSERA_SERVER, else kDefaultServer.
std::string DefaultServerUrl();

class ApiClient {
 public:
  // `server_url` is "http://host:port" (a trailing '/' is ignored).
  explicit ApiClient(std::string server_url);
  ~ApiClient();
  ApiClient(const ApiClient&) = delete;
  ApiClient& operator=(const ApiClient&) = delete;

  const std::string& server_url() const { return url_; }

  StatusOr<json> Get(const std::string& path);
  StatusOr<json> Post(const std::string& path, const json& body);
  StatusOr<json> Delete(const std::string& path);

 private:
  StatusOr<json> Decode(const std::string& method, const std::string& path, int http_status,
                        const std::string& body) const;

  std::string url_;
  std::unique_ptr<httplib::Client> http_;
};

// The one-line message for a kUnavailable status from `client`.
std::string UnreachableMessage(const std::string& server_url, const Status& status);

}  // namespace tessera::cli
