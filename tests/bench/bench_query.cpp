// tessera-bench query: status query latency of the real HTTP API while the scheduler holds a large
// backlog and is busy dispatching it. 1,000,000 one-frame noop tasks (jobs of at most 100,000
// frames) are stored through Store::CreateJob, then the broker starts (loading every unfinished
// task into memory, as after a restart) with the HTTP API, and simulated workers drain the queue.
// Meanwhile a cpp-httplib client, one connection per request like the `tessera` CLI, times
// `GET /api/v1/summary` and `GET /api/v1/jobs/{id}`. The scheduler runs inside this process, so
// its memory is this process's RSS, reported beside the RSS before the store was opened.
// Target: p99 <= 5 ms for both queries; scheduler RSS <= 1 GiB with 1 M tasks.

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "scheduler/api/http_api.h"
#include "scheduler/broker/broker.h"
#include "scheduler/store/store.h"
#include "tests/bench/bench.h"
#include "tests/bench/sim_fleet.h"

namespace tessera::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kMaxFramesPerJob = 100000;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

double Millis(Clock::time_point since) { return Seconds(since) * 1000.0; }

// A "VmRSS"-style line of /proc/self/status, in MiB (0 if absent).
double ProcStatusMib(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::stod(line.substr(key.size() + 1)) / 1024.0;
  }
  return 0;
}

// Latencies of the two status queries, interleaved, one new connection per request.
struct QueryTimes {
  // page_ms: the dashboard's job page, i.e. the job, its first 200 frames, and its running and
  // failed tasks (the four requests one after another).
  std::vector<double> summary_ms, job_ms, page_ms;
  std::string last_summary;  // body of the last summary answer
  std::string error;         // set when a request failed; timing stops there
};

QueryTimes TimeQueries(int port, const std::string& token, const std::vector<int64_t>& job_ids,
                       int requests, const std::function<void()>& every_100) {
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(10);
  cli.set_bearer_token_auth(token);
  QueryTimes out;
  auto get = [&](const std::string& path, std::vector<double>& into) -> httplib::Result {
    auto t = Clock::now();
    httplib::Result res = cli.Get(path);
    into.push_back(Millis(t));
    if (!res || res->status != 200) {
      out.error = "GET " + path + " failed: " + (res ? res->body : httplib::to_string(res.error()));
    }
    return res;
  };
  for (int i = 0; i < requests && out.error.empty(); ++i) {
    auto res = get("/api/v1/summary", out.summary_ms);
    if (res && res->status == 200) out.last_summary = res->body;
    const std::string job = "/api/v1/jobs/" + std::to_string(job_ids[i % job_ids.size()]);
    get(job, out.job_ms);
    const auto page_start = Clock::now();
    std::vector<double> parts;
    for (const char* part : {"", "/frames?count=200", "/tasks?state=running&limit=100",
                             "/tasks?state=failed&limit=100"}) {
      get(job + part, parts);
    }
    out.page_ms.push_back(Millis(page_start));
    if (i % 100 == 0) every_100();
  }
  return out;
}

}  // namespace

void AddQueryCommand(CLI::App& app) {
  struct Options {
    int tasks = 1000000;
    int workers = 100;
    int requests = 2000;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "query", "HTTP status query latency and scheduler RSS with 1 M tasks being dispatched");
  cmd->add_option("--tasks", opts->tasks, "tasks stored (1 frame each, 100,000 per job)")
      ->check(CLI::Range(1, 10000000));
  cmd->add_option("--workers", opts->workers, "simulated workers draining the queue")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--requests", opts->requests, "requests timed per endpoint")
      ->check(CLI::Range(1, 1000000));
  cmd->callback([opts] {
    const double baseline_rss = ProcStatusMib("VmRSS");
    TempDir temp("tessera-bench-query");
    const std::string& dir = temp.path();
    auto store = OpenStore(dir);

    auto start = Clock::now();
    std::vector<int64_t> job_ids;
    for (int stored = 0, n = 0; stored < opts->tasks; stored += n) {
      n = std::min(kMaxFramesPerJob, opts->tasks - stored);
      spec::JobSpec job;
      job.name = "query-" + std::to_string(job_ids.size() + 1);
      // Noop tasks: the broker dispatches as fast as it can; no frame files compete for the CPU.
      job.renderer = spec::kRendererNoop;
      job.scene_yaml = "width: 1\n";
      job.frame_start = 1;
      job.frame_end = n;
      job.output.formats = {"png"};
      job_ids.push_back(StoreJob(*store, job, dir));
    }
    const double create_s = Seconds(start);
    std::printf("stored %d tasks in %zu jobs in %.2f s (RSS %.0f MiB)\n", opts->tasks,
                job_ids.size(), create_s, ProcStatusMib("VmRSS"));

    broker::Broker broker(*store, LoopbackBroker(), tessera::Clock::Real());
    start = Clock::now();
    const std::string endpoint = StartBroker(broker);
    const double load_s = Seconds(start);
    std::printf("broker loaded the backlog in %.2f s (RSS %.0f MiB)\n", load_s,
                ProcStatusMib("VmRSS"));
    api::ApiOptions aopts;
    aopts.port = 0;
    aopts.output_root = dir;
    // Queries carry a viewer token, as a dashboard's would: the token check is part of the cost.
    security::ApiAuth auth(*store, /*enabled=*/true);
    auto viewer = auth.Create("bench", security::Role::kViewer, "query bench", 0);
    if (!viewer.ok()) throw CLI::RuntimeError(viewer.status().ToString(), 1);
    api::HttpApi http(*store, broker, auth, aopts);
    auto port = http.Start();
    if (!port.ok()) throw CLI::RuntimeError(port.status().ToString(), 1);

    // Baseline: the same queries while the scheduler holds the backlog but dispatches nothing.
    QueryTimes idle = TimeQueries(*port, viewer->token, job_ids, opts->requests, [] {});
    if (!idle.error.empty()) throw CLI::RuntimeError(idle.error, 1);
    std::printf("idle scheduler: summary p99 %.2f ms, job p99 %.2f ms\n",
                Percentile(idle.summary_ms, 99), Percentile(idle.job_ms, 99));

    zmq::context_t ctx;
    Fleet fleet(ctx, endpoint, opts->workers, "query-sim-");
    std::atomic<bool> stop{false};
    std::thread fleet_thread([&] { fleet.Run(stop); });
    // Dispatch must be under way before the clock starts.
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (fleet.tasks_done() < std::min<int64_t>(opts->workers, opts->tasks) &&
           Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }

    double rss = 0;
    const int64_t done_before = fleet.tasks_done();
    start = Clock::now();
    QueryTimes busy = TimeQueries(*port, viewer->token, job_ids, opts->requests,
                                  [&] { rss = std::max(rss, ProcStatusMib("VmRSS")); });
    const double window_s = Seconds(start);
    const int64_t dispatched = fleet.tasks_done() - done_before;
    rss = std::max(rss, ProcStatusMib("VmRSS"));
    const double peak_rss = ProcStatusMib("VmHWM");
    const bool drained = fleet.tasks_done() >= opts->tasks;

    http.Stop();
    stop = true;
    fleet_thread.join();
    broker.Stop();
    if (!busy.error.empty()) throw CLI::RuntimeError(busy.error, 1);
    const std::vector<double>& summary_ms = busy.summary_ms;
    const std::vector<double>& job_ms = busy.job_ms;

    auto sum = nlohmann::json::parse(busy.last_summary, nullptr, false);
    std::printf("last summary: %s\n", sum.is_discarded() ? "?" : sum["tasks"].dump().c_str());
    std::printf("%d x GET /api/v1/summary: p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", opts->requests,
                Percentile(summary_ms, 50), Percentile(summary_ms, 99),
                Percentile(summary_ms, 100));
    std::printf("%d x GET /api/v1/jobs/{id}: p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
                opts->requests, Percentile(job_ms, 50), Percentile(job_ms, 99),
                Percentile(job_ms, 100));
    std::printf(
        "%d x the job page (job, 200 frames, running and failed tasks): p50 %.2f ms, "
        "p99 %.2f ms, max %.2f ms\n",
        opts->requests, Percentile(busy.page_ms, 50), Percentile(busy.page_ms, 99),
        Percentile(busy.page_ms, 100));
    std::printf("meanwhile %lld tasks were dispatched and answered in %.2f s (%.0f tasks/s)%s\n",
                static_cast<long long>(dispatched), window_s, dispatched / window_s,
                drained ? "; WARNING: the queue ran dry, raise --tasks" : "");
    std::printf(
        "RSS: %.0f MiB before the store was opened, %.0f MiB while serving, peak %.0f MiB\n",
        baseline_rss, rss, peak_rss);
    PrintFigures({{"tasks", std::to_string(opts->tasks)},
                  {"workers", std::to_string(opts->workers)},
                  {"requests", std::to_string(opts->requests)},
                  {"summary_p50_ms", Fixed(Percentile(summary_ms, 50), 2)},
                  {"summary_p99_ms", Fixed(Percentile(summary_ms, 99), 2)},
                  {"job_p50_ms", Fixed(Percentile(job_ms, 50), 2)},
                  {"job_p99_ms", Fixed(Percentile(job_ms, 99), 2)},
                  {"job_page_p50_ms", Fixed(Percentile(busy.page_ms, 50), 2)},
                  {"job_page_p99_ms", Fixed(Percentile(busy.page_ms, 99), 2)},
                  {"target_p99_ms", "5"},
                  {"idle_summary_p99_ms", Fixed(Percentile(idle.summary_ms, 99), 2)},
                  {"idle_job_p99_ms", Fixed(Percentile(idle.job_ms, 99), 2)},
                  {"rss_mib", Fixed(rss)},
                  {"peak_rss_mib", Fixed(peak_rss)},
                  {"baseline_rss_mib", Fixed(baseline_rss)},
                  {"target_rss_mib", "1024"},
                  {"dispatch_tasks_per_s", Fixed(dispatched / window_s)},
                  {"create_s", Fixed(create_s, 2)},
                  {"load_s", Fixed(load_s, 2)}});
  });
}

}  // namespace tessera::bench
