#include "scheduler/blobs/blob_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "shared/base/disk_space.h"
#include "shared/base/file_io.h"
#include "shared/base/sha256.h"

namespace tessera::blobs {

namespace fs = std::filesystem;

namespace {

// Writes all of `bytes` at `offset`, retrying short writes.
Status PwriteAll(int fd, std::string_view bytes, int64_t offset, const std::string& path) {
  while (!bytes.empty()) {
    ssize_t n = ::pwrite(fd, bytes.data(), bytes.size(), offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      // 507 to the uploader, with the room left: not a server fault to retry at once.
      if (disk_space::IsFullErrno(errno)) return disk_space::FullError("write", path, errno);
      return Status::Internal(path + ": write failed: " + std::strerror(errno));
    }
    bytes.remove_prefix(static_cast<size_t>(n));
    offset += n;
  }
  return Status::Ok();
}

}  // namespace

Status BlobStore::Open() {
  // Assets and checkpoints are the farm's users' data: readable by the scheduler's user alone.
  TSR_RETURN_IF_ERROR(file_io::MakePrivateDirectory(dir_));
  return file_io::MakePrivateDirectory(dir_ + "/uploads");
}

std::string BlobStore::PathOf(const std::string& hash) const {
  return dir_ + "/" + hash.substr(0, 2) + "/" + hash;
}

std::string BlobStore::UploadPathOf(const std::string& hash) const {
  return dir_ + "/uploads/" + hash + ".part";
}

std::shared_ptr<std::mutex> BlobStore::LockFor(const std::string& hash) {
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<std::mutex> m = locks_[hash].lock();
  if (!m) {
    m = std::make_shared<std::mutex>();
    locks_[hash] = m;
  }
  // Forget the locks nobody holds, so the map stays as small as the uploads in progress.
  for (auto it = locks_.begin(); it != locks_.end();) {
    it = it->second.expired() ? locks_.erase(it) : std::next(it);
  }
  return m;
}

StatusOr<int64_t> BlobStore::Size(const std::string& hash) const {
  std::error_code ec;
  const auto size = fs::file_size(PathOf(hash), ec);
  if (ec) return Status::NotFound("blob " + hash + " is not stored");
  return static_cast<int64_t>(size);
}

int64_t BlobStore::Received(const std::string& hash) const {
  std::error_code ec;
  const auto size = fs::file_size(UploadPathOf(hash), ec);
  return ec ? 0 : static_cast<int64_t>(size);
}

StatusOr<BlobStore::Progress> BlobStore::Write(const std::string& hash, int64_t offset,
                                               int64_t total, std::string_view bytes) {
  if (total < 0 || total > kMaxBlobBytes) {
    return Status::InvalidArgument("total: " + std::to_string(total) + " is outside 0.." +
                                   std::to_string(kMaxBlobBytes) + " bytes");
  }
  if (static_cast<int64_t>(bytes.size()) > kMaxUploadPieceBytes) {
    return Status::InvalidArgument("body: a piece may be at most " +
                                   std::to_string(kMaxUploadPieceBytes) + " bytes");
  }
  std::shared_ptr<std::mutex> m = LockFor(hash);
  std::lock_guard<std::mutex> lock(*m);
  if (StatusOr<int64_t> have = Size(hash); have.ok()) {
    if (*have != total) {
      return Status::InvalidArgument("total: the stored blob " + hash + " has " +
                                     std::to_string(*have) + " bytes, not " +
                                     std::to_string(total));
    }
    return Progress{total, true};  // already here: nothing to do
  }
  const std::string part = UploadPathOf(hash);
  const int64_t received = Received(hash);
  if (offset != received) {
    return Status::FailedPrecondition("offset: the upload of " + hash + " stands at " +
                                      std::to_string(received) + ", not " + std::to_string(offset));
  }
  if (offset + static_cast<int64_t>(bytes.size()) > total) {
    return Status::InvalidArgument("total: " + std::to_string(offset + bytes.size()) +
                                   " bytes sent for a blob of " + std::to_string(total));
  }
  int fd = ::open(part.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0 && disk_space::IsFullErrno(errno)) return disk_space::FullError("open", part, errno);
  if (fd < 0) return Status::Internal(part + ": cannot open: " + std::strerror(errno));
  Status written = PwriteAll(fd, bytes, offset, part);
  const bool complete = written.ok() && offset + static_cast<int64_t>(bytes.size()) == total;
  if (complete && ::fsync(fd) != 0) {
    written = disk_space::IsFullErrno(errno) ? disk_space::FullError("write", part, errno)
                                             : Status::Internal(part + ": fsync failed");
  }
  ::close(fd);
  TSR_RETURN_IF_ERROR(written);
  if (!complete) return Progress{offset + static_cast<int64_t>(bytes.size()), false};

  TSR_ASSIGN_OR_RETURN(std::string actual, Sha256File(part));
  std::error_code ec;
  if (actual != hash) {
    fs::remove(part, ec);
    return Status::InvalidArgument("hash: the uploaded bytes have SHA-256 " + actual + ", not " +
                                   hash + "; the upload was discarded");
  }
  TSR_RETURN_IF_ERROR(file_io::MakePrivateDirectory(fs::path(PathOf(hash)).parent_path()));
  fs::rename(part, PathOf(hash), ec);
  if (ec) return Status::Internal("cannot store blob " + hash + ": " + ec.message());
  return Progress{total, true};
}

StatusOr<std::string> BlobStore::Put(std::string_view bytes) {
  const std::string hash = Sha256Hex(bytes);
  if (Size(hash).ok()) return hash;
  TSR_RETURN_IF_ERROR(file_io::MakePrivateDirectory(fs::path(PathOf(hash)).parent_path()));
  TSR_RETURN_IF_ERROR(file_io::WriteAtomically(PathOf(hash), {bytes}, 0600));
  return hash;
}

void BlobStore::Remove(const std::string& hash) {
  std::error_code ec;
  fs::remove(PathOf(hash), ec);
}

bool BlobStore::RemoveIfIdle(const std::string& hash, std::chrono::seconds grace) {
  std::error_code ec;
  const auto mtime = fs::last_write_time(PathOf(hash), ec);
  if (ec || fs::file_time_type::clock::now() - mtime < grace) return false;
  return fs::remove(PathOf(hash), ec);
}

void BlobStore::Touch(const std::string& hash) {
  std::error_code ec;
  fs::last_write_time(PathOf(hash), fs::file_time_type::clock::now(), ec);
}

StatusOr<std::string> BlobStore::Read(const std::string& hash, int64_t offset,
                                      int64_t length) const {
  const std::string path = PathOf(hash);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::NotFound("blob " + hash + " is not stored");
  std::string bytes(static_cast<size_t>(std::max<int64_t>(0, length)), '\0');
  size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::pread(fd, bytes.data() + got, bytes.size() - got, offset + got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return Status::Internal(path + ": read failed: " + std::strerror(errno));
    }
    if (n == 0) break;  // end of the blob
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  bytes.resize(got);
  return bytes;
}

}  // namespace tessera::blobs
