// The store's credentials: join tokens and the CURVE keys of enrolled workers (schema 14), and
// the HTTP API's bearer tokens (schema 15). They change rarely, so reads go through the writer
// connection too.

#include "scheduler/store/sql/sql_credential_records.h"

#include "scheduler/store/database.h"
#include "scheduler/store/sql/table.h"

namespace tessera::store {
namespace {

constexpr Column<JoinTokenRecord> kJoinTokenColumns[] = {
    {"id", &JoinTokenRecord::id},
    {"public_key", &JoinTokenRecord::public_key},
    {"note", &JoinTokenRecord::note},
    {"created_at", &JoinTokenRecord::created_at_ms},
    {"expires_at", &JoinTokenRecord::expires_at_ms},
    {"max_uses", &JoinTokenRecord::max_uses},
    {"uses", &JoinTokenRecord::uses},
    {"revoked_at", &JoinTokenRecord::revoked_at_ms},
    {"worker_name", &JoinTokenRecord::worker_name}};
constexpr Table<JoinTokenRecord> kJoinTokens{"join_tokens", kJoinTokenColumns};

constexpr Column<WorkerKeyRecord> kWorkerKeyColumns[] = {
    {"name", &WorkerKeyRecord::name},
    {"public_key", &WorkerKeyRecord::public_key},
    {"token_id", &WorkerKeyRecord::token_id},
    {"enrolled_at", &WorkerKeyRecord::enrolled_at_ms},
    {"revoked_at", &WorkerKeyRecord::revoked_at_ms}};
constexpr Table<WorkerKeyRecord> kWorkerKeys{"worker_keys", kWorkerKeyColumns};

constexpr Column<ApiTokenRecord> kApiTokenColumns[] = {
    {"id", &ApiTokenRecord::id},
    {"secret_hash", &ApiTokenRecord::secret_hash},
    {"\"user\"", &ApiTokenRecord::user},
    {"role", &ApiTokenRecord::role},
    {"note", &ApiTokenRecord::note},
    {"created_at", &ApiTokenRecord::created_at_ms},
    {"expires_at", &ApiTokenRecord::expires_at_ms},
    {"revoked_at", &ApiTokenRecord::revoked_at_ms}};
constexpr Table<ApiTokenRecord> kApiTokens{"api_tokens", kApiTokenColumns};

// The row an INSERT ... RETURNING gave.
template <typename Record>
StatusOr<Record> Inserted(sql::Db& db, sql::Stmt& s, const Table<Record>& table, const char* what) {
  TSR_ASSIGN_OR_RETURN(std::optional<Record> row, ReadOne(s, table));
  if (!row) return Status::Internal(std::string(what) + ": the INSERT returned no row");
  return std::move(*row);
}

}  // namespace

StatusOr<JoinTokenRecord> SqlCredentialRecords::CreateJoinToken(
    const std::string& public_key, const std::string& note, std::optional<int64_t> expires_at_ms,
    int max_uses, const std::string& worker_name) {
  Database::WriteLock lock(db_);
  TSR_ASSIGN_OR_RETURN(
      sql::Stmt s,
      db_.writer().Prepare("INSERT INTO join_tokens (public_key, note, created_at, expires_at, "
                           "max_uses, worker_name) VALUES (?1, ?2, ?3, ?4, ?5, ?6)" +
                           kJoinTokens.Returning()));
  s.Bind(1, public_key)
      .Bind(2, note)
      .Bind(3, db_.Now())
      .Bind(4, expires_at_ms)
      .Bind(5, max_uses)
      .Bind(6, worker_name);
  return Inserted(db_.writer(), s, kJoinTokens, "create join token");
}

StatusOr<std::vector<JoinTokenRecord>> SqlCredentialRecords::ListJoinTokens() {
  Database::WriteLock lock(db_);
  return SelectAll(db_.writer(), kJoinTokens, "ORDER BY id");
}

StatusOr<JoinTokenRecord> SqlCredentialRecords::RevokeJoinToken(int64_t token_id) {
  Database::WriteLock lock(db_);
  return RevokeById(db_.writer(), kJoinTokens, token_id, db_.Now(), "join token");
}

StatusOr<SqlCredentialRecords::Enrolment> SqlCredentialRecords::EnrolWorker(
    const std::string& name, const std::string& public_key, int64_t token_id) {
  Database::WriteLock lock(db_);
  sql::Transaction tx(db_.writer());
  TSR_RETURN_IF_ERROR(tx.begin_status());
  const int64_t now = db_.Now();
  JoinTokenRecord token;
  {
    TSR_ASSIGN_OR_RETURN(sql::Stmt s, db_.writer().Prepare(kJoinTokens.Select("WHERE id = ?1")));
    s.Bind(1, token_id);
    TSR_ASSIGN_OR_RETURN(std::optional<JoinTokenRecord> row, ReadOne(s, kJoinTokens));
    if (!row || !row->usable(now)) {
      return Status::FailedPrecondition("join token " + std::to_string(token_id) +
                                        " is revoked, expired or used up");
    }
    token = std::move(*row);
  }
  if (!token.worker_name.empty() && token.worker_name != name) {
    return Status::FailedPrecondition("join token " + std::to_string(token_id) +
                                      " was made for worker " + token.worker_name + ", not " +
                                      name);
  }
  Enrolment result;
  std::optional<std::string>& replaced = result.replaced_key;
  {
    TSR_ASSIGN_OR_RETURN(sql::Stmt s, db_.writer().Prepare(kWorkerKeys.Select("WHERE name = ?1")));
    s.Bind(1, name);
    TSR_ASSIGN_OR_RETURN(std::optional<WorkerKeyRecord> row, ReadOne(s, kWorkerKeys));
    if (row) {
      const WorkerKeyRecord& old = *row;
      if (old.revoked_at_ms) {
        return Status::FailedPrecondition("worker " + name +
                                          " was revoked; an operator must readmit it "
                                          "(tessera worker readmit " +
                                          name + ") before it can enrol again");
      }
      if (old.public_key != public_key) {
        // Otherwise whoever holds any join token could take the name over, lock the real
        // worker out and receive its tasks.
        if (token.worker_name != name) {
          return Status::AlreadyExists(
              "worker " + name +
              " is already enrolled with another key; to enrol another machine under this "
              "name, revoke and readmit it (tessera worker revoke/readmit " +
              name + ") or use a join token made for this name");
        }
        replaced = old.public_key;
      }
    }
  }
  {
    TSR_ASSIGN_OR_RETURN(
        sql::Stmt s,
        db_.writer().Prepare("INSERT INTO worker_keys (name, public_key, token_id, enrolled_at) "
                             "VALUES (?1, ?2, ?3, ?4) ON CONFLICT(name) DO UPDATE SET "
                             "public_key = ?2, token_id = ?3, enrolled_at = ?4"));
    Status st = s.Bind(1, name).Bind(2, public_key).Bind(3, token_id).Bind(4, now).Run();
    if (!st.ok()) {
      return Status::AlreadyExists("this key is already enrolled for another worker");
    }
  }
  {
    TSR_ASSIGN_OR_RETURN(
        sql::Stmt s, db_.writer().Prepare("UPDATE join_tokens SET uses = uses + 1 WHERE id = ?1"));
    TSR_RETURN_IF_ERROR(s.Bind(1, token_id).Run());
  }
  TSR_RETURN_IF_ERROR(tx.Commit());
  ++token.uses;
  result.token_usable = token.usable(now);
  return result;
}

StatusOr<WorkerKeyRecord> SqlCredentialRecords::SetWorkerRevoked(const std::string& name,
                                                                 bool revoked) {
  Database::WriteLock lock(db_);
  // Readmitting deletes the revoked key: left in place, it would authenticate again after a
  // restart, and it would hold the name against the enrolment readmitting is for.
  const std::string sql =
      revoked ? "UPDATE worker_keys SET revoked_at = coalesce(revoked_at, ?2) WHERE name = ?1" +
                    kWorkerKeys.Returning()
              : "DELETE FROM worker_keys WHERE name = ?1 AND revoked_at IS NOT NULL" +
                    kWorkerKeys.Returning();
  TSR_ASSIGN_OR_RETURN(sql::Stmt s, db_.writer().Prepare(sql));
  s.Bind(1, name);
  if (revoked) s.Bind(2, db_.Now());
  TSR_ASSIGN_OR_RETURN(std::optional<WorkerKeyRecord> changed, ReadOne(s, kWorkerKeys));
  if (changed) return std::move(*changed);
  if (!revoked) {
    // Not revoked: readmitting an enrolled worker changes nothing.
    TSR_ASSIGN_OR_RETURN(sql::Stmt q, db_.writer().Prepare(kWorkerKeys.Select("WHERE name = ?1")));
    q.Bind(1, name);
    TSR_ASSIGN_OR_RETURN(std::optional<WorkerKeyRecord> found, ReadOne(q, kWorkerKeys));
    if (found) return std::move(*found);
  }
  return Status::NotFound("no worker named " + name + " has enrolled");
}

StatusOr<std::vector<WorkerKeyRecord>> SqlCredentialRecords::ListWorkerKeys() {
  Database::WriteLock lock(db_);
  return SelectAll(db_.writer(), kWorkerKeys, "ORDER BY name");
}

StatusOr<ApiTokenRecord> SqlCredentialRecords::CreateApiToken(const ApiTokenRecord& token) {
  Database::WriteLock lock(db_);
  TSR_ASSIGN_OR_RETURN(
      sql::Stmt s,
      db_.writer().Prepare("INSERT INTO api_tokens (secret_hash, \"user\", role, note, created_at, "
                           "expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)" +
                           kApiTokens.Returning()));
  s.Bind(1, token.secret_hash)
      .Bind(2, token.user)
      .Bind(3, token.role)
      .Bind(4, token.note)
      .Bind(5, db_.Now())
      .Bind(6, token.expires_at_ms);
  return Inserted(db_.writer(), s, kApiTokens, "create API token");
}

StatusOr<std::vector<ApiTokenRecord>> SqlCredentialRecords::ListApiTokens() {
  Database::WriteLock lock(db_);
  return SelectAll(db_.writer(), kApiTokens, "ORDER BY id");
}

StatusOr<ApiTokenRecord> SqlCredentialRecords::RevokeApiToken(int64_t token_id) {
  Database::WriteLock lock(db_);
  return RevokeById(db_.writer(), kApiTokens, token_id, db_.Now(), "API token");
}

}  // namespace tessera::store
