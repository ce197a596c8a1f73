// The test process launcher (process.h) on its own: what a client run captures and sees of the
// environment, a daemon's log, a client read line by line, and that nothing a handle started
// outlives it.
#include "tests/support/process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <string>

namespace tessera::testing {
namespace {

using namespace std::chrono_literals;

TEST(ProcessTest, RunProcessCapturesOutputApartAndTheExitCode) {
  const RunResult r = RunProcess({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"});
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
}

TEST(ProcessTest, RunProcessKillsAChildPastItsTimeout) {
  const auto started = std::chrono::steady_clock::now();
  const RunResult r = RunProcess({"/bin/sleep", "30"}, 200ms);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.exit_code, 128 + SIGKILL);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 10s);
}

TEST(ProcessTest, ClientRunsDoNotSeeTheCliSettingsOfWhoeverRunsTheTests) {
  ::setenv("TESSERA_SERVER", "http://somewhere:1", 1);
  ::setenv("TESSERA_TEST_KEPT", "kept", 1);
  const RunResult r = RunProcess(
      {"/bin/sh", "-c",
       "echo \"${TESSERA_SERVER-unset} $TESSERA_TEST_KEPT $XDG_CONFIG_HOME $TESSERA_TOKEN\""},
      30s, {"TESSERA_TOKEN=given", "TESSERA_TEST_KEPT=replaced"});
  ::unsetenv("TESSERA_SERVER");
  ::unsetenv("TESSERA_TEST_KEPT");
  EXPECT_EQ(r.out, "unset replaced /nonexistent/tessera-test-config given\n");
}

TEST(ProcessTest, ADaemonKeepsTheEnvironmentAndAppendsToItsLog) {
  const std::string dir = MakeTempDir("tsr-process-test");
  const std::string log = dir + "/daemon.log";
  WriteFile(log, "earlier run\n");
  ::setenv("TESSERA_TEST_DAEMON", "seen", 1);
  Process daemon =
      Process::Start({"/bin/sh", "-c", "echo \"$TESSERA_TEST_DAEMON\"; echo oops >&2"}, log);
  ::unsetenv("TESSERA_TEST_DAEMON");
  EXPECT_EQ(daemon.Wait(10s), 0);
  EXPECT_EQ(ReadFile(log), "earlier run\nseen\noops\n");
  std::filesystem::remove_all(dir);
}

TEST(ProcessTest, AClientIsReadLineByLineAndStoppedWithWhatItStarted) {
  const std::string dir = MakeTempDir("tsr-process-test");
  pid_t grandchild = -1;
  {
    Process client = Process::StartClient(
        {"/bin/sh", "-c", "echo first; echo oops >&2; /bin/sleep 60 & echo \"$!\"; wait"},
        dir + "/client.err");
    EXPECT_EQ(client.ReadLine(10s), "first");
    const std::optional<std::string> sleeper = client.ReadLine(10s);
    ASSERT_TRUE(sleeper.has_value());
    grandchild = std::stoi(*sleeper);
    EXPECT_TRUE(ProcessAlive(grandchild));
    EXPECT_TRUE(client.running());
  }
  // The handle stopped the shell and the sleep it had started.
  EXPECT_TRUE(WaitFor([&] { return !ProcessAlive(grandchild); }, 5s)) << "pid " << grandchild;
  EXPECT_EQ(ReadFile(dir + "/client.err"), "oops\n");
  std::filesystem::remove_all(dir);
}

TEST(ProcessTest, StopEndsADaemonThatIgnoresSigterm) {
  const std::string dir = MakeTempDir("tsr-process-test");
  Process stubborn =
      Process::Start({"/bin/sh", "-c", "trap '' TERM; echo ready; while true; do sleep 0.05; done"},
                     dir + "/stubborn.log");
  ASSERT_TRUE(WaitFor([&] { return ReadFile(dir + "/stubborn.log") == "ready\n"; }, 10s));
  stubborn.Stop(300ms);
  EXPECT_FALSE(stubborn.running());
  EXPECT_EQ(stubborn.Wait(0ms), 128 + SIGKILL);
  std::filesystem::remove_all(dir);
}

TEST(ProcessTest, FreePortIsALoopbackPortNobodyHolds) {
  const int port = FreePort();
  EXPECT_GT(port, 0);
  EXPECT_LT(port, 65536);
}

}  // namespace
}  // namespace tessera::testing
