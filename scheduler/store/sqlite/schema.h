#pragma once
// The SQLite engine's schema: numbered migrations, tracked with PRAGMA user_version and applied
// when the store opens (schema.cpp; never edit a shipped migration: append one).

#include "shared/base/status.h"

namespace tessera::store {

class Database;

inline constexpr int kSqliteSchemaVersion = 32;

// Brings the database to kSqliteSchemaVersion, one transaction per migration (with its C++
// backfill, if any); returns the version it is at. FailedPrecondition for a database of a newer
// version than this program knows.
StatusOr<int> MigrateSchema(Database& db);

}  // namespace tessera::store
