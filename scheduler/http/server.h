#pragma once
// The HTTP/1.1 server under the API: asynchronous (Boost.Beast over Boost.Asio), so a
// connection costs a socket and a few kilobytes, never a thread. A slow, idle or hostile client
// holds nothing that other clients need:
//   - I/O runs on `io_threads` event-loop threads; handlers run on a separate pool of
//     `handler_threads`, so a slow store query never delays reading or writing other sockets;
//   - every phase of a request has its own deadline (request line + headers, including the
//     wait for a keep-alive connection's next request and the TLS handshake; body; response);
//   - header bytes and header count are capped (431), bodies are capped (413);
//   - connections are capped in total and per client address (refused at accept);
//   - server-sent event streams wait on timers, not threads, and are woken by WakeStreams().
// The path and query are decoded and checked (valid UTF-8) before any route sees them
// (url.h); handler exceptions become 500 answers (router.h).
//
// Threads: Start/Stop from one owning thread; WakeStreams and counters() from any thread.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "scheduler/http/router.h"
#include "shared/base/status.h"

namespace tessera::http {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0 picks a free port
  int io_threads = 2;
  int handler_threads = 16;
  // Both set: serve HTTPS only, TLS `tls_min_version` ("1.2" or "1.3") or later.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_min_version = "1.2";
  size_t max_header_bytes = 16 * 1024;  // request line + all header lines
  size_t max_header_count = 100;
  size_t max_body_bytes = 64 << 20;
  // Request line and headers (and, for a kept-alive connection, the wait for them; for TLS,
  // the handshake): a client that dribbles its headers is cut off after this.
  std::chrono::seconds header_timeout{10};
  std::chrono::seconds body_timeout{60};
  std::chrono::seconds write_timeout{60};  // each response, or each write of a stream
  int max_connections = 10000;
  int max_connections_per_client = 256;
  int max_event_streams = 1000;
  std::chrono::seconds stream_keepalive{15};  // an idle event stream sends a comment this often
};

struct ServerCounters {
  int64_t open_connections = 0;
  int64_t open_streams = 0;
  int64_t refused_connections = 0;  // over a connection cap
  int64_t timed_out = 0;            // a request phase ran past its deadline
  int64_t rejected_requests = 0;    // malformed, over a size limit, or not valid UTF-8
};

class Server {
 public:
  Server(ServerOptions options, Router router);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds, starts the threads and serves; returns the bound port.
  StatusOr<int> Start();
  // Stops accepting, closes every connection and joins the threads (handlers in flight finish).
  void Stop();

  // Asks every open event stream to pull its source (something new may be there).
  void WakeStreams();
  ServerCounters counters() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::http
