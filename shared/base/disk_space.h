#pragma once
// Full filesystems, told apart from other I/O failures. Wherever a daemon writes (frames, parts,
// the spool, the cache, blobs, the database) a write that fails for want of room is a
// StatusCode::kStorageFull status naming the path and the room left, so callers can wait for
// space instead of charging the work or stopping.

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "shared/base/status.h"

namespace tessera::disk_space {

// errno values that mean "this filesystem takes no more": ENOSPC, EDQUOT, EROFS.
bool IsFullErrno(int err);

struct Room {
  uint64_t free_bytes = 0;  // what an unprivileged writer may still use (f_bavail)
  uint64_t total_bytes = 0;
  bool read_only = false;
  dev_t device = 0;         // the filesystem, to group paths that fill up together
  std::string mount_probe;  // the existing folder that was asked (path or its nearest parent)
};

// The room on the filesystem holding `path` (the path itself or, when it does not exist yet, its
// nearest existing parent). Internal when not even "/" can be asked.
StatusOr<Room> RoomFor(const std::string& path);

// "12.0 MiB free of 100.0 MiB on /data" (or "read-only filesystem at /data").
std::string Describe(const Room& room);

// StorageFull for a write of `path` that failed with `err`: "no space left on device: cannot
// write PATH (0 B free of 64.0 MiB on /mnt/out)". `what` is the operation ("write frame").
Status FullError(const std::string& what, const std::string& path, int err);

// Classifies a failed write of `path` whose errno is unknown (a library reported it, e.g.
// OpenImageIO): StorageFull when the filesystem is read-only or has less than `needed_bytes`
// (at least 1 MiB) left, else `failed` unchanged. Never turns success into failure.
Status ClassifyWriteFailure(const Status& failed, const std::string& path, uint64_t needed_bytes);

// OkStatus when the filesystem of `path` has at least `floor_bytes` free; StorageFull naming the
// path, the room and the floor otherwise (also when it is read-only).
Status CheckFloor(const std::string& path, uint64_t floor_bytes, const std::string& setting);

}  // namespace tessera::disk_space
