#pragma once
// A record type's table as the store reads it: the table, the columns a record is read from (in
// the order its reader expects) and the reader. Every SELECT and RETURNING of that record goes
// through one Table, so a column list and its reader cannot drift apart.
//
//   constexpr Table<ApiTokenRecord> kApiTokens{"api_tokens", "id, secret_hash, ...",
//   &ReadApiToken}; db.Prepare(kApiTokens.Select("ORDER BY id")); db.Prepare("INSERT INTO
//   api_tokens (...) VALUES (...)" + kApiTokens.Returning());

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "scheduler/store/sqlite.h"

namespace tessera::store {

template <typename Record>
struct Table {
  const char* name;
  const char* columns;
  Record (*read)(const Stmt&);

  // "SELECT <columns> FROM <name> <tail>"
  std::string Select(std::string_view tail = {}) const {
    std::string sql = std::string("SELECT ") + columns + " FROM " + name;
    if (!tail.empty()) sql.append(" ").append(tail);
    return sql;
  }
  // " RETURNING <columns>", to append to an INSERT, UPDATE or DELETE of this table.
  std::string Returning() const { return std::string(" RETURNING ") + columns; }
};

// The one row a statement gives (a RETURNING clause, a SELECT by key), or nullopt for none. The
// statement is stepped to its end either way.
template <typename Record>
StatusOr<std::optional<Record>> ReadOne(Stmt& s, const Table<Record>& table) {
  TSR_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return std::optional<Record>();
  Record record = table.read(s);
  TSR_RETURN_IF_ERROR(s.Run());
  return std::optional<Record>(std::move(record));
}

// Every row of the table, after `tail` ("ORDER BY id").
template <typename Record>
StatusOr<std::vector<Record>> SelectAll(Db& db, const Table<Record>& table, std::string_view tail) {
  TSR_ASSIGN_OR_RETURN(Stmt s, db.Prepare(table.Select(tail)));
  return ReadAll(s, table.read);
}

// Revokes the row with `id` at `now_ms` (a row already revoked keeps its first time) and returns
// it as it is now; NotFound "<what> <id> does not exist".
template <typename Record>
StatusOr<Record> RevokeById(Db& db, const Table<Record>& table, int64_t id, int64_t now_ms,
                            const std::string& what) {
  TSR_ASSIGN_OR_RETURN(Stmt s, db.Prepare(std::string("UPDATE ") + table.name +
                                          " SET revoked_at = coalesce(revoked_at, ?2) WHERE id = "
                                          "?1" +
                                          table.Returning()));
  s.Bind(1, id).Bind(2, now_ms);
  TSR_ASSIGN_OR_RETURN(std::optional<Record> row, ReadOne(s, table));
  if (!row) return Status::NotFound(what + " " + std::to_string(id) + " does not exist");
  return std::move(*row);
}

}  // namespace tessera::store
