#include "scheduler/store/sqlite/sqlite_database.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace tessera::store {

StatusOr<std::unique_ptr<SqliteDatabase>> SqliteDatabase::Open(const std::string& path,
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
  TSR_ASSIGN_OR_RETURN(auto writer, Db::Open(path, /*read_only=*/false, synchronous));
  return std::unique_ptr<SqliteDatabase>(new SqliteDatabase(path, std::move(writer), clock));
}

SqliteDatabase::SqliteDatabase(std::string path, std::unique_ptr<Db> writer, const Clock& clock)
    : path_(std::move(path)), clock_(clock), writer_(std::move(writer)) {}

SqliteDatabase::~SqliteDatabase() {
  {
    std::lock_guard<std::mutex> lock(checkpoint_mu_);
    stopping_ = true;
  }
  checkpoint_cv_.notify_all();
  if (checkpointer_.joinable()) checkpointer_.join();
}

int64_t SqliteDatabase::Now() const { return clock_.WallMs(); }

Status SqliteDatabase::StartCheckpointer(const std::string& synchronous) {
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

StatusOr<SqliteDatabase::Reader> SqliteDatabase::BorrowReader() {
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
  TSR_ASSIGN_OR_RETURN(auto conn, Db::Open(path_, /*read_only=*/true));
  return Reader(this, std::move(conn));
}

void SqliteDatabase::ReturnReader(std::unique_ptr<Db> conn) {
  std::lock_guard<std::mutex> lock(pool_mu_);
  if (readers_.size() < 16) readers_.push_back(std::move(conn));
}

}  // namespace tessera::store
