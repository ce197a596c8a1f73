#pragma once
// Test support: a scripted worker speaking the real protocol over a real DEALER socket, for
// scheduler behaviour a real worker will not show on demand (lost assignments, hangs, failures).
// It heartbeats every 100 ms, listing `running`, while the test waits on it.

#include <chrono>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "shared/wire/protocol.h"

namespace tessera::testing {

class FakeWorker {
 public:
  FakeWorker(const std::string& endpoint, const std::string& name,
             std::vector<std::string> pools = {"default"}, std::vector<std::string> tags = {},
             std::vector<protocol::GpuInfo> gpus = {}, int slots = 1,
             std::vector<std::string> features = {}, int slots_per_gpu = 0)
      : socket_(context_, zmq::socket_type::dealer) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.connect(endpoint);
    reg_.name = name;
    reg_.hostname = "fake";
    reg_.cpu_cores = 1;
    reg_.backends = {"cpu"};
    reg_.pools = std::move(pools);
    reg_.tags = std::move(tags);
    reg_.gpus = std::move(gpus);
    reg_.slots = slots;
    reg_.features = std::move(features);
    reg_.slots_per_gpu = slots_per_gpu;
    Register();
  }

  // What it registers with (change it, then Register() again to offer other hardware).
  protocol::Register& registration() { return reg_; }

  // (Re-)registers, reporting the tasks in `running` as still being rendered.
  void Register() {
    reg_.running = running;
    Send(protocol::MessageType::kRegister, reg_);
  }

  template <typename T>
  void Send(protocol::MessageType type, const T& body) {
    auto frames = protocol::Encode(type, body);
    zmq::send_multipart(socket_, frames);
  }

  template <typename T>
  void SendWithPayload(protocol::MessageType type, const T& body, zmq::message_t payload) {
    auto frames = protocol::Encode(type, body, std::move(payload));
    zmq::send_multipart(socket_, frames);
  }

  // Waits for a message of `type`, heartbeating meanwhile; other messages are dropped.
  std::optional<protocol::Envelope> WaitFor(protocol::MessageType type,
                                            std::chrono::milliseconds timeout) {
    return WaitFor([type](protocol::MessageType t) { return t == type; }, timeout);
  }
  // The next message other than a heartbeat acknowledgement.
  std::optional<protocol::Envelope> Next(std::chrono::milliseconds timeout) {
    return WaitFor(
        [](protocol::MessageType t) { return t != protocol::MessageType::kHeartbeatAck; }, timeout);
  }
  template <typename Wanted>
  std::optional<protocol::Envelope> WaitFor(Wanted wanted, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::chrono::milliseconds(0));
      if (!(item.revents & ZMQ_POLLIN)) {
        // Heartbeats go out between messages, never while one waits unread: a beat sent with an
        // assignment still in the socket would tell the scheduler the worker does not hold it
        // (a test thread slowed by a loaded machine reads it late).
        if (std::chrono::steady_clock::now() >= next_beat_) {
          Send(protocol::MessageType::kHeartbeat, protocol::Heartbeat{running});
          next_beat_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
        }
        item.revents = 0;
        zmq::poll(&item, 1, std::chrono::milliseconds(20));
        if (!(item.revents & ZMQ_POLLIN)) continue;
      }
      std::vector<zmq::message_t> frames;
      if (!zmq::recv_multipart(socket_, std::back_inserter(frames))) continue;
      auto env = protocol::Decode(frames);
      if (env.ok() && wanted(env->type)) return std::move(*env);
    }
    return std::nullopt;
  }

  // Waits for the next assignment and decodes it.
  std::optional<protocol::Assign> NextAssign(std::chrono::milliseconds timeout) {
    auto env = WaitFor(protocol::MessageType::kAssign, timeout);
    if (!env) return std::nullopt;
    auto assign = env->As<protocol::Assign>();
    if (!assign.ok()) return std::nullopt;
    return *assign;
  }
  // Reports a noop task done.
  void Done(const protocol::Assign& a) {
    Send(protocol::MessageType::kTaskDone, protocol::TaskDone{a.task_id, a.attempt});
  }

  std::vector<protocol::TaskRef> running;  // what heartbeats report

 private:
  zmq::context_t context_;
  zmq::socket_t socket_;
  protocol::Register reg_;
  std::chrono::steady_clock::time_point next_beat_{};
};

}  // namespace tessera::testing
