// tessera-bench dispatch: end-to-end task throughput of the real scheduler core (store, broker,
// assembler) with simulated workers speaking the real protocol over TCP loopback: every noop task
// is leased (durably), assigned, reported done and durably recorded done (--frames: each also
// sends a 1x1 frame result the assembler writes as a PNG). Baseline, measured
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
#include "tests/bench/bench.h"
#include "tests/bench/sim_fleet.h"

namespace tessera::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// The baseline: the least a ROUTER/DEALER dispatcher can do per task. Each side has its own
// context (and I/O thread), as the scheduler and its workers do, being separate processes, and as
// the end-to-end run below does.
double BareLoopTasksPerSecond(int workers, int tasks) {
  zmq::context_t ctx, fleet_ctx;
  zmq::socket_t router(ctx, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  router.bind("tcp://127.0.0.1:*");
  std::string endpoint = router.get(zmq::sockopt::last_endpoint);
  std::atomic<bool> stop{false};
  std::thread fleet([&] {
    std::vector<zmq::socket_t> dealers;
    for (int i = 0; i < workers; ++i) {
      dealers.emplace_back(fleet_ctx, zmq::socket_type::dealer);
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

}  // namespace

void AddDispatchCommand(CLI::App& app) {
  struct Options {
    int workers = 100;
    int tasks = 50000;
    bool frames = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd =
      app.add_subcommand("dispatch", "end-to-end task throughput vs a bare ZeroMQ loop");
  cmd->add_option("--workers", opts->workers, "simulated workers")->check(CLI::Range(1, 5000));
  cmd->add_option("--tasks", opts->tasks, "tasks (1 frame each)")->check(CLI::Range(1, 100000));
  cmd->add_flag("--frames", opts->frames,
                "path-tracer tasks that each send a 1x1 frame the assembler writes as a PNG, "
                "instead of noop tasks");
  cmd->callback([opts] {
    double bare = BareLoopTasksPerSecond(opts->workers, opts->tasks);
    std::printf("bare ROUTER/DEALER loop: %.0f tasks/s\n", bare);

    std::string dir = (fs::temp_directory_path() / "tessera-bench-dispatch").string();
    fs::remove_all(dir);
    auto store = OpenStore(dir);
    broker::Broker broker(*store, LoopbackBroker());
    const std::string endpoint = StartBroker(broker);

    zmq::context_t ctx;
    Fleet fleet(ctx, endpoint, opts->workers);
    std::atomic<bool> stop{false};
    std::thread fleet_thread([&] { fleet.Run(stop); });
    // Let every simulated worker register before the clock starts.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));

    spec::JobSpec job;
    job.name = "dispatch";
    job.renderer = opts->frames ? spec::kRendererPathTracer : spec::kRendererNoop;
    job.scene_yaml = "width: 1\n";
    job.frame_start = 1;
    job.frame_end = opts->tasks;
    job.output.formats = {"png"};
    const int64_t job_id = StoreJob(*store, job, dir);
    // The clock starts once the job is stored: submission has its own benchmark (submit), and
    // the baseline loop has nothing to submit either.
    auto start = Clock::now();
    broker.JobSubmitted(job_id);
    store::JobRecord state;
    for (;;) {
      auto j = store->GetJob(job_id);
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
    PrintFigures({{"renderer", job.renderer},
                  {"workers", std::to_string(opts->workers)},
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
