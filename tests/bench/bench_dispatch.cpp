// tessera-bench dispatch: end-to-end task throughput of the real scheduler core (store, broker,
// assembler) with simulated workers speaking the real protocol over TCP loopback: every noop task
// is leased (durably), assigned, reported done and durably recorded done (--frames: each also
// sends a 1x1 frame result the assembler writes as a PNG). Baseline, measured
// in the same run: a bare ZeroMQ ROUTER/DEALER READY -> task -> DONE loop with as many workers.
// --frame-deps: a job of two noop steps, the second after the first frame by frame, against the
// same two steps without the dependency (goal: the frame gates cost at most 5 %).
// Goal (DESIGN.md): >= 25,000 tasks/s and >= 0.7 x the bare loop.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <thread>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "scheduler/broker/broker.h"
#include "scheduler/store/sql/store_url.h"
#include "scheduler/store/store.h"
#include "shared/jobs/job_steps.h"
#include "tests/bench/bench.h"
#include "tests/bench/sim_fleet.h"
#include "tests/support/postgres_server.h"

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

// One end-to-end run in a fresh store: `store_jobs` stores the work (the job ids to queue, and
// the one whose end ends the run); the clock runs from queuing to that job's end. Returns tasks
// done per second; *done gets how many were done.
struct Stored {
  std::vector<int64_t> queue;
  int64_t watch = 0;
};
using StoreJobs = std::function<Stored(store::Store&, const std::string& dir)>;

// `url`: the store to dispatch from (nullptr: SQLite in a temporary folder).
double EndToEnd(int workers, const StoreJobs& store_jobs, int64_t* done,
                const store::StoreUrl* url = nullptr) {
  std::string dir = (fs::temp_directory_path() / "tessera-bench-dispatch").string();
  fs::remove_all(dir);
  auto store = OpenStore(dir, url);
  broker::Broker broker(*store, LoopbackBroker(), tessera::Clock::Real());
  const std::string endpoint = StartBroker(broker);

  zmq::context_t ctx;
  Fleet fleet(ctx, endpoint, workers);
  std::atomic<bool> stop{false};
  std::thread fleet_thread([&] { fleet.Run(stop); });
  // Let every simulated worker register before the clock starts.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const Stored stored = store_jobs(*store, dir);
  // The clock starts once the jobs are stored: submission has its own benchmark (submit), and
  // the baseline loop has nothing to submit either.
  auto start = Clock::now();
  for (int64_t id : stored.queue) broker.JobSubmitted(id);
  store::JobRecord state;
  for (;;) {
    auto j = store->GetJob(stored.watch);
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
  fs::remove_all(dir);
  *done = state.tasks.done;
  return state.tasks.done / seconds;
}

// A job with two noop steps of `frames` frames each: b after a frame by frame when `per_frame`,
// else no dependency (the same work without the frame gates).
Stored StoreTwoSteps(store::Store& store, const std::string& dir, int frames, bool per_frame) {
  spec::PipelineSpec pipeline;
  pipeline.name = "steps";
  for (const char* name : {"a", "b"}) {
    spec::StepSpec step;
    step.name = name;
    step.job.name = "steps";
    step.job.renderer = spec::kRendererNoop;
    step.job.frame_start = 1;
    step.job.frame_end = frames;
    if (per_frame && step.name == "b") step.depends_on = {{"a", true}};
    pipeline.steps.push_back(std::move(step));
  }
  auto folder = [&](int64_t id) -> StatusOr<std::string> {
    std::string out = dir + "/out-" + std::to_string(id);
    fs::create_directories(out);
    return out;
  };
  auto rec = store.CreatePipeline(
      pipeline, "", folder, [&](size_t, int64_t id, const std::string&) { return folder(id); });
  if (!rec.ok()) throw CLI::RuntimeError(rec.status().ToString(), 1);
  auto steps = store.PipelineSteps(rec->id);
  if (!steps.ok()) throw CLI::RuntimeError(steps.status().ToString(), 1);
  Stored stored{{}, rec->id};
  for (const auto& step : *steps) stored.queue.push_back(step.id);
  return stored;
}

// Durable noop tasks dispatched from SQLite and from PostgreSQL, in turns (three rounds each):
// the group commit turns a pass's writes into one transaction on either engine.
void DispatchOnBothEngines(int workers, int tasks) {
  StatusOr<std::unique_ptr<testing::PostgresServer>> server = testing::PostgresServer::Start();
  if (!server.ok()) throw CLI::RuntimeError(server.status().ToString(), 1);
  spec::JobSpec job;
  job.name = "dispatch";
  job.renderer = spec::kRendererNoop;
  job.scene_yaml = "width: 1\n";
  job.frame_start = 1;
  job.frame_end = tasks;
  const StoreJobs store_job = [&](store::Store& s, const std::string& d) {
    const int64_t id = StoreJob(s, job, d);
    return Stored{{id}, id};
  };
  std::vector<double> sqlite, postgres;
  for (int round = 0; round < 3; ++round) {
    int64_t done = 0;
    sqlite.push_back(EndToEnd(workers, store_job, &done));
    StatusOr<std::string> db = (*server)->CreateDatabase();
    if (!db.ok()) throw CLI::RuntimeError(db.status().ToString(), 1);
    StatusOr<store::StoreUrl> url = store::ParseStoreUrl((*server)->ConnInfo(*db));
    if (!url.ok()) throw CLI::RuntimeError(url.status().ToString(), 1);
    postgres.push_back(EndToEnd(workers, store_job, &done, &*url));
    std::printf("round %d: sqlite %.0f tasks/s, postgresql %.0f tasks/s (%lld done)\n", round + 1,
                sqlite.back(), postgres.back(), static_cast<long long>(done));
  }
  std::sort(sqlite.begin(), sqlite.end());
  std::sort(postgres.begin(), postgres.end());
  PrintFigures({{"workers", std::to_string(workers)},
                {"tasks", std::to_string(tasks)},
                {"sqlite_tasks_per_s", Fixed(sqlite[1])},
                {"postgres_tasks_per_s", Fixed(postgres[1])},
                {"ratio", Fixed(postgres[1] / sqlite[1], 3)},
                {"target_ratio", "0.5"}});
}

}  // namespace

void AddDispatchCommand(CLI::App& app) {
  struct Options {
    int workers = 100;
    int tasks = 50000;
    bool frames = false;
    bool frame_deps = false;
    bool postgres = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd =
      app.add_subcommand("dispatch", "end-to-end task throughput vs a bare ZeroMQ loop");
  cmd->add_option("--workers", opts->workers, "simulated workers")->check(CLI::Range(1, 5000));
  cmd->add_option("--tasks", opts->tasks, "tasks (1 frame each)")->check(CLI::Range(1, 100000));
  cmd->add_flag("--frames", opts->frames,
                "path-tracer tasks that each send a 1x1 frame the assembler writes as a PNG, "
                "instead of noop tasks");
  cmd->add_flag("--frame-deps", opts->frame_deps,
                "a job of two noop steps (tasks/2 frames each), the second after the first frame "
                "by frame, against the same steps without the dependency (target: >= 0.95 x)");
  cmd->add_flag("--postgres", opts->postgres,
                "noop tasks from a store on PostgreSQL (a server of the bench's own) against the "
                "same on SQLite, in turns (target: >= 0.5 x)");
  cmd->callback([opts] {
    if (opts->postgres) {
      DispatchOnBothEngines(opts->workers, opts->tasks);
      return;
    }
    if (opts->frame_deps) {
      const int frames = std::max(1, opts->tasks / 2);
      int64_t plain_done = 0, gated_done = 0;
      const double plain = EndToEnd(
          opts->workers,
          [&](store::Store& s, const std::string& d) { return StoreTwoSteps(s, d, frames, false); },
          &plain_done);
      const double gated = EndToEnd(
          opts->workers,
          [&](store::Store& s, const std::string& d) { return StoreTwoSteps(s, d, frames, true); },
          &gated_done);
      std::printf(
          "two steps of %d frames, %d workers: %.0f tasks/s without a dependency, %.0f "
          "with b after a frame by frame\n",
          frames, opts->workers, plain, gated);
      PrintFigures({{"workers", std::to_string(opts->workers)},
                    {"tasks", std::to_string(2 * frames)},
                    {"done_without", std::to_string(plain_done)},
                    {"done_with", std::to_string(gated_done)},
                    {"tasks_per_s_without", Fixed(plain)},
                    {"tasks_per_s_per_frame", Fixed(gated)},
                    {"ratio", Fixed(gated / plain, 3)},
                    {"target_ratio", "0.95"}});
      return;
    }
    double bare = BareLoopTasksPerSecond(opts->workers, opts->tasks);
    std::printf("bare ROUTER/DEALER loop: %.0f tasks/s\n", bare);
    spec::JobSpec job;
    job.name = "dispatch";
    job.renderer = opts->frames ? spec::kRendererPathTracer : spec::kRendererNoop;
    job.scene_yaml = "width: 1\n";
    job.frame_start = 1;
    job.frame_end = opts->tasks;
    job.output.formats = {"png"};
    int64_t done = 0;
    const double rate = EndToEnd(
        opts->workers,
        [&](store::Store& s, const std::string& d) {
          const int64_t id = StoreJob(s, job, d);
          return Stored{{id}, id};
        },
        &done);
    std::printf("end to end: %lld of %d tasks done = %.0f tasks/s (%d workers)\n",
                static_cast<long long>(done), opts->tasks, rate, opts->workers);
    PrintFigures({{"renderer", job.renderer},
                  {"workers", std::to_string(opts->workers)},
                  {"tasks", std::to_string(opts->tasks)},
                  {"tasks_per_s", Fixed(rate)},
                  {"zmq_loop_per_s", Fixed(bare)},
                  {"ratio", Fixed(rate / bare, 3)},
                  {"target_tasks_per_s", "25000"},
                  {"target_ratio", "0.7"}});
  });
}

}  // namespace tessera::bench
