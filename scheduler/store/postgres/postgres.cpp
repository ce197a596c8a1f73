#include "scheduler/store/postgres/postgres.h"

#include <endian.h>
#include <spdlog/spdlog.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <vector>

namespace tessera::store::sql {

namespace {

// Type OIDs of the parameters and columns the store uses (catalog/pg_type_d.h, which only the
// server's development package installs).
constexpr Oid kBoolOid = 16;
constexpr Oid kInt8Oid = 20;
constexpr Oid kInt2Oid = 21;
constexpr Oid kInt4Oid = 23;
constexpr Oid kTextOid = 25;
constexpr Oid kFloat4Oid = 700;
constexpr Oid kFloat8Oid = 701;
constexpr Oid kNumericOid = 1700;

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

// The SQLSTATE of a failed result ("" when there is none).
std::string SqlState(const PGresult* result) {
  const char* state = result ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  return state ? state : "";
}

// The start of a statement, to say which one failed.
std::string Head(std::string_view sql) {
  std::string head;
  for (char c : sql.substr(0, 72)) head += (c == '\n' || c == '\t') ? ' ' : c;
  return sql.size() > 72 ? head + "..." : head;
}

std::string TrimEnd(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

bool IsIdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsIdentChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$';
}

// Rows changed by a finished INSERT, UPDATE, DELETE or MERGE; nullopt for other commands.
std::optional<int> ChangedRows(const PGresult* r) {
  const std::string_view tag = PQcmdStatus(const_cast<PGresult*>(r));
  for (std::string_view verb : {"INSERT", "UPDATE", "DELETE", "MERGE"}) {
    if (tag.substr(0, verb.size()) == verb) {
      return std::atoi(PQcmdTuples(const_cast<PGresult*>(r)));
    }
  }
  return std::nullopt;
}

void LogNotice(void*, const char* message) {
  spdlog::debug("postgresql: {}", TrimEnd(message ? message : ""));
}

}  // namespace

std::string RewritePlaceholders(std::string_view sql, int* count) {
  std::string out;
  out.reserve(sql.size() + 16);
  int largest = 0;
  const size_t n = sql.size();
  size_t i = 0;
  // Copies sql[i, end) and moves on.
  auto copy_to = [&](size_t end) {
    end = std::min(end, n);
    out.append(sql.substr(i, end - i));
    i = end;
  };
  while (i < n) {
    const char c = sql[i];
    const char next = i + 1 < n ? sql[i + 1] : '\0';
    if (IsIdentStart(c)) {
      size_t end = i + 1;
      while (end < n && IsIdentChar(sql[end])) ++end;
      const bool escape_string =
          end == i + 1 && (c == 'E' || c == 'e') && end < n && sql[end] == '\'';
      copy_to(end);
      if (escape_string) {  // E'...': backslash escapes inside
        size_t j = i + 1;
        while (j < n && sql[j] != '\'') j += sql[j] == '\\' ? 2 : 1;
        copy_to(j + 1);
      }
    } else if (c == '\'' || c == '"') {  // 'literal' or "identifier"; a doubled quote escapes
      size_t j = i + 1;
      for (; j < n; ++j) {
        if (sql[j] != c) continue;
        if (j + 1 < n && sql[j + 1] == c) {
          ++j;
        } else {
          break;
        }
      }
      copy_to(j + 1);
    } else if (c == '-' && next == '-') {
      const size_t eol = sql.find('\n', i);
      copy_to(eol == std::string_view::npos ? n : eol + 1);
    } else if (c == '/' && next == '*') {  // comments nest in PostgreSQL
      int depth = 0;
      size_t j = i;
      while (j < n) {
        if (sql.substr(j, 2) == "/*") {
          ++depth;
          j += 2;
        } else if (sql.substr(j, 2) == "*/") {
          j += 2;
          if (--depth == 0) break;
        } else {
          ++j;
        }
      }
      copy_to(j);
    } else if (c == '$' && std::isdigit(static_cast<unsigned char>(next))) {  // $N, as written
      size_t j = i + 1;
      int index = 0;
      while (j < n && std::isdigit(static_cast<unsigned char>(sql[j])))
        index = index * 10 + (sql[j++] - '0');
      largest = std::max(largest, index);
      copy_to(j);
    } else if (c == '$') {  // $tag$ ... $tag$ (the tag may be empty)
      size_t j = i + 1;
      while (j < n && IsIdentChar(sql[j]) && sql[j] != '$') ++j;
      if (j < n && sql[j] == '$') {
        const std::string_view tag = sql.substr(i, j - i + 1);
        const size_t close = sql.find(tag, j + 1);
        copy_to(close == std::string_view::npos ? n : close + tag.size());
      } else {
        copy_to(i + 1);
      }
    } else if (c == '?') {
      size_t j = i + 1;
      int index = 0;
      while (j < n && std::isdigit(static_cast<unsigned char>(sql[j])))
        index = index * 10 + (sql[j++] - '0');
      if (j == i + 1) index = largest + 1;
      largest = std::max(largest, index);
      out += '$';
      out += std::to_string(index);
      i = j;
    } else {
      copy_to(i + 1);
    }
  }
  *count = largest;
  return out;
}

Status PostgresStatus(std::string_view sqlstate, std::string_view message, bool connection_lost,
                      const std::string& what) {
  const std::string state(sqlstate);
  const std::string text = what + ": " + std::string(message) +
                           (state.empty() ? std::string() : " (SQLSTATE " + state + ")");
  if (connection_lost || state.substr(0, 2) == "08" || state == "57P01" || state == "57P02" ||
      state == "57P03") {
    return Status::Unavailable(
        what + ": the connection to PostgreSQL is lost or refused: " + std::string(message) +
        (state.empty() ? std::string() : " (SQLSTATE " + state + ")"));
  }
  if (state == "25006") {
    return Status::Unavailable(text + ": the server is a read-only standby, not the primary");
  }
  if (state == "53100") return Status::StorageFull(text + ": the database server's disk is full");
  return Status::Internal(text);
}

// A statement cached by its connection: its text rewritten for PostgreSQL, its parameters as
// bound, the server-side statements prepared for it (one per combination of parameter types),
// and the rows of its current execution.
class PostgresDb::PgCursor final : public Cursor {
 public:
  PgCursor(PostgresDb& db, std::string original, std::string text, int param_count)
      : db_(db),
        original_(std::move(original)),
        text_(std::move(text)),
        params_(static_cast<size_t>(param_count)) {}

  void BindInt(int index, int64_t value) override {
    const uint64_t be = htobe64(static_cast<uint64_t>(value));
    Set(index, kInt8Oid, std::string_view(reinterpret_cast<const char*>(&be), sizeof be));
  }
  void BindDouble(int index, double value) override {
    uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    const uint64_t be = htobe64(bits);
    Set(index, kFloat8Oid, std::string_view(reinterpret_cast<const char*>(&be), sizeof be));
  }
  void BindText(int index, std::string_view value) override { Set(index, kTextOid, value); }
  void BindNull(int index) override {
    if (Param* p = At(index)) *p = Param{};
  }

  StatusOr<bool> Step() override {
    if (state_ == State::kIdle) TSR_RETURN_IF_ERROR(Execute());
    return Next();
  }

  int64_t Int(int col) const override {
    const char* v = Value(col);
    if (v == nullptr) return 0;
    switch (PQftype(row_.get(), col)) {
      case kBoolOid:
        return v[0] == 't' ? 1 : 0;
      case kFloat4Oid:
      case kFloat8Oid:
      case kNumericOid:
        return static_cast<int64_t>(std::strtod(v, nullptr));
      default:
        return std::strtoll(v, nullptr, 10);
    }
  }
  double Double(int col) const override {
    const char* v = Value(col);
    if (v == nullptr) return 0;
    if (PQftype(row_.get(), col) == kBoolOid) return v[0] == 't' ? 1 : 0;
    return std::strtod(v, nullptr);
  }
  std::string Text(int col) const override {
    const char* v = Value(col);
    if (v == nullptr) return std::string();
    if (PQftype(row_.get(), col) == kBoolOid) return v[0] == 't' ? "1" : "0";  // as SQLite
    return std::string(v, static_cast<size_t>(PQgetlength(row_.get(), 0, col)));
  }
  bool IsNull(int col) const override {
    return row_ == nullptr || col >= PQnfields(row_.get()) || PQgetisnull(row_.get(), 0, col);
  }
  int ColumnCount() const override { return row_ == nullptr ? 0 : PQnfields(row_.get()); }
  ValueType TypeOf(int col) const override {
    if (IsNull(col)) return ValueType::kNull;
    switch (PQftype(row_.get(), col)) {
      case kBoolOid:
      case kInt2Oid:
      case kInt4Oid:
      case kInt8Oid:
        return ValueType::kInt;
      case kFloat4Oid:
      case kFloat8Oid:
      case kNumericOid:
        return ValueType::kDouble;
      default:
        return ValueType::kText;
    }
  }

  void Reset() override {
    Finish();
    state_ = State::kIdle;
    for (Param& p : params_) p = Param{};
    bind_error_.clear();
  }

  // The connection is wanted for another command: the rest of this execution's results move into
  // memory.
  void Buffer() {
    while (Result r{PQgetResult(db_.conn_)}) buffered_.push_back(std::move(r));
    state_ = State::kBuffered;
    db_.streaming_ = nullptr;
  }

  // The connection was reset: nothing prepared on the server is left.
  void Forget() {
    row_.reset();
    buffered_.clear();
    state_ = State::kIdle;
    variants_.clear();
  }

 private:
  struct Param {
    Oid type = 0;  // 0: NULL
    std::string bytes;
  };
  struct Variant {
    std::vector<Oid> types;
    std::string name;
  };
  enum class State { kIdle, kStreaming, kBuffered, kDone };

  Param* At(int index) {
    if (index < 1 || index > static_cast<int>(params_.size())) {
      bind_error_ = "parameter ?" + std::to_string(index) + " is out of range (the statement has " +
                    std::to_string(params_.size()) + ")";
      return nullptr;
    }
    return &params_[static_cast<size_t>(index - 1)];
  }
  void Set(int index, Oid type, std::string_view bytes) {
    if (Param* p = At(index)) {
      p->type = type;
      p->bytes.assign(bytes.data(), bytes.size());
    }
  }

  std::string What(const char* action) const {
    return std::string("postgresql ") + action + " '" + Head(original_) + "'";
  }

  // A server-side statement whose parameter types fit what is bound (a NULL fits any type); one
  // is prepared when none does. A NULL takes the type another variant gave its position, so the
  // server rarely has to infer one.
  StatusOr<std::string> StatementFor() {
    for (const Variant& v : variants_) {
      bool fits = true;
      for (size_t i = 0; i < params_.size() && fits; ++i) {
        fits = params_[i].type == 0 || params_[i].type == v.types[i];
      }
      if (fits) return v.name;
    }
    Variant v;
    for (size_t i = 0; i < params_.size(); ++i) {
      Oid type = params_[i].type;
      for (size_t k = 0; k < variants_.size() && type == 0; ++k) type = variants_[k].types[i];
      v.types.push_back(type);
    }
    v.name = "tsr_" + std::to_string(db_.next_statement_++);
    Result r(PQprepare(db_.conn_, v.name.c_str(), text_.c_str(), static_cast<int>(v.types.size()),
                       v.types.data()));
    if (r && PQresultStatus(r.get()) != PGRES_COMMAND_OK && SqlState(r.get()) == "42P18") {
      // A parameter the text never uses (a filter left out) and that is NULL has no type the
      // server could infer: give such parameters text and prepare again.
      for (Oid& type : v.types) type = type == 0 ? kTextOid : type;
      r = Result(PQprepare(db_.conn_, v.name.c_str(), text_.c_str(),
                           static_cast<int>(v.types.size()), v.types.data()));
    }
    if (!r || PQresultStatus(r.get()) != PGRES_COMMAND_OK)
      return db_.Failure(r.get(), What("prepare"));
    ++db_.prepared_on_server_;
    variants_.push_back(std::move(v));
    return variants_.back().name;
  }

  Status Execute() {
    if (!bind_error_.empty()) return Status::Internal(What("bind") + ": " + bind_error_);
    db_.Claim();
    TSR_ASSIGN_OR_RETURN(std::string name, StatementFor());
    std::vector<const char*> values(params_.size());
    std::vector<int> lengths(params_.size());
    std::vector<int> formats(params_.size(), 1);  // binary: exact integers and doubles
    for (size_t i = 0; i < params_.size(); ++i) {
      values[i] = params_[i].type == 0 ? nullptr : params_[i].bytes.data();
      lengths[i] = static_cast<int>(params_[i].bytes.size());
    }
    if (!PQsendQueryPrepared(db_.conn_, name.c_str(), static_cast<int>(params_.size()),
                             values.data(), lengths.data(), formats.data(), /*resultFormat=*/0)) {
      return db_.Failure(nullptr, What("send"));
    }
    PQsetSingleRowMode(db_.conn_);
    state_ = State::kStreaming;
    db_.streaming_ = this;
    return Status::Ok();
  }

  StatusOr<bool> Next() {
    row_.reset();
    if (state_ != State::kStreaming && state_ != State::kBuffered) return false;
    Result r;
    if (state_ == State::kStreaming) {
      r.reset(PQgetResult(db_.conn_));
    } else if (!buffered_.empty()) {
      r = std::move(buffered_.front());
      buffered_.pop_front();
    }
    if (!r) {
      Finish();
      return false;
    }
    switch (PQresultStatus(r.get())) {
      case PGRES_SINGLE_TUPLE:
        row_ = std::move(r);
        return true;
      case PGRES_TUPLES_OK:
      case PGRES_COMMAND_OK:
        if (std::optional<int> changed = ChangedRows(r.get())) db_.changes_ = *changed;
        Finish();
        return false;
      default: {
        Status failure = db_.Failure(r.get(), What("step"));
        Finish();
        return failure;
      }
    }
  }

  // Ends the execution: what the connection still has for it is read and dropped (a finished
  // INSERT, UPDATE or DELETE still counts its rows).
  void Finish() {
    row_.reset();
    if (state_ == State::kStreaming) {
      while (Result r{PQgetResult(db_.conn_)}) {
        if (std::optional<int> changed = ChangedRows(r.get())) db_.changes_ = *changed;
      }
      db_.streaming_ = nullptr;
    }
    for (const Result& r : buffered_) {
      if (std::optional<int> changed = ChangedRows(r.get())) db_.changes_ = *changed;
    }
    buffered_.clear();
    if (state_ != State::kIdle) state_ = State::kDone;
  }

  const char* Value(int col) const {
    if (row_ == nullptr || col < 0 || col >= PQnfields(row_.get()) ||
        PQgetisnull(row_.get(), 0, col)) {
      return nullptr;
    }
    return PQgetvalue(row_.get(), 0, col);
  }

  PostgresDb& db_;
  const std::string original_;  // as the store wrote it, for messages
  const std::string text_;      // with $N placeholders
  std::vector<Param> params_;
  std::string bind_error_;
  std::vector<Variant> variants_;
  State state_ = State::kIdle;
  Result row_;                   // the current row (a one-row result)
  std::deque<Result> buffered_;  // the rest of the execution, taken off the connection
};

PostgresDb::PostgresDb(PGconn* conn, std::string redacted, std::string secret)
    : conn_(conn), redacted_(std::move(redacted)), secret_(std::move(secret)) {}

PostgresDb::~PostgresDb() {
  cursors_.clear();
  PQfinish(conn_);  // an open transaction is rolled back by the server
}

StatusOr<std::unique_ptr<PostgresDb>> PostgresDb::Connect(const StoreUrl& url) {
  if (url.engine != Engine::kPostgres) {
    return Status::InvalidArgument("not a PostgreSQL store: " + url.Redacted());
  }
  const std::string redacted = url.Redacted();
  // Later keywords override earlier ones, and the expanded dbname (the whole connection string)
  // overrides the timeout before it: the settings' own connect_timeout wins.
  std::vector<const char*> keys = {"connect_timeout", "dbname", "fallback_application_name"};
  std::vector<const char*> values = {"10", url.conninfo.c_str(), "tessera-scheduler"};
  if (!url.password.empty()) {
    keys.push_back("password");
    values.push_back(url.password.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  PGconn* conn = PQconnectdbParams(keys.data(), values.data(), /*expand_dbname=*/1);
  if (conn == nullptr) {
    return Status::Unavailable("cannot connect to PostgreSQL at " + redacted + ": out of memory");
  }
  const char* used = PQpass(conn);
  std::string secret = used != nullptr && *used != '\0' ? used : url.password;
  std::unique_ptr<PostgresDb> db(new PostgresDb(conn, redacted, secret));
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string message = TrimEnd(PQerrorMessage(conn));
    for (char& c : message) c = c == '\n' ? ' ' : c;
    const bool refused = PQconnectionNeedsPassword(conn) ||
                         message.find("password authentication failed") != std::string::npos;
    if (PQconnectionNeedsPassword(conn)) {
      message +=
          " (the server wants a password: give store.password_file, a password in "
          "store.url, or a PGPASSFILE entry)";
    }
    std::string text = ScrubSecret(
        ScrubSecret("cannot connect to PostgreSQL at " + redacted + ": " + message, secret),
        url.password);
    return refused ? Status::Unauthenticated(std::move(text))
                   : Status::Unavailable(std::move(text));
  }
  if (PQserverVersion(conn) < 120000) {
    return Status::FailedPrecondition("PostgreSQL at " + redacted + " is version " +
                                      std::to_string(PQserverVersion(conn)) +
                                      "; Tessera needs 12 or newer");
  }
  PQsetNoticeProcessor(conn, &LogNotice, nullptr);
  return db;
}

bool PostgresDb::connected() const { return PQstatus(conn_) == CONNECTION_OK; }

int PostgresDb::backend_pid() const { return PQbackendPID(conn_); }

Status PostgresDb::Reconnect() {
  for (auto& [sql, cursor] : cursors_) cursor->Forget();
  streaming_ = nullptr;
  depth_ = 0;
  PQreset(conn_);
  if (PQstatus(conn_) != CONNECTION_OK) {
    return Status::Unavailable(ScrubSecret(
        "cannot reconnect to PostgreSQL at " + redacted_ + ": " + TrimEnd(PQerrorMessage(conn_)),
        secret_));
  }
  return Status::Ok();
}

Status PostgresDb::Failure(const PGresult* result, const std::string& what) const {
  std::string sqlstate, message;
  if (result != nullptr) {
    const char* state = PQresultErrorField(result, PG_DIAG_SQLSTATE);
    const char* primary = PQresultErrorField(result, PG_DIAG_MESSAGE_PRIMARY);
    const char* detail = PQresultErrorField(result, PG_DIAG_MESSAGE_DETAIL);
    sqlstate = state ? state : "";
    message = primary ? primary : "";
    if (detail != nullptr) message += std::string(" (") + detail + ")";
  }
  if (message.empty()) message = TrimEnd(PQerrorMessage(conn_));
  for (char& c : message) c = c == '\n' ? ' ' : c;
  Status status = PostgresStatus(sqlstate, message, PQstatus(conn_) == CONNECTION_BAD, what);
  std::string text = status.message();
  if (status.code() == StatusCode::kUnavailable || status.code() == StatusCode::kStorageFull) {
    text += " [PostgreSQL at " + redacted_ + "]";
  }
  return Status(status.code(), ScrubSecret(std::move(text), secret_));
}

void PostgresDb::Claim() {
  if (streaming_ != nullptr) streaming_->Buffer();
}

StatusOr<std::string> PostgresDb::RunSimple(const std::string& sql, const std::string& what) {
  Claim();
  Result r(PQexec(conn_, sql.c_str()));
  const ExecStatusType status = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) return Failure(r.get(), what);
  if (std::optional<int> changed = ChangedRows(r.get())) changes_ = *changed;
  return std::string(PQcmdStatus(r.get()));
}

Status PostgresDb::Exec(const std::string& sql) {
  return RunSimple(sql, "postgresql exec '" + Head(sql) + "'").status();
}

StatusOr<Cursor*> PostgresDb::PrepareCursor(const std::string& sql) {
  auto it = cursors_.find(sql);
  if (it == cursors_.end()) {
    int count = 0;
    std::string text = RewritePlaceholders(sql, &count);
    it =
        cursors_.emplace(sql, std::make_unique<PgCursor>(*this, sql, std::move(text), count)).first;
  }
  it->second->Reset();
  return it->second.get();
}

Status PostgresDb::Begin() {
  TSR_RETURN_IF_ERROR(
      RunSimple(depth_ == 0 ? "BEGIN" : "SAVEPOINT nested", "postgresql begin").status());
  ++depth_;
  return Status::Ok();
}

Status PostgresDb::Commit() {
  if (depth_ > 1) {
    TSR_RETURN_IF_ERROR(RunSimple("RELEASE SAVEPOINT nested", "postgresql release").status());
    --depth_;
    return Status::Ok();
  }
  Claim();
  if (PQtransactionStatus(conn_) == PQTRANS_INERROR) {
    return Status::Internal(
        "postgresql commit: a statement of the transaction failed, so "
        "PostgreSQL rolled the whole transaction back");
  }
  StatusOr<std::string> tag = RunSimple("COMMIT", "postgresql commit");
  if (!tag.ok()) {
    if (tag.status().code() != StatusCode::kUnavailable) return tag.status();
    return Status::Unavailable(tag.status().message() +
                               "; whether the transaction was committed is unknown");
  }
  if (*tag != "COMMIT") {
    return Status::Internal("postgresql commit: PostgreSQL rolled the transaction back (" + *tag +
                            ")");
  }
  --depth_;
  return Status::Ok();
}

void PostgresDb::Rollback() {
  if (depth_ == 0) return;
  (void)RunSimple(
      depth_ > 1 ? "ROLLBACK TO SAVEPOINT nested; RELEASE SAVEPOINT nested" : "ROLLBACK",
      "postgresql rollback");
  --depth_;
}

}  // namespace tessera::store::sql
