#pragma once
// Test support: a small tmpfs mounted over a folder, to fill a filesystem for real (outputs,
// the data folder, a worker's spool) without touching the machine's disks. Needs root (CI runs as
// root); use with TSR_REQUIRE(::geteuid() == 0, ...).
//
//   ScopedTmpfs out(dir + "/out", 4 << 20);   // 4 MiB
//   ASSERT_TRUE(out.mounted()) << out.error();
//   out.Fill();         // leaves no free block
//   out.FreeFiller();   // space is back

#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace tessera::testing {

class ScopedTmpfs {
 public:
  ScopedTmpfs(std::string dir, uint64_t size_bytes) : dir_(std::move(dir)) {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    const std::string options = "size=" + std::to_string(size_bytes) + ",mode=0755";
    if (::mount("tmpfs", dir_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, options.c_str()) != 0) {
      error_ = "mount tmpfs on " + dir_ + ": " + std::strerror(errno);
      return;
    }
    mounted_ = true;
  }
  ~ScopedTmpfs() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  ScopedTmpfs(const ScopedTmpfs&) = delete;
  ScopedTmpfs& operator=(const ScopedTmpfs&) = delete;

  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }
  const std::string& dir() const { return dir_; }

  // Writes a hidden filler file until the filesystem has no free block left.
  void Fill() {
    const std::string path = dir_ + "/.filler";
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) return;
    std::vector<char> block(64 * 1024, 'x');
    for (size_t size = block.size(); size > 0;) {
      if (::write(fd, block.data(), size) < 0) size /= 2;  // ENOSPC: try smaller pieces
    }
    ::close(fd);
  }
  // Removes the filler: the space Fill() took is free again.
  void FreeFiller() { std::filesystem::remove(dir_ + "/.filler"); }

  // Remounts read-only (EROFS for every writer) or read-write again.
  bool SetReadOnly(bool read_only) {
    const unsigned long flags = MS_REMOUNT | MS_NOSUID | MS_NODEV | (read_only ? MS_RDONLY : 0);
    return ::mount("tmpfs", dir_.c_str(), "tmpfs", flags, nullptr) == 0;
  }

 private:
  std::string dir_;
  bool mounted_ = false;
  std::string error_;
};

}  // namespace tessera::testing
