// tessera-bench makespan: how close the real scheduler gets to the ideal makespan of one job.
// A job of 1-frame tasks runs on simulated workers, each on its own thread with its own DEALER
// socket, that "render" a task by waiting its synthetic cost, then send a 1x1 frame result and
// kTaskDone, so the workers truly run in parallel. The clock runs from submission (the store
// commit) until the store records the job done, every frame written.
// Even costs: ideal = ceil(tasks / workers) x cost. Uneven costs (--jitter j: each task's cost
// uniform in [1-j, 1+j] x --task-ms, from a seeded RNG): ideal = max(sum / workers, max cost), a
// lower bound no schedule beats; the run also reports the makespan of handing the tasks out in
// frame order to the first free worker with no overhead (greedy_s), the baseline that separates
// the scheduler's overhead from the order it hands tasks out in.
// Target: makespan <= 1.05 x ideal.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <numeric>
#include <optional>
#include <queue>
#include <random>
#include <thread>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "scheduler/broker/broker.h"
#include "scheduler/store/store.h"
#include "shared/wire/protocol.h"
#include "tests/bench/bench.h"
#include "tests/bench/sim_fleet.h"

namespace tessera::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using protocol::MessageType;

double Millis(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Shared by the worker threads and the main thread.
struct SimRun {
  std::vector<double> cost_ms;  // by frame - 1
  std::atomic<int> welcomed{0};
  std::atomic<bool> stop{false};
  std::mutex mu;  // guards the figures below
  // Idle time of a worker between sending kTaskDone and receiving its next kAssign.
  std::vector<double> turnaround_ms;
  // How late a simulated render finished past its cost (this simulation's own timer error).
  std::vector<double> overshoot_ms;
  Clock::time_point first_assign = Clock::time_point::max();
  Clock::time_point last_done;
};

// One simulated worker; runs on its own thread, which owns the socket.
void SimulateWorker(zmq::context_t& ctx, const std::string& endpoint, int index, SimRun& run) {
  FakeWorker sim(ctx, endpoint, FakeWorker::Registration("makespan-" + std::to_string(index)));
  sim.Register();
  Clock::time_point due, done_at;
  std::optional<protocol::Assign> task;
  bool finished_one = false;
  while (!run.stop.load()) {
    for (protocol::Envelope& env : sim.Poll(task ? due : Clock::time_point::max())) {
      const auto now = Clock::now();
      if (env.type == MessageType::kWelcome) {
        ++run.welcomed;
      } else if (env.type == MessageType::kAssign) {
        auto a = env.As<protocol::Assign>();
        if (!a.ok()) continue;
        if (task) {
          sim.RefuseBusy(*a);
          continue;
        }
        double cost = 0;
        for (int f = a->frame_start; f <= a->frame_end; ++f) {
          cost += run.cost_ms[static_cast<size_t>(f - 1) % run.cost_ms.size()];
        }
        due = now + std::chrono::microseconds(std::llround(cost * 1000));
        task = *a;
        std::lock_guard<std::mutex> lock(run.mu);
        run.first_assign = std::min(run.first_assign, now);
        if (finished_one) run.turnaround_ms.push_back(Millis(now - done_at));
      }
    }
    const auto now = Clock::now();
    if (task && now >= due) {
      sim.SendTinyFrames(*task);
      sim.Done(*task);
      done_at = Clock::now();
      finished_one = true;
      std::lock_guard<std::mutex> lock(run.mu);
      run.overshoot_ms.push_back(Millis(now - due));
      run.last_done = std::max(run.last_done, done_at);
      task.reset();
    }
    sim.running.clear();
    if (task) sim.running.push_back({task->task_id, task->attempt});
    sim.BeatIfDue(now);
  }
}

// Makespan of the same tasks handed out in frame order to whichever worker is free first, with
// no overhead at all: what the scheduler's own policy could reach on a perfect machine.
double GreedySeconds(const std::vector<double>& cost_ms, int workers) {
  std::priority_queue<double, std::vector<double>, std::greater<double>> free_at;
  for (int i = 0; i < workers; ++i) free_at.push(0);
  double end = 0;
  for (double cost : cost_ms) {
    const double done = free_at.top() + cost;
    free_at.pop();
    free_at.push(done);
    end = std::max(end, done);
  }
  return end / 1000.0;
}

}  // namespace

void AddMakespanCommand(CLI::App& app) {
  struct Options {
    int tasks = 320;
    int workers = 32;
    double task_ms = 50;
    double jitter = 0;
    uint64_t seed = 1;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd =
      app.add_subcommand("makespan", "one job's makespan on parallel workers vs the ideal");
  cmd->add_option("--tasks", opts->tasks, "tasks (1 frame each)")->check(CLI::Range(1, 100000));
  cmd->add_option("--workers", opts->workers, "simulated workers, one thread each")
      ->check(CLI::Range(1, 512));
  cmd->add_option("--task-ms", opts->task_ms, "synthetic cost of one task")
      ->check(CLI::Range(1.0, 600000.0));
  cmd->add_option("--jitter", opts->jitter, "uneven costs: uniform in [1-j, 1+j] x task-ms")
      ->check(CLI::Range(0.0, 0.95));
  cmd->add_option("--seed", opts->seed, "seed of the uneven costs");
  cmd->callback([opts] {
    SimRun run;
    std::mt19937_64 rng(opts->seed);
    std::uniform_real_distribution<double> factor(1 - opts->jitter, 1 + opts->jitter);
    for (int i = 0; i < opts->tasks; ++i) {
      run.cost_ms.push_back(opts->jitter > 0 ? opts->task_ms * factor(rng) : opts->task_ms);
    }
    const double sum_ms = std::accumulate(run.cost_ms.begin(), run.cost_ms.end(), 0.0);
    const double max_ms = *std::max_element(run.cost_ms.begin(), run.cost_ms.end());
    const double ideal_s =
        (opts->jitter > 0
             ? std::max(sum_ms / opts->workers, max_ms)
             : std::ceil(static_cast<double>(opts->tasks) / opts->workers) * opts->task_ms) /
        1000.0;

    TempDir temp("tessera-bench-makespan");
    const std::string& dir = temp.path();
    auto store = OpenStore(dir);
    broker::Broker broker(*store, LoopbackBroker(), tessera::Clock::Real());
    const std::string endpoint = StartBroker(broker);

    zmq::context_t ctx;
    std::vector<std::thread> workers;
    for (int i = 0; i < opts->workers; ++i) {
      workers.emplace_back([&, i] { SimulateWorker(ctx, endpoint, i, run); });
    }
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (run.welcomed.load() < opts->workers && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }

    spec::JobSpec job;
    job.name = "makespan";
    job.scene_yaml = "width: 1\n";
    job.frame_start = 1;
    job.frame_end = opts->tasks;
    job.output.formats = {"png"};
    const auto start = Clock::now();
    auto rec = store->CreateJob(job, "", [&](int64_t id) -> StatusOr<std::string> {
      std::string out = dir + "/out-" + std::to_string(id);
      fs::create_directories(out);
      return out;
    });
    const auto committed = Clock::now();
    std::optional<store::JobRecord> final_state;
    Status status = rec.status();
    if (rec.ok()) {
      broker.JobSubmitted(rec->id);
      const auto give_up = start + std::chrono::duration<double>(10 * ideal_s + 60);
      while (!final_state && status.ok()) {
        auto j = store->GetJob(rec->id);
        if (j.ok() && j->terminal()) {
          final_state = *j;
        } else if (Clock::now() > give_up) {
          status = Status::Unavailable("the job did not finish within 10 x ideal + 60 s");
        } else {
          std::this_thread::sleep_for(std::chrono::microseconds(500));
        }
      }
    }
    const auto end = Clock::now();
    run.stop = true;
    for (auto& t : workers) t.join();
    broker.Stop();
    if (!status.ok()) throw CLI::RuntimeError(status.ToString(), 1);

    const double makespan_s = std::chrono::duration<double>(end - start).count();
    std::printf("%d of %d workers registered; %lld of %d tasks done\n", run.welcomed.load(),
                opts->workers, static_cast<long long>(final_state->tasks.done), opts->tasks);
    std::printf("costs: %.1f ms each on average, longest %.1f ms, %.2f s in all\n",
                sum_ms / opts->tasks, max_ms, sum_ms / 1000);
    const double greedy_s = GreedySeconds(run.cost_ms, opts->workers);
    std::printf(
        "makespan %.3f s, ideal %.3f s, ratio %.3f; in-order greedy with no overhead %.3f s\n",
        makespan_s, ideal_s, makespan_s / ideal_s, greedy_s);
    std::printf("  submit to first assignment: %.1f ms (%.1f ms of it the store commit)\n",
                Millis(run.first_assign - start), Millis(committed - start));
    std::printf(
        "  worker idle between kTaskDone and its next kAssign: p50 %.2f ms, p99 %.2f ms, "
        "max %.2f ms (%zu turnarounds)\n",
        Percentile(run.turnaround_ms, 50), Percentile(run.turnaround_ms, 99),
        Percentile(run.turnaround_ms, 100), run.turnaround_ms.size());
    std::printf("  last kTaskDone sent to job recorded done: %.1f ms\n",
                Millis(end - run.last_done));
    std::printf("  simulated render timer overshoot: p50 %.2f ms, max %.2f ms\n",
                Percentile(run.overshoot_ms, 50), Percentile(run.overshoot_ms, 100));
    PrintFigures({{"tasks", std::to_string(opts->tasks)},
                  {"workers", std::to_string(opts->workers)},
                  {"task_ms", Fixed(opts->task_ms)},
                  {"jitter", Fixed(opts->jitter, 2)},
                  {"makespan_s", Fixed(makespan_s, 3)},
                  {"ideal_s", Fixed(ideal_s, 3)},
                  {"ratio", Fixed(makespan_s / ideal_s, 3)},
                  {"target_ratio", "1.05"},
                  {"greedy_s", Fixed(greedy_s, 3)},
                  {"ratio_to_greedy", Fixed(makespan_s / greedy_s, 3)},
                  {"turnaround_p99_ms", Fixed(Percentile(run.turnaround_ms, 99), 2)}});
  });
}

}  // namespace tessera::bench
