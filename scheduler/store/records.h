#pragma once
// The records the store reads and writes (store.h): jobs, tasks, workers, attempts, credentials,
// costs, and the small values its calls take and return.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "shared/jobs/job_file.h"
#include "shared/jobs/job_steps.h"
#include "shared/wire/protocol.h"

namespace tessera::store {

enum class JobState { kQueued, kRunning, kDone, kFailed, kCanceled };
enum class TaskState { kQueued, kRunning, kDone, kFailed, kCanceled };
enum class WorkerState { kIdle, kBusy, kOffline };

const char* JobStateName(JobState s);
const char* TaskStateName(TaskState s);
const char* WorkerStateName(WorkerState s);
bool IsTerminal(TaskState s);

struct TaskCounts {
  int64_t total = 0, queued = 0, running = 0, done = 0, failed = 0, canceled = 0;
  int64_t in(TaskState s) const {
    switch (s) {
      case TaskState::kQueued:
        return queued;
      case TaskState::kRunning:
        return running;
      case TaskState::kDone:
        return done;
      case TaskState::kFailed:
        return failed;
      case TaskState::kCanceled:
        return canceled;
    }
    return 0;
  }
};

struct JobRecord {
  int64_t id = 0;
  std::string name;
  JobState state = JobState::kQueued;
  int priority = 50;
  int frame_start = 0, frame_end = 0, chunk_size = 1, max_retries = 3;
  std::string output_dir;      // absolute
  std::string output_pattern;  // "name.####"
  std::vector<std::string> output_formats;
  TaskCounts tasks;
  std::optional<std::string> error;
  int64_t submitted_at_ms = 0;
  std::optional<int64_t> started_at_ms, finished_at_ms;
  bool paused = false;              // queued tasks are held back until resumed
  int task_timeout_s = 0;           // 0: none
  int progress_timeout_s = 0;       // 0: none
  int blocklist_after = 3;          // 0: never
  std::vector<int64_t> depends_on;  // jobs that must be done before this one starts
  std::vector<std::string> limits;  // named limits its running tasks hold
  std::vector<std::string> pools;   // empty: any
  std::vector<std::string> tags;    // required
  spec::ResourceSpec resources;     // per task
  std::string renderer = spec::kDefaultRenderer;
  std::string project = "default";
  std::string user;                       // who submitted it ("unknown" when not said)
  std::vector<int64_t> frame_depends_on;  // jobs whose same frames must be done first
  int fail_after_workers = 0;             // 0: off
  // Set by the scheduler when something the job cannot fix by waiting holds it, e.g. no
  // connected worker can ever run its tasks; cleared when that passes.
  std::optional<std::string> notice;
  int parts_per_frame = 1;                    // tasks (tiles x sample parts) that make one frame
  bool interruptible = true;                  // spot nodes may run it
  std::optional<int64_t> deadline_ms;         // must be done by then (the autoscaler plans for it)
  double gpu_seconds = 0;                     // of every attempt of its tasks, so far
  double cost = 0;                            // of those attempts, at their workers' prices
  bool exr_float = false;                     // EXR frames in 32-bit float (else half)
  std::map<std::string, std::string> assets;  // path -> blob SHA-256, fetched by workers
  bool output_shared = false;     // output_dir is on shared storage: workers write whole frames
  int checkpoint_interval_s = 0;  // seconds between a running task's checkpoints; 0: none
  // A plugin renderer's settings with its defaults filled in, and the file name the worker
  // writes the scene under: resolved from the job file once, when it was submitted (schema 28).
  std::map<std::string, std::string> settings;
  std::string scene_name;
  // Jobs with steps (shared/jobs/job_steps.h, schema 29). The job itself has renderer
  // spec::kRendererSteps, no tasks, and its steps' task counters; each step is a job whose
  // pipeline_id is the job's, with its step name and its dependencies on the job's other steps.
  std::optional<int64_t> pipeline_id;
  std::string step;
  std::vector<spec::StepDependency> step_depends_on;
  spec::FailurePolicy failure_policy;  // schema 31

  bool has_steps() const { return renderer == spec::kRendererSteps; }

  // Whether its tasks send frame results: not noop tasks (they only report done), nor those of
  // a plugin whose `outputs` setting is none (a command run for its side effects; jobs stored
  // before the setting existed have none and keep returning images).
  bool produces_frames() const {
    auto outputs = settings.find("outputs");
    return renderer != spec::kRendererNoop &&
           (outputs == settings.end() || outputs->second == "images");
  }
  // Whether its tasks send files back instead (a command's `outputs: files`).
  bool returns_files() const {
    auto outputs = settings.find("outputs");
    return outputs != settings.end() && outputs->second == "files";
  }
  bool terminal() const {
    return state == JobState::kDone || state == JobState::kFailed || state == JobState::kCanceled;
  }
};

// A row of the events table: what happened, in order (ids only grow).
struct EventRecord {
  int64_t id = 0;
  int64_t at_ms = 0;
  std::optional<int64_t> job_id, task_id, worker_id;
  std::string kind;
  std::string message;
};

struct TaskRecord {
  int64_t id = 0;
  int64_t job_id = 0;
  int index = 0;
  int frame_start = 0, frame_end = 0;
  TaskState state = TaskState::kQueued;
  int attempt = 0;         // attempts started so far; the current lease's fencing number
  int failures = 0;        // render failures counted against max_retries (a retry resets it)
  int failures_total = 0;  // every charged failure of the task, never reset
  std::optional<int64_t> worker_id;
  std::optional<std::string> worker_name;
  double progress = 0;
  std::string message;
  std::string status_line;  // what its program last said it does (an OpenJD openjd_status)
  std::optional<int64_t> started_at_ms, finished_at_ms;
  std::vector<int64_t> failed_on;  // workers a charged failure happened on
  bool interrupted = false;        // it was running when the scheduler stopped
  protocol::FramePart part;        // the part of its frames it renders (default: whole frames)
  double gpu_seconds = 0;          // of all its attempts
  double cost = 0;
};

// What storing a job created beside the job's own row, as CreateJob / CreatePipeline report it
// when asked: a job with steps' steps (in the order stored) and the tasks of the job or of its
// steps as they were inserted (queued, no attempt yet). The submission hands them to the broker,
// which then holds the new job without reading back what was just written.
struct CreatedRows {
  std::vector<JobRecord> steps;
  std::vector<TaskRecord> tasks;
};

struct WorkerRecord {
  int64_t id = 0;
  std::string name;
  std::string hostname;
  WorkerState state = WorkerState::kOffline;
  int cpu_cores = 0;
  int64_t ram_mb = 0;
  std::vector<protocol::GpuInfo> gpus;
  std::vector<std::string> backends;
  std::string version;
  std::vector<int64_t> current_tasks;
  std::vector<std::string> pools, tags;
  int64_t registered_at_ms = 0, last_seen_ms = 0;
  // What it reported about its machine (workers.details_json; empty for older workers).
  std::string os, cpu_model;
  protocol::CloudInfo cloud;
  bool disabled = false;      // an operator said: no new tasks for it
  std::string node_group;     // the autoscaler's node group it belongs to ("" for none)
  double price_per_hour = 0;  // what it costs while registered, idle or not
  double cost = 0;            // what it has cost so far
};

// What the farm cost on one UTC day: every worker's registered time at its price, and the
// GPU-seconds its tasks took.
struct CostDay {
  std::string day;  // "2026-12-03"
  double cost = 0;
  double gpu_seconds = 0;
};

// A node the autoscaler requested from a provider, until it is terminated.
struct AutoscalerNodeRecord {
  int64_t id = 0;
  std::string group;
  std::string worker_name;  // "" until a node its provider names registers
  std::string provider_id;  // "" until known
  int64_t requested_at_ms = 0;
  bool draining = false;  // being scaled in: terminated once its worker has left
};

// A join token: a new worker that presents it (through its CURVE key pair) may enrol once per
// use. Only its public key is stored.
struct JoinTokenRecord {
  int64_t id = 0;
  std::string public_key;  // Z85
  std::string note;
  int64_t created_at_ms = 0;
  std::optional<int64_t> expires_at_ms;  // none: never
  int max_uses = 0;                      // 0: unlimited
  int uses = 0;
  std::optional<int64_t> revoked_at_ms;
  // Made for this worker name: it enrols only that name, and may replace the key the name is
  // enrolled with (a replacement machine). "": any name that has no valid key.
  std::string worker_name;
  // Whether it still admits a new enrolment at `now_ms`.
  bool usable(int64_t now_ms) const {
    return !revoked_at_ms && (!expires_at_ms || *expires_at_ms > now_ms) &&
           (max_uses == 0 || uses < max_uses);
  }
};

// How one attempt of a task ended. Every attempt is recorded `running` when its lease starts
// and then ends exactly once: `done` only when the task is recorded done (its frames written).
enum class AttemptOutcome { kRunning, kDone, kFailed, kLost, kHandedBack, kCanceled };
const char* AttemptOutcomeName(AttemptOutcome o);

// Failure classes the scheduler finds itself (beside the workers' protocol::kFailure*).
inline constexpr const char* kFailureOutputWrite = "output_write";  // a frame could not be written
inline constexpr const char* kFailureIncomplete = "incomplete";     // done, but frames were missing
inline constexpr const char* kFailureBadResult = "bad_result";      // a result the task cannot have
inline constexpr const char* kFailureBadPixels = "bad_pixels";  // output validation sent it back

struct AttemptEnd {
  AttemptOutcome outcome = AttemptOutcome::kLost;
  std::string failure_class;  // kFailed only
  std::string message;
  bool charged = false;  // counted against the task's retry budget
};

// One attempt of a task: how it ended and what it logged (the worker's and the renderer's lines).
// Rows from before schema 26 have only outcome, at and log (done, failed, handed_back).
struct TaskLogRecord {
  int64_t task_id = 0;
  int attempt = 0;
  int64_t job_id = 0;
  std::optional<int64_t> worker_id;
  std::optional<std::string> worker_name;  // when the worker is still known
  std::string outcome;                     // AttemptOutcomeName
  std::string failure_class;               // failed: its class ("" when not recorded)
  std::string message;
  std::optional<bool> charged;  // not recorded before schema 26
  std::vector<int> gpus;
  std::optional<int64_t> started_at_ms, ended_at_ms;
  int64_t at_ms = 0;  // last written
  std::string log;
};

// A bearer token of the HTTP API: who it speaks for and with which role. Only a hash of the
// token is stored; the token itself is shown once, when it is created.
struct ApiTokenRecord {
  int64_t id = 0;
  std::string secret_hash;  // hex SHA-256 of the token text
  std::string user;
  std::string role;  // viewer, submitter, operator, admin
  std::string note;
  int64_t created_at_ms = 0;
  std::optional<int64_t> expires_at_ms;  // none: never
  std::optional<int64_t> revoked_at_ms;
  bool usable(int64_t now_ms) const {
    return !revoked_at_ms && (!expires_at_ms || *expires_at_ms > now_ms);
  }
};

// A worker's enrolled CURVE key: what authenticates it on every connection.
struct WorkerKeyRecord {
  std::string name;
  std::string public_key;  // Z85
  std::optional<int64_t> token_id;
  int64_t enrolled_at_ms = 0;
  std::optional<int64_t> revoked_at_ms;
};

struct FarmSummary {
  std::vector<std::pair<std::string, int64_t>> jobs_by_state;
  TaskCounts tasks;
  std::vector<std::pair<std::string, int64_t>> workers_by_state;
  double cost_today = 0, gpu_seconds_today = 0;  // this UTC day
  double cost_per_hour = 0;                      // what the connected workers cost now
};

// A task that is running on a worker, as needed to tell the worker to stop.
struct Lease {
  int64_t task_id = 0;
  int attempt = 0;
  std::optional<int64_t> worker_id;
};

// A POST that created something, remembered under the Idempotency-Key its client sent, so a
// retry of it (its answer was lost) returns what was created instead of creating it again.
struct IdempotentRequest {
  std::string user;
  std::string key;
  std::string request_hash;  // SHA-256 of method, path and body: the same key, another request
  std::string resource;      // "job", "api_token", "join_token"
  int64_t resource_id = 0;
  int64_t created_at_ms = 0;
};

}  // namespace tessera::store
