#include "scheduler/http/server.h"

#include <fcntl.h>
#include <openssl/ssl.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <array>
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

#include "scheduler/http/url.h"
#include "shared/utf8.h"

namespace tessera::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = net::ip::tcp;

namespace {

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

// Answers for connections refused at accept (plain HTTP only: a TLS client would not read it).
constexpr std::string_view kTooManyConnections =
    "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 5\r\n"
    "Connection: close\r\nContent-Length: 84\r\n\r\n"
    R"({"error":"too many open connections from this address; retry later","code":"unavailable"})";

bool IsTimeout(const beast::error_code& ec) { return ec == beast::error::timeout; }

}  // namespace

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

namespace {

// One connection: reads a request under the header and body deadlines, hands it to the handler
// pool, writes the answer, and reads the next one (keep-alive). Every member is touched only on
// the connection's strand (the socket's executor).
template <typename Stream>
class Session : public Server::Impl::Wakeable,
                public std::enable_shared_from_this<Session<Stream>> {
 public:
  Session(Server::Impl& server, Stream stream, Server::Impl::Ticket ticket)
      : server_(server),
        options_(server.options()),
        stream_(std::move(stream)),
        ticket_(std::move(ticket)),
        timer_(stream_.get_executor()),
        deadline_(stream_.get_executor()) {}

  ~Session() override {
    if (streaming_) server_.StreamClosed();
  }

  void Run() {
    if constexpr (std::is_same_v<Stream, beast::tcp_stream>) {
      net::dispatch(stream_.get_executor(), [self = this->shared_from_this()] { self->Read(); });
    } else {
      Lowest().expires_after(options_.header_timeout);
      stream_.async_handshake(ssl::stream_base::server,
                              [self = this->shared_from_this()](beast::error_code ec) {
                                if (ec) {
                                  if (IsTimeout(ec)) ++self->server_.timed_out_;
                                  return self->Close();
                                }
                                self->Read();
                              });
    }
  }

  void Wake() override {
    net::post(stream_.get_executor(), [weak = this->weak_from_this()] {
      auto self = weak.lock();
      if (!self || !self->streaming_ || self->closed_) return;
      if (self->writing_) {
        self->pump_again_ = true;
      } else {
        self->timer_.cancel();  // its handler pumps
      }
    });
  }

 private:
  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }

  void Read() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(options_.max_header_bytes));
    parser_->body_limit(options_.max_body_bytes);
    ArmDeadline(options_.header_timeout);
    bhttp::async_read_header(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(beast::error_code ec) {
    deadline_.cancel();
    if (ec) return ReadFailed(ec, "headers");
    const auto& head = parser_->get();
    size_t fields = 0;
    for (auto it = head.begin(); it != head.end(); ++it) ++fields;
    if (fields > options_.max_header_count) {
      ++server_.rejected_requests_;
      return Refuse(431, "invalid_argument",
                    "too many header lines (" + std::to_string(fields) + "; at most " +
                        std::to_string(options_.max_header_count) + ")");
    }
    if (parser_->is_done()) return Dispatch();
    if (beast::iequals(head[bhttp::field::expect], "100-continue")) {
      // curl waits a second for this before sending a large body.
      auto cont = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
      Lowest().expires_after(options_.write_timeout);
      net::async_write(stream_, net::buffer(*cont),
                       [self = this->shared_from_this(), cont](beast::error_code ec, size_t) {
                         if (ec) return self->Close();
                         self->ReadBody();
                       });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    ArmDeadline(options_.body_timeout);
    bhttp::async_read(stream_, buffer_, *parser_,
                      [self = this->shared_from_this()](beast::error_code ec, size_t) {
                        self->deadline_.cancel();
                        if (ec) return self->ReadFailed(ec, "body");
                        self->Dispatch();
                      });
  }

  // Whether any byte of the current request has arrived (the parser starts on a header only
  // once it is complete; until then the bytes wait in the buffer).
  bool Started() const { return parser_->got_some() || buffer_.size() > 0; }

  void ArmDeadline(std::chrono::seconds after) {
    Lowest().expires_never();
    deadline_hit_ = false;
    deadline_.expires_after(after);
    deadline_.async_wait([self = this->shared_from_this()](beast::error_code ec) {
      if (ec || self->closed_) return;  // cancelled: the read finished in time
      self->deadline_hit_ = true;
      beast::error_code ignored;
      self->Lowest().socket().cancel(ignored);  // the pending read ends with operation_aborted
    });
  }

  void ReadFailed(beast::error_code ec, const char* phase) {
    if (deadline_hit_ && ec == net::error::operation_aborted) ec = beast::error::timeout;
    if (ec == bhttp::error::end_of_stream || ec == net::error::eof ||
        ec == net::error::operation_aborted || ec == net::ssl::error::stream_truncated) {
      return Close();
    }
    if (IsTimeout(ec)) {
      ++server_.timed_out_;
      // A kept-alive connection that simply went quiet is closed without a word; so is a TLS
      // connection (a read cut short leaves its record layer in no state to answer).
      if (!Started() || !std::is_same_v<Stream, beast::tcp_stream>) return Close();
      server_.log().Warn("HTTP: {} from {} did not arrive within the deadline; closed", phase,
                         ticket_.address());
      return Refuse(408, "invalid_argument",
                    std::string("the request's ") + phase + " did not arrive in time");
    }
    ++server_.rejected_requests_;
    if (ec == bhttp::error::header_limit) {
      return Refuse(431, "invalid_argument",
                    "request headers are larger than " + std::to_string(options_.max_header_bytes) +
                        " bytes");
    }
    if (ec == bhttp::error::body_limit) {
      return Refuse(413, "resource_exhausted",
                    "request body is larger than the limit (" +
                        std::to_string(options_.max_body_bytes) + " bytes)");
    }
    server_.log().Warn("HTTP: malformed request from {}: {}", ticket_.address(), ec.message());
    if (!Started()) return Close();
    Refuse(400, "invalid_argument", "malformed HTTP request: " + ec.message());
  }

  // Builds the checked Request and runs its handler on the handler pool.
  void Dispatch() {
    bhttp::request<bhttp::string_body> msg = parser_->release();
    version_ = msg.version();
    keep_alive_ = msg.keep_alive();
    head_ = msg.method() == bhttp::verb::head;
    auto req = std::make_shared<Request>();
    req->method = std::string(msg.method_string());
    req->target = utf8::Sanitize(std::string(msg.target()));
    req->remote_address = ticket_.address();
    for (const auto& field : msg) {
      std::string name(field.name_string());
      std::string value(field.value());
      if (Status st = utf8::Check(value, "header " + name); !st.ok()) {
        ++server_.rejected_requests_;
        return Answer(ErrorResponse(400, "invalid_argument", st.message()));
      }
      req->headers.emplace_back(std::move(name), std::move(value));
    }
    StatusOr<Target> target =
        ParseTarget(std::string_view(msg.target().data(), msg.target().size()));
    if (!target.ok()) {
      ++server_.rejected_requests_;
      return Answer(ErrorResponse(400, "invalid_argument", target.status().message()));
    }
    req->path = std::move(target->path);
    req->params = std::move(target->params);
    req->body = std::move(msg.body());
    Lowest().expires_never();  // the handler takes as long as it takes; no socket I/O meanwhile
    net::post(server_.handlers(), [self = this->shared_from_this(), req] {
      auto res = std::make_shared<Response>();
      self->server_.router().Dispatch(*req, *res);  // never throws
      net::post(self->stream_.get_executor(), [self, res] { self->Answer(std::move(*res)); });
    });
  }

  static Response ErrorResponse(int status, std::string_view code, std::string_view message) {
    Response res;
    SetError(res, status, code, message);
    return res;
  }

  // Answers with an error and closes: the rest of what the client sent cannot be trusted.
  void Refuse(int status, std::string_view code, const std::string& message) {
    keep_alive_ = false;
    if (version_ == 0) version_ = 11;
    Answer(ErrorResponse(status, code, message));
  }

  template <typename Message>
  void Fill(Message& msg, const Response& res) {
    msg.version(version_ == 10 ? 10 : 11);
    msg.result(static_cast<unsigned>(res.status));
    if (!res.content_type.empty()) msg.set(bhttp::field::content_type, res.content_type);
    for (const auto& [name, value] : res.headers) msg.set(name, value);
    msg.set("X-Content-Type-Options", "nosniff");
    msg.keep_alive(keep_alive_);
  }

  void Answer(Response res) {
    if (closed_) return;
    if (res.stream) return StartStream(std::move(res));
    if (!res.file_path.empty()) {
      bhttp::file_body::value_type file;
      beast::error_code ec;
      file.open(res.file_path.c_str(), beast::file_mode::scan, ec);
      if (ec) {
        spdlog::error("HTTP: cannot open {}: {}", res.file_path, ec.message());
        return Answer(ErrorResponse(500, "internal", "cannot read the file"));
      }
      auto msg = std::make_shared<bhttp::response<bhttp::file_body>>();
      Fill(*msg, res);
      const uint64_t size = file.size();
      if (head_) {
        return Send(HeadOnly(res, size));
      }
      msg->body() = std::move(file);
      msg->prepare_payload();
      return Send(std::move(msg));
    }
    if (head_) return Send(HeadOnly(res, res.body.size()));
    auto msg = std::make_shared<bhttp::response<bhttp::string_body>>();
    Fill(*msg, res);
    msg->body() = std::move(res.body);
    msg->prepare_payload();
    Send(std::move(msg));
  }

  std::shared_ptr<bhttp::response<bhttp::empty_body>> HeadOnly(const Response& res, uint64_t size) {
    auto msg = std::make_shared<bhttp::response<bhttp::empty_body>>();
    Fill(*msg, res);
    msg->content_length(size);
    return msg;
  }

  template <typename Message>
  void Send(std::shared_ptr<Message> msg) {
    const bool close = !msg->keep_alive();
    Lowest().expires_after(options_.write_timeout);
    bhttp::async_write(stream_, *msg,
                       [self = this->shared_from_this(), msg, close](beast::error_code ec, size_t) {
                         if (ec) {
                           if (IsTimeout(ec)) ++self->server_.timed_out_;
                           return self->Close();
                         }
                         if (close) return self->Shutdown();
                         self->Read();
                       });
  }

  // ---- server-sent event streams ----------------------------------------------------------
  void StartStream(Response res) {
    if (!server_.AdmitStream(this->weak_from_this())) {
      Response busy = ErrorResponse(503, "unavailable",
                                    "too many open event streams (" +
                                        std::to_string(options_.max_event_streams) +
                                        "; api.max_event_streams sets it); poll the API instead");
      busy.SetHeader("Retry-After", "10");
      return Answer(std::move(busy));
    }
    streaming_ = true;
    source_ = std::move(res.stream);
    keep_alive_ = false;  // the stream is the connection's last response
    auto msg = std::make_shared<bhttp::response<bhttp::empty_body>>();
    Fill(*msg, res);
    msg->keep_alive(true);  // chunked; ends with the last chunk, then the connection closes
    msg->chunked(true);
    auto serializer = std::make_shared<bhttp::response_serializer<bhttp::empty_body>>(*msg);
    writing_ = true;
    Lowest().expires_after(options_.write_timeout);
    bhttp::async_write_header(
        stream_, *serializer,
        [self = this->shared_from_this(), msg, serializer](beast::error_code ec, size_t) {
          self->writing_ = false;
          if (ec) return self->Close();
          self->Pump(false);
        });
  }

  // Sends what the source has; with nothing new, waits for a wake-up or the keep-alive timer.
  void Pump(bool keepalive_due) {
    if (closed_) return;
    if (writing_) {
      pump_again_ = true;
      return;
    }
    std::optional<std::string> next;
    try {
      next = source_->Next();
    } catch (const std::exception& e) {
      spdlog::error("HTTP: event stream failed: {}", utf8::Sanitize(e.what()));
      next.reset();
    }
    if (!next) {
      writing_ = true;
      Lowest().expires_after(options_.write_timeout);
      net::async_write(stream_, bhttp::make_chunk_last(),
                       [self = this->shared_from_this()](beast::error_code, size_t) {
                         self->writing_ = false;
                         self->Shutdown();
                       });
      return;
    }
    if (next->empty()) {
      if (!keepalive_due) return ArmKeepAlive();
      *next = ": keep-alive\n\n";
    }
    chunk_ = std::move(*next);
    writing_ = true;
    Lowest().expires_after(options_.write_timeout);
    net::async_write(stream_, bhttp::make_chunk(net::buffer(chunk_)),
                     [self = this->shared_from_this()](beast::error_code ec, size_t) {
                       self->writing_ = false;
                       self->Lowest().expires_never();
                       if (ec) {
                         if (IsTimeout(ec)) ++self->server_.timed_out_;
                         return self->Close();
                       }
                       if (self->pump_again_) {
                         self->pump_again_ = false;
                         return self->Pump(false);
                       }
                       self->ArmKeepAlive();
                     });
  }

  void ArmKeepAlive() {
    timer_.expires_after(options_.stream_keepalive);
    timer_.async_wait([self = this->shared_from_this()](beast::error_code ec) {
      // Cancelled: woken because there may be news. Expired: time for a keep-alive comment.
      self->Pump(ec != net::error::operation_aborted);
    });
  }

  // ---- closing ----------------------------------------------------------------------------
  void Shutdown() {
    if (closed_) return;
    if constexpr (std::is_same_v<Stream, beast::tcp_stream>) {
      beast::error_code ec;
      stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
      // Closing with unread bytes from the client would reset the connection, and the client
      // could lose the answer (a 408 or 431 it has not read yet): drain what it still sends, for
      // a moment, then close.
      Lowest().expires_after(std::chrono::seconds(2));
      Drain();
    } else {
      Lowest().expires_after(std::chrono::seconds(5));
      stream_.async_shutdown(
          [self = this->shared_from_this()](beast::error_code) { self->Close(); });
    }
  }

  void Drain() {
    auto sink = std::make_shared<std::array<char, 4096>>();
    Lowest().async_read_some(net::buffer(*sink),
                             [self = this->shared_from_this(), sink](beast::error_code ec, size_t) {
                               if (ec) return self->Close();
                               self->Drain();
                             });
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    timer_.cancel();
    deadline_.cancel();
    beast::error_code ec;
    Lowest().socket().close(ec);
  }

  Server::Impl& server_;
  const ServerOptions& options_;
  Stream stream_;
  Server::Impl::Ticket ticket_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool head_ = false;
  bool closed_ = false;
  // Event stream state.
  bool streaming_ = false;
  bool writing_ = false;
  bool pump_again_ = false;
  std::shared_ptr<EventSource> source_;
  std::string chunk_;
  net::steady_timer timer_;
  // The deadline of the request being read. Our own timer rather than the stream's expiry,
  // which closes the socket and so would leave no way to send a 408.
  net::steady_timer deadline_;
  bool deadline_hit_ = false;
};

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
  if (tls_) {
    std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(
        *this, beast::ssl_stream<beast::tcp_stream>(beast::tcp_stream(std::move(socket)), *tls_),
        std::move(*ticket))
        ->Run();
  } else {
    std::make_shared<Session<beast::tcp_stream>>(*this, beast::tcp_stream(std::move(socket)),
                                                 std::move(*ticket))
        ->Run();
  }
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
