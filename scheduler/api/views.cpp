#include "scheduler/api/views.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <map>

#include "scheduler/assembler/assembler.h"

namespace tessera::api {

namespace {
nlohmann::json OptTime(const std::optional<int64_t>& ms) {
  return ms ? nlohmann::json(IsoTime(*ms)) : nlohmann::json(nullptr);
}
nlohmann::json CountsView(const store::TaskCounts& c) {
  return {{"total", c.total}, {"queued", c.queued}, {"running", c.running},
          {"done", c.done},   {"failed", c.failed}, {"canceled", c.canceled}};
}
}  // namespace

nlohmann::json JobView(const store::JobRecord& j) {
  double progress = j.tasks.total ? static_cast<double>(j.tasks.done) / j.tasks.total : 0.0;
  // Time left at the pace since it started: tasks still to finish over tasks finished per second.
  nlohmann::json eta = nullptr;
  if (j.state == store::JobState::kRunning && j.started_at_ms && j.tasks.done > 0) {
    const double elapsed_s = std::max<int64_t>(1, store::NowMs() - *j.started_at_ms) / 1000.0;
    const int64_t left = j.tasks.queued + j.tasks.running;
    eta = std::llround(left * elapsed_s / j.tasks.done);
  }
  return {{"id", j.id},
          {"name", j.name},
          // A paused job that is not finished reads "paused"; `paused` keeps the flag either way.
          {"state", j.paused && !j.terminal() ? "paused" : store::JobStateName(j.state)},
          {"paused", j.paused},
          {"priority", j.priority},
          {"frame_start", j.frame_start},
          {"frame_end", j.frame_end},
          {"chunk_size", j.chunk_size},
          {"max_retries", j.max_retries},
          {"task_timeout", j.task_timeout_s},
          {"progress_timeout", j.progress_timeout_s},
          {"checkpoint_interval_s", j.checkpoint_interval_s},
          {"blocklist_after", j.blocklist_after},
          {"renderer", j.renderer},
          {"project", j.project},
          {"user", j.user},
          {"depends_on", j.depends_on},
          {"frame_depends_on", j.frame_depends_on},
          {"fail_after_workers", j.fail_after_workers},
          {"limits", j.limits},
          {"pools", j.pools},
          {"tags", j.tags},
          {"resources", j.resources},
          {"tasks", CountsView(j.tasks)},
          {"progress", progress},
          {"eta_s", eta},
          {"output_dir", j.output_dir},
          {"output_pattern", j.output_pattern},
          {"output_formats", j.output_formats},
          {"output_exr", j.exr_float ? "float" : "half"},
          {"submitted_at", IsoTime(j.submitted_at_ms)},
          {"started_at", OptTime(j.started_at_ms)},
          {"finished_at", OptTime(j.finished_at_ms)},
          {"error", j.error ? nlohmann::json(*j.error) : nlohmann::json(nullptr)},
          {"notice", j.notice ? nlohmann::json(*j.notice) : nlohmann::json(nullptr)},
          {"interruptible", j.interruptible},
          {"deadline", OptTime(j.deadline_ms)},
          {"gpu_seconds", j.gpu_seconds},
          {"cost", j.cost},
          {"pipeline_id", j.pipeline_id ? nlohmann::json(*j.pipeline_id) : nlohmann::json(nullptr)},
          {"step", j.pipeline_id ? nlohmann::json(j.step) : nlohmann::json(nullptr)},
          {"step_depends_on", j.step_depends_on}};
}

nlohmann::json TaskView(const store::TaskRecord& t) {
  return {{"id", t.id},
          {"job_id", t.job_id},
          {"index", t.index},
          {"frame_start", t.frame_start},
          {"frame_end", t.frame_end},
          {"state", store::TaskStateName(t.state)},
          {"attempt", t.attempt},
          {"failures", t.failures},
          {"failures_total", t.failures_total},
          {"worker_id", t.worker_id ? nlohmann::json(*t.worker_id) : nlohmann::json(nullptr)},
          {"worker_name", t.worker_name ? nlohmann::json(*t.worker_name) : nlohmann::json(nullptr)},
          {"progress", t.progress},
          {"message", t.message},
          {"status_line", t.status_line},
          {"started_at", OptTime(t.started_at_ms)},
          {"finished_at", OptTime(t.finished_at_ms)},
          {"gpu_seconds", t.gpu_seconds},
          {"cost", t.cost}};
}

nlohmann::json WorkerView(const store::WorkerRecord& w, const nlohmann::json& gpu_use) {
  // Per GPU, which tasks it holds and its free share; nothing for a worker not connected.
  auto member = [&](const char* key, nlohmann::json fallback) {
    return gpu_use.is_object() && gpu_use.contains(key) ? gpu_use[key] : fallback;
  };
  return {{"id", w.id},
          {"name", w.name},
          {"hostname", w.hostname},
          {"state", store::WorkerStateName(w.state)},
          {"cpu_cores", w.cpu_cores},
          {"ram_mb", w.ram_mb},
          {"gpus", w.gpus},
          {"backends", w.backends},
          {"pools", w.pools},
          {"tags", w.tags},
          {"version", w.version},
          {"os", w.os},
          {"cpu_model", w.cpu_model},
          {"cloud", w.cloud},
          {"current_tasks", w.current_tasks},
          // Connected workers only: the tasks it runs at once, how many run (or still stop),
          // and the cores and RAM those tasks declared.
          {"slots", member("slots", nullptr)},
          {"slots_used", member("slots_used", nullptr)},
          {"cpu_cores_used", member("cpu_cores_used", nullptr)},
          {"ram_mb_used", member("ram_mb_used", nullptr)},
          {"slots_per_gpu", member("slots_per_gpu", 0)},
          {"memory_mb_per_slot", member("memory_mb_per_slot", 0)},
          {"gpu_use", member("gpus", nlohmann::json::array())},
          // Connected workers only: "ok", or "unhealthy" with why (a GPU fault, a full disk).
          {"health", member("health", nullptr)},
          {"health_reason", member("health_reason", "")},
          {"disabled", w.disabled},
          {"node_group", w.node_group},
          {"price_per_hour", w.price_per_hour},
          {"cost", w.cost},
          {"registered_at", IsoTime(w.registered_at_ms)},
          {"last_seen", IsoTime(w.last_seen_ms)}};
}

nlohmann::json AlertsView(const events::FarmAlerts* alerts) {
  nlohmann::json out = nlohmann::json::array();
  if (alerts == nullptr) return out;
  for (const events::FarmAlert& a : alerts->List()) {
    out.push_back(
        {{"key", a.key}, {"kind", a.kind}, {"message", a.message}, {"since", IsoTime(a.since_ms)}});
  }
  return out;
}

nlohmann::json SummaryView(const store::FarmSummary& s) {
  nlohmann::json jobs = {
      {"queued", 0}, {"running", 0}, {"done", 0}, {"failed", 0}, {"canceled", 0}};
  int64_t total = 0;
  for (const auto& [state, n] : s.jobs_by_state) {
    jobs[state] = n;
    total += n;
  }
  jobs["total"] = total;
  nlohmann::json workers = {{"idle", 0}, {"busy", 0}, {"offline", 0}};
  total = 0;
  for (const auto& [state, n] : s.workers_by_state) {
    workers[state] = n;
    total += n;
  }
  workers["total"] = total;
  return {{"jobs", jobs},
          {"tasks", CountsView(s.tasks)},
          {"workers", workers},
          {"cost",
           {{"today", s.cost_today},
            {"gpu_seconds_today", s.gpu_seconds_today},
            {"per_hour", s.cost_per_hour}}},
          {"version", TESSERA_VERSION},
          {"api_version", kApiVersion}};
}

nlohmann::json JoinTokenView(const store::JoinTokenRecord& t) {
  const int64_t now = store::NowMs();
  const char* state = t.revoked_at_ms                                ? "revoked"
                      : (t.expires_at_ms && *t.expires_at_ms <= now) ? "expired"
                      : (t.max_uses > 0 && t.uses >= t.max_uses)     ? "used up"
                                                                     : "valid";
  return {
      {"id", t.id},
      {"note", t.note},
      {"created_at", IsoTime(t.created_at_ms)},
      {"expires_at", OptTime(t.expires_at_ms)},
      {"max_uses", t.max_uses},
      {"uses", t.uses},
      {"worker", t.worker_name.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.worker_name)},
      {"state", state}};
}

nlohmann::json ApiTokenView(const store::ApiTokenRecord& t) {
  const char* state = t.revoked_at_ms ? "revoked" : !t.usable(store::NowMs()) ? "expired" : "valid";
  return {{"id", t.id},
          {"user", t.user},
          {"role", t.role},
          {"note", t.note},
          {"created_at", IsoTime(t.created_at_ms)},
          {"expires_at", OptTime(t.expires_at_ms)},
          {"state", state}};
}

nlohmann::json FramesView(const store::JobRecord& job, const std::vector<store::TaskRecord>& tasks,
                          const std::map<int, std::string>& flags, int first, int count) {
  // Per frame: how many of its parts (tasks) are in each state.
  struct Parts {
    int total = 0, done = 0, running = 0, failed = 0, canceled = 0;
  };
  const int last = std::min<int64_t>(job.frame_end, static_cast<int64_t>(first) + count - 1);
  std::map<int, Parts> frames;
  for (int f = first; f <= last; ++f) frames[f];
  for (const store::TaskRecord& t : tasks) {
    for (int f = std::max(t.frame_start, first); f <= std::min(t.frame_end, last); ++f) {
      Parts& p = frames[f];
      ++p.total;
      p.done += t.state == store::TaskState::kDone;
      p.running += t.state == store::TaskState::kRunning;
      p.failed += t.state == store::TaskState::kFailed;
      p.canceled += t.state == store::TaskState::kCanceled;
    }
  }
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [frame, p] : frames) {
    const char* state = p.total > 0 && p.done == p.total ? "done"
                        : p.failed > 0                   ? "failed"
                        : p.running > 0                  ? "running"
                        : p.canceled > 0                 ? "canceled"
                                                         : "queued";
    std::error_code ec;
    const bool thumbnail =
        job.produces_frames() &&
        std::filesystem::exists(assembler::ThumbnailPath(job.output_dir, frame), ec);
    out.push_back(
        {{"frame", frame},
         {"state", state},
         {"parts_total", p.total},
         {"parts_done", p.done},
         {"thumbnail", thumbnail},
         {"flag", flags.count(frame) ? nlohmann::json(flags.at(frame)) : nlohmann::json(nullptr)}});
  }
  return {{"job_id", job.id},
          {"frame_start", job.frame_start},
          {"frame_end", job.frame_end},
          {"frames", std::move(out)}};
}

}  // namespace tessera::api
