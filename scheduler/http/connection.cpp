// One HTTP connection's state machine (the server is in server.cpp): a request read under the
// header and body deadlines and size limits, checked, handed to the handler pool and answered;
// keep-alive; server-sent event streams; closing without losing the answer.
#include <spdlog/spdlog.h>

#include <array>

#include "scheduler/http/server_internal.h"
#include "scheduler/http/url.h"
#include "shared/base/utf8.h"

namespace tessera::http {

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

void ServeConnection(Server::Impl& server, tcp::socket socket, Server::Impl::Ticket ticket,
                     ssl::context* tls) {
  if (tls) {
    std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(
        server, beast::ssl_stream<beast::tcp_stream>(beast::tcp_stream(std::move(socket)), *tls),
        std::move(ticket))
        ->Run();
  } else {
    std::make_shared<Session<beast::tcp_stream>>(server, beast::tcp_stream(std::move(socket)),
                                                 std::move(ticket))
        ->Run();
  }
}

}  // namespace tessera::http
