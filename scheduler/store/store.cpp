#include "scheduler/store/store.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

namespace tessera::store {

// ---- reader pool ------------------------------------------------------------------------------

// A read connection for one call: one from the pool, or -- for the thread inside a WriteGroup,
// which must see its own uncommitted writes -- the writer itself (that thread holds its lock).
StatusOr<Store::Reader> Store::BorrowReader() {
  if (InGroup()) {
    EnterGroupTransaction();  // the group's thread reads its own writes
    return Reader(writer_.get());
  }
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (!readers_.empty()) {
      auto db = std::move(readers_.back());
      readers_.pop_back();
      return Reader(this, std::move(db));
    }
  }
  TSR_ASSIGN_OR_RETURN(auto db, Db::Open(path_, /*read_only=*/true));
  return Reader(this, std::move(db));
}

void Store::ReturnReader(std::unique_ptr<Db> db) {
  std::lock_guard<std::mutex> lock(pool_mu_);
  if (readers_.size() < 16) readers_.push_back(std::move(db));
}

// ---- open & migrate ---------------------------------------------------------------------------

Store::Store(std::string path, std::unique_ptr<Db> writer)
    : path_(std::move(path)), writer_(std::move(writer)) {}

std::string Store::data_dir() const { return std::filesystem::path(path_).parent_path().string(); }

Store::~Store() {
  {
    std::lock_guard<std::mutex> lock(checkpoint_mu_);
    stopping_ = true;
  }
  checkpoint_cv_.notify_all();
  if (checkpointer_.joinable()) checkpointer_.join();
}

Status Store::StartCheckpointer(const std::string& synchronous) {
  // The writer never checkpoints (that fsyncs, and would stall the broker's pass); a connection
  // of its own copies the WAL back into the database in the background. PASSIVE never blocks
  // the writer or readers.
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

StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& data_dir,
                                             const std::string& synchronous) {
  std::error_code ec;
  std::filesystem::create_directories(data_dir, ec);
  if (ec) return Status::Internal("cannot create data directory " + data_dir + ": " + ec.message());
  std::string path = (std::filesystem::path(data_dir) / "tessera.db").string();
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
  std::unique_ptr<Store> store(new Store(path, std::move(writer)));
  TSR_RETURN_IF_ERROR(store->Migrate());
  TSR_RETURN_IF_ERROR(store->LoadAttemptCounts());
  TSR_RETURN_IF_ERROR(store->StartCheckpointer(synchronous));
  return store;
}

}  // namespace tessera::store
