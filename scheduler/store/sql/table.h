#pragma once
// A record type's table as the store reads it: the table's name and its columns, each with the
// record member it is read into. That one declaration gives every SELECT and RETURNING of the
// record its column list and reads its rows, so a column list and its reader cannot drift apart.
//
//   constexpr Column<ApiTokenRecord> kApiTokenColumns[] = {
//       {"id", &ApiTokenRecord::id}, {"secret_hash", &ApiTokenRecord::secret_hash}, ...};
//   constexpr Table<ApiTokenRecord> kApiTokens{"api_tokens", kApiTokenColumns};
//   db.Prepare(kApiTokens.Select("ORDER BY id"));
//   db.Prepare("INSERT INTO api_tokens (...) VALUES (...)" + kApiTokens.Returning());

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "scheduler/store/sql/sql_engine.h"

namespace tessera::store {

// A column and the member of Record it fills (integers, flags stored 0/1, reals, text, and
// nullable integers).
template <typename Record>
struct Column {
  const char* name;
  std::variant<int64_t Record::*, int Record::*, bool Record::*, double Record::*,
               std::string Record::*, std::optional<int64_t> Record::*>
      member;
};

template <typename Record>
struct Table {
  const char* name;
  std::span<const Column<Record>> columns;

  // "a, b, c": the columns in the order Read expects them.
  std::string ColumnList() const {
    std::string list;
    for (const Column<Record>& c : columns) list.append(list.empty() ? "" : ", ").append(c.name);
    return list;
  }
  // "SELECT <columns> FROM <name> <tail>"
  std::string Select(std::string_view tail = {}) const {
    std::string sql = "SELECT " + ColumnList() + " FROM " + name;
    if (!tail.empty()) sql.append(" ").append(tail);
    return sql;
  }
  // " RETURNING <columns>", to append to an INSERT, UPDATE or DELETE of this table.
  std::string Returning() const { return " RETURNING " + ColumnList(); }

  // The record of the row `s` stands on (selected with ColumnList()).
  Record Read(const sql::Stmt& s) const {
    Record record;
    for (size_t i = 0; i < columns.size(); ++i) {
      const int col = static_cast<int>(i);
      std::visit([&](auto member) { ReadInto(s, col, record.*member); }, columns[i].member);
    }
    return record;
  }

 private:
  static void ReadInto(const sql::Stmt& s, int col, int64_t& v) { v = s.Int(col); }
  static void ReadInto(const sql::Stmt& s, int col, int& v) { v = static_cast<int>(s.Int(col)); }
  static void ReadInto(const sql::Stmt& s, int col, bool& v) { v = s.Int(col) != 0; }
  static void ReadInto(const sql::Stmt& s, int col, double& v) { v = s.Double(col); }
  static void ReadInto(const sql::Stmt& s, int col, std::string& v) { v = s.Text(col); }
  static void ReadInto(const sql::Stmt& s, int col, std::optional<int64_t>& v) {
    v = s.OptInt(col);
  }
};

// The one row a statement gives (a RETURNING clause, a SELECT by key), or nullopt for none. The
// statement is stepped to its end either way.
template <typename Record>
StatusOr<std::optional<Record>> ReadOne(sql::Stmt& s, const Table<Record>& table) {
  TSR_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return std::optional<Record>();
  Record record = table.Read(s);
  TSR_RETURN_IF_ERROR(s.Run());
  return std::optional<Record>(std::move(record));
}

// Every row `s` gives.
template <typename Record>
StatusOr<std::vector<Record>> ReadRows(sql::Stmt& s, const Table<Record>& table) {
  std::vector<Record> rows;
  for (;;) {
    TSR_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return rows;
    rows.push_back(table.Read(s));
  }
}

// Every row of the table, after `tail` ("ORDER BY id").
template <typename Record>
StatusOr<std::vector<Record>> SelectAll(sql::Db& db, const Table<Record>& table,
                                        std::string_view tail) {
  TSR_ASSIGN_OR_RETURN(sql::Stmt s, db.Prepare(table.Select(tail)));
  return ReadRows(s, table);
}

// Revokes the row with `id` at `now_ms` (a row already revoked keeps its first time) and returns
// it as it is now; NotFound "<what> <id> does not exist".
template <typename Record>
StatusOr<Record> RevokeById(sql::Db& db, const Table<Record>& table, int64_t id, int64_t now_ms,
                            const std::string& what) {
  TSR_ASSIGN_OR_RETURN(sql::Stmt s,
                       db.Prepare(std::string("UPDATE ") + table.name +
                                  " SET revoked_at = coalesce(revoked_at, ?2) WHERE id = "
                                  "?1" +
                                  table.Returning()));
  s.Bind(1, id).Bind(2, now_ms);
  TSR_ASSIGN_OR_RETURN(std::optional<Record> row, ReadOne(s, table));
  if (!row) return Status::NotFound(what + " " + std::to_string(id) + " does not exist");
  return std::move(*row);
}

}  // namespace tessera::store
