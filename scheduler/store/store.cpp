#include "scheduler/store/store.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

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
};
constexpr int kMigrationCount = sizeof(kMigrations) / sizeof(kMigrations[0]);
static_assert(kMigrationCount == Store::kSchemaVersion);

template <typename E, size_t N>
StatusOr<E> ParseEnum(const std::string& text, const char* const (&names)[N]) {
  for (size_t i = 0; i < N; ++i) {
    if (text == names[i]) return static_cast<E>(i);
  }
  return Status::Internal("unknown state '" + text + "' in database");
}

const char* const kJobStates[] = {"queued", "running", "done", "failed", "canceled"};
const char* const kTaskStates[] = {"queued", "running", "done", "failed", "canceled"};
const char* const kWorkerStates[] = {"idle", "busy", "offline"};

const char* kJobColumns =
    "id, name, state, priority, frame_start, frame_end, chunk_size, max_retries, output_dir, "
    "output_pattern, output_formats, tasks_total, tasks_queued, tasks_running, tasks_done, "
    "tasks_failed, tasks_canceled, error, submitted_at, started_at, finished_at, paused, "
    "task_timeout_s, blocklist_after, depends_on, limits, progress_timeout_s, pools, tags, "
    "resources, renderer, project, user_name, frame_depends_on, fail_after_workers, notice, "
    "parts_per_frame, interruptible, deadline_ms, gpu_seconds, cost, exr_float, assets, "
    "output_shared, checkpoint_interval_s";

StatusOr<JobRecord> ReadJob(const Stmt& s) {
  JobRecord j;
  j.id = s.Int(0);
  j.name = s.Text(1);
  TSR_ASSIGN_OR_RETURN(j.state, ParseEnum<JobState>(s.Text(2), kJobStates));
  j.priority = static_cast<int>(s.Int(3));
  j.frame_start = static_cast<int>(s.Int(4));
  j.frame_end = static_cast<int>(s.Int(5));
  j.chunk_size = static_cast<int>(s.Int(6));
  j.max_retries = static_cast<int>(s.Int(7));
  j.output_dir = s.Text(8);
  j.output_pattern = s.Text(9);
  j.output_formats = nlohmann::json::parse(s.Text(10)).get<std::vector<std::string>>();
  j.tasks = {s.Int(11), s.Int(12), s.Int(13), s.Int(14), s.Int(15), s.Int(16)};
  if (!s.IsNull(17)) j.error = s.Text(17);
  j.submitted_at_ms = s.Int(18);
  j.started_at_ms = s.OptInt(19);
  j.finished_at_ms = s.OptInt(20);
  j.paused = s.Int(21) != 0;
  j.task_timeout_s = static_cast<int>(s.Int(22));
  j.blocklist_after = static_cast<int>(s.Int(23));
  j.depends_on = nlohmann::json::parse(s.Text(24)).get<std::vector<int64_t>>();
  j.limits = nlohmann::json::parse(s.Text(25)).get<std::vector<std::string>>();
  j.progress_timeout_s = static_cast<int>(s.Int(26));
  j.pools = nlohmann::json::parse(s.Text(27)).get<std::vector<std::string>>();
  j.tags = nlohmann::json::parse(s.Text(28)).get<std::vector<std::string>>();
  j.resources = nlohmann::json::parse(s.Text(29)).get<spec::ResourceSpec>();
  j.renderer = s.Text(30);
  j.project = s.Text(31);
  j.user = s.Text(32);
  j.frame_depends_on = nlohmann::json::parse(s.Text(33)).get<std::vector<int64_t>>();
  j.fail_after_workers = static_cast<int>(s.Int(34));
  if (!s.IsNull(35)) j.notice = s.Text(35);
  j.parts_per_frame = static_cast<int>(s.Int(36));
  j.interruptible = s.Int(37) != 0;
  j.deadline_ms = s.OptInt(38);
  j.gpu_seconds = s.Double(39);
  j.cost = s.Double(40);
  j.exr_float = s.Int(41) != 0;
  j.assets = nlohmann::json::parse(s.Text(42)).get<std::map<std::string, std::string>>();
  j.output_shared = s.Int(43) != 0;
  j.checkpoint_interval_s = static_cast<int>(s.Int(44));
  return j;
}

const char* kTaskColumns =
    "t.id, t.job_id, t.idx, t.frame_start, t.frame_end, t.state, t.attempt, t.failures, "
    "t.worker_id, w.name, t.progress, t.message, t.started_at, t.finished_at, t.failed_on, t.part, "
    "t.gpu_seconds, t.cost, t.failures_total";

StatusOr<TaskRecord> ReadTask(const Stmt& s) {
  TaskRecord t;
  t.id = s.Int(0);
  t.job_id = s.Int(1);
  t.index = static_cast<int>(s.Int(2));
  t.frame_start = static_cast<int>(s.Int(3));
  t.frame_end = static_cast<int>(s.Int(4));
  TSR_ASSIGN_OR_RETURN(t.state, ParseEnum<TaskState>(s.Text(5), kTaskStates));
  t.attempt = static_cast<int>(s.Int(6));
  t.failures = static_cast<int>(s.Int(7));
  t.worker_id = s.OptInt(8);
  if (!s.IsNull(9)) t.worker_name = s.Text(9);
  t.progress = s.Double(10);
  t.message = s.Text(11);
  t.started_at_ms = s.OptInt(12);
  t.finished_at_ms = s.OptInt(13);
  t.failed_on = nlohmann::json::parse(s.Text(14)).get<std::vector<int64_t>>();
  if (const std::string part = s.Text(15); !part.empty()) {
    t.part = nlohmann::json::parse(part).get<protocol::FramePart>();
  }
  t.gpu_seconds = s.Double(16);
  t.cost = s.Double(17);
  t.failures_total = static_cast<int>(s.Int(18));
  return t;
}

// Steps `s` to the end, converting every row with `read`.
template <typename T>
StatusOr<std::vector<T>> CollectRows(Stmt& s, StatusOr<T> (*read)(const Stmt&)) {
  std::vector<T> out;
  for (;;) {
    TSR_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return out;
    TSR_ASSIGN_OR_RETURN(T value, read(s));
    out.push_back(std::move(value));
  }
}

}  // namespace

const char* JobStateName(JobState s) { return kJobStates[static_cast<int>(s)]; }
const char* TaskStateName(TaskState s) { return kTaskStates[static_cast<int>(s)]; }
const char* WorkerStateName(WorkerState s) { return kWorkerStates[static_cast<int>(s)]; }
bool IsTerminal(TaskState s) {
  return s == TaskState::kDone || s == TaskState::kFailed || s == TaskState::kCanceled;
}

// ---- reader pool ------------------------------------------------------------------------------

// A read connection for one call: one from the pool, or -- for the thread inside a WriteGroup,
// which must see its own uncommitted writes -- the writer itself (that thread holds its lock).
StatusOr<Store::Reader> Store::BorrowReader() {
  if (InGroup()) {
    EnterGroupTransaction();  // the group's thread reads its own writes
    return Reader(writer_.get());
  }
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (!readers_.empty()) {
      auto db = std::move(readers_.back());
      readers_.pop_back();
      return Reader(this, std::move(db));
    }
  }
  TSR_ASSIGN_OR_RETURN(auto db, Db::Open(path_, /*read_only=*/true));
  return Reader(this, std::move(db));
}

void Store::ReturnReader(std::unique_ptr<Db> db) {
  std::lock_guard<std::mutex> lock(pool_mu_);
  if (readers_.size() < 16) readers_.push_back(std::move(db));
}

// ---- open & migrate ---------------------------------------------------------------------------

Store::Store(std::string path, std::unique_ptr<Db> writer)
    : path_(std::move(path)), writer_(std::move(writer)) {}

std::string Store::data_dir() const { return std::filesystem::path(path_).parent_path().string(); }

Store::~Store() {
  {
    std::lock_guard<std::mutex> lock(checkpoint_mu_);
    stopping_ = true;
  }
  checkpoint_cv_.notify_all();
  if (checkpointer_.joinable()) checkpointer_.join();
}

Status Store::StartCheckpointer(const std::string& synchronous) {
  // The writer never checkpoints (that fsyncs, and would stall the broker's pass); a connection
  // of its own copies the WAL back into the database in the background. PASSIVE never blocks
  // the writer or readers.
  TSR_RETURN_IF_ERROR(writer_->Exec("PRAGMA wal_autocheckpoint=0"));
  TSR_ASSIGN_OR_RETURN(std::shared_ptr<Db> db, Db::Open(path_, /*read_only=*/false, synchronous));
  checkpointer_ = std::thread([this, db] {
    std::unique_lock<std::mutex> lock(checkpoint_mu_);
    while (!checkpoint_cv_.wait_for(lock, std::chrono::milliseconds(250),
                                    [this] { return stopping_; })) {
      lock.unlock();
      (void)db->Exec("PRAGMA wal_checkpoint(PASSIVE)");
      lock.lock();
    }
  });
  return Status::Ok();
}

StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& data_dir,
                                             const std::string& synchronous) {
  std::error_code ec;
  std::filesystem::create_directories(data_dir, ec);
  if (ec) return Status::Internal("cannot create data directory " + data_dir + ": " + ec.message());
  std::string path = (std::filesystem::path(data_dir) / "tessera.db").string();
  // The database holds job files, token hashes and keys: the scheduler's user's alone. SQLite
  // creates a new file 0644 (less the umask) and gives its -wal and -shm the database file's
  // mode, so the file is made 0600 before SQLite opens it (an older one is tightened too).
  for (const char* suffix : {"", "-wal", "-shm"}) {
    const std::string file = path + suffix;
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | (*suffix ? 0 : O_CREAT), 0600);
    if (fd < 0) continue;  // (-wal, -shm: not there yet)
    const int error = ::fchmod(fd, 0600) == 0 ? 0 : errno;
    ::close(fd);
    if (error != 0) {  // another user's file that we may write: say so, and carry on
      spdlog::warn("cannot make {} private (mode 0600): {}", file, std::strerror(error));
    }
  }
  TSR_ASSIGN_OR_RETURN(auto writer, Db::Open(path, /*read_only=*/false, synchronous));
  std::unique_ptr<Store> store(new Store(path, std::move(writer)));
  TSR_RETURN_IF_ERROR(store->Migrate());
  TSR_RETURN_IF_ERROR(store->LoadAttemptCounts());
  TSR_RETURN_IF_ERROR(store->StartCheckpointer(synchronous));
  return store;
}

Status Store::Migrate() {
  WriteLock lock(*this);
  int version = 0;
  {  // reset before migrating: a schema change needs no statement left running
    TSR_ASSIGN_OR_RETURN(Stmt v, writer_->Prepare("PRAGMA user_version"));
    TSR_ASSIGN_OR_RETURN(bool row, v.Step());
    if (row) version = static_cast<int>(v.Int(0));
  }
  if (version > kSchemaVersion) {
    return Status::FailedPrecondition("database schema version " + std::to_string(version) +
                                      " is newer than this scheduler supports (" +
                                      std::to_string(kSchemaVersion) + "); upgrade Tessera");
  }
  for (; version < kSchemaVersion; ++version) {
    Transaction tx(*writer_);
    TSR_RETURN_IF_ERROR(tx.begin_status());
    TSR_RETURN_IF_ERROR(writer_->Exec(kMigrations[version]));
    TSR_RETURN_IF_ERROR(writer_->Exec("PRAGMA user_version = " + std::to_string(version + 1)));
    TSR_RETURN_IF_ERROR(tx.Commit());
  }
  schema_version_ = version;
  return Status::Ok();
}

// ---- jobs -------------------------------------------------------------------------------------

StatusOr<JobRecord> Store::CreateJob(
    const spec::JobSpec& spec, const std::string& job_yaml,
    const std::function<StatusOr<std::string>(int64_t)>& output_dir_for,
    const IdempotentRequest* request) {
  std::vector<spec::FrameChunk> chunks = spec::ExpandFrames(spec);
  int64_t job_id = 0;
  {
    WriteLock lock(*this);
    Transaction tx(*writer_);
    TSR_RETURN_IF_ERROR(tx.begin_status());
    int64_t now = NowMs();
    TSR_ASSIGN_OR_RETURN(
        Stmt ins, writer_->Prepare(
                      "INSERT INTO jobs (name, state, priority, frame_start, frame_end, "
                      "chunk_size, max_retries, job_yaml, scene_yaml, output_dir, output_pattern, "
                      "output_formats, tasks_total, tasks_queued, submitted_at, task_timeout_s, "
                      "blocklist_after, depends_on, limits, progress_timeout_s, pools, tags, "
                      "resources, renderer, project, user_name, frame_depends_on, "
                      "fail_after_workers, parts_per_frame, interruptible, deadline_ms, exr_float, "
                      "assets, output_shared, checkpoint_interval_s) "
                      "VALUES (?, 'queued', ?, ?, ?, ?, ?, ?, ?, '', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                      "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
    ins.Bind(1, spec.name).Bind(2, spec.priority).Bind(3, spec.frame_start).Bind(4, spec.frame_end);
    ins.Bind(5, spec.chunk_size).Bind(6, spec.max_retries).Bind(7, job_yaml);
    ins.Bind(8, spec.scene_yaml).Bind(9, spec::EffectivePattern(spec));
    ins.Bind(10, nlohmann::json(spec.output.formats).dump());
    // Every chunk of frames times every part of a frame (one part, the whole frame, unless split).
    const std::vector<protocol::FramePart> parts =
        spec.parts.empty() ? std::vector<protocol::FramePart>{protocol::FramePart{}} : spec.parts;
    const auto task_count = static_cast<int64_t>(chunks.size() * parts.size());
    ins.Bind(11, task_count).Bind(12, task_count);
    ins.Bind(13, now).Bind(14, spec.task_timeout).Bind(15, spec.blocklist_after);
    ins.Bind(16, nlohmann::json(spec.depends_on).dump());
    ins.Bind(17, nlohmann::json(spec.limits).dump()).Bind(18, spec.progress_timeout);
    ins.Bind(19, nlohmann::json(spec.pools).dump()).Bind(20, nlohmann::json(spec.tags).dump());
    ins.Bind(21, nlohmann::json(spec.resources).dump()).Bind(22, spec.renderer);
    ins.Bind(23, spec.project).Bind(24, spec.user.empty() ? "unknown" : spec.user);
    ins.Bind(25, nlohmann::json(spec.frame_depends_on).dump()).Bind(26, spec.fail_after_workers);
    ins.Bind(27, static_cast<int64_t>(parts.size())).Bind(28, spec.interruptible ? 1 : 0);
    if (spec.deadline_ms) ins.Bind(29, *spec.deadline_ms);
    ins.Bind(30, spec.output.exr_float ? 1 : 0);
    ins.Bind(31, nlohmann::json(spec.assets).dump());
    ins.Bind(32, spec.output.shared_dir.empty() ? 0 : 1);
    ins.Bind(33, spec.checkpoint_interval_s);
    TSR_RETURN_IF_ERROR(ins.Run());
    job_id = writer_->LastInsertId();

    if (request != nullptr) {
      IdempotentRequest made = *request;
      made.resource = "job";
      made.resource_id = job_id;
      TSR_RETURN_IF_ERROR(InsertIdempotentRequest(*writer_, made));
    }
    TSR_ASSIGN_OR_RETURN(std::string output_dir, output_dir_for(job_id));
    TSR_ASSIGN_OR_RETURN(Stmt upd, writer_->Prepare("UPDATE jobs SET output_dir = ? WHERE id = ?"));
    TSR_RETURN_IF_ERROR(upd.Bind(1, output_dir).Bind(2, job_id).Run());

    std::vector<std::string> part_json;
    for (const protocol::FramePart& part : parts) {
      part_json.push_back(part.whole() ? "" : nlohmann::json(part).dump());
    }
    int64_t index = 0;
    for (const spec::FrameChunk& c : chunks) {
      for (const std::string& part : part_json) {
        TSR_ASSIGN_OR_RETURN(
            Stmt task, writer_->Prepare("INSERT INTO tasks (job_id, idx, frame_start, frame_end, "
                                        "part, state) VALUES (?, ?, ?, ?, ?, 'queued')"));
        TSR_RETURN_IF_ERROR(task.Bind(1, job_id)
                                .Bind(2, index++)
                                .Bind(3, c.frame_start)
                                .Bind(4, c.frame_end)
                                .Bind(5, part)
                                .Run());
      }
    }
    TSR_ASSIGN_OR_RETURN(Stmt ev, writer_->Prepare("INSERT INTO events (at, job_id, kind, message) "
                                                   "VALUES (?, ?, 'job_submitted', ?)"));
    TSR_RETURN_IF_ERROR(
        ev.Bind(1, now).Bind(2, job_id).Bind(3, std::to_string(task_count) + " tasks").Run());
    TSR_RETURN_IF_ERROR(tx.Commit());
  }
  return GetJob(job_id);
}

StatusOr<std::vector<Lease>> Store::CancelJob(int64_t job_id) {
  WriteLock lock(*this);
  Transaction tx(*writer_);
  TSR_RETURN_IF_ERROR(tx.begin_status());
  TSR_ASSIGN_OR_RETURN(Stmt q, writer_->Prepare("SELECT state FROM jobs WHERE id = ?"));
  q.Bind(1, job_id);
  TSR_ASSIGN_OR_RETURN(bool found, q.Step());
  if (!found) return Status::NotFound("job " + std::to_string(job_id) + " does not exist");
  TSR_ASSIGN_OR_RETURN(JobState state, ParseEnum<JobState>(q.Text(0), kJobStates));
  if (state != JobState::kQueued && state != JobState::kRunning) {
    return Status::FailedPrecondition("job " + std::to_string(job_id) + " is already " +
                                      JobStateName(state));
  }
  std::vector<Lease> leases;
  TSR_ASSIGN_OR_RETURN(Stmt run, writer_->Prepare("SELECT id, attempt, worker_id FROM tasks "
                                                  "WHERE job_id = ? AND state = 'running'"));
  run.Bind(1, job_id);
  for (;;) {
    TSR_ASSIGN_OR_RETURN(bool row, run.Step());
    if (!row) break;
    leases.push_back({run.Int(0), static_cast<int>(run.Int(1)), run.OptInt(2)});
  }
  int64_t now = NowMs();
  TSR_ASSIGN_OR_RETURN(Stmt upd,
                       writer_->Prepare("UPDATE tasks SET state = 'canceled', finished_at = ? "
                                        "WHERE job_id = ? AND state IN ('queued', 'running')"));
  TSR_RETURN_IF_ERROR(upd.Bind(1, now).Bind(2, job_id).Run());
  TSR_ASSIGN_OR_RETURN(Stmt job,
                       writer_->Prepare("UPDATE jobs SET state = 'canceled', finished_at = ?, "
                                        "tasks_canceled = tasks_canceled + tasks_queued + "
                                        "tasks_running, tasks_queued = 0, tasks_running = 0 "
                                        "WHERE id = ?"));
  TSR_RETURN_IF_ERROR(job.Bind(1, now).Bind(2, job_id).Run());
  TSR_ASSIGN_OR_RETURN(Stmt ev, writer_->Prepare("INSERT INTO events (at, job_id, kind, message) "
                                                 "VALUES (?, ?, 'job_canceled', '')"));
  TSR_RETURN_IF_ERROR(ev.Bind(1, now).Bind(2, job_id).Run());
  AttemptEnd canceled;
  canceled.outcome = AttemptOutcome::kCanceled;
  canceled.message = "the job was canceled";
  TSR_RETURN_IF_ERROR(CloseAttemptsWhere("job_id = ?1", job_id, 0, canceled));
  Status committed = tx.Commit();
  if (!InGroup()) SettleAttemptCounts(committed.ok());
  TSR_RETURN_IF_ERROR(committed);
  return leases;
}

StatusOr<JobState> Store::JobStateForUpdate(int64_t job_id) {
  TSR_ASSIGN_OR_RETURN(Stmt q, writer_->Prepare("SELECT state FROM jobs WHERE id = ?"));
  q.Bind(1, job_id);
  TSR_ASSIGN_OR_RETURN(bool found, q.Step());
  if (!found) return Status::NotFound("job " + std::to_string(job_id) + " does not exist");
  return ParseEnum<JobState>(q.Text(0), kJobStates);
}

namespace {
Status RequireUnfinished(int64_t job_id, JobState state) {
  if (state == JobState::kQueued || state == JobState::kRunning) return Status::Ok();
  return Status::FailedPrecondition("job " + std::to_string(job_id) + " is already " +
                                    JobStateName(state));
}
}  // namespace

Status Store::SetJobPriority(int64_t job_id, int priority) {
  if (priority < 0 || priority > 100) {
    return Status::InvalidArgument("priority: must be in [0, 100], got " +
                                   std::to_string(priority));
  }
  WriteLock lock(*this);
  return InWriteTx(*writer_, [&]() -> Status {
    TSR_ASSIGN_OR_RETURN(JobState state, JobStateForUpdate(job_id));
    TSR_RETURN_IF_ERROR(RequireUnfinished(job_id, state));
    TSR_ASSIGN_OR_RETURN(Stmt s, writer_->Prepare("UPDATE jobs SET priority = ? WHERE id = ?"));
    return s.Bind(1, priority).Bind(2, job_id).Run();
  });
}

Status Store::SetJobPaused(int64_t job_id, bool paused) {
  WriteLock lock(*this);
  return InWriteTx(*writer_, [&]() -> Status {
    TSR_ASSIGN_OR_RETURN(JobState state, JobStateForUpdate(job_id));
    TSR_RETURN_IF_ERROR(RequireUnfinished(job_id, state));
    TSR_ASSIGN_OR_RETURN(Stmt s, writer_->Prepare("UPDATE jobs SET paused = ? WHERE id = ?"));
    TSR_RETURN_IF_ERROR(s.Bind(1, paused ? 1 : 0).Bind(2, job_id).Run());
    TSR_ASSIGN_OR_RETURN(Stmt ev, writer_->Prepare("INSERT INTO events (at, job_id, kind, message) "
                                                   "VALUES (?, ?, ?, '')"));
    return ev.Bind(1, NowMs()).Bind(2, job_id).Bind(3, paused ? "job_paused" : "job_resumed").Run();
  });
}

StatusOr<int> Store::RequeueFinished(int64_t job_id, const std::string& task_filter, int first,
                                     int last) {
  TSR_ASSIGN_OR_RETURN(JobState state, JobStateForUpdate(job_id));
  if (state == JobState::kCanceled) {
    return Status::FailedPrecondition("job " + std::to_string(job_id) + " is canceled");
  }
  const std::string where =
      "job_id = ?1 AND " + task_filter + " AND frame_end >= ?2 AND frame_start <= ?3";
  // Counters first, from the rows about to move.
  TSR_ASSIGN_OR_RETURN(Stmt count, writer_->Prepare("SELECT count(*), total(state = 'done'), "
                                                    "total(state = 'failed') FROM tasks WHERE " +
                                                    where));
  count.Bind(1, job_id).Bind(2, first).Bind(3, last);
  TSR_ASSIGN_OR_RETURN(bool row, count.Step());
  const int moved = row ? static_cast<int>(count.Int(0)) : 0;
  if (moved == 0) return 0;
  const int64_t done = static_cast<int64_t>(count.Double(1));
  const int64_t failed = static_cast<int64_t>(count.Double(2));
  TSR_ASSIGN_OR_RETURN(Stmt upd,
                       writer_->Prepare("UPDATE tasks SET state = 'queued', failures = 0, "
                                        "progress = 0, worker_id = NULL, finished_at = NULL, "
                                        "message = 'requeued by request' WHERE " +
                                        where));
  TSR_RETURN_IF_ERROR(upd.Bind(1, job_id).Bind(2, first).Bind(3, last).Run());
  TSR_ASSIGN_OR_RETURN(
      Stmt job, writer_->Prepare("UPDATE jobs SET tasks_done = tasks_done - ?, "
                                 "tasks_failed = tasks_failed - ?, "
                                 "tasks_queued = tasks_queued + ?, error = CASE WHEN "
                                 "tasks_failed - ? = 0 THEN NULL ELSE error END WHERE id = ?"));
  TSR_RETURN_IF_ERROR(
      job.Bind(1, done).Bind(2, failed).Bind(3, moved).Bind(4, failed).Bind(5, job_id).Run());
  TSR_RETURN_IF_ERROR(RefreshJobState(job_id));
  return moved;
}

StatusOr<int> Store::RetryFailedTasks(int64_t job_id) {
  WriteLock lock(*this);
  Transaction tx(*writer_);
  TSR_RETURN_IF_ERROR(tx.begin_status());
  TSR_ASSIGN_OR_RETURN(
      int moved, RequeueFinished(job_id, "state = 'failed'", spec::kMinFrame, spec::kMaxFrame));
  TSR_RETURN_IF_ERROR(tx.Commit());
  return moved;
}

StatusOr<int> Store::RerenderFrames(int64_t job_id, int first, int last) {
  if (first > last) {
    return Status::InvalidArgument("frames: start " + std::to_string(first) + " is after end " +
                                   std::to_string(last));
  }
  WriteLock lock(*this);
  Transaction tx(*writer_);
  TSR_RETURN_IF_ERROR(tx.begin_status());
  TSR_ASSIGN_OR_RETURN(int moved,
                       RequeueFinished(job_id, "state IN ('done', 'failed')", first, last));
  TSR_RETURN_IF_ERROR(tx.Commit());
  return moved;
}

Status Store::DeleteJob(int64_t job_id) {
  WriteLock lock(*this);
  return InWriteTx(*writer_, [&]() -> Status {
    TSR_ASSIGN_OR_RETURN(JobState state, JobStateForUpdate(job_id));
    if (state == JobState::kQueued || state == JobState::kRunning) {
      return Status::FailedPrecondition("job " + std::to_string(job_id) + " is " +
                                        JobStateName(state) + "; cancel it before deleting it");
    }
    for (const char* sql :
         {"DELETE FROM events WHERE job_id = ?", "DELETE FROM task_logs WHERE job_id = ?",
          "DELETE FROM frame_flags WHERE job_id = ?", "DELETE FROM tasks WHERE job_id = ?",
          "DELETE FROM job_worker_failures WHERE job_id = ?", "DELETE FROM jobs WHERE id = ?"}) {
      TSR_ASSIGN_OR_RETURN(Stmt s, writer_->Prepare(sql));
      TSR_RETURN_IF_ERROR(s.Bind(1, job_id).Run());
    }
    return Status::Ok();
  });
}

// ---- tasks ------------------------------------------------------------------------------------

StatusOr<std::vector<TaskRecord>> Store::LoadUnfinishedTasks(std::optional<int64_t> job_id,
                                                             bool requeue_running) {
  WriteLock lock(*this);
  std::set<int64_t> interrupted;
  if (!job_id && !requeue_running) {
    TSR_ASSIGN_OR_RETURN(Stmt r, writer_->Prepare("SELECT id FROM tasks WHERE state = 'running'"));
    for (;;) {
      TSR_ASSIGN_OR_RETURN(bool row, r.Step());
      if (!row) break;
      interrupted.insert(r.Int(0));
    }
  } else if (!job_id) {
    // Leases do not survive a restart: running tasks go back to the queue, uncharged (their
    // workers may re-attach them; see ReattachTask).
    Transaction tx(*writer_);
    TSR_RETURN_IF_ERROR(tx.begin_status());
    TSR_ASSIGN_OR_RETURN(Stmt r, writer_->Prepare("SELECT id FROM tasks WHERE state = 'running'"));
    for (;;) {
      TSR_ASSIGN_OR_RETURN(bool row, r.Step());
      if (!row) break;
      interrupted.insert(r.Int(0));
    }
    TSR_RETURN_IF_ERROR(CloseStaleAttempts());
    TSR_RETURN_IF_ERROR(writer_->Exec(
        "UPDATE jobs SET tasks_queued = tasks_queued + tasks_running, tasks_running = 0 "
        "WHERE tasks_running > 0"));
    TSR_RETURN_IF_ERROR(
        writer_->Exec("UPDATE tasks SET state = 'queued', worker_id = NULL, progress = 0, "
                      "live_attempts = '[]', message = 'requeued: scheduler restarted' "
                      "WHERE state = 'running'"));
    Status committed = tx.Commit();
    if (!InGroup()) SettleAttemptCounts(committed.ok());
    TSR_RETURN_IF_ERROR(committed);
  }
  std::string sql = std::string("SELECT ") + kTaskColumns +
                    " FROM tasks t LEFT JOIN workers w ON w.id = t.worker_id "
                    "WHERE t.state IN ('queued', 'running')" +
                    (job_id ? " AND t.job_id = ?" : "") + " ORDER BY t.job_id, t.idx";
  TSR_ASSIGN_OR_RETURN(Stmt s, writer_->Prepare(sql));
  if (job_id) s.Bind(1, *job_id);
  TSR_ASSIGN_OR_RETURN(std::vector<TaskRecord> tasks, CollectRows(s, &ReadTask));
  for (TaskRecord& t : tasks) t.interrupted = interrupted.count(t.id) > 0;
  return tasks;
}

StatusOr<std::string> Store::JobScene(int64_t job_id) {
  TSR_ASSIGN_OR_RETURN(Reader r, BorrowReader());
  TSR_ASSIGN_OR_RETURN(Stmt s, r->Prepare("SELECT scene_yaml FROM jobs WHERE id = ?"));
  s.Bind(1, job_id);
  TSR_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return Status::NotFound("job " + std::to_string(job_id) + " does not exist");
  return s.Text(0);
}

StatusOr<std::string> Store::JobYaml(int64_t job_id) {
  TSR_ASSIGN_OR_RETURN(Reader r, BorrowReader());
  TSR_ASSIGN_OR_RETURN(Stmt s, r->Prepare("SELECT job_yaml FROM jobs WHERE id = ?"));
  s.Bind(1, job_id);
  TSR_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return Status::NotFound("job " + std::to_string(job_id) + " does not exist");
  return s.Text(0);
}

StatusOr<Store::TaskFence> Store::ReadFence(int64_t task_id) {
  TSR_ASSIGN_OR_RETURN(Stmt q, writer_->Prepare("SELECT state, attempt, job_id, live_attempts "
                                                "FROM tasks WHERE id = ?"));
  q.Bind(1, task_id);
  TSR_ASSIGN_OR_RETURN(bool found, q.Step());
  if (!found) return Status::NotFound("task " + std::to_string(task_id) + " does not exist");
  TaskFence f;
  TSR_ASSIGN_OR_RETURN(f.state, ParseEnum<TaskState>(q.Text(0), kTaskStates));
  f.attempt = static_cast<int>(q.Int(1));
  f.job_id = q.Int(2);
  f.live = nlohmann::json::parse(q.Text(3)).get<std::vector<int>>();
  return f;
}

Status Store::StaleAttempt(int64_t task_id, int attempt, const TaskFence& f) {
  return Status::FailedPrecondition("task " + std::to_string(task_id) + " attempt " +
                                    std::to_string(attempt) + " is stale (task is " +
                                    TaskStateName(f.state) + ", attempt " +
                                    std::to_string(f.attempt) + ")");
}

Status Store::TransitionTask(int64_t task_id, int attempt, TaskState to, const std::string& message,
                             bool count_failure, std::optional<int64_t> worker_id, int64_t job_id,
                             bool reattach, std::unordered_map<int64_t, Store::CountDeltas>* counts,
                             const std::vector<int>& gpus) {
  // Fencing, in the UPDATE itself: a start names a queued task's next attempt (a re-attach its
  // current one); everything else must name a live attempt of a running task (almost always
  // the only one, which the plain comparison settles without parsing JSON).
  const bool starting = (to == TaskState::kRunning);
  const TaskState from = starting ? TaskState::kQueued : TaskState::kRunning;
  const std::string only_attempt = "[" + std::to_string(attempt) + "]";
  const int64_t now = NowMs();
  // Two statements, one per direction, so each stays a plain indexed UPDATE (this is the
  // dispatch hot path: every task passes through both). No RETURNING: SQLite runs it through a
  // temporary table, which cost as much again; the caller knows the job (else one lookup).
  TSR_ASSIGN_OR_RETURN(
      Stmt u,
      starting
          ? writer_->Prepare("UPDATE tasks SET state = 'running', attempt = ?2, message = ?3, "
                             "live_attempts = ?4, worker_id = ?5, progress = 0, started_at = ?6, "
                             "finished_at = NULL "
                             "WHERE id = ?1 AND state = 'queued' AND attempt = ?2 - ?7")
          : writer_->Prepare("UPDATE tasks SET state = ?8, message = ?3, live_attempts = '[]', "
                             "worker_id = ?5, failures = failures + ?7, "
                             "failures_total = failures_total + ?7, progress = ?9, "
                             "finished_at = ?6 "
                             "WHERE id = ?1 AND state = 'running' AND (live_attempts = ?4 OR "
                             "EXISTS (SELECT 1 FROM json_each(live_attempts) WHERE value = ?2))"));
  u.Bind(1, task_id).Bind(2, attempt).Bind(3, message).Bind(4, only_attempt).Bind(5, worker_id);
  if (starting) {
    if (attempt < 1) return Status::InvalidArgument("attempt: must be at least 1");
    u.Bind(6, now).Bind(7, reattach ? 0 : 1);
  } else {
    const bool terminal = IsTerminal(to);
    u.Bind(6, terminal ? std::optional<int64_t>(now) : std::nullopt);
    u.Bind(7, count_failure ? 1 : 0).Bind(8, TaskStateName(to));
    u.Bind(9, to == TaskState::kDone ? 1.0 : 0.0);
  }
  TSR_RETURN_IF_ERROR(u.Run());
  if (writer_->Changes() != 1) {
    TSR_ASSIGN_OR_RETURN(TaskFence fence, ReadFence(task_id));  // NotFound if there is none
    return StaleAttempt(task_id, attempt, fence);
  }
  if (job_id <= 0) {
    TSR_ASSIGN_OR_RETURN(Stmt j, writer_->Prepare("SELECT job_id FROM tasks WHERE id = ?"));
    j.Bind(1, task_id);
    TSR_ASSIGN_OR_RETURN(bool row, j.Step());
    if (!row) return Status::NotFound("task " + std::to_string(task_id) + " does not exist");
    job_id = j.Int(0);
  }
  // The attempt history, in the same transaction: a start opens the attempt (an older one still
  // open lost its lease with a restart: its worker did not take it back); done closes it, and
  // the end of the task closes any copy the broker did not.
  // A first attempt has no other (a backup is always a later one): the dispatch hot path pays
  // one INSERT at the start and one UPDATE at done.
  if (starting && !reattach) {
    if (attempt > 1) {
      AttemptEnd superseded;
      superseded.message = "its lease ended with a restart of the scheduler";
      TSR_RETURN_IF_ERROR(
          CloseAttemptsWhere("task_id = ?1 AND attempt < ?2", task_id, attempt, superseded));
    }
    TSR_RETURN_IF_ERROR(InsertAttempt(task_id, attempt, job_id, worker_id, gpus));
  } else if (starting) {
    // Its worker took the lease back (it was recorded lost when the worker went silent).
    TSR_RETURN_IF_ERROR(ReopenAttempt(task_id, attempt));
  } else if (IsTerminal(to)) {
    if (to == TaskState::kDone) {
      AttemptEnd done;
      done.outcome = AttemptOutcome::kDone;
      TSR_RETURN_IF_ERROR(CloseAttempt(task_id, attempt, job_id, done));
    }
    if (attempt > 1) {
      AttemptEnd rest;
      rest.outcome = AttemptOutcome::kCanceled;
      rest.message = "the task ended (" + std::string(TaskStateName(to)) + ") without this copy";
      TSR_RETURN_IF_ERROR(CloseAttemptsWhere("task_id = ?1", task_id, 0, rest));
    }
  }
  if (to == TaskState::kFailed) {
    TSR_ASSIGN_OR_RETURN(
        Stmt e, writer_->Prepare("UPDATE jobs SET error = COALESCE(error, ?) WHERE id = ?"));
    TSR_RETURN_IF_ERROR(
        e.Bind(1, "task " + std::to_string(task_id) + " failed: " + message).Bind(2, job_id).Run());
  }
  // Last, so a failed step above leaves no count behind.
  CountDeltas delta;
  CountDeltas& d = counts ? (*counts)[job_id] : delta;
  d.Add(from, -1);
  d.Add(to, +1);
  return counts ? Status::Ok() : ApplyCounts(job_id, delta);
}

void Store::CountDeltas::Add(TaskState s, int64_t n) {
  switch (s) {
    case TaskState::kQueued:
      queued += n;
      break;
    case TaskState::kRunning:
      running += n;
      break;
    case TaskState::kDone:
      done += n;
      break;
    case TaskState::kFailed:
      failed += n;
      break;
    case TaskState::kCanceled:
      canceled += n;
      break;
  }
}

Status Store::ApplyCounts(int64_t job_id, const CountDeltas& d) {
  TSR_ASSIGN_OR_RETURN(
      Stmt c, writer_->Prepare("UPDATE jobs SET tasks_queued = tasks_queued + ?1, "
                               "tasks_running = tasks_running + ?2, tasks_done = tasks_done + ?3, "
                               "tasks_failed = tasks_failed + ?4, "
                               "tasks_canceled = tasks_canceled + ?5 WHERE id = ?6 "
                               "RETURNING state, started_at IS NULL, tasks_total, tasks_running, "
                               "tasks_done, tasks_failed, tasks_canceled"));
  c.Bind(1, d.queued).Bind(2, d.running).Bind(3, d.done).Bind(4, d.failed).Bind(5, d.canceled);
  c.Bind(6, job_id);
  TSR_ASSIGN_OR_RETURN(bool row, c.Step());
  if (!row) return Status::Ok();  // the job is gone
  // The job's state follows its counters; most changes (leases starting or ending while others
  // run) leave it as it is, so it is recomputed only when the counters say it moves.
  const std::string state = c.Text(0);
  const bool unstarted = c.Int(1) != 0;
  const int64_t total = c.Int(2), running = c.Int(3), done = c.Int(4), failed = c.Int(5),
                canceled = c.Int(6);
  const bool finished = done + failed + canceled == total;
  const bool active = running + done + failed > 0;
  const bool refresh =
      state != "canceled" &&
      (finished || (active ? state != "running" || (unstarted && running > 0) : state != "queued"));
  TSR_RETURN_IF_ERROR(c.Run());
  return refresh ? RefreshJobState(job_id) : Status::Ok();
}

// ---- group commit ------------------------------------------------------------------------------

Status Store::ApplyDeferred(std::vector<Deferred>& ops) {
  std::unordered_map<int64_t, CountDeltas> counts;
  for (const Deferred& op : ops) {
    Status s;
    switch (op.kind) {
      case Deferred::Kind::kTransition:
        s = TransitionTask(op.id, op.attempt, op.to, op.message, op.count_failure, op.worker_id,
                           op.job_id, /*reattach=*/false, &counts, op.gpus);
        break;
      case Deferred::Kind::kAttemptEnd:
        s = CloseAttempt(op.id, op.attempt, op.job_id,
                         AttemptEnd{op.outcome, op.failure_class, op.message, op.count_failure});
        break;
      case Deferred::Kind::kWorkerState:
        s = WriteWorkerState(op.id, op.worker_state);
        break;
      case Deferred::Kind::kProgress:
        s = WriteTaskProgress(op.id, op.attempt, op.progress);
        break;
    }
    if (s.code() == StatusCode::kFailedPrecondition || s.code() == StatusCode::kNotFound) {
      spdlog::error("store: a recorded write was refused and skipped: {}", s.ToString());
    } else if (!s.ok()) {
      return s;
    }
  }
  ops.clear();
  for (const auto& [job_id, delta] : counts) TSR_RETURN_IF_ERROR(ApplyCounts(job_id, delta));
  return Status::Ok();
}

bool Store::Defer(Deferred op) {
  if (!InGroup()) return false;
  group_ops_.push_back(std::move(op));
  return true;
}

void Store::BeginGroup() { group_thread_.store(std::this_thread::get_id()); }

void Store::EnterGroupTransaction() {
  if (!group_tx_) {
    group_lock_ = std::unique_lock<std::recursive_mutex>(write_mu_);
    group_tx_.emplace(*writer_);
    if (!group_tx_->begin_status().ok() && group_error_.ok()) {
      group_error_ = group_tx_->begin_status();
    }
  }
  if (!group_ops_.empty() && group_error_.ok()) group_error_ = ApplyDeferred(group_ops_);
}

Status Store::CommitGroup() {
  if (!group_tx_ && group_ops_.empty()) return Status::Ok();  // nothing was written
  EnterGroupTransaction();
  Status s = group_error_.ok() ? group_tx_->Commit() : group_error_;
  SettleAttemptCounts(s.ok());
  group_tx_.reset();
  group_lock_.unlock();
  group_error_ = Status::Ok();
  return s;
}

void Store::EndGroup() {
  if (group_lock_.owns_lock()) SettleAttemptCounts(false);
  group_tx_.reset();  // rolls back a transaction Commit() did not reach
  if (group_lock_.owns_lock()) group_lock_.unlock();
  group_ops_.clear();
  group_error_ = Status::Ok();
  group_thread_.store(std::thread::id());
}

Status Store::RefreshJobState(int64_t job_id) {
  TSR_ASSIGN_OR_RETURN(
      Stmt s,
      writer_->Prepare("UPDATE jobs SET "
                       "state = CASE WHEN state = 'canceled' THEN 'canceled' "
                       "  WHEN tasks_done + tasks_failed + tasks_canceled = tasks_total THEN "
                       "    CASE WHEN tasks_failed > 0 THEN 'failed' ELSE 'done' END "
                       "  WHEN tasks_running + tasks_done + tasks_failed > 0 THEN 'running' "
                       "  ELSE 'queued' END, "
                       "started_at = CASE WHEN started_at IS NULL AND tasks_running > 0 THEN ?1 "
                       "  ELSE started_at END, "
                       "finished_at = CASE WHEN state = 'canceled' THEN finished_at "
                       "  WHEN tasks_done + tasks_failed + tasks_canceled = tasks_total THEN "
                       "    COALESCE(finished_at, ?1) ELSE NULL END "
                       "WHERE id = ?2"));
  return s.Bind(1, NowMs()).Bind(2, job_id).Run();
}

Status Store::Transition(int64_t task_id, int attempt, TaskState to, const std::string& message,
                         bool count_failure, std::optional<int64_t> worker_id, int64_t job_id,
                         bool reattach, const std::vector<int>& gpus) {
  if (!reattach) {
    Deferred op;
    op.kind = Deferred::Kind::kTransition;
    op.id = task_id;
    op.attempt = attempt;
    op.to = to;
    op.message = message;
    op.count_failure = count_failure;
    op.worker_id = worker_id;
    op.job_id = job_id;
    op.gpus = gpus;
    if (Defer(std::move(op))) return Status::Ok();
  }
  WriteLock lock(*this);
  Status s = InWriteTx(*writer_, [&] {
    return TransitionTask(task_id, attempt, to, message, count_failure, worker_id, job_id, reattach,
                          nullptr, gpus);
  });
  if (!InGroup()) SettleAttemptCounts(s.ok());
  return s;
}

Status Store::StartTask(int64_t task_id, int attempt, int64_t worker_id, int64_t job_id,
                        const std::vector<int>& gpus) {
  return Transition(task_id, attempt, TaskState::kRunning, "", false, worker_id, job_id,
                    /*reattach=*/false, gpus);
}

Status Store::ReattachTask(int64_t task_id, int attempt, int64_t worker_id, int64_t job_id) {
  return Transition(task_id, attempt, TaskState::kRunning, "re-attached", false, worker_id, job_id,
                    /*reattach=*/true);
}

Status Store::FinishTask(int64_t task_id, int attempt, int64_t worker_id, int64_t job_id) {
  return Transition(task_id, attempt, TaskState::kDone, "", false, worker_id, job_id);
}

Status Store::RequeueTask(int64_t task_id, int attempt, const std::string& message,
                          bool count_failure, int64_t job_id) {
  return Transition(task_id, attempt, TaskState::kQueued, message, count_failure, std::nullopt,
                    job_id);
}

Status Store::FailTask(int64_t task_id, int attempt, const std::string& message, int64_t job_id) {
  return Transition(task_id, attempt, TaskState::kFailed, message, true, std::nullopt, job_id);
}

Status Store::StartBackup(int64_t task_id, int attempt, std::optional<int64_t> worker_id,
                          const std::vector<int>& gpus) {
  WriteLock lock(*this);
  return InWriteTx(*writer_, [&]() -> Status {
    TSR_ASSIGN_OR_RETURN(TaskFence fence, ReadFence(task_id));
    if (fence.state != TaskState::kRunning || attempt != fence.attempt + 1) {
      return StaleAttempt(task_id, attempt, fence);
    }
    TSR_ASSIGN_OR_RETURN(Stmt u,
                         writer_->Prepare("UPDATE tasks SET attempt = ?1, "
                                          "live_attempts = json_insert(live_attempts, '$[#]', ?1) "
                                          "WHERE id = ?2"));
    TSR_RETURN_IF_ERROR(u.Bind(1, attempt).Bind(2, task_id).Run());
    return InsertAttempt(task_id, attempt, fence.job_id, worker_id, gpus);
  });
}

Status Store::EndCopy(int64_t task_id, int attempt, bool count_failure) {
  WriteLock lock(*this);
  return InWriteTx(*writer_, [&]() -> Status {
    TSR_ASSIGN_OR_RETURN(TaskFence fence, ReadFence(task_id));
    if (fence.state != TaskState::kRunning || !fence.IsLive(attempt) || fence.live.size() < 2) {
      return StaleAttempt(task_id, attempt, fence);
    }
    std::vector<int> live;
    for (int a : fence.live) {
      if (a != attempt) live.push_back(a);
    }
    TSR_ASSIGN_OR_RETURN(Stmt u, writer_->Prepare("UPDATE tasks SET live_attempts = ?1, "
                                                  "failures = failures + ?2, "
                                                  "failures_total = failures_total + ?2 "
                                                  "WHERE id = ?3"));
    return u.Bind(1, nlohmann::json(live).dump())
        .Bind(2, count_failure ? 1 : 0)
        .Bind(3, task_id)
        .Run();
  });
}

Status Store::SetTaskProgress(int64_t task_id, int attempt, double progress) {
  Deferred op;
  op.kind = Deferred::Kind::kProgress;
  op.id = task_id;
  op.attempt = attempt;
  op.progress = progress;
  if (Defer(std::move(op))) return Status::Ok();
  WriteLock lock(*this);
  return WriteTaskProgress(task_id, attempt, progress);
}

Status Store::WriteTaskProgress(int64_t task_id, int attempt, double progress) {
  TSR_ASSIGN_OR_RETURN(
      Stmt s, writer_->Prepare("UPDATE tasks SET progress = ? WHERE id = ? AND attempt = ? "
                               "AND state = 'running'"));
  return s.Bind(1, progress).Bind(2, task_id).Bind(3, attempt).Run();
}

Status Store::RecordWorkerFailure(int64_t job_id, int64_t task_id, int64_t worker_id) {
  WriteLock lock(*this);
  return InWriteTx(*writer_, [&]() -> Status {
    TSR_ASSIGN_OR_RETURN(
        Stmt t, writer_->Prepare("UPDATE tasks SET failed_on = json_insert(failed_on, '$[#]', ?) "
                                 "WHERE id = ? AND NOT EXISTS (SELECT 1 FROM "
                                 "json_each(failed_on) WHERE value = ?)"));
    TSR_RETURN_IF_ERROR(t.Bind(1, worker_id).Bind(2, task_id).Bind(3, worker_id).Run());
    TSR_ASSIGN_OR_RETURN(
        Stmt j, writer_->Prepare("INSERT INTO job_worker_failures (job_id, worker_id, failures) "
                                 "VALUES (?, ?, 1) ON CONFLICT (job_id, worker_id) DO UPDATE "
                                 "SET failures = failures + 1"));
    return j.Bind(1, job_id).Bind(2, worker_id).Run();
  });
}

StatusOr<std::vector<std::pair<int64_t, int>>> Store::WorkerFailures(int64_t job_id) {
  TSR_ASSIGN_OR_RETURN(Reader r, BorrowReader());
  TSR_ASSIGN_OR_RETURN(Stmt s, r->Prepare("SELECT worker_id, failures FROM job_worker_failures "
                                          "WHERE job_id = ?"));
  s.Bind(1, job_id);
  std::vector<std::pair<int64_t, int>> out;
  for (;;) {
    TSR_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return out;
    out.emplace_back(s.Int(0), static_cast<int>(s.Int(1)));
  }
}

StatusOr<std::vector<std::pair<int, int>>> Store::UndoneFrameRanges(int64_t job_id) {
  TSR_ASSIGN_OR_RETURN(Reader r, BorrowReader());
  TSR_ASSIGN_OR_RETURN(Stmt s, r->Prepare("SELECT frame_start, frame_end FROM tasks WHERE "
                                          "job_id = ? AND state != 'done' ORDER BY idx"));
  s.Bind(1, job_id);
  std::vector<std::pair<int, int>> out;
  for (;;) {
    TSR_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return out;
    out.emplace_back(static_cast<int>(s.Int(0)), static_cast<int>(s.Int(1)));
  }
}

Status Store::SetJobNotice(int64_t job_id, const std::optional<std::string>& notice) {
  WriteLock lock(*this);
  TSR_ASSIGN_OR_RETURN(Stmt s, writer_->Prepare("UPDATE jobs SET notice = ? WHERE id = ?"));
  return s.Bind(1, notice).Bind(2, job_id).Run();
}

// ---- workers ----------------------------------------------------------------------------------

StatusOr<int64_t> Store::UpsertWorker(const protocol::Register& reg) {
  WriteLock lock(*this);
  int64_t now = NowMs();
  TSR_ASSIGN_OR_RETURN(
      Stmt s,
      writer_->Prepare("INSERT INTO workers (name, hostname, state, cpu_cores, ram_mb, gpus_json, "
                       "backends_json, version, registered_at, last_seen, pools_json, tags_json, "
                       "details_json) "
                       "VALUES (?1, ?2, 'idle', ?3, ?4, ?5, ?6, ?7, ?8, ?8, ?9, ?10, ?11) "
                       "ON CONFLICT(name) DO UPDATE SET hostname = ?2, state = 'idle', "
                       "cpu_cores = ?3, ram_mb = ?4, gpus_json = ?5, backends_json = ?6, "
                       "version = ?7, registered_at = ?8, last_seen = ?8, pools_json = ?9, "
                       "tags_json = ?10, details_json = ?11 RETURNING id"));
  s.Bind(1, reg.name).Bind(2, reg.hostname).Bind(3, reg.cpu_cores).Bind(4, reg.ram_mb);
  s.Bind(5, nlohmann::json(reg.gpus).dump()).Bind(6, nlohmann::json(reg.backends).dump());
  s.Bind(7, reg.version).Bind(8, now);
  s.Bind(9, nlohmann::json(reg.pools).dump()).Bind(10, nlohmann::json(reg.tags).dump());
  const nlohmann::json details = {
      {"os", reg.os}, {"cpu_model", reg.cpu_model}, {"cloud", reg.cloud}};
  s.Bind(11, details.dump());
  TSR_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return writer_->Error("upsert worker");
  int64_t id = s.Int(0);
  TSR_RETURN_IF_ERROR(s.Run());
  return id;
}

Status Store::SaveNativePlugin(const protocol::PluginOffer& offer) {
  WriteLock lock(*this);
  TSR_ASSIGN_OR_RETURN(Stmt s,
                       writer_->Prepare("INSERT INTO native_plugins (name, offer_json, updated_at) "
                                        "VALUES (?1, ?2, ?3) ON CONFLICT(name) DO UPDATE SET "
                                        "offer_json = ?2, updated_at = ?3 WHERE offer_json != ?2"));
  return s.Bind(1, offer.name).Bind(2, nlohmann::json(offer).dump()).Bind(3, NowMs()).Run();
}

StatusOr<std::vector<protocol::PluginOffer>> Store::NativePlugins() {
  TSR_ASSIGN_OR_RETURN(Reader r, BorrowReader());
  TSR_ASSIGN_OR_RETURN(Stmt s, r->Prepare("SELECT offer_json FROM native_plugins ORDER BY name"));
  std::vector<protocol::PluginOffer> out;
  for (;;) {
    TSR_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    nlohmann::json j = nlohmann::json::parse(s.Text(0), nullptr, false);
    try {
      if (j.is_object()) out.push_back(j.get<protocol::PluginOffer>());
    } catch (const nlohmann::json::exception&) {
      // A row from a future version of the offer: the next worker offering it rewrites it.
    }
  }
  return out;
}

Status Store::SetWorkerDisabled(const std::string& name, bool disabled) {
  WriteLock lock(*this);
  TSR_ASSIGN_OR_RETURN(Stmt s, writer_->Prepare("UPDATE workers SET disabled = ?2 WHERE name = ?1 "
                                                "RETURNING id"));
  s.Bind(1, name).Bind(2, disabled ? 1 : 0);
  TSR_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return Status::NotFound("no worker named " + name + " has ever registered");
  return s.Run();
}

Status Store::SetWorkerState(int64_t worker_id, WorkerState state) {
  Deferred op;
  op.kind = Deferred::Kind::kWorkerState;
  op.id = worker_id;
  op.worker_state = state;
  if (Defer(std::move(op))) return Status::Ok();
  WriteLock lock(*this);
  return WriteWorkerState(worker_id, state);
}

Status Store::WriteWorkerState(int64_t worker_id, WorkerState state) {
  TSR_ASSIGN_OR_RETURN(
      Stmt s, writer_->Prepare("UPDATE workers SET state = ?, last_seen = ? WHERE id = ?"));
  return s.Bind(1, WorkerStateName(state)).Bind(2, NowMs()).Bind(3, worker_id).Run();
}

Status Store::TouchWorkers(const std::vector<std::pair<int64_t, int64_t>>& id_and_last_seen_ms) {
  if (id_and_last_seen_ms.empty()) return Status::Ok();
  WriteLock lock(*this);
  return InWriteTx(*writer_, [&]() -> Status {
    for (const auto& [id, seen] : id_and_last_seen_ms) {
      TSR_ASSIGN_OR_RETURN(Stmt s,
                           writer_->Prepare("UPDATE workers SET last_seen = ? WHERE id = ?"));
      TSR_RETURN_IF_ERROR(s.Bind(1, seen).Bind(2, id).Run());
    }
    return Status::Ok();
  });
}

Status Store::MarkAllWorkersOffline() {
  WriteLock lock(*this);
  return writer_->Exec("UPDATE workers SET state = 'offline' WHERE state != 'offline'");
}

Status Store::SetFrameFlag(int64_t job_id, int frame, const std::string& reason) {
  WriteLock lock(*this);
  TSR_ASSIGN_OR_RETURN(Stmt s, writer_->Prepare("INSERT OR REPLACE INTO frame_flags (job_id, "
                                                "frame, reason, at) VALUES (?, ?, ?, ?)"));
  return s.Bind(1, job_id).Bind(2, frame).Bind(3, reason).Bind(4, NowMs()).Run();
}

Status Store::ClearFrameFlag(int64_t job_id, int frame) {
  WriteLock lock(*this);
  TSR_ASSIGN_OR_RETURN(Stmt s,
                       writer_->Prepare("DELETE FROM frame_flags WHERE job_id = ? AND frame = ?"));
  return s.Bind(1, job_id).Bind(2, frame).Run();
}

StatusOr<std::map<int, std::string>> Store::FrameFlags(int64_t job_id, int first, int last) {
  TSR_ASSIGN_OR_RETURN(Reader r, BorrowReader());
  TSR_ASSIGN_OR_RETURN(Stmt s, r->Prepare("SELECT frame, reason FROM frame_flags WHERE job_id = ? "
                                          "AND frame BETWEEN ? AND ?"));
  s.Bind(1, job_id).Bind(2, first).Bind(3, last);
  std::map<int, std::string> flags;
  for (;;) {
    TSR_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    flags[static_cast<int>(s.Int(0))] = s.Text(1);
  }
  return flags;
}

StatusOr<bool> Store::BlobInUse(const std::string& hash) {
  TSR_ASSIGN_OR_RETURN(Reader r, BorrowReader());
  TSR_ASSIGN_OR_RETURN(Stmt s, r->Prepare("SELECT 1 FROM jobs WHERE instr(assets, ?) > 0 LIMIT 1"));
  s.Bind(1, hash);
  return s.Step();
}

StatusOr<std::vector<std::pair<int64_t, std::string>>> Store::JobsWritingTo(
    const std::string& dir) {
  TSR_ASSIGN_OR_RETURN(Reader r, BorrowReader());
  TSR_ASSIGN_OR_RETURN(Stmt s,
                       r->Prepare("SELECT id, user_name FROM jobs WHERE output_dir = ? LIMIT 10"));
  s.Bind(1, dir);
  std::vector<std::pair<int64_t, std::string>> out;
  for (;;) {
    TSR_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.emplace_back(s.Int(0), s.Text(1));
  }
  return out;
}

Status Store::AddEvent(std::optional<int64_t> job_id, std::optional<int64_t> task_id,
                       std::optional<int64_t> worker_id, const std::string& kind,
                       const std::string& message) {
  WriteLock lock(*this);
  TSR_ASSIGN_OR_RETURN(Stmt s,
                       writer_->Prepare("INSERT INTO events (at, job_id, task_id, worker_id, kind, "
                                        "message) VALUES (?, ?, ?, ?, ?, ?)"));
  return s.Bind(1, NowMs())
      .Bind(2, job_id)
      .Bind(3, task_id)
      .Bind(4, worker_id)
      .Bind(5, kind)
      .Bind(6, message)
      .Run();
}

// ---- reads ------------------------------------------------------------------------------------

StatusOr<std::vector<JobRecord>> Store::ListJobs(std::optional<JobState> state, int limit) {
  JobFilter filter;
  filter.state = state;
  filter.limit = limit;
  return ListJobs(filter);
}

StatusOr<std::vector<JobRecord>> Store::ListJobs(const JobFilter& f) {
  TSR_ASSIGN_OR_RETURN(Reader r, BorrowReader());
  std::string sql = std::string("SELECT ") + kJobColumns + " FROM jobs WHERE 1";
  if (f.state) sql += " AND state = ?1";
  if (f.paused) {
    sql += *f.paused ? " AND paused = 1 AND state IN ('queued', 'running')" : " AND paused = 0";
  }
  if (!f.user.empty()) sql += " AND user_name = ?2";
  if (!f.project.empty()) sql += " AND project = ?3";
  if (f.before) sql += " AND id < ?4";
  sql += " ORDER BY id DESC LIMIT ?5";
  TSR_ASSIGN_OR_RETURN(Stmt s, r->Prepare(sql));
  if (f.state) s.Bind(1, JobStateName(*f.state));
  if (!f.user.empty()) s.Bind(2, f.user);
  if (!f.project.empty()) s.Bind(3, f.project);
  if (f.before) s.Bind(4, *f.before);
  s.Bind(5, f.limit);
  return CollectRows(s, &ReadJob);
}

StatusOr<JobRecord> Store::GetJob(int64_t job_id) {
  TSR_ASSIGN_OR_RETURN(Reader r, BorrowReader());
  TSR_ASSIGN_OR_RETURN(
      Stmt s, r->Prepare(std::string("SELECT ") + kJobColumns + " FROM jobs WHERE id = ?"));
  s.Bind(1, job_id);
  TSR_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return Status::NotFound("job " + std::to_string(job_id) + " does not exist");
  return ReadJob(s);
}

StatusOr<std::vector<TaskRecord>> Store::ListTasks(int64_t job_id) {
  return ListTasks(job_id, TaskFilter{});
}

StatusOr<std::vector<TaskRecord>> Store::ListTasks(int64_t job_id, const TaskFilter& f) {
  TSR_ASSIGN_OR_RETURN(Reader r, BorrowReader());
  // Running tasks are few farm-wide (one per worker slot): find them through the index of
  // unfinished tasks rather than walking every task of a large job.
  const bool running = f.state == TaskState::kRunning;
  TSR_ASSIGN_OR_RETURN(
      Stmt s, r->Prepare(std::string("SELECT ") + kTaskColumns + " FROM tasks t " +
                         (running ? "INDEXED BY tasks_unfinished " : "") +
                         "LEFT JOIN workers w ON w.id = t.worker_id WHERE t.job_id = ?1 AND "
                         "t.idx > ?2" +
                         (running ? " AND t.state IN ('queued', 'running')" : "") +
                         (f.state ? " AND t.state = ?4" : "") + " ORDER BY t.idx LIMIT ?3"));
  s.Bind(1, job_id).Bind(2, f.after_index).Bind(3, f.limit);
  if (f.state) s.Bind(4, TaskStateName(*f.state));
  return CollectRows(s, &ReadTask);
}

StatusOr<TaskRecord> Store::GetTask(int64_t task_id) {
  TSR_ASSIGN_OR_RETURN(Reader r, BorrowReader());
  TSR_ASSIGN_OR_RETURN(Stmt s, r->Prepare(std::string("SELECT ") + kTaskColumns +
                                          " FROM tasks t LEFT JOIN workers w ON w.id = "
                                          "t.worker_id WHERE t.id = ?"));
  s.Bind(1, task_id);
  TSR_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return Status::NotFound("task " + std::to_string(task_id) + " does not exist");
  return ReadTask(s);
}

StatusOr<std::vector<WorkerRecord>> Store::ListWorkers() {
  TSR_ASSIGN_OR_RETURN(Reader r, BorrowReader());
  TSR_ASSIGN_OR_RETURN(
      Stmt s, r->Prepare("SELECT w.id, w.name, w.hostname, w.state, w.cpu_cores, "
                         "w.ram_mb, w.gpus_json, w.backends_json, w.version, "
                         "w.registered_at, w.last_seen, "
                         "(SELECT group_concat(t.id) FROM tasks t WHERE t.worker_id = "
                         "w.id AND t.state = 'running'), w.pools_json, w.tags_json, "
                         "w.details_json, w.disabled, w.node_group, w.price_per_hour, w.cost "
                         "FROM workers w ORDER BY w.id"));
  std::vector<WorkerRecord> out;
  for (;;) {
    TSR_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    WorkerRecord w;
    w.id = s.Int(0);
    w.name = s.Text(1);
    w.hostname = s.Text(2);
    TSR_ASSIGN_OR_RETURN(w.state, ParseEnum<WorkerState>(s.Text(3), kWorkerStates));
    w.cpu_cores = static_cast<int>(s.Int(4));
    w.ram_mb = s.Int(5);
    w.gpus = nlohmann::json::parse(s.Text(6)).get<std::vector<protocol::GpuInfo>>();
    w.backends = nlohmann::json::parse(s.Text(7)).get<std::vector<std::string>>();
    w.version = s.Text(8);
    w.registered_at_ms = s.Int(9);
    w.last_seen_ms = s.Int(10);
    w.pools = nlohmann::json::parse(s.Text(12)).get<std::vector<std::string>>();
    w.tags = nlohmann::json::parse(s.Text(13)).get<std::vector<std::string>>();
    const nlohmann::json details = nlohmann::json::parse(s.Text(14), nullptr, false);
    if (details.is_object()) {
      w.os = details.value("os", "");
      w.cpu_model = details.value("cpu_model", "");
      w.cloud = details.value("cloud", protocol::CloudInfo{});
    }
    w.disabled = s.Int(15) != 0;
    w.node_group = s.Text(16);
    w.price_per_hour = s.Double(17);
    w.cost = s.Double(18);
    std::string tasks = s.Text(11);
    for (size_t pos = 0; pos < tasks.size();) {
      size_t comma = tasks.find(',', pos);
      if (comma == std::string::npos) comma = tasks.size();
      w.current_tasks.push_back(std::stoll(tasks.substr(pos, comma - pos)));
      pos = comma + 1;
    }
    out.push_back(std::move(w));
  }
  return out;
}

StatusOr<FarmSummary> Store::Summary() {
  TSR_ASSIGN_OR_RETURN(Reader r, BorrowReader());
  FarmSummary sum;
  TSR_ASSIGN_OR_RETURN(Stmt j, r->Prepare("SELECT state, count(*) FROM jobs GROUP BY state"));
  for (;;) {
    TSR_ASSIGN_OR_RETURN(bool row, j.Step());
    if (!row) break;
    sum.jobs_by_state.emplace_back(j.Text(0), j.Int(1));
  }
  TSR_ASSIGN_OR_RETURN(Stmt t,
                       r->Prepare("SELECT total(tasks_total), total(tasks_queued), "
                                  "total(tasks_running), total(tasks_done), total(tasks_failed), "
                                  "total(tasks_canceled) FROM jobs"));
  TSR_ASSIGN_OR_RETURN(bool trow, t.Step());
  if (trow) {
    sum.tasks = {static_cast<int64_t>(t.Double(0)), static_cast<int64_t>(t.Double(1)),
                 static_cast<int64_t>(t.Double(2)), static_cast<int64_t>(t.Double(3)),
                 static_cast<int64_t>(t.Double(4)), static_cast<int64_t>(t.Double(5))};
  }
  TSR_ASSIGN_OR_RETURN(Stmt w, r->Prepare("SELECT state, count(*) FROM workers GROUP BY state"));
  for (;;) {
    TSR_ASSIGN_OR_RETURN(bool row, w.Step());
    if (!row) break;
    sum.workers_by_state.emplace_back(w.Text(0), w.Int(1));
  }
  TSR_ASSIGN_OR_RETURN(Stmt c, r->Prepare("SELECT (SELECT total(price_per_hour) FROM workers "
                                          "WHERE state != 'offline'), (SELECT cost FROM "
                                          "cost_days WHERE day = ?1), (SELECT gpu_seconds FROM "
                                          "cost_days WHERE day = ?1)"));
  c.Bind(1, UtcDay(NowMs()));
  TSR_ASSIGN_OR_RETURN(bool crow, c.Step());
  if (crow) {
    sum.cost_per_hour = c.Double(0);
    sum.cost_today = c.Double(1);
    sum.gpu_seconds_today = c.Double(2);
  }
  TSR_RETURN_IF_ERROR(c.Run());
  return sum;
}

}  // namespace tessera::store
