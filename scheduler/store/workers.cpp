// Workers: registration, state, heartbeats, the operator's disable flag, and the C++ renderer
// plugins they offer. Enrolled keys and tokens are in credentials.cpp.

#include <nlohmann/json.hpp>

#include "scheduler/store/rows.h"
#include "scheduler/store/store.h"

namespace tessera::store {

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

}  // namespace tessera::store
