#pragma once
// The scheduler's content-addressed blob store: job assets (meshes, textures, environment maps,
// renderer files) by the SHA-256 of their bytes, so a file shared by many jobs is stored once
// and a worker fetches it once into its cache (worker/blob_cache.h).
//
// Layout: <dir>/<first two hex digits>/<hash>, complete and verified blobs only; uploads in
// progress are <dir>/uploads/<hash>.part. An upload is resumable: pieces are appended at the
// offset the store reports (HEAD /api/v1/blobs/{hash} says how far it got), and when the last
// byte arrives the whole file is hashed; a blob whose bytes do not match its name is discarded.
// Thread-safe: the HTTP API writes, the broker reads pieces for workers.
//
// Limits: a blob is at most kMaxBlobBytes; one upload piece at most kMaxUploadPieceBytes.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "shared/base/status.h"

namespace tessera::blobs {

inline constexpr int64_t kMaxBlobBytes = int64_t{16} << 30;
inline constexpr int64_t kMaxUploadPieceBytes = int64_t{16} << 20;

class BlobStore {
 public:
  explicit BlobStore(std::string dir) : dir_(std::move(dir)) {}

  // Creates the folders.
  Status Open();
  const std::string& dir() const { return dir_; }

  // The size of a complete blob; NotFound when the store lacks it. `hash` must be IsSha256Hex.
  StatusOr<int64_t> Size(const std::string& hash) const;
  // Bytes of an unfinished upload (0 when none).
  int64_t Received(const std::string& hash) const;

  struct Progress {
    int64_t received = 0;
    bool complete = false;  // verified and stored
  };
  // Appends `bytes` at `offset` of the blob `hash` of `total` bytes. Errors name the field:
  // offset (not where the upload stands), total (out of range, or differs from the upload's),
  // hash (the bytes do not match it; the upload is discarded).
  StatusOr<Progress> Write(const std::string& hash, int64_t offset, int64_t total,
                           std::string_view bytes);
  // Bytes [offset, offset + length) of a complete blob (fewer at its end).
  StatusOr<std::string> Read(const std::string& hash, int64_t offset, int64_t length) const;
  std::string PathOf(const std::string& hash) const;
  // Stores bytes the scheduler itself has (a handed-back checkpoint); returns their hash.
  StatusOr<std::string> Put(std::string_view bytes);
  void Remove(const std::string& hash);
  // Removes the blob unless it was stored or marked in use (Touch) within `grace`: a job being
  // submitted may have just found it. Returns whether it was removed.
  bool RemoveIfIdle(const std::string& hash, std::chrono::seconds grace);
  // Marks the blob as in use now (a job naming it was submitted).
  void Touch(const std::string& hash);

 private:
  std::string UploadPathOf(const std::string& hash) const;
  std::shared_ptr<std::mutex> LockFor(const std::string& hash);

  const std::string dir_;
  std::mutex mu_;  // guards locks_
  std::map<std::string, std::weak_ptr<std::mutex>> locks_;
};

}  // namespace tessera::blobs
