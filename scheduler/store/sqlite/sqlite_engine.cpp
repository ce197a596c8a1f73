#include "scheduler/store/sqlite/sqlite_engine.h"

#include <optional>
#include <utility>

namespace tessera::store::sql {

// A cached statement of the wrapped connection, held as the wrapper's Stmt while in use.
class SqliteDb::SqliteCursor final : public Cursor {
 public:
  void Use(store::Stmt stmt) { stmt_.emplace(std::move(stmt)); }

  void BindInt(int index, int64_t value) override { stmt_->Bind(index, value); }
  void BindDouble(int index, double value) override { stmt_->Bind(index, value); }
  void BindText(int index, std::string_view value) override { stmt_->Bind(index, value); }
  void BindNull(int index) override { stmt_->BindNull(index); }
  StatusOr<bool> Step() override { return stmt_->Step(); }
  int64_t Int(int col) const override { return stmt_->Int(col); }
  double Double(int col) const override { return stmt_->Double(col); }
  std::string Text(int col) const override { return stmt_->Text(col); }
  bool IsNull(int col) const override { return stmt_->IsNull(col); }
  int ColumnCount() const override { return stmt_->ColumnCount(); }
  ValueType TypeOf(int col) const override {
    switch (stmt_->ColumnType(col)) {
      case SQLITE_NULL:
        return ValueType::kNull;
      case SQLITE_INTEGER:
        return ValueType::kInt;
      case SQLITE_FLOAT:
        return ValueType::kDouble;
      default:
        return ValueType::kText;
    }
  }
  void Reset() override { stmt_.reset(); }  // the wrapper's Stmt resets the statement

 private:
  std::optional<store::Stmt> stmt_;
};

StatusOr<std::unique_ptr<SqliteDb>> SqliteDb::Open(const std::string& path, bool read_only,
                                                   const std::string& synchronous) {
  TSR_ASSIGN_OR_RETURN(std::unique_ptr<store::Db> db,
                       store::Db::Open(path, read_only, synchronous));
  return std::unique_ptr<SqliteDb>(new SqliteDb(std::move(db), path));
}

SqliteDb::SqliteDb(store::Db& db, std::string path) : db_(db), path_(std::move(path)) {}

SqliteDb::SqliteDb(std::unique_ptr<store::Db> owned, std::string path)
    : owned_(std::move(owned)), db_(*owned_), path_(std::move(path)) {}

SqliteDb::~SqliteDb() {
  while (!levels_.empty()) levels_.pop_back();  // innermost first: each rolls back
  cursors_.clear();                             // before the connection they belong to
}

StatusOr<Cursor*> SqliteDb::PrepareCursor(const std::string& sql) {
  TSR_ASSIGN_OR_RETURN(store::Stmt stmt, db_.Prepare(sql));
  std::unique_ptr<SqliteCursor>& cursor = cursors_[sql];
  if (!cursor) cursor = std::make_unique<SqliteCursor>();
  cursor->Use(std::move(stmt));
  return cursor.get();
}

Status SqliteDb::Begin() {
  auto level = std::make_unique<store::Transaction>(db_);
  TSR_RETURN_IF_ERROR(level->begin_status());
  levels_.push_back(std::move(level));
  return Status::Ok();
}

Status SqliteDb::Commit() {
  TSR_RETURN_IF_ERROR(levels_.back()->Commit());
  levels_.pop_back();
  return Status::Ok();
}

void SqliteDb::Rollback() { levels_.pop_back(); }

}  // namespace tessera::store::sql
