#pragma once
// A scheduler stand-in for worker tests: a real ROUTER bound to a free loopback port that records
// every message it receives and lets a test answer the worker that sent it.

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "shared/wire/protocol.h"

namespace tessera::worker::testing {

struct Received {
  std::string identity;  // the worker's routing id: changes when it recreates its socket
  protocol::Envelope env;
};

class FakeScheduler {
 public:
  FakeScheduler() : router_(context_, zmq::socket_type::router) {
    router_.set(zmq::sockopt::linger, 0);
    router_.bind("tcp://127.0.0.1:*");
    endpoint_ = router_.get(zmq::sockopt::last_endpoint);
  }

  const std::string& endpoint() const { return endpoint_; }

  // Next well-formed message of `type` within `timeout`, skipping (but recording) others.
  std::optional<Received> WaitFor(protocol::MessageType type,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      std::optional<Received> r = Next(left);
      if (r && r->env.type == type) return r;
    }
  }

  // Next message of any type within `timeout`.
  std::optional<Received> Next(std::chrono::milliseconds timeout) {
    std::vector<zmq::pollitem_t> items = {{router_.handle(), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, timeout);
    if (!(items[0].revents & ZMQ_POLLIN)) return std::nullopt;
    std::vector<zmq::message_t> frames;
    if (!zmq::recv_multipart(router_, std::back_inserter(frames))) return std::nullopt;
    StatusOr<protocol::Envelope> env = protocol::Decode(frames, 1);
    EXPECT_TRUE(env.ok()) << "worker sent a malformed message: " << env.status().ToString();
    if (!env.ok()) return std::nullopt;
    Received r{frames[0].to_string(), std::move(*env)};
    log.push_back({r.identity, r.env.type});
    return r;
  }

  template <typename T>
  void Send(const std::string& identity, protocol::MessageType type, const T& body) {
    std::vector<zmq::message_t> frames = protocol::Encode(type, body);
    SendRaw(identity, std::move(frames));
  }

  void SendRaw(const std::string& identity, std::vector<zmq::message_t> frames) {
    frames.insert(frames.begin(), zmq::message_t(identity.data(), identity.size()));
    zmq::send_multipart(router_, frames);
  }

  struct LogEntry {
    std::string identity;
    protocol::MessageType type;
  };
  std::vector<LogEntry> log;

 private:
  zmq::context_t context_;
  zmq::socket_t router_;
  std::string endpoint_;
};

}  // namespace tessera::worker::testing
