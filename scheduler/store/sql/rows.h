#pragma once
// How rows become records, for the store's own files: the state names as stored, the job and task
// column lists with their readers (rows.cpp), and a loop that reads every row of a statement.

#include <string>
#include <vector>

#include "scheduler/store/records.h"
#include "scheduler/store/sql/sql_engine.h"
#include "shared/jobs/job_file.h"

namespace tessera::store {

inline constexpr const char* kJobStates[] = {"queued", "running", "done", "failed", "canceled"};
inline constexpr const char* kTaskStates[] = {"queued", "running", "done", "failed", "canceled"};
inline constexpr const char* kWorkerStates[] = {"idle", "busy", "offline"};

template <typename E, size_t N>
StatusOr<E> ParseEnum(const std::string& text, const char* const (&names)[N]) {
  for (size_t i = 0; i < N; ++i) {
    if (text == names[i]) return static_cast<E>(i);
  }
  return Status::Internal("unknown state '" + text + "' in database");
}

// "SELECT <kJobColumns> FROM jobs ..." rows, read by ReadJob.
extern const char* const kJobColumns;
StatusOr<JobRecord> ReadJob(const sql::Stmt& s);
// The job `job_id` (NotFound naming it when there is none), read on `db`.
StatusOr<JobRecord> SelectJob(sql::Db& db, int64_t job_id);
// "SELECT <kTaskColumns> FROM tasks t LEFT JOIN workers w ON w.id = t.worker_id ..." rows.
extern const char* const kTaskColumns;
StatusOr<TaskRecord> ReadTask(const sql::Stmt& s);

// A plugin job's settings with the plugin's defaults filled in (a JSON object of strings) and the
// file name its scene is written under, resolved from its spec (empty when they do not resolve:
// its tasks then fail on the worker naming the setting). Stored once, at submit.
struct PluginFiles {
  std::string settings_json = "{}";
  std::string scene_name;
};
PluginFiles ResolvePluginFiles(const spec::JobSpec& spec);

// Steps `s` to the end, converting every row with `read`.
template <typename T>
StatusOr<std::vector<T>> CollectRows(sql::Stmt& s, StatusOr<T> (*read)(const sql::Stmt&)) {
  std::vector<T> out;
  for (;;) {
    TSR_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return out;
    TSR_ASSIGN_OR_RETURN(T value, read(s));
    out.push_back(std::move(value));
  }
}

}  // namespace tessera::store
