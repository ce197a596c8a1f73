#pragma once
// `tessera-scheduler store copy --from URL --to URL`: moves a farm's records from one store to
// another -- SQLite to PostgreSQL when a farm outgrows one machine, or back -- while the
// scheduler is stopped. Every table is copied row by row with its ids (jobs, steps, tasks,
// attempts, workers, join tokens, worker keys, API tokens, costs, events, webhook cursors, frame
// flags, plugins, idempotent requests, autoscaler nodes), in one transaction on the target, and
// the row counts of both sides are compared afterwards. The target must be an empty store (its
// schema is created or migrated first); a store that already holds records is refused, naming a
// table that has rows, and nothing is written. Both stores must be at this build's schema
// version (the source is migrated as a start of the scheduler would).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/store/sql/store_url.h"
#include "shared/base/clock.h"
#include "shared/base/status.h"

namespace tessera::store {

struct CopiedTable {
  std::string table;
  int64_t rows = 0;
};

// The tables in the order they are copied (rows referring to others come after them).
const std::vector<std::string>& StoreTables();

// Copies every record of `from` into the empty store `to`; returns the rows per table (equal on
// both sides: a difference is an error naming the table and both counts).
StatusOr<std::vector<CopiedTable>> CopyStore(const StoreUrl& from, const StoreUrl& to,
                                             const Clock& clock);

}  // namespace tessera::store
