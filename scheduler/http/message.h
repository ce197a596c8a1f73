#pragma once
// What a route handler sees of an HTTP exchange: a Request already checked at the boundary (the
// path and every query parameter percent-decoded and valid UTF-8, header values valid UTF-8,
// sizes within the server's limits) and the Response it fills in. The server (server.h) owns
// sockets, parsing, limits and timeouts; handlers never see any of that.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tessera::http {

struct Request {
  std::string method;                              // "GET", "POST", ... (HEAD is routed as GET)
  std::string target;                              // the raw request-target, for logs only
  std::string path;                                // percent-decoded, valid UTF-8
  std::multimap<std::string, std::string> params;  // the decoded query
  std::vector<std::pair<std::string, std::string>> headers;  // in arrival order
  std::string body;
  std::vector<std::string> matches;  // [0]: the path, [1..]: the route pattern's groups
  std::string remote_address;        // the peer's IP address

  bool HasParam(const std::string& name) const { return params.count(name) > 0; }
  // The first value of query parameter `name`, or "" when absent.
  std::string Param(const std::string& name) const;
  // The value of header `name` (case-insensitive), or "" when absent.
  std::string Header(const std::string& name) const;
  bool HasHeader(const std::string& name) const;
};

// A response body that is produced over time: a server-sent event stream
// (text/event-stream). The server asks it for more whenever Server::WakeStreams() is called
// and sends a keep-alive comment when it has been quiet for a while. Called only on its
// connection's own strand, one call at a time.
class EventSource {
 public:
  virtual ~EventSource() = default;
  // The next bytes to send ("" when there is nothing new), or nullopt when the stream is over.
  virtual std::optional<std::string> Next() = 0;
};

struct Response {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string content_type;
  std::string body;
  // When set, the body is this file, streamed from disk (never read whole into memory).
  std::string file_path;
  // When set, the response is an open-ended chunked stream fed by this source.
  std::shared_ptr<EventSource> stream;

  void SetHeader(const std::string& name, const std::string& value);
  void SetContent(std::string content, const std::string& type) {
    body = std::move(content);
    content_type = type;
  }
};

}  // namespace tessera::http
