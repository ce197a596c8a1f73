// shared/file_io: what a writer killed mid-write leaves behind is found and removed at start-up,
// and nothing else is.

#include "shared/base/file_io.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace tessera::file_io {
namespace {

namespace fs = std::filesystem;

// The PID of a process that has exited (and been reaped).
pid_t DeadPid() {
  const pid_t pid = ::fork();
  if (pid == 0) _exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

TEST(FileIoTest, LeftoverTempFilesOfGoneWritersAreRemovedAndNothingElse) {
  const fs::path root = fs::temp_directory_path() / ("file-io-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "shot-1" / ".thumbnails");
  fs::create_directories(root / "shot-1" / ".parts" / "3");
  const std::string dead = std::to_string(DeadPid());
  const std::string self = std::to_string(::getpid());
  const std::vector<std::string> garbage = {
      "shot-1/.shot.0005.exr.tmp-" + dead + "-16",  // a frame, its writer killed
      "shot-1/.thumbnails/.shot.0005.png.tmp-" + dead + "-2",
      "shot-1/.shot.0006.png.tmp-" + self + "-1",  // ours: nothing of ours writes yet
      "shot-1/.parts/3/part-0.tile.tmp",           // a part (PATH.tmp)
      "blobs.tmp",
  };
  const std::vector<std::string> kept = {
      "shot-1/shot.0005.exr",
      "shot-1/.shot.0007.exr.tmp-1-4",  // PID 1 is alive: its writer may still finish
      "shot-1/.parts/3/part-1.tile",
      "shot-1/.odd.tmp-x1-2",  // not the writer's pattern
      "shot-1/notes.tmpl",
      "tessera.db",
  };
  for (const auto& list : {garbage, kept}) {
    for (const std::string& f : list) std::ofstream(root / f) << "x";
  }

  std::vector<std::string> removed = RemoveLeftoverTempFiles(root.string());
  std::sort(removed.begin(), removed.end());
  std::vector<std::string> expected;
  for (const std::string& f : garbage) expected.push_back((root / f).string());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(removed, expected);
  for (const std::string& f : garbage) EXPECT_FALSE(fs::exists(root / f)) << f;
  for (const std::string& f : kept) EXPECT_TRUE(fs::exists(root / f)) << f;
  EXPECT_TRUE(RemoveLeftoverTempFiles((root / "missing").string()).empty());
  fs::remove_all(root);
}

// A file someone else placed is read only when it is a plain file within the limit: never
// through a link (which could lead to the daemon's keys), a folder or a FIFO (which would block).
TEST(FileIoTest, ReadPlainFileRefusesLinksSpecialFilesAndOversizedOnes) {
  const fs::path dir = fs::temp_directory_path() / ("tsr-plain-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "frame.png", std::ios::binary) << "0123456789";
  std::ofstream(dir / "secret", std::ios::binary) << "key";
  fs::create_symlink(dir / "secret", dir / "link.png");
  ASSERT_EQ(::mkfifo((dir / "fifo.png").c_str(), 0600), 0);

  StatusOr<std::string> ok = ReadPlainFile((dir / "frame.png").string(), 10);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(*ok, "0123456789");
  StatusOr<std::string> big = ReadPlainFile((dir / "frame.png").string(), 9);
  EXPECT_EQ(big.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(big.status().message().find("is 10 bytes; at most 9 are read"), std::string::npos);
  StatusOr<std::string> link = ReadPlainFile((dir / "link.png").string(), 100);
  EXPECT_EQ(link.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(link.status().message().find("is a link, not a plain file"), std::string::npos);
  for (const char* name : {"fifo.png", "."}) {
    StatusOr<std::string> special = ReadPlainFile((dir / name).string(), 100);
    EXPECT_EQ(special.status().code(), StatusCode::kPermissionDenied) << name;
    EXPECT_NE(special.status().message().find("is not a plain file"), std::string::npos) << name;
  }
  EXPECT_EQ(ReadPlainFile((dir / "gone.png").string(), 100).status().code(), StatusCode::kNotFound);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tessera::file_io
