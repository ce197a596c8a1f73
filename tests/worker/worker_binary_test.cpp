// The tessera-worker binary as operators run it: config errors exit 2 naming the field,
// SIGTERM makes a registered worker say goodbye and exit 0 promptly, and a scheduler key that
// is not the scheduler's ends it with exit 1 saying so.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "shared/wire/curve_keys.h"
#include "tests/support/process.h"
#include "tests/worker/fake_scheduler.h"

namespace tessera::worker {
namespace {

using protocol::MessageType;
using namespace std::chrono_literals;

const std::string kBinary = std::string(TSR_BIN_DIR) + "/tessera-worker";

// Runs the binary with `args`; returns its exit code and fills *output (stdout, then stderr).
int RunCapture(std::vector<std::string> args, std::string* output) {
  args.insert(args.begin(), kBinary);
  const tessera::testing::RunResult r = tessera::testing::RunProcess(args, 60s);
  *output += r.out + r.err;
  return r.exit_code;
}

TEST(WorkerBinary, BadConfigExitsTwoNamingTheField) {
  std::string out;
  EXPECT_EQ(RunCapture({"--backend", "gpu"}, &out), 2);
  EXPECT_THAT(out, ::testing::HasSubstr("worker.backend"));
  out.clear();
  EXPECT_EQ(RunCapture({"--config", "/nonexistent/worker.yaml"}, &out), 2);
  EXPECT_THAT(out, ::testing::HasSubstr("/nonexistent/worker.yaml"));
}

TEST(WorkerBinary, SigtermSaysGoodbyeAndExitsZero) {
  testing::FakeScheduler scheduler;
  // Its log goes where the test's output goes.
  tessera::testing::Process worker =
      tessera::testing::Process::Start({kBinary, "--scheduler", scheduler.endpoint(), "--name",
                                        "bin-test", "--backend", "cpu", "--log-level", "warn"},
                                       "/dev/stderr");
  ASSERT_GT(worker.pid(), 0);

  std::optional<testing::Received> reg = scheduler.WaitFor(MessageType::kRegister, 10s);
  ASSERT_TRUE(reg.has_value());
  EXPECT_EQ(reg->env.Json().value("name", ""), "bin-test");
  scheduler.Send(reg->identity, MessageType::kWelcome, protocol::Welcome{1, 100, 50});
  ASSERT_TRUE(scheduler.WaitFor(MessageType::kHeartbeat, 2s).has_value());

  const auto signalled_at = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(worker.pid(), SIGTERM), 0);
  EXPECT_TRUE(scheduler.WaitFor(MessageType::kGoodbye, 2s).has_value());
  // The handle kills it (SIGKILL) if it is still running when the test ends.
  const std::optional<int> code = worker.Wait(std::chrono::duration_cast<std::chrono::milliseconds>(
      signalled_at + 5s - std::chrono::steady_clock::now()));
  if (!code) FAIL() << "tessera-worker did not exit within 5 s of SIGTERM";
  EXPECT_LT(std::chrono::steady_clock::now() - signalled_at, 2s);
  EXPECT_EQ(*code, 0) << "an exit status, or 128 + the signal that ended it";
}

// A CURVE scheduler that is not the one whose key the worker was given: every handshake fails,
// and the worker gives up saying why instead of retrying for ever.
TEST(WorkerBinary, AnotherSchedulersKeyExitsOneSayingSo) {
  zmq::context_t context;
  zmq::socket_t router(context, zmq::socket_type::router);
  const curve::KeyPair scheduler = curve::Generate();
  router.set(zmq::sockopt::curve_server, 1);
  router.set(zmq::sockopt::curve_secretkey, scheduler.secret_key);
  router.bind("tcp://127.0.0.1:*");
  const std::string endpoint = router.get(zmq::sockopt::last_endpoint);
  const std::string other_key = curve::ToHex(curve::Generate().public_key);
  std::string out;
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(RunCapture({"--scheduler", endpoint, "--public-key", other_key, "--join-token",
                        curve::NewJoinToken(), "--backend", "cpu", "--name", "wrong-key"},
                       &out),
            1);
  EXPECT_THAT(out, ::testing::HasSubstr("is not that scheduler's key"));
  EXPECT_LT(std::chrono::steady_clock::now() - started, 30s);
}

}  // namespace
}  // namespace tessera::worker
