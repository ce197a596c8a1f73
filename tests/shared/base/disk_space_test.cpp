// disk_space: full filesystems told apart from other write failures, on a real (tmpfs) filesystem.

#include "shared/base/disk_space.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "tests/support/require.h"
#include "tests/support/tmpfs.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

std::string TempDir(const char* name) {
  fs::path dir = fs::temp_directory_path() /
                 (std::string("tsr-disk-") + name + "-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir.string();
}

TEST(DiskSpace, FullErrnosAreTheThreeThatMeanNoRoom) {
  EXPECT_TRUE(disk_space::IsFullErrno(ENOSPC));
  EXPECT_TRUE(disk_space::IsFullErrno(EDQUOT));
  EXPECT_TRUE(disk_space::IsFullErrno(EROFS));
  EXPECT_FALSE(disk_space::IsFullErrno(EACCES));
  EXPECT_FALSE(disk_space::IsFullErrno(EIO));
}

TEST(DiskSpace, RoomForAPathNotYetCreatedAsksItsNearestParent) {
  const std::string dir = TempDir("parent");
  auto room = disk_space::RoomFor(dir + "/not/yet/frame.exr");
  ASSERT_TRUE(room.ok()) << room.status().ToString();
  EXPECT_EQ(room->mount_probe, dir);
  EXPECT_GT(room->total_bytes, 0u);
  fs::remove_all(dir);
}

TEST(DiskSpace, FullErrorNamesThePathAndTheRoom) {
  const std::string dir = TempDir("named");
  const Status s = disk_space::FullError("write frame", dir + "/f.exr", ENOSPC);
  EXPECT_EQ(s.code(), StatusCode::kStorageFull);
  EXPECT_NE(s.message().find("no space left on device"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(dir + "/f.exr"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(" free of "), std::string::npos) << s.message();
  fs::remove_all(dir);
}

TEST(DiskSpace, ALibraryFailureOnAFullFilesystemIsStorageFullAndOtherwiseUnchanged) {
  TSR_REQUIRE(::geteuid() == 0, "needs root to mount a tmpfs");
  const std::string dir = TempDir("tmpfs");
  struct Cleanup {
    std::string dir;
    ~Cleanup() { fs::remove_all(dir); }
  } cleanup{dir};  // after the tmpfs below is unmounted
  testing::ScopedTmpfs fs_(dir + "/out", 2 << 20);
  ASSERT_TRUE(fs_.mounted()) << fs_.error();
  const Status failed = Status::Internal("Failed OpenEXR write: File output failed");

  // Room to spare: the failure is someone else's and stays as it was.
  Status s = disk_space::ClassifyWriteFailure(failed, fs_.dir() + "/f.exr", 1024);
  EXPECT_EQ(s.code(), StatusCode::kInternal) << s.ToString();

  fs_.Fill();
  s = disk_space::ClassifyWriteFailure(failed, fs_.dir() + "/f.exr", 1024);
  EXPECT_EQ(s.code(), StatusCode::kStorageFull) << s.ToString();
  EXPECT_NE(s.message().find("no space left on device"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("Failed OpenEXR write"), std::string::npos) << s.message();
  EXPECT_FALSE(disk_space::CheckFloor(fs_.dir(), 1 << 20, "storage.min_free_mb").ok());

  fs_.FreeFiller();
  EXPECT_TRUE(disk_space::CheckFloor(fs_.dir(), 1 << 20, "storage.min_free_mb").ok());
  ASSERT_TRUE(fs_.SetReadOnly(true));
  s = disk_space::ClassifyWriteFailure(failed, fs_.dir() + "/f.exr", 1024);
  EXPECT_EQ(s.code(), StatusCode::kStorageFull) << s.ToString();
  EXPECT_NE(s.message().find("read-only"), std::string::npos) << s.message();
  // Success is never turned into a failure.
  EXPECT_TRUE(disk_space::ClassifyWriteFailure(Status::Ok(), fs_.dir() + "/f.exr", 1024).ok());
}

}  // namespace
}  // namespace tessera
