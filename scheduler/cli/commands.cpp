// Read and control commands: jobs, status, workers, and the job operations.

#include "scheduler/cli/commands.h"

#include <httplib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>

#include "scheduler/cli/api_client.h"
#include "scheduler/cli/format.h"
#include "shared/jobs/job_file.h"

namespace tessera::cli {

namespace {

std::string JobPath(int64_t job_id) { return "/api/v1/jobs/" + std::to_string(job_id); }

std::string TaskCounts(const json& tasks) {
  return std::to_string(Int(tasks, "total")) + " total: " + std::to_string(Int(tasks, "done")) +
         " done, " + std::to_string(Int(tasks, "running")) + " running, " +
         std::to_string(Int(tasks, "queued")) + " queued, " + std::to_string(Int(tasks, "failed")) +
         " failed, " + std::to_string(Int(tasks, "canceled")) + " canceled";
}

std::string GpuSummary(const json& gpus) {
  if (!gpus.is_array() || gpus.empty()) return "-";
  std::string name = Str(gpus[0], "name", "gpu");
  return std::to_string(gpus.size()) + "x " + name;
}

// 0.25, 0.5, 1: a share of a GPU as people write it.
std::string ShareText(double share) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3g", share);
  return text;
}

// A GPU's latest telemetry reading: "87%", "40.0 GB/80.0 GB", "71C" ("-" when not reported).
std::string Reading(const json& telemetry, const char* key) {
  if (!telemetry.is_object() || !telemetry.contains(key)) return "-";
  if (std::string(key) == "memory_used_mb") {
    return FormatMegabytes(Int(telemetry, "memory_used_mb")) + "/" +
           FormatMegabytes(Int(telemetry, "memory_total_mb"));
  }
  return Str(telemetry, key) + (std::string(key) == "utilization_pct" ? "%" : "C");
}

// Per GPU of the connected workers whose GPUs hold tasks, are shared or report telemetry: which
// tasks it holds (with their share), its free share, its latest reading and its health.
void PrintGpuUse(const json& workers) {
  Table table({"WORKER", "GPU", "SLOTS", "FREE", "UTIL", "MEMORY", "TEMP", "HEALTH", "TASKS"});
  bool any = false;
  for (const json& w : workers) {
    const json& gpus = Member(w, "gpu_use");
    if (!gpus.is_array()) continue;
    for (const json& gpu : gpus) {
      const json& tasks = Member(gpu, "tasks");
      const json& telemetry = Member(gpu, "telemetry");
      const std::string fault = Str(gpu, "fault", "");
      if (Int(w, "slots_per_gpu") == 0 && (!tasks.is_array() || tasks.empty()) &&
          !telemetry.is_object() && fault.empty()) {
        continue;
      }
      std::string held;
      for (const json& t : tasks.is_array() ? tasks : json::array()) {
        held += (held.empty() ? "" : ", ") + Str(t, "task_id") + " (" +
                (Member(gpu, "whole") == true ? std::string("whole") : ShareText(Num(t, "share"))) +
                ")";
      }
      table.AddRow({Str(w, "name"), Str(gpu, "index"),
                    std::to_string(Int(gpu, "slots_used")) + "/" + Str(gpu, "slots"),
                    ShareText(Num(gpu, "free_share")), Reading(telemetry, "utilization_pct"),
                    Reading(telemetry, "memory_used_mb"), Reading(telemetry, "temperature_c"),
                    fault.empty() ? "ok" : "FAULT: " + fault, held.empty() ? "-" : held});
      any = true;
    }
  }
  if (!any) return;
  std::cout << "\n";
  table.Print(std::cout);
}

// "aws g5.xlarge spot us-east-1a": where a cloud worker runs; "-" on premises.
std::string CloudSummary(const json& cloud) {
  std::string where = Str(cloud, "zone", "");
  if (where.empty()) where = Str(cloud, "region", "");
  std::string out;
  for (const std::string& part : {Str(cloud, "provider", ""), Str(cloud, "instance_type", ""),
                                  Str(cloud, "lifecycle", ""), where}) {
    if (!part.empty()) out += (out.empty() ? "" : " ") + part;
  }
  return out.empty() ? "-" : out;
}

// "3/8": the slots in use of a connected worker ("-" for one not connected).
std::string SlotsText(const json& worker) {
  if (!Member(worker, "slots").is_number()) return "-";
  return Str(worker, "slots_used") + "/" + Str(worker, "slots");
}

std::string IdList(const json& ids) {
  if (!ids.is_array() || ids.empty()) return "-";
  std::string out;
  for (const json& id : ids) {
    if (!out.empty()) out += ",";
    out += id.dump();
  }
  return out;
}

}  // namespace

int ReportError(const std::string& server_url, const Status& status) {
  if (status.code() == StatusCode::kUnavailable) {
    std::cerr << "error: " << UnreachableMessage(server_url, status) << "\n";
    return kExitUnreachable;
  }
  std::cerr << "error: " << status.message() << "\n";
  if (status.code() == StatusCode::kUnauthenticated) {
    std::cerr << "hint: give the CLI an API token with --token, TESSERA_TOKEN, TESSERA_TOKEN_FILE "
                 "or `token_file:` in ~/.config/tessera/config.yaml (the scheduler writes the "
                 "first admin token to <data_dir>/admin.token)\n";
  }
  if (status.code() == StatusCode::kUnauthenticated ||
      status.code() == StatusCode::kPermissionDenied) {
    return kExitAuth;
  }
  return status.code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
}

std::optional<json> Call(const ClientOptions& options,
                         const std::function<StatusOr<json>(ApiClient&)>& call, int* rc) {
  ApiClient client(options.connection);
  StatusOr<json> reply = call(client);
  if (!reply.ok()) {
    *rc = ReportError(client.server_url(), reply.status());
    return std::nullopt;
  }
  if (options.json) {
    std::cout << reply->dump(2) << "\n";
    *rc = kExitOk;
    return std::nullopt;
  }
  return std::move(*reply);
}

int RunJobs(const ClientOptions& options, const JobQuery& filter) {
  std::string path = "/api/v1/jobs";
  std::string query;
  for (const auto& [name, value] :
       {std::pair{"state", filter.state}, std::pair{"user", filter.user},
        std::pair{"project", filter.project},
        std::pair{"limit", filter.limit > 0 ? std::to_string(filter.limit) : std::string()}}) {
    if (value.empty()) continue;
    query += (query.empty() ? "" : "&") + std::string(name) + "=" +
             httplib::detail::encode_query_param(value);
  }
  if (!query.empty()) path += "?" + query;
  int rc = kExitOk;
  std::optional<json> reply = Call(
      options, [&](ApiClient& c) { return c.Get(path); }, &rc);
  if (!reply) return rc;
  const json& jobs = Member(*reply, "jobs");
  if (!jobs.is_array() || jobs.empty()) {
    std::cout << "No jobs.\n";
    return kExitOk;
  }
  Table table({"ID", "NAME", "STATE", "PROGRESS", "FRAMES", "SUBMITTED"});
  for (const json& job : jobs) {
    table.AddRow({Str(job, "id"), Str(job, "name"), Str(job, "state"),
                  FormatPercent(Num(job, "progress")),
                  FormatFrames(Int(job, "frame_start"), Int(job, "frame_end")),
                  FormatTimestamp(Member(job, "submitted_at"))});
  }
  table.Print(std::cout);
  return kExitOk;
}

namespace {

// One look at a job (and its tasks); *state gets its state ("" when the request failed).
int StatusOnce(const ClientOptions& options, int64_t job_id, bool show_tasks, std::string* state);

}  // namespace

int RunStatus(const ClientOptions& options, int64_t job_id, bool show_tasks, bool watch) {
  std::string state;
  if (!watch) return StatusOnce(options, job_id, show_tasks, &state);
  // --watch: redraw whenever the job changes (the event stream says so; else every 2 s) until
  // it ends or Ctrl-C.
  const bool tty = isatty(STDOUT_FILENO) != 0;
  EventWatch events(options.connection, job_id);
  for (;;) {
    if (tty) std::cout << "\x1b[H\x1b[2J";  // top left, clear
    const int rc = StatusOnce(options, job_id, show_tasks, &state);
    std::cout << std::flush;
    if (rc != kExitOk) return rc;
    if (state == "done" || state == "failed" || state == "canceled") return kExitOk;
    events.Wait(std::chrono::seconds(events.live() ? 10 : 2));
    if (!tty) std::cout << "\n";
  }
}

namespace {

int StatusOnce(const ClientOptions& options, int64_t job_id, bool show_tasks, std::string* state) {
  ApiClient client(options.connection);
  StatusOr<json> reply = client.Get(JobPath(job_id));
  if (!reply.ok()) return ReportError(client.server_url(), reply.status());
  json tasks;
  if (show_tasks) {
    StatusOr<json> task_reply = client.Get(JobPath(job_id) + "/tasks");
    if (!task_reply.ok()) return ReportError(client.server_url(), task_reply.status());
    tasks = Member(*task_reply, "tasks");
  }
  const json& job = Member(*reply, "job");
  *state = Str(job, "state");
  if (options.json) {
    json out = *reply;
    if (show_tasks) out["tasks"] = tasks;
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  std::cout << "Job " << Str(job, "id") << "  " << Str(job, "name") << "\n";
  std::cout << "  state      " << Str(job, "state") << "  " << FormatPercent(Num(job, "progress"))
            << "\n";
  std::cout << "  frames     " << FormatFrames(Int(job, "frame_start"), Int(job, "frame_end"))
            << "  (chunk " << Int(job, "chunk_size", 1) << ", priority " << Int(job, "priority")
            << ")\n";
  std::cout << "  tasks      " << TaskCounts(Member(job, "tasks")) << "\n";
  if (Member(job, "eta_s").is_number()) {
    std::cout << "  time left  about " << FormatDuration(Num(job, "eta_s")) << "\n";
  }
  std::cout << "  owner      " << Str(job, "user") << " (project " << Str(job, "project") << ")\n";
  std::cout << "  cost       " << FormatMoney(Num(job, "cost")) << " for "
            << FormatDuration(Num(job, "gpu_seconds")) << " of GPU time"
            << (Member(job, "interruptible") == false ? " (never on spot nodes)" : "") << "\n";
  if (Member(job, "deadline").is_string()) {
    std::cout << "  deadline   " << FormatTimestamp(Member(job, "deadline"));
    if (Member(job, "forecast_finish").is_string()) {
      std::cout << "  (forecast " << FormatTimestamp(Member(job, "forecast_finish")) << ")";
    }
    std::cout << "\n";
  }
  if (Str(job, "renderer") != spec::kDefaultRenderer) {
    std::cout << "  renderer   " << Str(job, "renderer") << "\n";
  }
  // Scheduling constraints, shown only when the job has them.
  auto list = [](const json& values) {
    std::string out;
    for (const json& v : values)
      out += (out.empty() ? "" : ", ") + (v.is_string() ? v.get<std::string>() : v.dump());
    return out;
  };
  for (auto [key, label] :
       {std::pair{"depends_on", "depends_on "}, std::pair{"frame_depends_on", "frame deps "},
        std::pair{"pools", "pools      "}, std::pair{"tags", "tags       "},
        std::pair{"limits", "limits     "}}) {
    const json& values = Member(job, key);
    if (values.is_array() && !values.empty()) {
      std::cout << "  " << label << list(values) << "\n";
    }
  }
  const json& resources = Member(job, "resources");
  if (resources.is_object()) {
    std::string needs;
    for (const auto& [name, value] : resources.items()) {
      if (value.is_number() && value.get<double>() > 0) {
        needs += (needs.empty() ? "" : ", ") + name + " " + value.dump();
      }
    }
    if (!needs.empty()) std::cout << "  resources  " << needs << "\n";
  }
  std::cout << "  output     " << Str(job, "output_dir") << "\n";
  std::cout << "  submitted  " << FormatTimestamp(Member(job, "submitted_at")) << "\n";
  std::cout << "  started    " << FormatTimestamp(Member(job, "started_at")) << "\n";
  std::cout << "  finished   " << FormatTimestamp(Member(job, "finished_at")) << "\n";
  if (Member(job, "notice").is_string()) std::cout << "  notice     " << Str(job, "notice") << "\n";
  // A job with steps: what holds each step (no connected worker can run it, ...).
  const json& steps = Member(job, "steps");
  for (size_t i = 0; steps.is_array() && i < steps.size(); ++i) {
    const json& step = steps[i];
    if (Member(step, "notice").is_string() && !Str(step, "notice").empty()) {
      std::cout << "  notice     step " << Str(step, "step") << ": " << Str(step, "notice") << "\n";
    }
  }
  if (Member(job, "error").is_string() && !Str(job, "error").empty()) {
    std::cout << "  error      " << Str(job, "error") << "\n";
  }
  if (Member(job, "step").is_string()) {
    std::cout << "  step       " << Str(job, "step") << " of job " << Str(job, "pipeline_id")
              << "\n";
  }
  if (steps.is_array()) {
    // A job with steps: a row per step (each a job of its own: tessera status STEP_ID).
    std::cout << "\n";
    Table table({"STEP", "ID", "STATE", "PROGRESS", "TASKS", "RENDERER", "AFTER"});
    for (const json& step : steps) {
      std::string after;
      for (const json& dep : Member(step, "step_depends_on")) {
        after += (after.empty() ? "" : ", ") + Str(dep, "step") +
                 (Member(dep, "per_frame") == true ? " (per frame)" : "");
      }
      table.AddRow({Str(step, "step"), Str(step, "id"), Str(step, "state"),
                    FormatPercent(Num(step, "progress")), TaskCounts(Member(step, "tasks")),
                    Str(step, "renderer"), after.empty() ? "-" : after});
    }
    table.Print(std::cout);
  }
  if (show_tasks) {
    std::cout << "\n";
    Table table({"ID", "INDEX", "FRAMES", "STATE", "ATTEMPT", "WORKER", "PROGRESS", "MESSAGE"});
    if (tasks.is_array()) {
      for (const json& task : tasks) {
        table.AddRow({Str(task, "id"), Str(task, "index"),
                      FormatFrames(Int(task, "frame_start"), Int(task, "frame_end")),
                      Str(task, "state"), Str(task, "attempt"), Str(task, "worker_name"),
                      FormatPercent(Num(task, "progress")),
                      Str(task, "message", "").empty() ? Str(task, "status_line", "")
                                                       : Str(task, "message", "")});
      }
    }
    table.Print(std::cout);
  }
  return kExitOk;
}

}  // namespace

int RunWorkers(const ClientOptions& options) {
  int rc = kExitOk;
  std::optional<json> reply = Call(
      options, [](ApiClient& c) { return c.Get("/api/v1/workers"); }, &rc);
  if (!reply) return rc;
  const json& workers = Member(*reply, "workers");
  if (!workers.is_array() || workers.empty()) {
    std::cout << "No workers.\n";
    return kExitOk;
  }
  Table table({"ID", "NAME", "STATE", "CORES", "RAM", "GPUS", "CLOUD", "SLOTS", "TASKS", "COST",
               "LAST SEEN"});
  for (const json& w : workers) {
    const std::string state = Str(w, "state") +
                              (Member(w, "disabled") == true ? " (disabled)" : "") +
                              (Str(w, "health", "") == "unhealthy" ? " (unhealthy)" : "");
    // What it has cost, at its price per hour (its node group's, or its instance type's).
    std::string cost = "-";
    if (Num(w, "price_per_hour") > 0) {
      cost = FormatMoney(Num(w, "cost")) + " @" + FormatMoney(Num(w, "price_per_hour")) + "/h";
    }
    table.AddRow({Str(w, "id"), Str(w, "name"), state, Str(w, "cpu_cores"),
                  FormatMegabytes(Int(w, "ram_mb")), GpuSummary(Member(w, "gpus")),
                  CloudSummary(Member(w, "cloud")), SlotsText(w),
                  IdList(Member(w, "current_tasks")), cost,
                  FormatTimestamp(Member(w, "last_seen"))});
  }
  table.Print(std::cout);
  for (const json& w : workers) {
    if (Str(w, "health", "") == "unhealthy") {
      std::cout << "\nworker " << Str(w, "name") << " is unhealthy: " << Str(w, "health_reason")
                << "\n";
    }
  }
  PrintGpuUse(workers);
  return kExitOk;
}

int RunPlugins(const ClientOptions& options) {
  int rc = kExitOk;
  std::optional<json> reply = Call(
      options, [](ApiClient& c) { return c.Get("/api/v1/plugins"); }, &rc);
  if (!reply) return rc;
  const json& workers = Member(*reply, "workers");
  if (!workers.is_array() || workers.empty()) {
    std::cout << "No connected workers.\n";
  } else {
    Table table({"WORKER", "NAME", "PLUGINS"});
    for (const json& w : workers) {
      std::string list;
      for (const json& p : Member(w, "plugins")) {
        list += (list.empty() ? "" : ", ") + Str(p, "name");
        if (!Str(p, "version").empty()) list += " " + Str(p, "version");
      }
      table.AddRow({Str(w, "id"), Str(w, "name"), list.empty() ? "-" : list});
    }
    table.Print(std::cout);
  }
  std::cout << "Renderers this farm knows: pathtracer, noop";
  for (const json& p : Member(*reply, "plugins")) {
    // C++ plugins some worker loaded (worker.native_plugins) are marked as such.
    std::cout << ", " << Str(p, "name") << (Str(p, "kind") == "native" ? " (native)" : "");
  }
  std::cout << "\n";
  return kExitOk;
}

int RunLogs(const ClientOptions& options, int64_t task_id, int attempt) {
  int rc = kExitOk;
  std::optional<json> reply = Call(
      options,
      [&](ApiClient& c) { return c.Get("/api/v1/tasks/" + std::to_string(task_id) + "/log"); },
      &rc);
  if (!reply) return rc;
  const json& attempts = Member(*reply, "attempts");
  bool shown = false;
  if (attempt == 0 && !attempts.empty()) {
    std::cout << "task " << task_id << " (" << Str(*reply, "state") << "): " << attempts.size()
              << " attempt" << (attempts.size() == 1 ? "" : "s") << ", "
              << Int(*reply, "failures_total") << " charged failure"
              << (Int(*reply, "failures_total") == 1 ? "" : "s") << " in all ("
              << Int(*reply, "failures") << " since the last retry)\n";
  }
  for (const json& a : attempts) {
    if (attempt > 0 && Int(a, "attempt") != attempt) continue;
    // attempt 3: failed (output_write) on w1: cannot write frame 1: ...
    const std::string outcome = Str(a, "outcome", Str(a, "state"));
    std::cout << "attempt " << Int(a, "attempt") << ": " << outcome;
    if (!Str(a, "failure_class", "").empty()) std::cout << " (" << Str(a, "failure_class") << ")";
    std::cout << " on " << Str(a, "worker");
    if (!Str(a, "message", "").empty()) std::cout << ": " << Str(a, "message");
    if (outcome == "failed" && Str(a, "charged", "") == "false") std::cout << " [not charged]";
    std::cout << "\n";
    const bool running = outcome == "running";
    const json& when = Member(a, running ? "started_at" : "ended_at");
    std::cout << "   " << (running ? "running since " : "ended ")
              << FormatTimestamp(when.is_null() ? Member(a, "at") : when) << "\n";
    std::cout << Str(a, "log", "");
    if (!Str(a, "log", "").empty() && Str(a, "log", "").back() != '\n') std::cout << "\n";
    shown = true;
  }
  if (!shown) {
    std::cout << "task " << task_id << " (" << Str(*reply, "state") << ") has no attempt"
              << (attempt > 0 ? " " + std::to_string(attempt) : std::string()) << " recorded yet";
    if (!Str(*reply, "message", "").empty())
      std::cout << "; last message: " << Str(*reply, "message");
    std::cout << "\n";
  }
  return kExitOk;
}

int RunWhy(const ClientOptions& options, int64_t task_id) {
  int rc = kExitOk;
  std::optional<json> reply = Call(
      options,
      [&](ApiClient& c) { return c.Get("/api/v1/tasks/" + std::to_string(task_id) + "/why"); },
      &rc);
  if (!reply) return rc;
  std::cout << "task " << task_id << " (" << Str(*reply, "state") << "): " << Str(*reply, "reason")
            << "\n";
  for (const json& line : Member(*reply, "details")) {
    if (line.is_string()) std::cout << "  " << line.get<std::string>() << "\n";
  }
  const json checkpoint = Member(*reply, "checkpoint");
  if (checkpoint.is_object()) {
    std::cout << "  resumes from attempt " << checkpoint.value("attempt", 0)
              << "'s checkpoint: frame " << checkpoint.value("frame", 0) << ", "
              << checkpoint.value("samples", 0) << " samples\n";
  }
  return kExitOk;
}

int RunJobAction(const ClientOptions& options, int64_t job_id, const std::string& action,
                 const json& body) {
  int rc = kExitOk;
  std::optional<json> reply = Call(
      options,
      [&](ApiClient& c) {
        return action == "delete" ? c.Delete(JobPath(job_id))
                                  : c.Post(JobPath(job_id) + "/" + action, body);
      },
      &rc);
  if (!reply) return rc;
  if (action == "delete") {
    std::cout << "job " << job_id << " deleted (its output files are kept)\n";
    return kExitOk;
  }
  const json& job = Member(*reply, "job");
  std::cout << "job " << job_id << " (" << Str(job, "name") << "): " << Str(job, "state");
  if (reply->contains("tasks_requeued")) {
    std::cout << ", " << Int(*reply, "tasks_requeued") << " task(s) requeued";
  }
  if (action == "priority") std::cout << ", priority " << Int(job, "priority");
  std::cout << "\n";
  return kExitOk;
}

int RunWorkerAction(const ClientOptions& options, const std::string& name,
                    const std::string& action) {
  int rc = kExitOk;
  std::optional<json> reply = Call(
      options,
      [&](ApiClient& c) {
        return c.Post("/api/v1/workers/" + name + "/" + action, json::object());
      },
      &rc);
  if (!reply) return rc;
  if (action == "drain") {
    std::cout << "worker " << name << " is draining: it finishes its tasks, then leaves\n";
  } else if (action == "revoke") {
    std::cout << "worker " << name << " revoked: disconnected, and its key is refused\n";
  } else if (action == "disable") {
    std::cout << "worker " << name << " disabled: no new tasks (running ones finish)\n";
  } else if (action == "enable") {
    std::cout << "worker " << name << " enabled: it takes tasks again\n";
  } else {
    std::cout << "worker " << name << " readmitted: it may enrol again with a join token\n";
  }
  return kExitOk;
}

}  // namespace tessera::cli
