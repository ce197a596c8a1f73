// tessera-bench dispatch: end-to-end task throughput of the real scheduler core (store, broker,
// assembler) with simulated workers speaking the real protocol over TCP loopback: every task is
// leased, rendered (a 1x1 frame result), written and durably recorded done. Baseline, measured
// in the same run: a bare ZeroMQ ROUTER/DEALER READY -> task -> DONE loop with as many workers.
// Goal (DESIGN.md): >= 25,000 tasks/s and >= 0.7 x the bare loop.

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "scheduler/broker/broker.h"
#include "scheduler/store/store.h"
#include "shared/protocol.h"
#include "tests/bench/bench.h"

namespace tessera::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using protocol::MessageType;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

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

std::vector<zmq::pollitem_t> PollItems(std::vector<zmq::socket_t>& sockets) {
  std::vector<zmq::pollitem_t> items;
  for (auto& s : sockets) items.push_back({s.handle(), 0, ZMQ_POLLIN, 0});
  return items;
}

// The baseline: the least a ROUTER/DEALER dispatcher can do per task.
double BareLoopTasksPerSecond(int workers, int tasks) {
  zmq::context_t ctx;
  zmq::socket_t router(ctx, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  router.bind("tcp://127.0.0.1:*");
  std::string endpoint = router.get(zmq::sockopt::last_endpoint);
  std::atomic<bool> stop{false};
  std::thread fleet([&] {
    std::vector<zmq::socket_t> dealers;
    for (int i = 0; i < workers; ++i) {
      dealers.emplace_back(ctx, zmq::socket_type::dealer);
      dealers.back().set(zmq::sockopt::linger, 0);
      dealers.back().connect(endpoint);
      dealers.back().send(zmq::str_buffer("READY"), zmq::send_flags::none);
    }
    auto items = PollItems(dealers);
    while (!stop.load()) {
      PollAll(dealers, items, std::chrono::milliseconds(20),
              [&](size_t i, std::vector<zmq::message_t>&) {
                dealers[i].send(zmq::str_buffer("DONE"), zmq::send_flags::none);
              });
    }
  });
  int sent = 0, done = 0;
  Clock::time_point start = Clock::now();
  while (done < tasks) {
    std::vector<zmq::message_t> frames;
    (void)zmq::recv_multipart(router, std::back_inserter(frames));
    if (sent == 0) start = Clock::now();
    if (frames[1].to_string_view() == "DONE") ++done;
    if (sent < tasks) {
      router.send(frames[0], zmq::send_flags::sndmore);
      router.send(zmq::str_buffer("TASK"), zmq::send_flags::none);
      ++sent;
    }
  }
  double rate = tasks / Seconds(start);
  stop = true;
  fleet.join();
  return rate;
}

// Simulated workers speaking the real protocol: register, answer each ASSIGN with a 1x1 frame
// result per frame and TASK_DONE.
class Fleet {
 public:
  Fleet(zmq::context_t& ctx, const std::string& endpoint, int workers) {
    for (int i = 0; i < workers; ++i) {
      sockets_.emplace_back(ctx, zmq::socket_type::dealer);
      sockets_.back().set(zmq::sockopt::linger, 0);
      sockets_.back().connect(endpoint);
      protocol::Register reg;
      reg.name = "sim-" + std::to_string(i);
      reg.hostname = "bench";
      reg.cpu_cores = 1;
      reg.backends = {"cpu"};
      auto frames = protocol::Encode(MessageType::kRegister, reg);
      zmq::send_multipart(sockets_.back(), frames);
    }
    items_ = PollItems(sockets_);
  }

  void Run(const std::atomic<bool>& stop) {
    const float pixel[4] = {0.5f, 0.5f, 0.5f, 1.0f};
    auto next_beat = Clock::now();
    while (!stop.load()) {
      PollAll(sockets_, items_, std::chrono::milliseconds(20),
              [&](size_t i, std::vector<zmq::message_t>& frames) {
                auto env = protocol::Decode(frames);
                if (!env.ok() || env->type != MessageType::kAssign) return;
                auto a = env->As<protocol::Assign>();
                if (!a.ok()) return;
                for (int f = a->frame_start; f <= a->frame_end; ++f) {
                  protocol::FrameResult r{a->task_id, a->attempt, f, 1, 1, 4, 0.0, "sim", {}};
                  zmq::send_multipart(sockets_[i],
                                      protocol::Encode(MessageType::kFrameResult, r,
                                                       zmq::message_t(pixel, sizeof(pixel))));
                }
                zmq::send_multipart(sockets_[i],
                                    protocol::Encode(MessageType::kTaskDone,
                                                     protocol::TaskDone{a->task_id, a->attempt}));
              });
      if (Clock::now() >= next_beat) {
        for (auto& s : sockets_) {
          zmq::send_multipart(s, protocol::Encode(MessageType::kHeartbeat, protocol::Heartbeat{}));
        }
        next_beat = Clock::now() + std::chrono::milliseconds(500);
      }
    }
  }

 private:
  std::vector<zmq::socket_t> sockets_;
  std::vector<zmq::pollitem_t> items_;
};

}  // namespace

void AddDispatchCommand(CLI::App& app) {
  struct Options {
    int workers = 100;
    int tasks = 20000;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd =
      app.add_subcommand("dispatch", "end-to-end task throughput vs a bare ZeroMQ loop");
  cmd->add_option("--workers", opts->workers, "simulated workers")->check(CLI::Range(1, 5000));
  cmd->add_option("--tasks", opts->tasks, "tasks (1 frame each)")->check(CLI::Range(1, 100000));
  cmd->callback([opts] {
    double bare = BareLoopTasksPerSecond(opts->workers, opts->tasks);
    std::printf("bare ROUTER/DEALER loop: %.0f tasks/s\n", bare);

    std::string dir = (fs::temp_directory_path() / "tessera-bench-dispatch").string();
    fs::remove_all(dir);
    auto store = store::Store::Open(dir);
    if (!store.ok()) throw CLI::RuntimeError(store.status().ToString(), 1);
    broker::BrokerOptions bopts;
    bopts.bind_endpoint = "tcp://127.0.0.1:0";
    broker::Broker broker(**store, bopts);
    auto endpoint = broker.Start();
    if (!endpoint.ok()) throw CLI::RuntimeError(endpoint.status().ToString(), 1);

    zmq::context_t ctx;
    Fleet fleet(ctx, *endpoint, opts->workers);
    std::atomic<bool> stop{false};
    std::thread fleet_thread([&] { fleet.Run(stop); });
    // Let every simulated worker register before the clock starts.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));

    spec::JobSpec job;
    job.name = "noop";
    job.scene_yaml = "width: 1\n";
    job.frame_start = 1;
    job.frame_end = opts->tasks;
    job.output.formats = {"png"};
    auto start = Clock::now();
    auto rec = (*store)->CreateJob(job, "", [&](int64_t id) -> StatusOr<std::string> {
      std::string out = dir + "/out-" + std::to_string(id);
      fs::create_directories(out);
      return out;
    });
    if (!rec.ok()) throw CLI::RuntimeError(rec.status().ToString(), 1);
    broker.JobSubmitted(rec->id);
    store::JobRecord state;
    for (;;) {
      auto j = (*store)->GetJob(rec->id);
      if (j.ok() && j->state != store::JobState::kQueued && j->state != store::JobState::kRunning) {
        state = *j;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    double seconds = Seconds(start);
    stop = true;
    fleet_thread.join();
    broker.Stop();
    double rate = state.tasks.done / seconds;
    std::printf("end to end: %lld of %d tasks done in %.2f s = %.0f tasks/s (%d workers)\n",
                static_cast<long long>(state.tasks.done), opts->tasks, seconds, rate,
                opts->workers);
    PrintFigures({{"workers", std::to_string(opts->workers)},
                  {"tasks", std::to_string(opts->tasks)},
                  {"tasks_per_s", Fixed(rate)},
                  {"zmq_loop_per_s", Fixed(bare)},
                  {"ratio", Fixed(rate / bare, 3)},
                  {"target_tasks_per_s", "25000"},
                  {"target_ratio", "0.7"}});
    fs::remove_all(dir);
  });
}

}  // namespace tessera::bench
