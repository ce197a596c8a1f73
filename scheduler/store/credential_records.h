#pragma once
// Who may connect: join tokens (a new worker enrols its CURVE key with one), the enrolled keys of
// workers, and the HTTP API's bearer tokens. Only public keys and hashes of secrets are kept.
//
// One of the store's record tables (store.h): an engine-neutral interface, implemented for SQLite
// by SqlCredentialRecords (sql/sql_credential_records.h). Creation and revocation times
// are the store's clock; so is "now" when an enrolment checks its token's expiry.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/store/records.h"
#include "shared/base/status.h"

namespace tessera::store {

class CredentialRecords {
 public:
  // What an enrolment did.
  struct Enrolment {
    std::optional<std::string> replaced_key;  // the worker's previous key, if it had one
    bool token_usable = true;                 // false: that was the token's last use
  };

  virtual ~CredentialRecords() = default;

  virtual StatusOr<JoinTokenRecord> CreateJoinToken(const std::string& public_key,
                                                    const std::string& note,
                                                    std::optional<int64_t> expires_at_ms,
                                                    int max_uses,
                                                    const std::string& worker_name = "") = 0;
  virtual StatusOr<std::vector<JoinTokenRecord>> ListJoinTokens() = 0;
  virtual StatusOr<JoinTokenRecord> RevokeJoinToken(int64_t token_id) = 0;
  // Enrols the worker `name` with `public_key`, using one use of the token, in one transaction.
  // A name never changes hands silently: when it is enrolled with another valid key, only a
  // token made for that name may replace the key (a replacement machine, a lost key);
  // otherwise AlreadyExists, and an operator revokes and readmits the name first.
  // FailedPrecondition when the token is no longer usable (revoked, expired, used up) or is for
  // another name, or the name is revoked (not yet readmitted).
  virtual StatusOr<Enrolment> EnrolWorker(const std::string& name, const std::string& public_key,
                                          int64_t token_id) = 0;
  // Revokes the worker's key, or readmits a revoked name: its old key is forgotten for good and
  // the name may enrol again with a join token. NotFound if it never enrolled. Returns the
  // record as it was.
  virtual StatusOr<WorkerKeyRecord> SetWorkerRevoked(const std::string& name, bool revoked) = 0;
  virtual StatusOr<std::vector<WorkerKeyRecord>> ListWorkerKeys() = 0;

  virtual StatusOr<ApiTokenRecord> CreateApiToken(const ApiTokenRecord& token) = 0;
  virtual StatusOr<std::vector<ApiTokenRecord>> ListApiTokens() = 0;
  virtual StatusOr<ApiTokenRecord> RevokeApiToken(int64_t token_id) = 0;
};

}  // namespace tessera::store
