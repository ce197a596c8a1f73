#pragma once
// How the SQLite engine moves a task between states: one fenced UPDATE per transition (a start
// names a queued task's next attempt, everything else a live attempt of a running task), the
// attempt rows it opens or closes, and the job's task counters and state that follow -- all
// inside the caller's transaction. It also applies the writes a Store::WriteGroup recorded
// (transitions, attempt ends, worker states, progress), each job's counters once per group.
//
// Threads: the caller holds the write lock and a transaction on the writer.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "scheduler/store/database.h"
#include "scheduler/store/records.h"
#include "shared/base/status.h"

namespace tessera::store {

class AttemptRows;

class TaskTransitions final : public RecordedWriteApplier {
 public:
  // Per-job task counter changes, summed over a batch of transitions and written once per job.
  struct CountDeltas {
    int64_t queued = 0, running = 0, done = 0, failed = 0, canceled = 0;
    void Add(TaskState s, int64_t n);
  };
  // A task's fencing state, read on the writer.
  struct Fence {
    TaskState state = TaskState::kQueued;
    int attempt = 0;  // the highest attempt started
    int64_t job_id = 0;
    std::vector<int> live;  // attempts running now
    bool IsLive(int a) const { return std::find(live.begin(), live.end(), a) != live.end(); }
  };

  TaskTransitions(Database& db, AttemptRows& attempts) : db_(db), attempts_(attempts) {}

  // Moves one task to `to` (one statement, fenced by `attempt`; a failure also records the job's
  // error) and adds the counter change to `counts` (by job id), or -- when null -- writes the
  // job's counters and state at once.
  // `reattach`: a start under the current attempt (ReattachTask) rather than the next.
  // `job_id`: the task's job when the caller knows it (0: read from the row).
  Status Move(int64_t task_id, int attempt, TaskState to, const std::string& message,
              bool count_failure, std::optional<int64_t> worker_id, int64_t job_id, bool reattach,
              std::unordered_map<int64_t, CountDeltas>* counts, const std::vector<int>& gpus = {});
  StatusOr<Fence> ReadFence(int64_t task_id);
  static Status StaleAttempt(int64_t task_id, int attempt, const Fence& fence);
  // Adds `delta` to the job's counters; its state follows when they say it moves.
  Status ApplyCounts(int64_t job_id, const CountDeltas& delta);
  // The job's state, started_at and finished_at from its counters.
  Status RefreshJobState(int64_t job_id);
  Status WriteProgress(int64_t task_id, int attempt, double progress,
                       const std::string& status_line);

  // RecordedWriteApplier: a write the fencing refuses (memory and store disagree, which only a
  // bug causes) is logged and skipped; the first storage error is returned.
  Status Apply(std::vector<RecordedWrite>& writes) override;
  void Settle(bool committed) override;

 private:
  Database& db_;
  AttemptRows& attempts_;
};

}  // namespace tessera::store
