// The HTTP server under the API (server.h). Its parts:
//  - server.cpp: the listener (TLS set-up, bind, accept), the connection caps applied at accept,
//    waking event streams, the counters;
//  - connection.cpp: one connection's state machine: deadlines, limits, dispatch to the handler
//    pool, answers, event streams, closing;
//  - server_internal.h: what they share (Server::Impl).
#include "scheduler/http/server.h"

#include <fcntl.h>
#include <openssl/ssl.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include "scheduler/http/server_internal.h"

namespace tessera::http {
namespace {

// Answers for connections refused at accept (plain HTTP only: a TLS client would not read it).
constexpr std::string_view kTooManyConnections =
    "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 5\r\n"
    "Connection: close\r\nContent-Length: 84\r\n\r\n"
    R"({"error":"too many open connections from this address; retry later","code":"unavailable"})";

}  // namespace

StatusOr<int> Server::Impl::Start() {
  // Every open connection is a file descriptor: lift the soft limit to the hard one so the
  // connection caps, not the descriptor limit, decide who is turned away.
  if (rlimit lim{}; getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
  if (!options_.tls_cert_file.empty()) {
    tls_.emplace(ssl::context::tls_server);
    boost::system::error_code ec;
    tls_->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                      ssl::context::no_sslv3 | ssl::context::single_dh_use);
    tls_->use_certificate_chain_file(options_.tls_cert_file, ec);
    if (!ec) tls_->use_private_key_file(options_.tls_key_file, ssl::context::pem, ec);
    if (ec || SSL_CTX_check_private_key(tls_->native_handle()) != 1) {
      return Status::InvalidArgument(
          "api.tls_cert_file / api.tls_key_file: cannot load the certificate " +
          options_.tls_cert_file + " with the key " + options_.tls_key_file +
          " (PEM, matching pair?)" + (ec ? ": " + ec.message() : std::string()));
    }
    const int min = options_.tls_min_version == "1.3" ? TLS1_3_VERSION : TLS1_2_VERSION;
    SSL_CTX_set_min_proto_version(tls_->native_handle(), min);
  }
  boost::system::error_code ec;
  const net::ip::address address = net::ip::make_address(options_.host, ec);
  if (ec) return Status::InvalidArgument("api.listen: '" + options_.host + "' is not an address");
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(options_.port));
  acceptor_->open(endpoint.protocol(), ec);
  // Renderer and worker processes the scheduler starts must not inherit the listening socket:
  // one outliving a killed scheduler would keep the port from being bound again.
  if (!ec) ::fcntl(acceptor_->native_handle(), F_SETFD, FD_CLOEXEC);
  if (!ec) acceptor_->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_->bind(endpoint, ec);
  if (!ec) acceptor_->listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status::Unavailable("cannot bind the API on " + options_.host + ":" +
                               std::to_string(options_.port) + " (" + ec.message() + ")");
  }
  const int port = acceptor_->local_endpoint().port();
  handlers_ = std::make_unique<net::thread_pool>(std::max(1, options_.handler_threads));
  Accept();
  for (int i = 0; i < std::max(1, options_.io_threads); ++i) {
    io_threads_.emplace_back([this] { ioc_->run(); });
  }
  return port;
}

void Server::Impl::Stop() {
  if (!ioc_) return;
  ioc_->stop();
  for (std::thread& t : io_threads_) t.join();
  io_threads_.clear();
  if (handlers_) handlers_->join();
  boost::system::error_code ec;
  acceptor_->close(ec);
  acceptor_.reset();
  // Connections still open are destroyed with the loop, taking their tickets back here.
  ioc_.reset();
}

void Server::Impl::Accept() {
  acceptor_->async_accept(
      net::make_strand(*ioc_),
      [this](beast::error_code ec, tcp::socket socket) { OnAccept(ec, std::move(socket)); });
}

std::optional<Server::Impl::Ticket> Server::Impl::Admit(const std::string& address) {
  std::lock_guard lock(mu_);
  int& from_client = per_client_[address];
  if (open_ >= options_.max_connections || from_client >= options_.max_connections_per_client) {
    if (from_client == 0) per_client_.erase(address);
    return std::nullopt;
  }
  ++open_;
  ++from_client;
  return Ticket(this, address);
}

void Server::Impl::OnAccept(beast::error_code ec, tcp::socket socket) {
  if (ec == net::error::operation_aborted || !acceptor_->is_open()) return;
  if (ec) {
    // EMFILE and friends: keep accepting; the log says why connections fail.
    log_.Warn("HTTP: accept failed: {}", ec.message());
    return Accept();
  }
  boost::system::error_code peer_ec;
  const std::string address = socket.remote_endpoint(peer_ec).address().to_string();
  std::optional<Ticket> ticket = Admit(peer_ec ? std::string("?") : address);
  if (!ticket) {
    ++refused_;
    log_.Warn(
        "HTTP: refused a connection from {}: over api.max_connections_per_client ({}) or "
        "api.max_connections ({})",
        address, options_.max_connections_per_client, options_.max_connections);
    if (!tls_) {
      // The answer fits in the socket's send buffer, so this completes at once.
      auto sock = std::make_shared<tcp::socket>(std::move(socket));
      net::async_write(*sock, net::buffer(kTooManyConnections.data(), kTooManyConnections.size()),
                       [sock](beast::error_code, size_t) {
                         boost::system::error_code ignored;
                         sock->shutdown(tcp::socket::shutdown_both, ignored);
                         sock->close(ignored);
                       });
    }
    return Accept();
  }
  boost::system::error_code ignored;
  ::fcntl(socket.native_handle(), F_SETFD, FD_CLOEXEC);
  socket.set_option(tcp::no_delay(true), ignored);
  ServeConnection(*this, std::move(socket), std::move(*ticket), tls_ ? &*tls_ : nullptr);
  Accept();
}

void Server::Impl::WakeStreams() {
  std::vector<std::shared_ptr<Wakeable>> live;
  {
    std::lock_guard lock(streams_mu_);
    for (const auto& w : streams_) {
      if (auto s = w.lock()) live.push_back(std::move(s));
    }
  }
  for (const auto& s : live) s->Wake();
}

ServerCounters Server::Impl::counters() const {
  ServerCounters c;
  {
    std::lock_guard lock(mu_);
    c.open_connections = open_;
  }
  c.open_streams = open_streams_.load();
  c.refused_connections = refused_.load();
  c.timed_out = timed_out_.load();
  c.rejected_requests = rejected_requests_.load();
  return c;
}

Server::Server(ServerOptions options, Router router)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(router))) {}

Server::~Server() { Stop(); }

StatusOr<int> Server::Start() { return impl_->Start(); }
void Server::Stop() { impl_->Stop(); }
void Server::WakeStreams() { impl_->WakeStreams(); }
ServerCounters Server::counters() const { return impl_->counters(); }

}  // namespace tessera::http
