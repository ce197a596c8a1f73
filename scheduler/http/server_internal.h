#pragma once
// What the files implementing the HTTP server (server*.cpp, connection.cpp) share: the server's
// state behind Server (Server::Impl: listener, connection caps, event stream registry), its
// rate-limited warnings, and the entry to a connection's state machine. Not part of its API
// (server.h).

#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "scheduler/http/server.h"

namespace tessera::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = net::ip::tcp;

// At most one line per interval for each kind of refusal: a flood of bad connections must not
// become a flood of log lines. The count of lines held back goes out with the next one.
class LogLimiter {
 public:
  template <typename... Args>
  void Warn(fmt::format_string<Args...> format, Args&&... args) {
    const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count();
    int64_t next = next_ms_.load();
    if (now < next || !next_ms_.compare_exchange_strong(next, now + kIntervalMs)) {
      ++held_back_;
      return;
    }
    const int64_t held = held_back_.exchange(0);
    const std::string line = fmt::format(format, std::forward<Args>(args)...);
    if (held > 0) {
      spdlog::warn("{} ({} more like it in the last {} s)", line, held, kIntervalMs / 1000);
    } else {
      spdlog::warn("{}", line);
    }
  }

 private:
  static constexpr int64_t kIntervalMs = 10'000;
  std::atomic<int64_t> next_ms_{0};
  std::atomic<int64_t> held_back_{0};
};

inline bool IsTimeout(const beast::error_code& ec) { return ec == beast::error::timeout; }

class Server::Impl {
 public:
  Impl(ServerOptions options, Router router)
      : options_(std::move(options)),
        router_(std::move(router)),
        ioc_(std::make_unique<net::io_context>(std::max(1, options_.io_threads))),
        acceptor_(std::make_unique<tcp::acceptor>(*ioc_)) {}

  // One open connection's place under the caps; released when the connection is gone.
  class Ticket {
   public:
    Ticket(Impl* server, std::string address) : server_(server), address_(std::move(address)) {}
    Ticket(Ticket&& other) noexcept
        : server_(std::exchange(other.server_, nullptr)), address_(std::move(other.address_)) {}
    Ticket(const Ticket&) = delete;
    ~Ticket() {
      if (server_) server_->Release(address_);
    }
    const std::string& address() const { return address_; }

   private:
    Impl* server_;
    std::string address_;
  };

  // A stream session's way to be woken from another thread.
  struct Wakeable {
    virtual ~Wakeable() = default;
    virtual void Wake() = 0;
  };

  StatusOr<int> Start();
  void Stop();
  void WakeStreams();
  ServerCounters counters() const;

  const ServerOptions& options() const { return options_; }
  const Router& router() const { return router_; }
  net::thread_pool& handlers() { return *handlers_; }
  LogLimiter& log() { return log_; }

  bool AdmitStream(std::weak_ptr<Wakeable> stream) {
    std::lock_guard lock(streams_mu_);
    std::erase_if(streams_, [](const std::weak_ptr<Wakeable>& w) { return w.expired(); });
    if (static_cast<int>(streams_.size()) >= options_.max_event_streams) return false;
    streams_.push_back(std::move(stream));
    ++open_streams_;
    return true;
  }
  void StreamClosed() { --open_streams_; }

  std::atomic<int64_t> timed_out_{0};
  std::atomic<int64_t> rejected_requests_{0};

 private:
  void Accept();
  void OnAccept(beast::error_code ec, tcp::socket socket);
  std::optional<Ticket> Admit(const std::string& address);
  void Release(const std::string& address) {
    std::lock_guard lock(mu_);
    --open_;
    auto it = per_client_.find(address);
    if (it != per_client_.end() && --it->second <= 0) per_client_.erase(it);
  }

  ServerOptions options_;
  Router router_;
  std::optional<ssl::context> tls_;  // outlives every connection (they are gone with ioc_)
  // Owned by pointer so Stop() can destroy them, and the connections still waiting in the
  // loop, while the members their tickets release into still exist.
  std::unique_ptr<net::io_context> ioc_;
  std::unique_ptr<tcp::acceptor> acceptor_;
  std::unique_ptr<net::thread_pool> handlers_;
  std::vector<std::thread> io_threads_;
  LogLimiter log_;

  mutable std::mutex mu_;  // guards open_ and per_client_
  int64_t open_ = 0;
  std::unordered_map<std::string, int> per_client_;
  std::atomic<int64_t> refused_{0};

  std::mutex streams_mu_;
  std::vector<std::weak_ptr<Wakeable>> streams_;
  std::atomic<int64_t> open_streams_{0};
};

// Serves one accepted connection (over TLS when `tls` is set) until it closes; its ticket holds
// its place under the connection caps until then (connection.cpp).
void ServeConnection(Server::Impl& server, tcp::socket socket, Server::Impl::Ticket ticket,
                     ssl::context* tls);

}  // namespace tessera::http
