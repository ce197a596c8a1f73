// `tessera wait`: follow the job until it ends. The scheduler's event stream wakes it when the
// job changes (it polls twice a second when there is no stream). On a terminal the progress is
// one line with a bar, rewritten in place; in a pipe or log a line is printed only when
// something changed.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "scheduler/cli/api_client.h"
#include "scheduler/cli/commands.h"
#include "scheduler/cli/format.h"

namespace tessera::cli {

namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kPollInterval = std::chrono::milliseconds(500);
// With the event stream, a look now and then anyway (a missed event costs at most this).
constexpr auto kLiveRecheck = std::chrono::seconds(5);
constexpr int kBarWidth = 24;
// A scheduler restart (or a hiccup) should not end a long wait; only a sustained outage does.
constexpr auto kUnreachableGrace = std::chrono::seconds(10);

std::string ProgressLine(int64_t job_id, const json& job, bool bar) {
  const json& tasks = job.contains("tasks") ? job["tasks"] : json();
  std::string drawn;
  if (bar) {
    const int filled =
        static_cast<int>(std::clamp(Num(job, "progress"), 0.0, 1.0) * kBarWidth + 0.5);
    drawn = " [" + std::string(filled, '#') + std::string(kBarWidth - filled, '.') + "]";
  }
  return "job " + std::to_string(job_id) + " (" + Str(job, "name") + "): " + Str(job, "state") +
         drawn + " " + FormatPercent(Num(job, "progress")) + "  " +
         std::to_string(Int(tasks, "done")) + "/" + std::to_string(Int(tasks, "total")) +
         " tasks done, " + std::to_string(Int(tasks, "running")) + " running" +
         (Int(tasks, "failed") > 0 ? ", " + std::to_string(Int(tasks, "failed")) + " failed"
                                   : std::string());
}

}  // namespace

int RunWait(const ClientOptions& options, int64_t job_id, double timeout_seconds, bool quiet) {
  ApiClient client(options.connection);
  const bool tty = isatty(STDOUT_FILENO) != 0;
  EventWatch watch(options.connection, job_id);
  const auto start = Clock::now();
  const bool bounded = timeout_seconds > 0;
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(bounded ? timeout_seconds : 0.0));
  std::string last_line;
  json job;
  bool seen_once = false;
  std::set<std::string> said;  // notices already printed
  auto unreachable_since = Clock::time_point::max();

  auto end_progress_line = [&] {
    if (tty && !quiet && !last_line.empty()) std::cout << "\n" << std::flush;
  };

  while (true) {
    StatusOr<json> reply = client.Get("/api/v1/jobs/" + std::to_string(job_id));
    if (!reply.ok()) {
      Status status = reply.status();
      bool transient = status.code() == StatusCode::kUnavailable && seen_once;
      if (transient && unreachable_since == Clock::time_point::max()) {
        unreachable_since = Clock::now();
      }
      if (!transient || Clock::now() - unreachable_since > kUnreachableGrace) {
        end_progress_line();
        return ReportError(client.server_url(), status);
      }
    } else {
      seen_once = true;
      unreachable_since = Clock::time_point::max();
      job = (*reply).contains("job") ? (*reply)["job"] : *reply;
      const std::string state = Str(job, "state");
      // What holds the job that waiting will not fix (no connected worker can run it), said
      // once, on stderr; it may pass (a worker joins), so the wait goes on.
      std::vector<std::string> notices = {Str(job, "notice", "")};
      for (const json& step : Member(job, "steps")) {
        const std::string notice = Str(step, "notice", "");
        if (!notice.empty()) notices.push_back("step " + Str(step, "step") + ": " + notice);
      }
      for (const std::string& notice : notices) {
        if (notice.empty() || !said.insert(notice).second) continue;
        end_progress_line();
        last_line.clear();
        std::cerr << "tessera wait: job " << job_id << ": " << notice
                  << " (still waiting: a worker may join)\n";
      }
      if (!quiet) {
        std::string line = ProgressLine(job_id, job, tty);
        if (line != last_line) {
          if (tty) {
            std::cout << "\r\x1b[K" << line << std::flush;
          } else {
            std::cout << line << "\n" << std::flush;
          }
          last_line = line;
        }
      }
      if (state == "done") {
        end_progress_line();
        if (!quiet) {
          double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
          std::cout << "job " << job_id << " done (waited " << FormatDuration(elapsed)
                    << "); output in " << Str(job, "output_dir") << "\n";
        }
        return kExitOk;
      }
      if (state == "failed" || state == "canceled") {
        end_progress_line();
        std::string error = Str(job, "error", "");
        std::cerr << "error: job " << job_id << " " << state
                  << (error.empty() ? std::string() : ": " + error) << "\n";
        return kExitFailure;
      }
    }
    const auto pause = watch.live()
                           ? std::chrono::duration_cast<std::chrono::milliseconds>(kLiveRecheck)
                           : kPollInterval;
    if (bounded && Clock::now() >= deadline) {
      end_progress_line();
      std::cerr << "error: timed out after " << timeout_seconds << " s waiting for job " << job_id;
      if (seen_once) {
        std::cerr << " (still " << Str(job, "state") << ", " << FormatPercent(Num(job, "progress"))
                  << ")";
      }
      std::cerr << "\n";
      return kExitFailure;
    }
    const auto left =
        bounded ? std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now())
                : pause;
    watch.Wait(std::clamp(left, std::chrono::milliseconds(1), pause));
  }
}

}  // namespace tessera::cli
