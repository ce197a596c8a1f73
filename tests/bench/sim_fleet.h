#pragma once
// Support for the scheduler benchmarks: the real scheduler core started in-process (store and
// broker on loopback), and a simulated fleet of workers -- tests/support/fake_worker.h, each a
// DEALER socket speaking shared/wire/protocol.h to the real broker over TCP loopback -- with
// the polling helpers they are built on.

#include <atomic>
#include <chrono>
#include <iterator>
#include <memory>
#include <string>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "scheduler/broker/broker.h"
#include "scheduler/store/store.h"
#include "shared/jobs/job_file.h"
#include "tests/support/fake_worker.h"

namespace tessera::bench {

using testing::FakeWorker;

// The scheduler core in this process. Errors end the benchmark (CLI::RuntimeError).
// A fresh store in `dir`: SQLite, or the store `url` names (a PostgreSQL database).
std::unique_ptr<store::Store> OpenStore(const std::string& dir,
                                        const store::StoreUrl* url = nullptr);
// Broker options binding a free loopback port, defaults otherwise.
broker::BrokerOptions LoopbackBroker();
// Starts the broker; returns the endpoint workers connect to.
std::string StartBroker(broker::Broker& broker);
// Stores `job` with its output under <dir>/out-<id>; returns the job id.
int64_t StoreJob(store::Store& store, const spec::JobSpec& job, const std::string& dir);

// Polls every socket once; calls on_message(index, frames) for each message received.
template <typename F>
void PollAll(std::vector<zmq::socket_t>& sockets, std::vector<zmq::pollitem_t>& items,
             std::chrono::milliseconds timeout, F on_message) {
  zmq::poll(items.data(), items.size(), timeout);
  for (size_t i = 0; i < sockets.size(); ++i) {
    if (!(items[i].revents & ZMQ_POLLIN)) continue;
    for (;;) {
      std::vector<zmq::message_t> frames;
      if (!zmq::recv_multipart(sockets[i], std::back_inserter(frames), zmq::recv_flags::dontwait)) {
        break;
      }
      on_message(i, frames);
    }
  }
}

std::vector<zmq::pollitem_t> PollItems(std::vector<zmq::socket_t>& sockets);

// Workers that finish instantly: each registers as `<prefix><i>`, answers every kAssign with a
// 1x1 frame result per frame and kTaskDone (FakeWorker::CompleteAtOnce), and heartbeats every
// 500 ms. Threads: construct on any thread, then Run() on one thread only (it owns the sockets).
class Fleet {
 public:
  Fleet(zmq::context_t& ctx, const std::string& endpoint, int workers,
        const std::string& prefix = "sim-");

  // Serves until `stop` is set.
  void Run(const std::atomic<bool>& stop);
  // Tasks answered so far (any thread).
  int64_t tasks_done() const { return tasks_done_.load(); }

 private:
  std::vector<std::unique_ptr<FakeWorker>> workers_;
  std::vector<zmq::pollitem_t> items_;
  std::atomic<int64_t> tasks_done_{0};
};

}  // namespace tessera::bench
