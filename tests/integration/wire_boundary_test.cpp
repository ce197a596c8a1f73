// The scheduler's ZeroMQ boundary against the real daemons over loopback: a REGISTER with bytes
// that are not UTF-8 no longer aborts the scheduler (names are refused with the field and the
// byte offset, text is made valid); on an insecure farm (`tessera up`) another process cannot
// register under a connected worker's name and take its tasks, while the worker itself
// reconnecting after a crash gets its name back; and the data files are private.

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <zmq_addon.hpp>

#include "shared/wire/protocol.h"
#include "tests/support/fake_worker.h"
#include "tests/support/farm.h"
#include "tests/support/process.h"

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using protocol::MessageType;

bool Contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// The answer to one REGISTER sent on a fresh connection: WELCOME or REJECT (nullopt: none).
std::optional<protocol::Envelope> RegisterOnce(const std::string& endpoint,
                                               const protocol::Register& reg) {
  zmq::context_t context;
  zmq::socket_t dealer(context, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.connect(endpoint);
  auto frames = protocol::Encode(MessageType::kRegister, reg);
  if (!zmq::send_multipart(dealer, frames)) return std::nullopt;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    zmq::pollitem_t item{dealer.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, 100ms);
    if (!(item.revents & ZMQ_POLLIN)) continue;
    std::vector<zmq::message_t> reply;
    if (!zmq::recv_multipart(dealer, std::back_inserter(reply))) continue;
    auto env = protocol::Decode(reply);
    if (env.ok() && (env->type == MessageType::kWelcome || env->type == MessageType::kReject)) {
      return std::move(*env);
    }
  }
  return std::nullopt;
}

// Rows of the scheduler's events table of `kind` (read beside the running scheduler).
int CountEvents(const LocalFarm& farm, const std::string& kind) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2((farm.dir() + "/data/tessera.db").c_str(), &db, SQLITE_OPEN_READONLY,
                      nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    return -1;
  }
  sqlite3_busy_timeout(db, 5000);
  sqlite3_stmt* stmt = nullptr;
  int count = -1;
  if (sqlite3_prepare_v2(db, "SELECT count(*) FROM events WHERE kind = ?1", -1, &stmt, nullptr) ==
      SQLITE_OK) {
    sqlite3_bind_text(stmt, 1, kind.c_str(), -1, SQLITE_TRANSIENT);
    if (sqlite3_step(stmt) == SQLITE_ROW) count = sqlite3_column_int(stmt, 0);
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return count;
}

TEST(WireBoundaryTest, RegisterWithBytesThatAreNotUtf8NeitherCrashesTheSchedulerNorIsStored) {
  LocalFarm farm("wire-utf8");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();

  // Text a program printed (host name, OS): made valid, and the worker is welcomed.
  protocol::Register text;
  text.name = "odd-host";
  text.hostname = "node\xff\xfe-7";
  text.os = "Linux \xc3\x28";
  text.backends = {"cpu"};
  text.cpu_cores = 1;
  auto welcomed = RegisterOnce(farm.broker_endpoint(), text);
  ASSERT_TRUE(welcomed) << farm.SchedulerLog();
  EXPECT_EQ(welcomed->type, MessageType::kWelcome) << farm.SchedulerLog();

  // Names (tags, pools, the worker's name): refused, naming the field and the byte.
  protocol::Register tags = text;
  tags.name = "odd-tags";
  tags.tags = {"ok", "gpu\xc3\x28"};
  auto refused = RegisterOnce(farm.broker_endpoint(), tags);
  ASSERT_TRUE(refused) << farm.SchedulerLog();
  ASSERT_EQ(refused->type, MessageType::kReject);
  EXPECT_TRUE(
      Contains(refused->As<protocol::Reject>()->reason, "tags[1]: not valid UTF-8 (byte 3)"))
      << refused->As<protocol::Reject>()->reason;
  protocol::Register name = text;
  name.name = "w\xff";
  refused = RegisterOnce(farm.broker_endpoint(), name);
  ASSERT_TRUE(refused) << farm.SchedulerLog();
  ASSERT_EQ(refused->type, MessageType::kReject);
  EXPECT_TRUE(Contains(refused->As<protocol::Reject>()->reason, "name: not valid UTF-8 (byte 1)"));

  // Still serving: the next worker is welcomed and the API lists the first one, its host name
  // made valid.
  FakeWorker next(farm.broker_endpoint(), "next");
  EXPECT_TRUE(next.WaitFor(MessageType::kWelcome, 10s)) << farm.SchedulerLog();
  int status = 0;
  nlohmann::json workers = farm.Get("/api/v1/workers", &status)["workers"];
  ASSERT_EQ(status, 200) << farm.SchedulerLog();
  bool listed = false;
  for (const auto& w : workers) {
    if (w["name"] == "odd-host") {
      listed = true;
      EXPECT_EQ(w["hostname"], "node\xef\xbf\xbd\xef\xbf\xbd-7") << w.dump();
    }
    EXPECT_NE(w["name"], "odd-tags");
  }
  EXPECT_TRUE(listed) << workers.dump();
}

TEST(WireBoundaryTest, OnAnInsecureFarmAnotherProcessCannotTakeAConnectedWorkersName) {
  LocalFarm farm("wire-takeover");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("w1"));
  ASSERT_TRUE(farm.WaitForWorkers(1, 20s)) << farm.WorkerLog("w1");

  // Any local process could connect and REGISTER as w1, to be sent w1's tasks and scenes.
  {
    FakeWorker impostor(farm.broker_endpoint(), "w1");
    auto answer = impostor.WaitFor(
        [](MessageType t) { return t == MessageType::kWelcome || t == MessageType::kReject; }, 10s);
    ASSERT_TRUE(answer) << farm.SchedulerLog();
    ASSERT_EQ(answer->type, MessageType::kReject) << farm.SchedulerLog();
    auto reject = answer->As<protocol::Reject>();
    ASSERT_TRUE(reject.ok());
    EXPECT_TRUE(Contains(reject->reason, "connected from another peer")) << reject->reason;
    EXPECT_GT(reject->retry_after_ms, 0);

    // The real worker keeps its name and does the work; nothing reaches the impostor.
    std::string error;
    const int64_t job = farm.Submit("name: mine\nrenderer: noop\nframes: 1-3\n", "", &error);
    ASSERT_GT(job, 0) << error;
    EXPECT_EQ(farm.WaitForJob(job, 30s)["state"], "done") << farm.SchedulerLog();
    EXPECT_FALSE(impostor.NextAssign(500ms).has_value());
  }
  EXPECT_TRUE(Contains(farm.SchedulerLog(), "registration_refused")) << farm.SchedulerLog();
  EXPECT_EQ(CountEvents(farm, "registration_refused"), 1);

  // The worker itself crashes and comes back at once: it gets its name back.
  farm.worker("w1").Signal(SIGKILL);
  farm.worker("w1").Wait(10s);
  ASSERT_TRUE(farm.StartWorker("w1"));
  std::string error;
  const int64_t job = farm.Submit("name: again\nrenderer: noop\nframes: 1-3\n", "", &error);
  ASSERT_GT(job, 0) << error;
  EXPECT_EQ(farm.WaitForJob(job, 30s)["state"], "done")
      << farm.SchedulerLog() << farm.WorkerLog("w1");
  EXPECT_FALSE(Contains(farm.WorkerLog("w1"), "rejected this worker")) << farm.WorkerLog("w1");
}

TEST(WireBoundaryTest, TheDataFilesOfBothDaemonsAreTheirUsersAlone) {
  LocalFarm farm("wire-modes");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  const std::string worker_data = farm.dir() + "/w1-data";
  ASSERT_TRUE(farm.StartWorkerWith("w1", {"--data-dir", worker_data}));
  ASSERT_TRUE(farm.WaitForWorkers(1, 20s)) << farm.WorkerLog("w1");
  std::string error;
  const int64_t job = farm.Submit("name: modes\nrenderer: noop\nframes: 1\n", "", &error);
  ASSERT_GT(job, 0) << error;
  ASSERT_EQ(farm.WaitForJob(job, 30s)["state"], "done");

  const std::string data = farm.dir() + "/data";
  for (const char* file : {"/tessera.db", "/tessera.db-wal", "/tessera.db-shm"}) {
    EXPECT_EQ(FileMode(data + file), "600") << file;
  }
  EXPECT_EQ(FileMode(data + "/blobs"), "700");
  EXPECT_EQ(FileMode(data + "/blobs/uploads"), "700");
  EXPECT_EQ(FileMode(worker_data + "/spool"), "700");
  EXPECT_EQ(FileMode(worker_data + "/cache"), "700");
}

}  // namespace
}  // namespace tessera::testing
