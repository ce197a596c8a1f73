#pragma once
// ApiClient: the CLI's only door to the scheduler's HTTP API v1. Every call returns the decoded
// JSON body or a Status whose code says who is at fault:
//   kUnavailable      the scheduler could not be reached (message: the reason, e.g. "connection
//                     refused"); the CLI turns it into one "cannot reach" line and exit code 3
//   kInvalidArgument  the server rejected the request as malformed (HTTP 400)
//   kNotFound         HTTP 404
//   kUnauthenticated  HTTP 401: no token, or one the scheduler does not accept
//   kPermissionDenied HTTP 403: the token's role does not allow it
//   other codes       the API's own "code" field when known, else kInternal
// Not thread-safe: one client per thread.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "shared/base/status.h"

namespace httplib {
class Client;
}

namespace tessera::cli {

using json = nlohmann::json;

inline constexpr char kDefaultServer[] = "http://127.0.0.1:8470";

// Where and how the CLI reaches the scheduler. Each field comes from the first of: its flag
// (--server, --token, --ca-file); the environment (TESSERA_SERVER; TESSERA_TOKEN, else
// TESSERA_TOKEN_FILE; TESSERA_CA_FILE); the config file ($TESSERA_CONFIG, else
// $XDG_CONFIG_HOME/tessera/config.yaml, else ~/.config/tessera/config.yaml, with the keys
// server, token, token_file, ca_file); the default.
struct Connection {
  std::string server;   // "http://host:port" or "https://host:port" (a trailing '/' is ignored)
  std::string token;    // API bearer token (tsra-...); empty: send none
  std::string ca_file;  // PEM certificates to trust for https; empty: the system's
};

// Fills the fields `flags` leaves empty from the environment, the config file and the defaults.
// kInvalidArgument naming the file and key for an unreadable or malformed config or token file.
StatusOr<Connection> ResolveConnection(Connection flags);

class ApiClient {
 public:
  explicit ApiClient(const Connection& connection);
  ~ApiClient();
  ApiClient(const ApiClient&) = delete;
  ApiClient& operator=(const ApiClient&) = delete;

  const std::string& server_url() const { return url_; }

  StatusOr<json> Get(const std::string& path);
  // With `idempotency_key`, the request carries it (Idempotency-Key): the scheduler answers a
  // re-sent request with what the first one created.
  StatusOr<json> Post(const std::string& path, const json& body,
                      const std::string& idempotency_key = "");
  StatusOr<json> Delete(const std::string& path);
  // PUTs raw bytes (application/octet-stream).
  StatusOr<json> PutBytes(const std::string& path, const std::string& bytes);
  // GETs `path` into the file `target` (through target.part, renamed when whole); returns the
  // bytes written. An error answer is decoded like Get's.
  StatusOr<uint64_t> Download(const std::string& path, const std::string& target);

 private:
  StatusOr<json> Decode(const std::string& method, const std::string& path, int http_status,
                        const std::string& body) const;

  std::string url_;
  std::unique_ptr<httplib::Client> http_;
  bool authenticated_ = false;
};

// Follows the scheduler's live event stream (GET /api/v1/events) on its own thread, so a command
// that waits for a job wakes when the job changes instead of polling. Reconnects on its own;
// while it is not connected (an old scheduler, too many streams) live() is false and the caller
// polls.
class EventWatch {
 public:
  // `match` is called with each event's data ({"kind", "job_id", ...}); true wakes Wait().
  EventWatch(const Connection& connection, std::function<bool(const json&)> match);
  // Wakes on the events of one job.
  EventWatch(const Connection& connection, int64_t job_id);
  ~EventWatch();
  EventWatch(const EventWatch&) = delete;
  EventWatch& operator=(const EventWatch&) = delete;

  // Returns true as soon as a matching event arrived since the last call (at once if one did
  // already), false after `timeout`.
  bool Wait(std::chrono::milliseconds timeout);
  bool live() const { return live_.load(); }

 private:
  void Run();
  void Parse(const char* data, size_t size);

  const Connection connection_;
  const std::function<bool(const json&)> match_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool woken_ = false;
  std::atomic<bool> stop_{false};
  std::atomic<bool> live_{false};
  std::string buffer_;  // the stream's unparsed tail (stream thread only)
  std::unique_ptr<httplib::Client> http_;
  std::thread thread_;
};

// The one-line message for a kUnavailable status from `client`.
std::string UnreachableMessage(const std::string& server_url, const Status& status);

}  // namespace tessera::cli
