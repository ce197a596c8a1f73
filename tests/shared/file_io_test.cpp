// shared/file_io: what a writer killed mid-write leaves behind is found and removed at start-up,
// and nothing else is.

#include "shared/file_io.h"

#include <gtest/gtest.h>
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

}  // namespace
}  // namespace tessera::file_io
