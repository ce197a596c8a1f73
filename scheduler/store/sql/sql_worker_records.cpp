// Workers: registration, state, heartbeats, the operator's disable flag, the C++ renderer
// plugins they offer, and each job's charged failures per worker (its blocklist). Enrolled keys
// and tokens are in sql_credential_records.cpp.

#include "scheduler/store/sql/sql_worker_records.h"

#include <nlohmann/json.hpp>

#include "scheduler/store/database.h"
#include "scheduler/store/sql/rows.h"

namespace tessera::store {

Status WriteWorkerState(Database& db, int64_t worker_id, WorkerState state) {
  TSR_ASSIGN_OR_RETURN(
      sql::Stmt s, db.writer().Prepare("UPDATE workers SET state = ?, last_seen = ? WHERE id = ?"));
  return s.Bind(1, WorkerStateName(state)).Bind(2, db.Now()).Bind(3, worker_id).Run();
}

StatusOr<int64_t> SqlWorkerRecords::UpsertWorker(const protocol::Register& reg) {
  Database::WriteLock lock(db_);
  int64_t now = db_.Now();
  TSR_ASSIGN_OR_RETURN(
      sql::Stmt s, db_.writer().Prepare(
                       "INSERT INTO workers (name, hostname, state, cpu_cores, ram_mb, gpus_json, "
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
  if (!row) return Status::Internal("upsert worker: the INSERT returned no row");
  int64_t id = s.Int(0);
  TSR_RETURN_IF_ERROR(s.Run());
  return id;
}

Status SqlWorkerRecords::SaveNativePlugin(const protocol::PluginOffer& offer) {
  Database::WriteLock lock(db_);
  TSR_ASSIGN_OR_RETURN(
      sql::Stmt s, db_.writer().Prepare("INSERT INTO native_plugins (name, offer_json, updated_at) "
                                        "VALUES (?1, ?2, ?3) ON CONFLICT(name) DO UPDATE SET "
                                        "offer_json = ?2, updated_at = ?3 WHERE offer_json != ?2"));
  return s.Bind(1, offer.name).Bind(2, nlohmann::json(offer).dump()).Bind(3, db_.Now()).Run();
}

StatusOr<std::vector<protocol::PluginOffer>> SqlWorkerRecords::NativePlugins() {
  TSR_ASSIGN_OR_RETURN(Database::Reader r, db_.BorrowReader());
  TSR_ASSIGN_OR_RETURN(sql::Stmt s,
                       r->Prepare("SELECT offer_json FROM native_plugins ORDER BY name"));
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

Status SqlWorkerRecords::SetWorkerDisabled(const std::string& name, bool disabled) {
  Database::WriteLock lock(db_);
  TSR_ASSIGN_OR_RETURN(sql::Stmt s,
                       db_.writer().Prepare("UPDATE workers SET disabled = ?2 WHERE name = ?1 "
                                            "RETURNING id"));
  s.Bind(1, name).Bind(2, disabled ? 1 : 0);
  TSR_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return Status::NotFound("no worker named " + name + " has ever registered");
  return s.Run();
}

Status SqlWorkerRecords::SetWorkerState(int64_t worker_id, WorkerState state) {
  RecordedWrite write;
  write.kind = RecordedWrite::Kind::kWorkerState;
  write.id = worker_id;
  write.worker_state = state;
  if (db_.Record(std::move(write))) return Status::Ok();
  Database::WriteLock lock(db_);
  return WriteWorkerState(db_, worker_id, state);
}

Status SqlWorkerRecords::TouchWorkers(
    const std::vector<std::pair<int64_t, int64_t>>& id_and_last_seen_ms) {
  if (id_and_last_seen_ms.empty()) return Status::Ok();
  Database::WriteLock lock(db_);
  return sql::InWriteTx(db_.writer(), [&]() -> Status {
    for (const auto& [id, seen] : id_and_last_seen_ms) {
      TSR_ASSIGN_OR_RETURN(sql::Stmt s,
                           db_.writer().Prepare("UPDATE workers SET last_seen = ? WHERE id = ?"));
      TSR_RETURN_IF_ERROR(s.Bind(1, seen).Bind(2, id).Run());
    }
    return Status::Ok();
  });
}

Status SqlWorkerRecords::MarkAllWorkersOffline() {
  Database::WriteLock lock(db_);
  return db_.writer().Exec("UPDATE workers SET state = 'offline' WHERE state != 'offline'");
}

Status SqlWorkerRecords::RecordWorkerFailure(int64_t job_id, int64_t task_id, int64_t worker_id) {
  Database::WriteLock lock(db_);
  return sql::InWriteTx(db_.writer(), [&]() -> Status {
    // The worker joins the JSON array of workers the task failed on, once: appended as text (the
    // array stays compact, as SQLite's json_insert writes it); the membership test is each
    // engine's JSON function.
    static constexpr sql::DialectSql kAddFailedOn{
        "UPDATE tasks SET failed_on = rtrim(failed_on, ']') || CASE WHEN failed_on = '[]' THEN "
        "'' ELSE ',' END || ?1 || ']' WHERE id = ?2 AND NOT EXISTS (SELECT 1 FROM "
        "json_each(failed_on) WHERE value = ?1)",
        "UPDATE tasks SET failed_on = rtrim(failed_on, ']') || CASE WHEN failed_on = '[]' THEN "
        "'' ELSE ',' END || ?1 || ']' WHERE id = ?2 AND NOT failed_on::jsonb @> "
        "jsonb_build_array(?1)"};
    TSR_ASSIGN_OR_RETURN(sql::Stmt t, db_.writer().Prepare(kAddFailedOn));
    TSR_RETURN_IF_ERROR(t.Bind(1, worker_id).Bind(2, task_id).Run());
    TSR_ASSIGN_OR_RETURN(
        sql::Stmt j,
        db_.writer().Prepare("INSERT INTO job_worker_failures (job_id, worker_id, failures) "
                             "VALUES (?, ?, 1) ON CONFLICT (job_id, worker_id) DO UPDATE "
                             "SET failures = job_worker_failures.failures + 1"));
    return j.Bind(1, job_id).Bind(2, worker_id).Run();
  });
}

StatusOr<std::vector<std::pair<int64_t, int>>> SqlWorkerRecords::WorkerFailures(int64_t job_id) {
  TSR_ASSIGN_OR_RETURN(Database::Reader r, db_.BorrowReader());
  TSR_ASSIGN_OR_RETURN(sql::Stmt s,
                       r->Prepare("SELECT worker_id, failures FROM job_worker_failures "
                                  "WHERE job_id = ?"));
  s.Bind(1, job_id);
  std::vector<std::pair<int64_t, int>> out;
  for (;;) {
    TSR_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return out;
    out.emplace_back(s.Int(0), static_cast<int>(s.Int(1)));
  }
}

}  // namespace tessera::store
