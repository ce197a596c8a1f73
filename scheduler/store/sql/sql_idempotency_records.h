#pragma once
// IdempotencyRecords (idempotency_records.h) on SQLite: the idempotent_requests table
// (schema 25).

#include <cstdint>
#include <optional>
#include <string>

#include "scheduler/store/idempotency_records.h"

namespace tessera::store {

class Database;

// Inserts `request` on the writer inside the caller's transaction (under the write lock), first
// dropping keys older than a day; kAlreadyExists when (user, key) is already recorded. Its time
// is the request's created_at_ms when set, else the store's clock.
Status InsertIdempotentRequest(Database& db, const IdempotentRequest& request);

class SqlIdempotencyRecords : public IdempotencyRecords {
 public:
  explicit SqlIdempotencyRecords(Database& db) : db_(db) {}

  StatusOr<std::optional<IdempotentRequest>> FindIdempotentRequest(const std::string& user,
                                                                   const std::string& key,
                                                                   int64_t max_age_ms) override;
  Status RecordIdempotentRequest(const IdempotentRequest& request) override;

 private:
  Database& db_;
};

}  // namespace tessera::store
