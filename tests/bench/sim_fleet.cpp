#include "tests/bench/sim_fleet.h"

#include <CLI/CLI.hpp>
#include <filesystem>

#include "scheduler/events/event_bus.h"
#include "shared/jobs/job_file.h"
#include "shared/wire/protocol.h"

namespace tessera::bench {

using Clock = std::chrono::steady_clock;
using protocol::MessageType;

std::unique_ptr<store::Store> OpenStore(const std::string& dir, const store::StoreUrl* url) {
  auto store = url == nullptr ? store::Store::Open(dir)
                              : store::Store::Open(*url, dir, tessera::Clock::Real());
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
    protocol::Register reg = FakeWorker::Registration(prefix + std::to_string(i));
    // Like the real worker: acknowledgements may come inside assignments (it keeps no spool,
    // so it has nothing to do with them).
    reg.features = {protocol::kFeatureAcksInAssign};
    workers_.push_back(std::make_unique<FakeWorker>(ctx, endpoint, std::move(reg),
                                                    std::chrono::milliseconds(500)));
    workers_.back()->Register();
    items_.push_back({workers_.back()->socket().handle(), 0, ZMQ_POLLIN, 0});
  }
}

void Fleet::Run(const std::atomic<bool>& stop) {
  while (!stop.load()) {
    zmq::poll(items_.data(), items_.size(), std::chrono::milliseconds(20));
    for (size_t i = 0; i < workers_.size(); ++i) {
      if (!(items_[i].revents & ZMQ_POLLIN)) continue;
      FakeWorker& worker = *workers_[i];
      while (std::optional<protocol::Envelope> env = worker.Receive()) {
        if (env->type != MessageType::kAssign) continue;
        auto a = env->As<protocol::Assign>();
        if (!a.ok()) continue;
        worker.CompleteAtOnce(*a);
        ++tasks_done_;
      }
    }
    const auto now = Clock::now();
    for (auto& worker : workers_) worker->BeatIfDue(now);
  }
}

}  // namespace tessera::bench
