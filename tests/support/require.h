#pragma once
// Test support: what a test needs from the machine (a tool, root, the built binaries). On a
// developer's machine a missing need skips the test with the reason; under CI=true it FAILS it,
// since .ci/run installs every tool (deploy/install-deps.sh) and a skip there would let a test
// pass that proved nothing. GPU tests, which need hardware no package brings, skip instead
// (GTEST_SKIP with "no CUDA device ..."): the only skip allowed under CI.
//
//   TSR_REQUIRE_TOOL("shellcheck", "the scripts are not linted");
//   TSR_REQUIRE(::geteuid() == 0, "needs root to change user");
//
// Both return from the calling function (a test body or SetUp), like GTEST_SKIP / ASSERT_*.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <string>

namespace tessera::testing {

// CI=true (or 1, as some runners set it): a missing need is a failure.
inline bool UnderCi() {
  const char* ci = std::getenv("CI");
  if (ci == nullptr) return false;
  const std::string v = ci;
  return v == "true" || v == "TRUE" || v == "True" || v == "1" || v == "yes";
}

// A path (with a '/') that is an executable file, or a name found executable on $PATH.
inline bool ToolFound(const std::string& path_or_name) {
  if (path_or_name.empty()) return false;
  if (path_or_name.find('/') != std::string::npos) {
    return ::access(path_or_name.c_str(), X_OK) == 0;
  }
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty()) dir = ".";
    if (::access((dir + "/" + path_or_name).c_str(), X_OK) == 0) return true;
  }
  return false;
}

}  // namespace tessera::testing

// Skips (fails under CI=true) the calling test when `condition` is false; `why` says what is
// missing and what the test therefore cannot check (streamable: "a" << b).
#define TSR_REQUIRE(condition, why)                                    \
  do {                                                                 \
    if (!(condition)) {                                                \
      if (::tessera::testing::UnderCi()) {                             \
        GTEST_FAIL() << "required under CI=true: " << why              \
                     << " (deploy/install-deps.sh must provide it)";   \
      } else {                                                         \
        GTEST_SKIP() << why << " (skipped; under CI=true this fails)"; \
      }                                                                \
    }                                                                  \
  } while (0)

// TSR_REQUIRE for a program: `path_or_name` is an absolute path or a name looked up on $PATH.
#define TSR_REQUIRE_TOOL(path_or_name, why)                                          \
  TSR_REQUIRE(::tessera::testing::ToolFound(path_or_name), std::string(path_or_name) \
                                                               << " is not installed: " << why)
