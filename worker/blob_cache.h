#pragma once
// The worker's cache of job assets (content-addressed blobs, scheduler/blobs/blob_store.h):
// <dir>/<sha256>, bounded to max_bytes by evicting the least recently used blob no running task
// holds. A blob is fetched from the scheduler once (the agent's kBlobRequest window) into
// <dir>/<sha256>.part and verified by its hash before it is kept; a cached copy is hashed again
// whenever its size or modification time changed since it was last verified, so a copy damaged
// on disk is noticed, dropped and fetched again. Used by the agent's I/O thread only.
//
// Tasks see their assets under their own folder: LinkAssets hard-links (or copies, across file
// systems) each cached blob to its path there.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "shared/base/status.h"

namespace tessera::worker {

class BlobCache {
 public:
  BlobCache(std::string dir, int64_t max_bytes) : dir_(std::move(dir)), max_bytes_(max_bytes) {}
  const std::string& dir() const { return dir_; }

  // Creates the folder, drops unfinished fetches, and learns what is cached.
  Status Open();
  // The cached, verified file of `hash`, or nothing (a copy that fails verification is deleted).
  std::optional<std::string> Lookup(const std::string& hash);
  // Where a fetch of `hash` writes.
  std::string PartPathOf(const std::string& hash) const { return dir_ + "/" + hash + ".part"; }
  // The fetch of `hash` is complete: verifies it and keeps it (an error when its bytes do not
  // match the hash; the file is deleted). Then evicts down to the size bound.
  Status Commit(const std::string& hash);
  // Blobs a running task uses are never evicted.
  void Hold(const std::string& hash) { ++holds_[hash]; }
  void Release(const std::string& hash);
  int64_t size_bytes() const { return size_bytes_; }

 private:
  struct Entry {
    int64_t size = 0;
    std::filesystem::file_time_type verified_mtime{};  // {} until verified by this process
    std::chrono::steady_clock::time_point used{};
  };
  std::string PathOf(const std::string& hash) const { return dir_ + "/" + hash; }
  void Remove(const std::string& hash);
  void Evict();

  const std::string dir_;
  const int64_t max_bytes_;
  int64_t size_bytes_ = 0;
  std::map<std::string, Entry> entries_;
  std::map<std::string, int> holds_;
};

// Makes `files` (path relative to `dir` -> cached file) visible in `dir`: hard links, or copies
// where a link cannot be made. Paths were validated at submission (spec::ValidateAssetPath).
Status LinkAssets(const std::string& dir, const std::map<std::string, std::string>& files);

}  // namespace tessera::worker
