#include "tests/bench/sim_fleet.h"

#include <CLI/CLI.hpp>
#include <filesystem>

#include "shared/jobs/job_file.h"
#include "shared/wire/protocol.h"

namespace tessera::bench {

using Clock = std::chrono::steady_clock;
using protocol::MessageType;

std::unique_ptr<store::Store> OpenStore(const std::string& dir) {
  auto store = store::Store::Open(dir);
  if (!store.ok()) throw CLI::RuntimeError(store.status().ToString(), 1);
  return std::move(store).value();
}

broker::BrokerOptions LoopbackBroker() {
  // Live events on, as in the real scheduler: publishing them is part of the cost measured.
  static events::EventBus bus;
  broker::BrokerOptions options;
  options.bind_endpoint = "tcp://127.0.0.1:0";
  options.events = &bus;
  return options;
}

std::string StartBroker(broker::Broker& broker) {
  auto endpoint = broker.Start();
  if (!endpoint.ok()) throw CLI::RuntimeError(endpoint.status().ToString(), 1);
  return *endpoint;
}

int64_t StoreJob(store::Store& store, const spec::JobSpec& job, const std::string& dir) {
  auto rec = store.CreateJob(job, "", [&](int64_t id) -> StatusOr<std::string> {
    std::string out = dir + "/out-" + std::to_string(id);
    std::filesystem::create_directories(out);
    return out;
  });
  if (!rec.ok()) throw CLI::RuntimeError(rec.status().ToString(), 1);
  return rec->id;
}

std::vector<zmq::pollitem_t> PollItems(std::vector<zmq::socket_t>& sockets) {
  std::vector<zmq::pollitem_t> items;
  for (auto& s : sockets) items.push_back({s.handle(), 0, ZMQ_POLLIN, 0});
  return items;
}

Fleet::Fleet(zmq::context_t& ctx, const std::string& endpoint, int workers,
             const std::string& prefix) {
  for (int i = 0; i < workers; ++i) {
    sockets_.emplace_back(ctx, zmq::socket_type::dealer);
    sockets_.back().set(zmq::sockopt::linger, 0);
    sockets_.back().connect(endpoint);
    protocol::Register reg;
    reg.name = prefix + std::to_string(i);
    reg.hostname = "bench";
    reg.cpu_cores = 1;
    reg.backends = {"cpu"};
    // Like the real worker: acknowledgements may come inside assignments (it keeps no spool,
    // so it has nothing to do with them).
    reg.features = {protocol::kFeatureAcksInAssign};
    auto frames = protocol::Encode(MessageType::kRegister, reg);
    zmq::send_multipart(sockets_.back(), frames);
  }
  items_ = PollItems(sockets_);
}

void Fleet::Run(const std::atomic<bool>& stop) {
  const float pixel[4] = {0.5f, 0.5f, 0.5f, 1.0f};
  auto next_beat = Clock::now();
  while (!stop.load()) {
    PollAll(sockets_, items_, std::chrono::milliseconds(20),
            [&](size_t i, std::vector<zmq::message_t>& frames) {
              auto env = protocol::Decode(frames);
              if (!env.ok() || env->type != MessageType::kAssign) return;
              auto a = env->As<protocol::Assign>();
              if (!a.ok()) return;
              // Noop tasks only report done; others send a 1x1 frame result per frame.
              for (int f = a->frame_start; a->renderer != spec::kRendererNoop && f <= a->frame_end;
                   ++f) {
                protocol::FrameResult r{a->task_id, a->attempt, f, 1, 1, 4, 0.0, "sim", {}};
                zmq::send_multipart(sockets_[i],
                                    protocol::Encode(MessageType::kFrameResult, r,
                                                     zmq::message_t(pixel, sizeof(pixel))));
              }
              zmq::send_multipart(sockets_[i],
                                  protocol::Encode(MessageType::kTaskDone,
                                                   protocol::TaskDone{a->task_id, a->attempt}));
              ++tasks_done_;
            });
    if (Clock::now() >= next_beat) {
      for (auto& s : sockets_) {
        zmq::send_multipart(s, protocol::Encode(MessageType::kHeartbeat, protocol::Heartbeat{}));
      }
      next_beat = Clock::now() + std::chrono::milliseconds(500);
    }
  }
}

SimWorker::SimWorker(zmq::context_t& ctx, const std::string& endpoint, const std::string& name)
    : socket_(ctx, zmq::socket_type::dealer) {
  socket_.set(zmq::sockopt::linger, 0);
  socket_.connect(endpoint);
  protocol::Register reg;
  reg.name = name;
  reg.hostname = "bench";
  reg.cpu_cores = 1;
  reg.backends = {"cpu"};
  Send(protocol::Encode(MessageType::kRegister, reg));
}

std::vector<protocol::Envelope> SimWorker::Poll(Clock::time_point until) {
  const Clock::time_point wake =
      std::min({next_beat_, Clock::now() + std::chrono::milliseconds(20), until});
  zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
  // Round up so the wait never ends early and busy-spins.
  auto wait = std::chrono::ceil<std::chrono::milliseconds>(wake - Clock::now());
  zmq::poll(&item, 1, std::max(wait, std::chrono::milliseconds(0)));
  std::vector<protocol::Envelope> received;
  for (;;) {
    std::vector<zmq::message_t> frames;
    if (!zmq::recv_multipart(socket_, std::back_inserter(frames), zmq::recv_flags::dontwait)) {
      break;
    }
    auto env = protocol::Decode(frames);
    if (!env.ok()) continue;
    if (env->type == MessageType::kWelcome) {
      auto w = env->As<protocol::Welcome>();
      if (w.ok()) interval_ = std::chrono::milliseconds(w->heartbeat_ms);
      next_beat_ = Clock::now() + interval_;
    }
    received.push_back(std::move(*env));
  }
  return received;
}

void SimWorker::RefuseBusy(const protocol::Assign& a) {
  Send(protocol::Encode(MessageType::kTaskFailed,
                        protocol::TaskFailed{a.task_id, a.attempt, "slot busy", false}));
}

void SimWorker::MaybeBeat(Clock::time_point now, std::optional<protocol::TaskRef> running,
                          std::optional<protocol::TaskRef> delivering) {
  if (now < next_beat_) return;
  protocol::Heartbeat beat;
  if (running) beat.running.push_back(*running);
  if (delivering) beat.delivering.push_back(*delivering);
  Send(protocol::Encode(MessageType::kHeartbeat, beat));
  next_beat_ += interval_;
}

void SimWorker::Send(std::vector<zmq::message_t> frames) { zmq::send_multipart(socket_, frames); }

bool SimWorker::TrySend(std::vector<zmq::message_t>& frames) {
  return zmq::send_multipart(socket_, frames, zmq::send_flags::dontwait).has_value();
}

}  // namespace tessera::bench
