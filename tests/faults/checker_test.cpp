// The checker's own instruments, so a scenario that passes has been looked at by something that
// can see a violation: the output watcher counts a second move of one frame into place, and the
// leftover scan finds both temporary-file patterns.

#include "tests/faults/checker.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>

namespace tessera::faults {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Writes `name` in `dir` as the farm's writers do: aside, then renamed into place.
void WriteAside(const std::string& dir, const std::string& name, int n) {
  const std::string tmp = dir + "/." + name + ".tmp-1-" + std::to_string(n);
  std::ofstream(tmp) << "pixels";
  fs::rename(tmp, dir + "/" + name);
}

TEST(CheckerSelfTest, ASecondMoveOfAFrameIntoPlaceIsCountedAndTempFilesAreFound) {
  LocalFarm farm("checker-self");  // not started: the prober stays idle
  ApiProber prober(farm);
  OutputWatcher watcher(prober);
  const std::string dir = farm.dir() + "/out";
  watcher.Watch(dir);
  fs::create_directories(dir);
  std::this_thread::sleep_for(200ms);  // the watcher adds its watch once the folder exists
  WriteAside(dir, "shot.0001.exr", 1);
  WriteAside(dir, "shot.0002.exr", 2);
  WriteAside(dir, "shot.0001.exr", 3);
  const auto writes = watcher.Writes(dir);
  ASSERT_EQ(writes.count("shot.0001.exr"), 1u);
  EXPECT_EQ(writes.at("shot.0001.exr").at(1), 2) << "written twice in the first scheduler run";
  EXPECT_EQ(writes.at("shot.0002.exr").at(1), 1);
  EXPECT_EQ(writes.size(), 2u) << "the temporary names are not frames";

  std::ofstream(dir + "/.shot.0003.exr.tmp-77-4") << "half";
  fs::create_directories(dir + "/.parts/3");
  std::ofstream(dir + "/.parts/3/0.tile.tmp") << "half";
  std::vector<std::string> left = LeftoverTempFiles(farm.dir());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{dir + "/.parts/3/0.tile.tmp",
                                            dir + "/.shot.0003.exr.tmp-77-4"}));
}

}  // namespace
}  // namespace tessera::faults
