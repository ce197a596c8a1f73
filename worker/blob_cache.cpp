#include "worker/blob_cache.h"

#include <spdlog/spdlog.h>

#include "shared/base/disk_space.h"
#include "shared/base/file_io.h"
#include "shared/base/sha256.h"

namespace tessera::worker {

namespace fs = std::filesystem;

Status BlobCache::Open() {
  // Job assets (and checkpoints) from the scheduler: the worker's user's alone.
  if (Status s = file_io::MakePrivateDirectory(dir_); !s.ok()) {
    return Status::Internal("cannot create the blob cache: " + s.message());
  }
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir_, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 5 && name.ends_with(".part")) {
      fs::remove(e.path(), ec);  // an unfinished fetch: started again when needed
    } else if (IsSha256Hex(name) && e.is_regular_file(ec)) {
      Entry entry;
      entry.size = static_cast<int64_t>(e.file_size(ec));
      size_bytes_ += entry.size;
      entries_[name] = entry;
    }
  }
  return Status::Ok();
}

std::optional<std::string> BlobCache::Lookup(const std::string& hash) {
  auto it = entries_.find(hash);
  if (it == entries_.end()) return std::nullopt;
  const std::string path = PathOf(hash);
  std::error_code ec;
  const fs::file_time_type mtime = fs::last_write_time(path, ec);
  const auto size = static_cast<int64_t>(fs::file_size(path, ec));
  if (ec) {
    Remove(hash);
    return std::nullopt;
  }
  if (mtime != it->second.verified_mtime || size != it->second.size) {
    StatusOr<std::string> actual = Sha256File(path);
    if (!actual.ok() || *actual != hash) {
      spdlog::warn("cached asset {} is damaged ({}); fetching it again", hash,
                   actual.ok() ? "its bytes hash to " + *actual : actual.status().message());
      Remove(hash);
      return std::nullopt;
    }
    size_bytes_ += size - it->second.size;
    it->second.size = size;
    it->second.verified_mtime = mtime;
  }
  it->second.used = std::chrono::steady_clock::now();
  return path;
}

Status BlobCache::Commit(const std::string& hash) {
  const std::string part = PartPathOf(hash);
  std::error_code ec;
  StatusOr<std::string> actual = Sha256File(part);
  if (!actual.ok() || *actual != hash) {
    fs::remove(part, ec);
    return Status::Internal(
        "blob " + hash + " arrived damaged (" +
        (actual.ok() ? "its bytes hash to " + *actual : actual.status().message()) + ")");
  }
  if (auto old = entries_.find(hash); old != entries_.end()) {  // a copy it replaces
    size_bytes_ -= old->second.size;
    entries_.erase(old);
  }
  fs::rename(part, PathOf(hash), ec);
  if (ec && disk_space::IsFullErrno(ec.value())) {
    return disk_space::FullError("keep the cached blob", PathOf(hash), ec.value());
  }
  if (ec) return Status::Internal("cannot keep blob " + hash + ": " + ec.message());
  Entry entry;
  entry.size = static_cast<int64_t>(fs::file_size(PathOf(hash), ec));
  entry.verified_mtime = fs::last_write_time(PathOf(hash), ec);
  entry.used = std::chrono::steady_clock::now();
  size_bytes_ += entry.size;
  entries_[hash] = entry;
  Evict();
  return Status::Ok();
}

void BlobCache::Release(const std::string& hash) {
  auto it = holds_.find(hash);
  if (it != holds_.end() && --it->second <= 0) holds_.erase(it);
}

void BlobCache::Remove(const std::string& hash) {
  auto it = entries_.find(hash);
  if (it == entries_.end()) return;
  std::error_code ec;
  fs::remove(PathOf(hash), ec);
  size_bytes_ -= it->second.size;
  entries_.erase(it);
}

void BlobCache::Evict() {
  while (size_bytes_ > max_bytes_) {
    auto oldest = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (holds_.count(it->first)) continue;
      if (oldest == entries_.end() || it->second.used < oldest->second.used) oldest = it;
    }
    if (oldest == entries_.end()) return;  // everything left is in use
    spdlog::info("asset cache over {} MiB: evicting {} ({} bytes)", max_bytes_ >> 20, oldest->first,
                 oldest->second.size);
    Remove(oldest->first);
  }
}

Status LinkAssets(const std::string& dir, const std::map<std::string, std::string>& files) {
  std::error_code ec;
  for (const auto& [relative, cached] : files) {
    const fs::path target = fs::path(dir) / relative;
    fs::create_directories(target.parent_path(), ec);
    fs::remove(target, ec);
    fs::create_hard_link(cached, target, ec);
    if (ec) {
      ec.clear();
      fs::copy_file(cached, target, fs::copy_options::overwrite_existing, ec);
    }
    if (ec && disk_space::IsFullErrno(ec.value())) {
      return disk_space::FullError("place the asset", target.string(), ec.value());
    }
    if (ec) return Status::Internal("asset " + relative + ": cannot place it: " + ec.message());
  }
  return Status::Ok();
}

}  // namespace tessera::worker
