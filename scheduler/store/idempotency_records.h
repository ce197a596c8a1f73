#pragma once
// Idempotency-Keys of POSTs that created something: which request first created what, kept for a
// day of the store's clock, so a client that lost an answer and retries gets the first result
// instead of a second job or token.
//
// One of the store's record tables (store.h): an engine-neutral interface, implemented for SQLite
// by SqlIdempotencyRecords (sql/sql_idempotency_records.h). A job's key is recorded in
// the job's own transaction (JobRecords::CreateJob).

#include <cstdint>
#include <optional>
#include <string>

#include "scheduler/store/records.h"
#include "shared/base/status.h"

namespace tessera::store {

class IdempotencyRecords {
 public:
  virtual ~IdempotencyRecords() = default;

  // The request first made with (user, key) within the last `max_age_ms`, if any.
  virtual StatusOr<std::optional<IdempotentRequest>> FindIdempotentRequest(const std::string& user,
                                                                           const std::string& key,
                                                                           int64_t max_age_ms) = 0;
  // Records a request (after what it created was stored), first forgetting those older than a
  // day; kAlreadyExists when the key is taken.
  virtual Status RecordIdempotentRequest(const IdempotentRequest& request) = 0;
};

}  // namespace tessera::store
