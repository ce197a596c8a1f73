#pragma once
// CredentialRecords (credential_records.h) on SQLite: the join_tokens, worker_keys and
// api_tokens tables (schemas 14 and 15). They change rarely, so reads go through the writer too.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/store/credential_records.h"

namespace tessera::store {

class Database;

class SqlCredentialRecords : public CredentialRecords {
 public:
  explicit SqlCredentialRecords(Database& db) : db_(db) {}

  StatusOr<JoinTokenRecord> CreateJoinToken(const std::string& public_key, const std::string& note,
                                            std::optional<int64_t> expires_at_ms, int max_uses,
                                            const std::string& worker_name = "") override;
  StatusOr<std::vector<JoinTokenRecord>> ListJoinTokens() override;
  StatusOr<JoinTokenRecord> RevokeJoinToken(int64_t token_id) override;
  StatusOr<Enrolment> EnrolWorker(const std::string& name, const std::string& public_key,
                                  int64_t token_id) override;
  StatusOr<WorkerKeyRecord> SetWorkerRevoked(const std::string& name, bool revoked) override;
  StatusOr<std::vector<WorkerKeyRecord>> ListWorkerKeys() override;
  StatusOr<ApiTokenRecord> CreateApiToken(const ApiTokenRecord& token) override;
  StatusOr<std::vector<ApiTokenRecord>> ListApiTokens() override;
  StatusOr<ApiTokenRecord> RevokeApiToken(int64_t token_id) override;

 private:
  Database& db_;
};

}  // namespace tessera::store
