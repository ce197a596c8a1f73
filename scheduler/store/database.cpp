#include "scheduler/store/database.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "scheduler/store/postgres/postgres.h"
#include "scheduler/store/sqlite/sqlite_engine.h"

namespace tessera::store {

StatusOr<std::unique_ptr<Database>> Database::OpenSqlite(const std::string& path,
                                                         const std::string& synchronous,
                                                         const Clock& clock) {
  // The database holds job files, token hashes and keys: the scheduler's user's alone. SQLite
  // creates a new file 0644 (less the umask) and gives its -wal and -shm the database file's
  // mode, so the file is made 0600 before SQLite opens it (an older one is tightened too).
  for (const char* suffix : {"", "-wal", "-shm"}) {
    const std::string file = path + suffix;
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | (*suffix ? 0 : O_CREAT), 0600);
    if (fd < 0) continue;  // (-wal, -shm: not there yet)
    const int error = ::fchmod(fd, 0600) == 0 ? 0 : errno;
    ::close(fd);
    if (error != 0) {  // another user's file that we may write: say so, and carry on
      spdlog::warn("cannot make {} private (mode 0600): {}", file, std::strerror(error));
    }
  }
  TSR_ASSIGN_OR_RETURN(std::unique_ptr<sql::SqliteDb> writer,
                       sql::SqliteDb::Open(path, /*read_only=*/false, synchronous));
  Db* sqlite_writer = &writer->connection();
  auto connect_reader = [path]() -> StatusOr<std::unique_ptr<sql::Db>> {
    TSR_ASSIGN_OR_RETURN(std::unique_ptr<sql::SqliteDb> reader,
                         sql::SqliteDb::Open(path, /*read_only=*/true));
    return std::unique_ptr<sql::Db>(std::move(reader));
  };
  std::unique_ptr<Database> db(
      new Database(path, std::move(writer), std::move(connect_reader), clock));
  db->sqlite_writer_ = sqlite_writer;
  return db;
}

StatusOr<std::unique_ptr<Database>> Database::OpenPostgres(const StoreUrl& url,
                                                           const Clock& clock) {
  TSR_ASSIGN_OR_RETURN(std::unique_ptr<sql::PostgresDb> writer, sql::PostgresDb::Connect(url));
  auto connect_reader = [url]() -> StatusOr<std::unique_ptr<sql::Db>> {
    TSR_ASSIGN_OR_RETURN(std::unique_ptr<sql::PostgresDb> reader, sql::PostgresDb::Connect(url));
    return std::unique_ptr<sql::Db>(std::move(reader));
  };
  return std::unique_ptr<Database>(
      new Database("", std::move(writer), std::move(connect_reader), clock));
}

Database::Database(std::string path, std::unique_ptr<sql::Db> writer, Connect connect_reader,
                   const Clock& clock)
    : path_(std::move(path)),
      clock_(clock),
      writer_(std::move(writer)),
      connect_reader_(std::move(connect_reader)) {}

Database::~Database() {
  {
    std::lock_guard<std::mutex> lock(checkpoint_mu_);
    stopping_ = true;
  }
  checkpoint_cv_.notify_all();
  if (checkpointer_.joinable()) checkpointer_.join();
}

int64_t Database::Now() const { return clock_.WallMs(); }

Status Database::StartCheckpointer(const std::string& synchronous) {
  if (engine() != sql::Engine::kSqlite) return Status::Ok();
  // The writer never checkpoints (that fsyncs, and would stall the broker's pass); a connection
  // of its own copies the WAL back into the database in the background. PASSIVE never blocks
  // the writer or readers. (Its period is real time: it paces a background thread and stamps
  // nothing.)
  TSR_RETURN_IF_ERROR(writer_->Exec("PRAGMA wal_autocheckpoint=0"));
  TSR_ASSIGN_OR_RETURN(std::shared_ptr<Db> db, Db::Open(path_, /*read_only=*/false, synchronous));
  checkpointer_ = std::thread([this, db] {
    std::unique_lock<std::mutex> lock(checkpoint_mu_);
    while (!checkpoint_cv_.wait_for(lock, std::chrono::milliseconds(250),
                                    [this] { return stopping_; })) {
      lock.unlock();
      (void)db->Exec("PRAGMA wal_checkpoint(PASSIVE)");
      lock.lock();
    }
  });
  return Status::Ok();
}

// ---- reader pool ------------------------------------------------------------------------------

StatusOr<Database::Reader> Database::BorrowReader() {
  if (InGroup()) {
    EnterGroupTransaction();  // the group's thread reads its own writes
    return Reader(writer_.get());
  }
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (!readers_.empty()) {
      auto conn = std::move(readers_.back());
      readers_.pop_back();
      return Reader(this, std::move(conn));
    }
  }
  TSR_ASSIGN_OR_RETURN(std::unique_ptr<sql::Db> conn, connect_reader_());
  return Reader(this, std::move(conn));
}

void Database::ReturnReader(std::unique_ptr<sql::Db> conn) {
  if (!conn->Usable()) return;  // lost (a server restart): the next borrow connects afresh
  std::lock_guard<std::mutex> lock(pool_mu_);
  if (readers_.size() < 16) readers_.push_back(std::move(conn));
}

}  // namespace tessera::store
