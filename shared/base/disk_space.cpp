#include "shared/base/disk_space.h"

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace tessera::disk_space {

namespace fs = std::filesystem;

bool IsFullErrno(int err) { return err == ENOSPC || err == EDQUOT || err == EROFS; }

StatusOr<Room> RoomFor(const std::string& path) {
  fs::path probe = path.empty() ? fs::path(".") : fs::path(path);
  std::error_code ec;
  for (int depth = 0; depth < 256; ++depth) {
    struct statvfs vfs {};
    struct stat st {};
    if (::statvfs(probe.c_str(), &vfs) == 0 && ::stat(probe.c_str(), &st) == 0) {
      Room room;
      room.free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
      room.total_bytes = static_cast<uint64_t>(vfs.f_blocks) * vfs.f_frsize;
      room.read_only = (vfs.f_flag & ST_RDONLY) != 0;
      room.device = st.st_dev;
      room.mount_probe = probe.string();
      return room;
    }
    if (!probe.has_parent_path() || probe.parent_path() == probe) break;
    probe = probe.parent_path();
  }
  return Status::Internal("cannot ask the free space of " + path + ": " + std::strerror(errno));
}

namespace {

std::string Bytes(uint64_t n) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(n);
  int unit = 0;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  char text[48];
  if (unit == 0) {
    std::snprintf(text, sizeof(text), "%llu B", static_cast<unsigned long long>(n));
  } else {
    std::snprintf(text, sizeof(text), "%.1f %s", value, kUnits[unit]);
  }
  return text;
}

std::string RoomText(const std::string& path) {
  auto room = RoomFor(path);
  return room.ok() ? Describe(*room) : room.status().message();
}

}  // namespace

std::string Describe(const Room& room) {
  if (room.read_only) return "read-only filesystem at " + room.mount_probe;
  return Bytes(room.free_bytes) + " free of " + Bytes(room.total_bytes) + " on " + room.mount_probe;
}

Status FullError(const std::string& what, const std::string& path, int err) {
  const char* why = err == EROFS    ? "read-only filesystem"
                    : err == EDQUOT ? "disk quota exceeded"
                                    : "no space left on device";
  return Status::StorageFull(std::string(why) + ": cannot " + what + " " + path + " (" +
                             RoomText(path) + ")");
}

Status ClassifyWriteFailure(const Status& failed, const std::string& path, uint64_t needed_bytes) {
  if (failed.ok() || failed.code() == StatusCode::kStorageFull) return failed;
  auto room = RoomFor(path);
  if (!room.ok()) return failed;
  const uint64_t needed = std::max<uint64_t>(needed_bytes, uint64_t{1} << 20);
  if (!room->read_only && room->free_bytes >= needed) return failed;
  const char* why = room->read_only ? "read-only filesystem" : "no space left on device";
  return Status::StorageFull(std::string(why) + ": " + failed.message() + " (" + Describe(*room) +
                             ", " + Bytes(needed) + " needed)");
}

Status CheckFloor(const std::string& path, uint64_t floor_bytes, const std::string& setting) {
  auto room = RoomFor(path);
  if (!room.ok()) return room.status();
  if (room->read_only) {
    return Status::StorageFull("read-only filesystem: " + path + " cannot be written");
  }
  if (room->free_bytes >= floor_bytes) return Status::Ok();
  return Status::StorageFull("low on disk space: " + Describe(*room) + ", below " + setting + " (" +
                             Bytes(floor_bytes) + ")");
}

}  // namespace tessera::disk_space
