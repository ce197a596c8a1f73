// The store's credentials: join tokens and the CURVE keys of enrolled workers (schema 14), and
// the HTTP API's bearer tokens (schema 15). They change rarely, so reads go through the writer
// connection too.

#include "scheduler/store/store.h"

namespace tessera::store {
namespace {

constexpr const char* kTokenColumns =
    "id, public_key, note, created_at, expires_at, max_uses, uses, revoked_at, worker_name";
constexpr const char* kWorkerKeyColumns = "name, public_key, token_id, enrolled_at, revoked_at";
constexpr const char* kApiTokenColumns =
    "id, secret_hash, user, role, note, created_at, expires_at, revoked_at";

JoinTokenRecord ReadToken(const Stmt& s) {
  JoinTokenRecord t;
  t.id = s.Int(0);
  t.public_key = s.Text(1);
  t.note = s.Text(2);
  t.created_at_ms = s.Int(3);
  t.expires_at_ms = s.OptInt(4);
  t.max_uses = static_cast<int>(s.Int(5));
  t.uses = static_cast<int>(s.Int(6));
  t.revoked_at_ms = s.OptInt(7);
  t.worker_name = s.Text(8);
  return t;
}

WorkerKeyRecord ReadWorkerKey(const Stmt& s) {
  WorkerKeyRecord k;
  k.name = s.Text(0);
  k.public_key = s.Text(1);
  k.token_id = s.OptInt(2);
  k.enrolled_at_ms = s.Int(3);
  k.revoked_at_ms = s.OptInt(4);
  return k;
}

ApiTokenRecord ReadApiToken(const Stmt& s) {
  ApiTokenRecord t;
  t.id = s.Int(0);
  t.secret_hash = s.Text(1);
  t.user = s.Text(2);
  t.role = s.Text(3);
  t.note = s.Text(4);
  t.created_at_ms = s.Int(5);
  t.expires_at_ms = s.OptInt(6);
  t.revoked_at_ms = s.OptInt(7);
  return t;
}

}  // namespace

StatusOr<JoinTokenRecord> Store::CreateJoinToken(const std::string& public_key,
                                                 const std::string& note,
                                                 std::optional<int64_t> expires_at_ms, int max_uses,
                                                 const std::string& worker_name) {
  WriteLock lock(*this);
  TSR_ASSIGN_OR_RETURN(
      Stmt s, writer_->Prepare(std::string("INSERT INTO join_tokens (public_key, note, created_at, "
                                           "expires_at, max_uses, worker_name) VALUES (?1, ?2, "
                                           "?3, ?4, ?5, ?6) RETURNING ") +
                               kTokenColumns));
  s.Bind(1, public_key)
      .Bind(2, note)
      .Bind(3, NowMs())
      .Bind(4, expires_at_ms)
      .Bind(5, max_uses)
      .Bind(6, worker_name);
  TSR_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return writer_->Error("create join token");
  JoinTokenRecord t = ReadToken(s);
  TSR_RETURN_IF_ERROR(s.Run());
  return t;
}

StatusOr<std::vector<JoinTokenRecord>> Store::ListJoinTokens() {
  WriteLock lock(*this);
  TSR_ASSIGN_OR_RETURN(Stmt s, writer_->Prepare(std::string("SELECT ") + kTokenColumns +
                                                " FROM join_tokens ORDER BY id"));
  return ReadAll(s, &ReadToken);
}

StatusOr<JoinTokenRecord> Store::RevokeJoinToken(int64_t token_id) {
  WriteLock lock(*this);
  TSR_ASSIGN_OR_RETURN(
      Stmt s, writer_->Prepare(std::string("UPDATE join_tokens SET revoked_at = "
                                           "coalesce(revoked_at, ?2) WHERE id = ?1 RETURNING ") +
                               kTokenColumns));
  s.Bind(1, token_id).Bind(2, NowMs());
  TSR_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return Status::NotFound("join token " + std::to_string(token_id) + " does not exist");
  JoinTokenRecord t = ReadToken(s);
  TSR_RETURN_IF_ERROR(s.Run());
  return t;
}

StatusOr<Store::Enrolment> Store::EnrolWorker(const std::string& name,
                                              const std::string& public_key, int64_t token_id) {
  WriteLock lock(*this);
  Transaction tx(*writer_);
  TSR_RETURN_IF_ERROR(tx.begin_status());
  const int64_t now = NowMs();
  JoinTokenRecord token;
  {
    TSR_ASSIGN_OR_RETURN(Stmt s, writer_->Prepare(std::string("SELECT ") + kTokenColumns +
                                                  " FROM join_tokens WHERE id = ?1"));
    s.Bind(1, token_id);
    TSR_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row || !ReadToken(s).usable(now)) {
      TSR_RETURN_IF_ERROR(s.Run());
      return Status::FailedPrecondition("join token " + std::to_string(token_id) +
                                        " is revoked, expired or used up");
    }
    token = ReadToken(s);
    TSR_RETURN_IF_ERROR(s.Run());
  }
  if (!token.worker_name.empty() && token.worker_name != name) {
    return Status::FailedPrecondition("join token " + std::to_string(token_id) +
                                      " was made for worker " + token.worker_name + ", not " +
                                      name);
  }
  Enrolment result;
  std::optional<std::string>& replaced = result.replaced_key;
  {
    TSR_ASSIGN_OR_RETURN(Stmt s, writer_->Prepare(std::string("SELECT ") + kWorkerKeyColumns +
                                                  " FROM worker_keys WHERE name = ?1"));
    s.Bind(1, name);
    TSR_ASSIGN_OR_RETURN(bool row, s.Step());
    if (row) {
      WorkerKeyRecord old = ReadWorkerKey(s);
      TSR_RETURN_IF_ERROR(s.Run());
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
        Stmt s,
        writer_->Prepare("INSERT INTO worker_keys (name, public_key, token_id, enrolled_at) "
                         "VALUES (?1, ?2, ?3, ?4) ON CONFLICT(name) DO UPDATE SET "
                         "public_key = ?2, token_id = ?3, enrolled_at = ?4"));
    Status st = s.Bind(1, name).Bind(2, public_key).Bind(3, token_id).Bind(4, now).Run();
    if (!st.ok()) {
      return Status::AlreadyExists("this key is already enrolled for another worker");
    }
  }
  {
    TSR_ASSIGN_OR_RETURN(Stmt s,
                         writer_->Prepare("UPDATE join_tokens SET uses = uses + 1 WHERE id = ?1"));
    TSR_RETURN_IF_ERROR(s.Bind(1, token_id).Run());
  }
  TSR_RETURN_IF_ERROR(tx.Commit());
  ++token.uses;
  result.token_usable = token.usable(now);
  return result;
}

StatusOr<WorkerKeyRecord> Store::SetWorkerRevoked(const std::string& name, bool revoked) {
  WriteLock lock(*this);
  // Readmitting deletes the revoked key: left in place, it would authenticate again after a
  // restart, and it would hold the name against the enrolment readmitting is for.
  const std::string sql = revoked
                              ? std::string(
                                    "UPDATE worker_keys SET revoked_at = coalesce(revoked_at, ?2) "
                                    "WHERE name = ?1 RETURNING ") +
                                    kWorkerKeyColumns
                              : std::string(
                                    "DELETE FROM worker_keys WHERE name = ?1 AND revoked_at IS NOT "
                                    "NULL RETURNING ") +
                                    kWorkerKeyColumns;
  TSR_ASSIGN_OR_RETURN(Stmt s, writer_->Prepare(sql));
  s.Bind(1, name);
  if (revoked) s.Bind(2, NowMs());
  TSR_ASSIGN_OR_RETURN(bool row, s.Step());
  if (row) {
    WorkerKeyRecord k = ReadWorkerKey(s);
    TSR_RETURN_IF_ERROR(s.Run());
    return k;
  }
  TSR_RETURN_IF_ERROR(s.Run());
  if (!revoked) {
    // Not revoked: readmitting an enrolled worker changes nothing.
    TSR_ASSIGN_OR_RETURN(Stmt q, writer_->Prepare(std::string("SELECT ") + kWorkerKeyColumns +
                                                  " FROM worker_keys WHERE name = ?1"));
    q.Bind(1, name);
    TSR_ASSIGN_OR_RETURN(bool found, q.Step());
    if (found) {
      WorkerKeyRecord k = ReadWorkerKey(q);
      TSR_RETURN_IF_ERROR(q.Run());
      return k;
    }
  }
  return Status::NotFound("no worker named " + name + " has enrolled");
}

StatusOr<std::vector<WorkerKeyRecord>> Store::ListWorkerKeys() {
  WriteLock lock(*this);
  TSR_ASSIGN_OR_RETURN(Stmt s, writer_->Prepare(std::string("SELECT ") + kWorkerKeyColumns +
                                                " FROM worker_keys ORDER BY name"));
  return ReadAll(s, &ReadWorkerKey);
}

StatusOr<ApiTokenRecord> Store::CreateApiToken(const ApiTokenRecord& token) {
  WriteLock lock(*this);
  TSR_ASSIGN_OR_RETURN(
      Stmt s, writer_->Prepare(std::string("INSERT INTO api_tokens (secret_hash, user, role, note, "
                                           "created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, "
                                           "?6) RETURNING ") +
                               kApiTokenColumns));
  s.Bind(1, token.secret_hash)
      .Bind(2, token.user)
      .Bind(3, token.role)
      .Bind(4, token.note)
      .Bind(5, NowMs())
      .Bind(6, token.expires_at_ms);
  TSR_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return writer_->Error("create API token");
  ApiTokenRecord t = ReadApiToken(s);
  TSR_RETURN_IF_ERROR(s.Run());
  return t;
}

StatusOr<std::vector<ApiTokenRecord>> Store::ListApiTokens() {
  WriteLock lock(*this);
  TSR_ASSIGN_OR_RETURN(Stmt s, writer_->Prepare(std::string("SELECT ") + kApiTokenColumns +
                                                " FROM api_tokens ORDER BY id"));
  return ReadAll(s, &ReadApiToken);
}

StatusOr<ApiTokenRecord> Store::RevokeApiToken(int64_t token_id) {
  WriteLock lock(*this);
  TSR_ASSIGN_OR_RETURN(
      Stmt s, writer_->Prepare(std::string("UPDATE api_tokens SET revoked_at = "
                                           "coalesce(revoked_at, ?2) WHERE id = ?1 RETURNING ") +
                               kApiTokenColumns));
  s.Bind(1, token_id).Bind(2, NowMs());
  TSR_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return Status::NotFound("API token " + std::to_string(token_id) + " does not exist");
  ApiTokenRecord t = ReadApiToken(s);
  TSR_RETURN_IF_ERROR(s.Run());
  return t;
}

}  // namespace tessera::store
