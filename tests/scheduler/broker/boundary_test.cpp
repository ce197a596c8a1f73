// The broker's ZeroMQ boundary, in process: a real Broker over a real SQLite file, real peers
// over TCP loopback, and its log captured from spdlog. An exception inside the poll loop is
// survived; a flood of malformed messages and refused handshakes (plaintext, a wrong server
// key, an unknown key) cost a bounded number of log lines and are counted; names are not taken
// from their live connection; and the farm's files are private.

#include <gtest/gtest.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <thread>
#include <zmq_addon.hpp>

#include "scheduler/assembler/assembler.h"
#include "scheduler/blobs/blob_store.h"
#include "scheduler/broker/broker.h"
#include "scheduler/events/event_bus.h"
#include "scheduler/store/store.h"
#include "shared/base/sha256.h"
#include "shared/jobs/job_file.h"
#include "shared/wire/curve_keys.h"
#include "tests/support/fake_worker.h"
#include "tests/support/process.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using protocol::MessageType;

// Every line the default logger writes, kept for the test to count.
class CaptureSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  size_t Count(const std::string& text) {
    std::lock_guard<std::mutex> lock(mutex_);
    return std::count_if(lines_.begin(), lines_.end(), [&](const std::string& line) {
      return line.find(text) != std::string::npos;
    });
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mutex_);
    return lines_.size();
  }
  std::string All() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::string all;
    for (const std::string& l : lines_) all += l + "\n";
    return all;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    lines_.emplace_back(msg.payload.data(), msg.payload.size());
  }
  void flush_() override {}

 private:
  std::vector<std::string> lines_;
};

class BoundaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/boundary-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    sink_ = std::make_shared<CaptureSink>();
    previous_ = spdlog::default_logger();
    auto logger = std::make_shared<spdlog::logger>("capture", sink_);
    logger->set_level(spdlog::level::debug);
    spdlog::set_default_logger(logger);
    auto store = store::Store::Open(dir_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
  }
  void TearDown() override {
    broker_.reset();
    store_.reset();
    spdlog::set_default_logger(previous_);
    fs::remove_all(dir_);
  }

  void StartBroker(broker::BrokerOptions options = {}) {
    options.bind_endpoint = "tcp://127.0.0.1:0";
    options.heartbeat_ms = 200;
    options.liveness = 10;
    options.assembler_threads = 1;
    options.events = &events_;
    // Long enough that a slow machine never sees a second interval in one test.
    options.noisy_log_interval = std::chrono::minutes(10);
    broker_ = std::make_unique<broker::Broker>(*store_, options, Clock::Real());
    auto endpoint = broker_->Start();
    ASSERT_TRUE(endpoint.ok()) << endpoint.status().ToString();
    endpoint_ = *endpoint;
  }

  // The broker answers: a worker registers and is welcomed.
  bool Serves(const std::string& name) {
    testing::FakeWorker w(endpoint_, name);
    return w.WaitFor(MessageType::kWelcome, 5s).has_value();
  }

  int64_t SubmitNoop() {
    auto spec = spec::ParseJobYaml("name: n\nrenderer: noop\nframes: 1-3\n");
    EXPECT_TRUE(spec.ok()) << spec.status().ToString();
    auto job = store_->CreateJob(*spec, "name: n\n", [&](int64_t id) -> StatusOr<std::string> {
      return dir_ + "/out/" + std::to_string(id);
    });
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    return job->id;
  }

  std::string dir_;
  std::shared_ptr<CaptureSink> sink_;
  std::shared_ptr<spdlog::logger> previous_;
  std::unique_ptr<store::Store> store_;
  events::EventBus events_;
  std::unique_ptr<broker::Broker> broker_;
  std::string endpoint_;
  zmq::context_t context_;
};

TEST_F(BoundaryTest, AnExceptionInThePollLoopIsCaughtAndTheBrokerGoesOnServing) {
  StartBroker();
  // A job row damaged on disk: loading it throws (the JSON of its tags no longer parses).
  const int64_t job = SubmitNoop();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ + "/tessera.db").c_str(), &db), SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  const std::string damage =
      "UPDATE jobs SET tags = 'not json' WHERE id = " + std::to_string(job) + ";";
  ASSERT_EQ(sqlite3_exec(db, damage.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);

  broker_->JobSubmitted(job);  // the broker thread loads it, and throws
  ASSERT_TRUE(testing::WaitFor([&] { return broker_->counters().errors_caught >= 1; }, 20s, 10ms))
      << sink_->All();
  EXPECT_EQ(sink_->Count("it was dropped and the scheduler goes on"), 1u) << sink_->All();
  EXPECT_TRUE(Serves("after")) << "the next request is served\n" << sink_->All();
}

TEST_F(BoundaryTest, AFloodOfMalformedMessagesIsCountedAndLogsABoundedNumberOfLines) {
  StartBroker();
  const size_t lines_before = sink_->size();
  zmq::socket_t dealer(context_, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.set(zmq::sockopt::sndhwm, 0);
  dealer.connect(endpoint_);
  constexpr int kFlood = 10000;
  for (int i = 0; i < kFlood; ++i) {
    // Not a Tessera message, a wrong version, a body that is not a map: in turn.
    std::vector<zmq::message_t> frames;
    switch (i % 3) {
      case 0:
        frames.emplace_back(std::string("garbage"));
        frames.emplace_back(std::string("x"));
        break;
      case 1:
        frames.emplace_back(std::string("TS\x09\x02", 4));
        frames.emplace_back(std::string("\x80", 1));
        break;
      default:
        frames.emplace_back(std::string("TS\x02\x02", 4));
        frames.emplace_back(std::string("\xc1", 1));
    }
    ASSERT_TRUE(zmq::send_multipart(dealer, frames));
  }
  ASSERT_TRUE(
      testing::WaitFor([&] { return broker_->counters().messages_dropped >= kFlood; }, 60s, 10ms))
      << broker_->counters().messages_dropped;
  EXPECT_EQ(broker_->counters().messages_dropped, static_cast<uint64_t>(kFlood));
  EXPECT_EQ(sink_->Count("dropped a message"), 1u) << "one line per interval, not per message";
  EXPECT_LE(sink_->size() - lines_before, 5u) << sink_->All();
  EXPECT_TRUE(Serves("after")) << sink_->All();
}

TEST_F(BoundaryTest, RefusedHandshakesAreLoggedOncePerIntervalAndCounted) {
  broker::BrokerOptions options;
  options.curve = curve::Generate();
  StartBroker(options);
  // Peers connect, one more every few milliseconds (some retry after a failed handshake, some
  // give up), until the broker counted `times` more refusals and logged `line`.
  auto knock = [&](std::optional<curve::KeyPair> client, const std::string& server_key,
                   uint64_t times, const std::string& line) {
    const uint64_t before = broker_->counters().handshakes_refused;
    std::vector<std::unique_ptr<zmq::socket_t>> peers;
    return testing::WaitFor(
        [&] {
          if (peers.size() < 500) {
            auto dealer = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::dealer);
            dealer->set(zmq::sockopt::linger, 0);
            dealer->set(zmq::sockopt::reconnect_ivl, 20);
            if (client) {
              dealer->set(zmq::sockopt::curve_serverkey, server_key);
              dealer->set(zmq::sockopt::curve_publickey, client->public_key);
              dealer->set(zmq::sockopt::curve_secretkey, client->secret_key);
            }
            dealer->connect(endpoint_);
            peers.push_back(std::move(dealer));
          }
          return broker_->counters().handshakes_refused >= before + times && sink_->Count(line) > 0;
        },
        20s, 10ms);
  };
  // Plaintext against the CURVE broker: 20 refusals, one line.
  const std::string plaintext = "does not speak CURVE";
  ASSERT_TRUE(knock(std::nullopt, "", 20, plaintext)) << sink_->All();
  EXPECT_EQ(sink_->Count(plaintext), 1u) << sink_->All();
  // A CURVE client that has the wrong server key.
  const std::string wrong_key = "wrong server key";
  ASSERT_TRUE(knock(curve::Generate(), curve::Generate().public_key, 20, wrong_key))
      << sink_->All();
  EXPECT_EQ(sink_->Count(wrong_key), 1u) << sink_->All();
  // The right server key, but a client key the scheduler never enrolled (refused by ZAP).
  const std::string unknown = "unknown, revoked or expired key";
  ASSERT_TRUE(knock(curve::Generate(), options.curve->public_key, 20, unknown)) << sink_->All();
  EXPECT_EQ(sink_->Count(unknown), 1u) << sink_->All();
  EXPECT_EQ(sink_->Count(plaintext), 1u) << sink_->All();
}

TEST_F(BoundaryTest, AnotherPeerCannotTakeTheNameOfALiveConnection) {
  StartBroker();
  testing::FakeWorker real(endpoint_, "render-1");
  ASSERT_TRUE(real.WaitFor(MessageType::kWelcome, 5s));
  {
    testing::FakeWorker impostor(endpoint_, "render-1");
    auto rejected = impostor.WaitFor(MessageType::kReject, 5s);
    ASSERT_TRUE(rejected) << sink_->All();
    auto reject = rejected->As<protocol::Reject>();
    ASSERT_TRUE(reject.ok());
    EXPECT_NE(reject->reason.find("connected from another peer"), std::string::npos)
        << reject->reason;
    EXPECT_GT(reject->retry_after_ms, 0) << "told to try again later, not to give up";
  }
  EXPECT_EQ(broker_->counters().names_refused, 1u);
  // The real worker keeps its connection (and its name).
  const int64_t job = SubmitNoop();
  broker_->JobSubmitted(job);
  auto assign = real.NextAssign(5s);
  ASSERT_TRUE(assign) << "the real worker still gets work";
  // Logged and published.
  EXPECT_EQ(sink_->Count("registration_refused"), 1u) << sink_->All();
  events::FarmEvents seen = events_.Since(0, 0ms, 1000);
  EXPECT_TRUE(std::any_of(seen.events.begin(), seen.events.end(), [](const events::FarmEvent& e) {
    return e.kind == "notice" && e.data.value("event", "") == "registration_refused";
  }));
}

TEST_F(BoundaryTest, TheSameWorkerReconnectingAfterItsConnectionClosedGetsItsNameBack) {
  StartBroker();
  {
    testing::FakeWorker first(endpoint_, "render-2");
    ASSERT_TRUE(first.WaitFor(MessageType::kWelcome, 5s));
  }  // closed: a restart, or a reconnect after a network cut
  testing::FakeWorker again(endpoint_, "render-2");
  bool welcomed = false;
  for (int i = 0; i < 10 && !welcomed; ++i) {
    auto answer = again.WaitFor(
        [](MessageType t) { return t == MessageType::kWelcome || t == MessageType::kReject; }, 3s);
    ASSERT_TRUE(answer);
    welcomed = answer->type == MessageType::kWelcome;
    if (!welcomed) {
      auto reject = answer->As<protocol::Reject>();
      ASSERT_TRUE(reject.ok() && reject->retry_after_ms > 0) << "only ever 'not now'";
      std::this_thread::sleep_for(std::chrono::milliseconds(reject->retry_after_ms));
      again.Register();
    }
  }
  EXPECT_TRUE(welcomed) << sink_->All();
}

TEST_F(BoundaryTest, BlobsAndPartsArePrivate) {
  blobs::BlobStore blobs(dir_ + "/blobs");
  ASSERT_TRUE(blobs.Open().ok());
  auto hash = blobs.Put("texture bytes");
  ASSERT_TRUE(hash.ok()) << hash.status().ToString();
  EXPECT_EQ(testing::FileMode(dir_ + "/blobs"), "700");
  EXPECT_EQ(testing::FileMode(dir_ + "/blobs/uploads"), "700");
  EXPECT_EQ(testing::FileMode(dir_ + "/blobs/" + hash->substr(0, 2)), "700");
  EXPECT_EQ(testing::FileMode(dir_ + "/blobs/" + hash->substr(0, 2) + "/" + *hash), "600");

  // An upload in pieces, as the API receives it.
  const std::string bytes = "another asset";
  const std::string other = Sha256Hex(bytes);
  ASSERT_TRUE(blobs.Write(other, 0, bytes.size(), bytes.substr(0, 4)).ok());
  EXPECT_EQ(testing::FileMode(dir_ + "/blobs/uploads/" + other + ".part"), "600");
  ASSERT_TRUE(blobs.Write(other, 4, bytes.size(), bytes.substr(4)).ok());
  EXPECT_EQ(testing::FileMode(dir_ + "/blobs/" + other.substr(0, 2) + "/" + other), "600");

  // A split frame's part, kept until the frame is assembled.
  assembler::Assembler assembler(
      1, [](assembler::Result) {}, Clock::Real());
  assembler::PartJob part;
  part.job_id = 1;
  part.task_id = 7;
  part.attempt = 1;
  part.frame = 3;
  part.parts_dir = assembler::PartsDir(dir_ + "/out", 3);
  part.assigned = {0, 0, 2, 2, 0, -1};
  part.pixels.width = part.pixels.height = 2;
  part.pixels.channels = 4;
  part.pixels.pixels.assign(16, 0.5f);
  assembler::PartStored stored = assembler.StorePart(part);
  ASSERT_TRUE(stored.status.ok()) << stored.status.ToString();
  ASSERT_EQ(stored.files.size(), 1u);
  EXPECT_EQ(testing::FileMode(dir_ + "/out/.parts"), "700");
  EXPECT_EQ(testing::FileMode(part.parts_dir), "700");
  EXPECT_EQ(testing::FileMode(stored.files[0]), "600");
}

}  // namespace
}  // namespace tessera
