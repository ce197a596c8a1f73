#pragma once
// The store's schema on PostgreSQL: the SQLite schema at version 32 (every migration of
// schema.cpp applied) written once as PostgreSQL DDL -- the same tables, columns in the same
// order, defaults, keys, indexes and foreign keys; the triggers that keep a job with steps in step
// with its steps and record a job's end as PL/pgSQL functions -- plus the farm's identity.
//
// Types: INTEGER is BIGINT (SQLite integers are 64-bit), REAL is DOUBLE PRECISION, TEXT is TEXT
// (JSON stays text, so a value reads back exactly as written); flags stay integers 0/1, so the
// store binds and reads them the same on both engines. AUTOINCREMENT ids are identity columns
// (BY DEFAULT, so copied rows keep their ids); both never reuse an id.
//
// tessera_meta holds one row per fact: `schema_version` and `farm_id` (a random id made when the
// schema is created). A scheduler refuses a database of a newer schema version, and one of a
// farm other than its own, naming it. Later schema changes are numbered migrations that follow
// SQLite's numbering (33, ...), each added to both engines.

#include <cstdint>
#include <random>
#include <string>

#include "scheduler/store/sql/sql_engine.h"
#include "shared/base/status.h"

namespace tessera::store {

// The schema version the PostgreSQL DDL creates; equal to Store::kSchemaVersion (a test checks).
inline constexpr int kPostgresSchemaVersion = 32;

// What OpenPostgresSchema found or made.
struct FarmDatabase {
  int schema_version = 0;
  std::string farm_id;
  bool created = false;  // the schema was created just now
};

// Makes `db` (a PostgreSQL connection) ready for the store: on an empty database, creates the
// schema and the farm identity with `new_farm_id`, in one transaction; on a Tessera database,
// checks it and applies the migrations it lacks. Refuses (kFailedPrecondition, nothing written):
// a schema version newer than this build's; a farm id other than `expected_farm_id` (when not
// empty); a database holding tables but no Tessera identity. Two schedulers starting together
// create the schema once (an advisory lock serialises them).
StatusOr<FarmDatabase> OpenPostgresSchema(sql::Db& db, const std::string& expected_farm_id,
                                          const std::string& new_farm_id);

// A new farm id: 128 random bits from `random`, as 32 hexadecimal digits.
std::string NewFarmId(std::mt19937_64& random);

// The PostgreSQL DDL of schema version 32 (for tests and for `store copy`).
const char* PostgresSchemaDdl();

}  // namespace tessera::store
