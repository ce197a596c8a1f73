// The schema: numbered migrations, tracked with PRAGMA user_version, applied when the store opens.

#include "scheduler/store/sqlite/schema.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/store/database.h"
#include "scheduler/store/sql/rows.h"
#include "scheduler/store/sqlite/sqlite.h"
#include "shared/plugins/plugin_catalog.h"

namespace tessera::store {

namespace {

// Numbered migrations; index i brings the schema from version i to i+1. Never edit a shipped
// migration: append a new one.
const char* const kMigrations[] = {
    // 0 -> 1: the initial schema.
    R"sql(
CREATE TABLE jobs (
  id              INTEGER PRIMARY KEY AUTOINCREMENT,
  name            TEXT    NOT NULL,
  state           TEXT    NOT NULL,
  priority        INTEGER NOT NULL,
  frame_start     INTEGER NOT NULL,
  frame_end       INTEGER NOT NULL,
  chunk_size      INTEGER NOT NULL,
  max_retries     INTEGER NOT NULL,
  job_yaml        TEXT    NOT NULL,
  scene_yaml      TEXT    NOT NULL,
  output_dir      TEXT    NOT NULL,
  output_pattern  TEXT    NOT NULL,
  output_formats  TEXT    NOT NULL,
  tasks_total     INTEGER NOT NULL DEFAULT 0,
  tasks_queued    INTEGER NOT NULL DEFAULT 0,
  tasks_running   INTEGER NOT NULL DEFAULT 0,
  tasks_done      INTEGER NOT NULL DEFAULT 0,
  tasks_failed    INTEGER NOT NULL DEFAULT 0,
  tasks_canceled  INTEGER NOT NULL DEFAULT 0,
  error           TEXT,
  submitted_at    INTEGER NOT NULL,
  started_at      INTEGER,
  finished_at     INTEGER
);
CREATE INDEX jobs_by_state ON jobs(state);
CREATE TABLE workers (
  id             INTEGER PRIMARY KEY AUTOINCREMENT,
  name           TEXT    NOT NULL UNIQUE,
  hostname       TEXT    NOT NULL,
  state          TEXT    NOT NULL,
  cpu_cores      INTEGER NOT NULL,
  ram_mb         INTEGER NOT NULL,
  gpus_json      TEXT    NOT NULL,
  backends_json  TEXT    NOT NULL,
  version        TEXT    NOT NULL,
  registered_at  INTEGER NOT NULL,
  last_seen      INTEGER NOT NULL
);
CREATE TABLE tasks (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id       INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  idx          INTEGER NOT NULL,
  frame_start  INTEGER NOT NULL,
  frame_end    INTEGER NOT NULL,
  state        TEXT    NOT NULL,
  attempt      INTEGER NOT NULL DEFAULT 0,
  failures     INTEGER NOT NULL DEFAULT 0,
  worker_id    INTEGER REFERENCES workers(id) ON DELETE SET NULL,
  progress     REAL    NOT NULL DEFAULT 0,
  message      TEXT    NOT NULL DEFAULT '',
  started_at   INTEGER,
  finished_at  INTEGER,
  UNIQUE (job_id, idx)
);
CREATE INDEX tasks_unfinished ON tasks(state) WHERE state IN ('queued', 'running');
CREATE INDEX tasks_by_worker ON tasks(worker_id) WHERE state = 'running';
CREATE TABLE events (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  at         INTEGER NOT NULL,
  job_id     INTEGER,
  task_id    INTEGER,
  worker_id  INTEGER,
  kind       TEXT NOT NULL,
  message    TEXT NOT NULL
);
CREATE INDEX events_by_job ON events(job_id);
)sql",
    // 1 -> 2: jobs can be paused (queued tasks are held back; running ones finish).
    R"sql(
ALTER TABLE jobs ADD COLUMN paused INTEGER NOT NULL DEFAULT 0;
)sql",
    // 2 -> 3: per-job task timeout and worker blocklist threshold.
    R"sql(
ALTER TABLE jobs ADD COLUMN task_timeout_s INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN blocklist_after INTEGER NOT NULL DEFAULT 3;
)sql",
    // 3 -> 4: job-on-job dependencies (a JSON array of job ids).
    R"sql(
ALTER TABLE jobs ADD COLUMN depends_on TEXT NOT NULL DEFAULT '[]';
)sql",
    // 4 -> 5: named counted limits a job's tasks hold while running (a JSON array of names).
    R"sql(
ALTER TABLE jobs ADD COLUMN limits TEXT NOT NULL DEFAULT '[]';
)sql",
    // 5 -> 6: no-progress timeout.
    R"sql(
ALTER TABLE jobs ADD COLUMN progress_timeout_s INTEGER NOT NULL DEFAULT 0;
)sql",
    // 6 -> 7: pools and tags, on jobs (what they need) and workers (what they offer).
    R"sql(
ALTER TABLE jobs ADD COLUMN pools TEXT NOT NULL DEFAULT '[]';
ALTER TABLE jobs ADD COLUMN tags TEXT NOT NULL DEFAULT '[]';
ALTER TABLE workers ADD COLUMN pools_json TEXT NOT NULL DEFAULT '["default"]';
ALTER TABLE workers ADD COLUMN tags_json TEXT NOT NULL DEFAULT '[]';
)sql",
    // 7 -> 8: per-task resource requirements (a JSON object).
    R"sql(
ALTER TABLE jobs ADD COLUMN resources TEXT NOT NULL DEFAULT '{}';
)sql",
    // 8 -> 9: renderer, fair-share owners, frame-on-frame dependencies, the distinct-worker
    // failure limit, the scheduler's notice on a job (e.g. no worker can run it), the workers
    // each task failed on, and each job's failure count per worker (its blocklist).
    R"sql(
ALTER TABLE jobs ADD COLUMN renderer TEXT NOT NULL DEFAULT 'pathtracer';
ALTER TABLE jobs ADD COLUMN project TEXT NOT NULL DEFAULT 'default';
ALTER TABLE jobs ADD COLUMN user_name TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN frame_depends_on TEXT NOT NULL DEFAULT '[]';
ALTER TABLE jobs ADD COLUMN fail_after_workers INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN notice TEXT;
ALTER TABLE tasks ADD COLUMN failed_on TEXT NOT NULL DEFAULT '[]';
CREATE TABLE job_worker_failures (
  job_id    INTEGER NOT NULL,
  worker_id INTEGER NOT NULL,
  failures  INTEGER NOT NULL,
  PRIMARY KEY (job_id, worker_id)
) WITHOUT ROWID;
)sql",
    // 9 -> 10: the attempts of a running task that are still live (a JSON array): one, or two
    // while a backup copy of a straggler runs beside the original.
    R"sql(
ALTER TABLE tasks ADD COLUMN live_attempts TEXT NOT NULL DEFAULT '[]';
UPDATE tasks SET live_attempts = json_array(attempt) WHERE state = 'running';
)sql",
    // 10 -> 11: nothing looks tasks up by worker, and the index cost every lease two writes.
    R"sql(
DROP INDEX tasks_by_worker;
)sql",
    // 11 -> 12: frames split into tiles and sample parts: each task's part of its frames (a
    // JSON protocol::FramePart; '' = the whole frame) and how many parts make one frame.
    R"sql(
ALTER TABLE tasks ADD COLUMN part TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN parts_per_frame INTEGER NOT NULL DEFAULT 1;
)sql",
    // 12 -> 13: what a worker reports about its machine, shown to people and never queried:
    // {"os", "cpu_model", "cloud": protocol::CloudInfo} as one JSON object.
    R"sql(
ALTER TABLE workers ADD COLUMN details_json TEXT NOT NULL DEFAULT '{}';
)sql",
    // 13 -> 14: CURVE credentials. Join tokens (only their public keys: the token itself is the
    // secret key and is never stored) and each enrolled worker's public key.
    R"sql(
CREATE TABLE join_tokens (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  public_key  TEXT    NOT NULL UNIQUE,
  note        TEXT    NOT NULL DEFAULT '',
  created_at  INTEGER NOT NULL,
  expires_at  INTEGER,
  max_uses    INTEGER NOT NULL DEFAULT 0,
  uses        INTEGER NOT NULL DEFAULT 0,
  revoked_at  INTEGER
);
CREATE TABLE worker_keys (
  name         TEXT    PRIMARY KEY,
  public_key   TEXT    NOT NULL UNIQUE,
  token_id     INTEGER,
  enrolled_at  INTEGER NOT NULL,
  revoked_at   INTEGER
);
)sql",
    // 14 -> 15: bearer tokens of the HTTP API. Only a SHA-256 of each token is stored.
    R"sql(
CREATE TABLE api_tokens (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  secret_hash TEXT    NOT NULL UNIQUE,
  user        TEXT    NOT NULL,
  role        TEXT    NOT NULL,
  note        TEXT    NOT NULL DEFAULT '',
  created_at  INTEGER NOT NULL,
  expires_at  INTEGER,
  revoked_at  INTEGER
);
)sql",
    // 15 -> 16: each task attempt's log (its last protocol::kMaxTaskLogBytes), for `tessera
    // logs` and the dashboard. Deleted with the job.
    R"sql(
CREATE TABLE task_logs (
  task_id    INTEGER NOT NULL,
  attempt    INTEGER NOT NULL,
  job_id     INTEGER NOT NULL,
  worker_id  INTEGER,
  outcome    TEXT    NOT NULL,
  at         INTEGER NOT NULL,
  log        TEXT    NOT NULL,
  PRIMARY KEY (task_id, attempt)
);
CREATE INDEX task_logs_by_job ON task_logs(job_id);
)sql",
    // 16 -> 17: an operator's "no new tasks for this worker", kept across reconnects and
    // restarts until enabled again.
    R"sql(
ALTER TABLE workers ADD COLUMN disabled INTEGER NOT NULL DEFAULT 0;
)sql",
    // 17 -> 18: elastic capacity and cost. Jobs say whether spot nodes may run them and when
    // they must be done; GPU-seconds and money are summed per task, per job and per day; each
    // worker has its price (from its node group or instance type) and what it has cost; and the
    // autoscaler's node requests are kept so a restarted scheduler still knows its machines.
    R"sql(
ALTER TABLE jobs ADD COLUMN interruptible INTEGER NOT NULL DEFAULT 1;
ALTER TABLE jobs ADD COLUMN deadline_ms INTEGER;
ALTER TABLE jobs ADD COLUMN gpu_seconds REAL NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN cost REAL NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN gpu_seconds REAL NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN cost REAL NOT NULL DEFAULT 0;
ALTER TABLE workers ADD COLUMN node_group TEXT NOT NULL DEFAULT '';
ALTER TABLE workers ADD COLUMN price_per_hour REAL NOT NULL DEFAULT 0;
ALTER TABLE workers ADD COLUMN cost REAL NOT NULL DEFAULT 0;
CREATE TABLE cost_days (
  day          TEXT PRIMARY KEY,
  cost         REAL NOT NULL DEFAULT 0,
  gpu_seconds  REAL NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE TABLE autoscaler_nodes (
  id            INTEGER PRIMARY KEY AUTOINCREMENT,
  node_group    TEXT    NOT NULL,
  worker_name   TEXT    NOT NULL,
  provider_id   TEXT    NOT NULL DEFAULT '',
  requested_at  INTEGER NOT NULL,
  draining      INTEGER NOT NULL DEFAULT 0
);
)sql",
    // 18 -> 19: EXR frames in 32-bit float instead of half, per job.
    R"sql(
ALTER TABLE jobs ADD COLUMN exr_float INTEGER NOT NULL DEFAULT 0;
)sql",
    // 19 -> 20: output validation's flags: a frame kept with bad pixels, and why, until it is
    // written clean. Deleted with the job.
    R"sql(
CREATE TABLE frame_flags (
  job_id  INTEGER NOT NULL,
  frame   INTEGER NOT NULL,
  reason  TEXT    NOT NULL,
  at      INTEGER NOT NULL,
  PRIMARY KEY (job_id, frame)
) WITHOUT ROWID;
)sql",
    // 20 -> 21: a job's assets: path -> SHA-256 of a blob in the blob store (JSON map).
    R"sql(
ALTER TABLE jobs ADD COLUMN assets TEXT NOT NULL DEFAULT '{}';
)sql",
    // 21 -> 22: outputs on shared storage, written by the workers themselves.
    R"sql(
ALTER TABLE jobs ADD COLUMN output_shared INTEGER NOT NULL DEFAULT 0;
)sql",
    // 22 -> 23: C++ renderer plugins that workers loaded from outside the build, as the last
    // worker offering each described it (protocol::PluginOffer as JSON), so jobs naming them
    // still parse after a restart, before any worker is back.
    R"sql(
CREATE TABLE native_plugins (
  name        TEXT    PRIMARY KEY,
  offer_json  TEXT    NOT NULL,
  updated_at  INTEGER NOT NULL
) WITHOUT ROWID;
)sql",
    // 23 -> 24: a join token may be made for one worker name ('' = any name without a valid
    // key): only such a token replaces the key a name is enrolled with.
    R"sql(
ALTER TABLE join_tokens ADD COLUMN worker_name TEXT NOT NULL DEFAULT '';
)sql",
    // 24 -> 25: Idempotency-Key of the POSTs that created something, kept a day
    // (store/idempotency.cpp).
    R"sql(
CREATE TABLE idempotent_requests (
  user_name     TEXT    NOT NULL,
  key           TEXT    NOT NULL,
  request_hash  TEXT    NOT NULL,
  resource      TEXT    NOT NULL,
  resource_id   INTEGER NOT NULL,
  created_at    INTEGER NOT NULL,
  PRIMARY KEY (user_name, key)
) WITHOUT ROWID;
CREATE INDEX idempotent_requests_age ON idempotent_requests (created_at);
)sql",
    // 25 -> 26: the attempt history (store/attempts.cpp). Each attempt has a row from its lease's
    // start (outcome 'running') to its one recorded outcome, with the failure's class and
    // message, whether it was charged, its GPUs and when it ran. A task counts every charged
    // failure in failures_total, which a retry does not reset. Older rows keep what they had.
    R"sql(
ALTER TABLE task_logs ADD COLUMN failure_class TEXT;
ALTER TABLE task_logs ADD COLUMN message TEXT;
ALTER TABLE task_logs ADD COLUMN charged INTEGER;
ALTER TABLE task_logs ADD COLUMN gpus TEXT;
ALTER TABLE task_logs ADD COLUMN started_at INTEGER;
ALTER TABLE task_logs ADD COLUMN ended_at INTEGER;
UPDATE task_logs SET outcome = 'handed_back' WHERE outcome = 'handed back';
UPDATE task_logs SET ended_at = at;
CREATE INDEX task_logs_running ON task_logs(task_id) WHERE outcome = 'running';
ALTER TABLE tasks ADD COLUMN failures_total INTEGER NOT NULL DEFAULT 0;
UPDATE tasks SET failures_total = failures;
)sql",
    // 26 -> 27: seconds between a running task's periodic checkpoints (0 = none). Jobs stored
    // before had none.
    R"sql(
ALTER TABLE jobs ADD COLUMN checkpoint_interval_s INTEGER NOT NULL DEFAULT 0;
)sql",
    // 27 -> 28: a plugin job's settings, with the plugin's defaults filled in (a JSON object of
    // strings), and the file name its scene is written under: resolved once from the job file
    // when it is submitted, so nothing parses a stored job file again. Jobs stored before are
    // filled in by BackfillJobSettings.
    R"sql(
ALTER TABLE jobs ADD COLUMN settings TEXT NOT NULL DEFAULT '{}';
ALTER TABLE jobs ADD COLUMN scene_name TEXT NOT NULL DEFAULT '';
)sql",
    // 28 -> 29: jobs with steps (shared/jobs/job_steps.h). The job is a row with renderer 'steps'
    // and
    // no tasks of its own; each step is a job row pointing at it (pipeline_id) with its name and
    // its dependencies on other steps ([{"step", "per_frame"}], shown to people; the broker works
    // from depends_on / frame_depends_on, which hold the steps' job ids). The job's task counters
    // are its steps' together, kept so by a trigger in the same transaction as every change of a
    // step's counters, whichever statement makes it; a second trigger derives the job's state
    // from them as TaskTransitions::RefreshJobState does for a job with tasks, except that a job
    // whose
    // steps all ended, none failed and some canceled is canceled (not done).
    R"sql(
ALTER TABLE jobs ADD COLUMN pipeline_id INTEGER;
ALTER TABLE jobs ADD COLUMN step TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN step_depends_on TEXT NOT NULL DEFAULT '[]';
CREATE INDEX jobs_by_pipeline ON jobs(pipeline_id) WHERE pipeline_id IS NOT NULL;
CREATE TRIGGER step_counts_to_job
AFTER UPDATE OF tasks_queued, tasks_running, tasks_done, tasks_failed, tasks_canceled ON jobs
WHEN NEW.pipeline_id IS NOT NULL
BEGIN
  UPDATE jobs SET
    tasks_queued = tasks_queued + NEW.tasks_queued - OLD.tasks_queued,
    tasks_running = tasks_running + NEW.tasks_running - OLD.tasks_running,
    tasks_done = tasks_done + NEW.tasks_done - OLD.tasks_done,
    tasks_failed = tasks_failed + NEW.tasks_failed - OLD.tasks_failed,
    tasks_canceled = tasks_canceled + NEW.tasks_canceled - OLD.tasks_canceled
  WHERE id = NEW.pipeline_id;
END;
CREATE TRIGGER job_state_from_steps
AFTER UPDATE OF tasks_queued, tasks_running, tasks_done, tasks_failed, tasks_canceled ON jobs
WHEN NEW.renderer = 'steps' AND NEW.state != 'canceled'
BEGIN
  UPDATE jobs SET
    state = CASE
      WHEN tasks_done + tasks_failed + tasks_canceled = tasks_total THEN
        CASE WHEN tasks_failed > 0 THEN 'failed' WHEN tasks_canceled > 0 THEN 'canceled'
             ELSE 'done' END
      WHEN tasks_running + tasks_done + tasks_failed > 0 THEN 'running'
      ELSE 'queued' END,
    started_at = CASE WHEN started_at IS NULL AND tasks_running > 0
      THEN CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) ELSE started_at END,
    finished_at = CASE WHEN tasks_done + tasks_failed + tasks_canceled = tasks_total
      THEN COALESCE(finished_at, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER))
      ELSE NULL END
  WHERE id = NEW.id;
END;
)sql",
    // 29 -> 30: webhooks (scheduler/events/webhooks.h). A job's end is an event in the same
    // transaction as the state change that ends it, whatever statement makes it (a task's last
    // transition, a cancel, a job with steps following its steps): job_done, job_failed,
    // job_canceled, with the job's error. Each webhook receiver keeps the id of the last event it
    // acknowledged, so a restart resends only what was not delivered.
    R"sql(
CREATE TRIGGER job_end_events
AFTER UPDATE OF state ON jobs
WHEN NEW.state != OLD.state AND NEW.state IN ('done', 'failed', 'canceled')
BEGIN
  INSERT INTO events (at, job_id, kind, message) VALUES (
    CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER), NEW.id, 'job_' || NEW.state,
    COALESCE(NEW.error, ''));
END;
CREATE TABLE webhook_cursors (
  receiver       TEXT    PRIMARY KEY,
  last_event_id  INTEGER NOT NULL
) WITHOUT ROWID;
)sql",
    // 30 -> 31: a job's failure_policy (shared/jobs/job_file.h FailurePolicy, JSON): what a failed
    // attempt of a class a renderer names leads to. Jobs stored before get the defaults.
    R"sql(
ALTER TABLE jobs ADD COLUMN failure_policy TEXT NOT NULL DEFAULT '{}';
)sql",
    // 31 -> 32: a task's status line, what its program last said it does (OpenJD's
    // openjd_status; "frame N" while a renderer renders one). Cleared when an attempt starts.
    R"sql(
ALTER TABLE tasks ADD COLUMN status_line TEXT NOT NULL DEFAULT '';
)sql",
};
constexpr int kMigrationCount = sizeof(kMigrations) / sizeof(kMigrations[0]);
static_assert(kMigrationCount == kSqliteSchemaVersion);

// A C++ plugin's jobs parse only against the declaration a worker offered; the broker adopts the
// stored offers when it starts, after the migrations, so the backfill adopts them first.
void AdoptStoredNativePlugins(Db& db) {
  StatusOr<Stmt> q = db.Prepare("SELECT offer_json FROM native_plugins");
  if (!q.ok()) return;
  for (StatusOr<bool> row = q->Step(); row.ok() && *row; row = q->Step()) {
    const nlohmann::json j = nlohmann::json::parse(q->Text(0), nullptr, false);
    protocol::PluginOffer offer;
    try {
      offer = j.get<protocol::PluginOffer>();
    } catch (const nlohmann::json::exception&) {
      continue;  // a row from a future version of the offer
    }
    const std::vector<std::string>& caps = offer.capabilities;
    StatusOr<plugin::PluginSpec> spec = plugin::NativePluginSpec(
        offer.name, offer.description, std::count(caps.begin(), caps.end(), "tiles") > 0,
        std::count(caps.begin(), caps.end(), "sample_parts") > 0, offer.declaration);
    if (spec.ok()) (void)plugin::RegisterNativePlugin(std::move(spec).value());
  }
}

// 27 -> 28: every stored plugin job's settings and scene file name, from its job file parsed this
// once. A job file that no longer parses leaves them empty, with a warning: its tasks then fail on
// the worker with a message naming the setting.
Status BackfillJobSettings(Db& db) {
  AdoptStoredNativePlugins(db);
  std::vector<std::pair<int64_t, std::string>> jobs;
  {
    TSR_ASSIGN_OR_RETURN(Stmt q, db.Prepare("SELECT id, job_yaml FROM jobs WHERE renderer NOT IN "
                                            "('pathtracer', 'noop')"));
    for (;;) {
      TSR_ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      jobs.emplace_back(q.Int(0), q.Text(1));
    }
  }
  for (const auto& [id, yaml] : jobs) {
    StatusOr<spec::JobSpec> parsed = spec::ParseJobYaml(yaml);
    if (!parsed.ok()) {
      spdlog::warn("job {}: stored job file no longer parses: {}", id, parsed.status().message());
      continue;
    }
    const PluginFiles files = ResolvePluginFiles(*parsed);
    TSR_ASSIGN_OR_RETURN(Stmt u, db.Prepare("UPDATE jobs SET settings = ?1, scene_name = ?2 "
                                            "WHERE id = ?3"));
    TSR_RETURN_IF_ERROR(u.Bind(1, files.settings_json).Bind(2, files.scene_name).Bind(3, id).Run());
  }
  return Status::Ok();
}

// What a migration runs in C++ after its SQL, in the same transaction, by the version it brings
// the schema to.
struct Backfill {
  int version;
  Status (*run)(Db&);
};
constexpr Backfill kBackfills[] = {{28, &BackfillJobSettings}};

}  // namespace

StatusOr<int> MigrateSchema(Database& db) {
  Database::WriteLock lock(db);
  Db& writer = *db.sqlite_writer();
  int version = 0;
  {  // reset before migrating: a schema change needs no statement left running
    TSR_ASSIGN_OR_RETURN(Stmt v, writer.Prepare("PRAGMA user_version"));
    TSR_ASSIGN_OR_RETURN(bool row, v.Step());
    if (row) version = static_cast<int>(v.Int(0));
  }
  if (version > kSqliteSchemaVersion) {
    return Status::FailedPrecondition("database schema version " + std::to_string(version) +
                                      " is newer than this scheduler supports (" +
                                      std::to_string(kSqliteSchemaVersion) + "); upgrade Tessera");
  }
  for (; version < kSqliteSchemaVersion; ++version) {
    Transaction tx(writer);
    TSR_RETURN_IF_ERROR(tx.begin_status());
    TSR_RETURN_IF_ERROR(writer.Exec(kMigrations[version]));
    for (const Backfill& b : kBackfills) {
      if (b.version == version + 1) TSR_RETURN_IF_ERROR(b.run(writer));
    }
    TSR_RETURN_IF_ERROR(writer.Exec("PRAGMA user_version = " + std::to_string(version + 1)));
    TSR_RETURN_IF_ERROR(tx.Commit());
  }
  return version;
}

}  // namespace tessera::store
