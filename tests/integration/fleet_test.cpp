// Integration tests for the worker fleet, with the real scheduler and real workers over ZeroMQ on
// loopback: CURVE enrolment with join tokens (good, bad, revoked, missing), refusal of peers
// without CURVE or with unknown keys, revoking a worker, the result spool across a scheduler
// restart, draining, a spot-interruption notice from a local metadata stub (checkpoint, hand-back,
// resume elsewhere, same image), and GPU slots.

#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/stat.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>
#include <thread>
#include <zmq_addon.hpp>

#include "shared/images/image_io.h"
#include "shared/wire/curve_keys.h"
#include "shared/wire/protocol.h"
#include "tests/support/farm.h"

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Seconds per frame on one core: slow enough to act while it renders.
std::string SlowScene() { return TinySceneYaml(320, 240, 512); }

std::string JobYaml(const std::string& name, const std::string& frames,
                    const std::string& extra = "") {
  return "name: " + name + "\nscene: scene.yaml\nframes: " + frames + "\n" + extra;
}

// Waits until one of the job's tasks runs with at least `progress` done.
bool WaitUntilRendering(LocalFarm& farm, int64_t job, double progress) {
  return WaitFor(
      [&] {
        for (const auto& t : Tasks(farm, job)) {
          if (t["state"] == "running" && t["progress"].get<double>() >= progress) return true;
        }
        return false;
      },
      60s, 100ms);
}

bool Contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

std::string Exr(const nlohmann::json& job, const std::string& name, int frame) {
  char file[64];
  std::snprintf(file, sizeof(file), "%s.%04d.exr", name.c_str(), frame);
  return job["output_dir"].get<std::string>() + "/" + file;
}

// ---- enrolment and refusal ------------------------------------------------------------------

TEST(FleetTest, EnrolsWithAGoodTokenAndRefusesBadRevokedAndMissingOnes) {
  LocalFarm farm("fleet-enrol");
  farm.UseCurve();
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  std::string key;
  const std::string token = farm.CreateJoinToken(&key);
  ASSERT_FALSE(token.empty()) << farm.SchedulerLog();
  ASSERT_EQ(key.size(), 64u) << "the scheduler's public key, in hex";

  // A good token: the worker enrols, keeps its own key pair, and renders over CURVE.
  const std::string data = farm.dir() + "/w1-data";
  ASSERT_TRUE(
      farm.StartWorkerWith("w1", {"--public-key", key, "--join-token", token, "--data-dir", data}));
  ASSERT_TRUE(farm.WaitForWorkers(1, 30s)) << farm.WorkerLog("w1") << farm.SchedulerLog();
  struct stat st {};
  ASSERT_EQ(::stat((data + "/worker.key").c_str(), &st), 0) << "the enrolled key pair is kept";
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::string error;
  int64_t job = farm.Submit(JobYaml("secure", "1-2"), TinySceneYaml(), &error);
  ASSERT_GT(job, 0) << error;
  EXPECT_EQ(farm.WaitForJob(job, 60s)["state"], "done") << farm.SchedulerLog();

  // Restarted without the token, it authenticates with its enrolled key.
  farm.worker("w1").Stop();
  ASSERT_TRUE(farm.StartWorkerWith("w1", {"--public-key", key, "--data-dir", data}));
  ASSERT_TRUE(
      WaitFor([&] { return Contains(farm.WorkerLog("w1"), "using the enrolled key"); }, 10s));
  ASSERT_TRUE(farm.WaitForWorkers(1, 30s)) << farm.WorkerLog("w1");

  // A well-formed token the scheduler never issued is refused at the handshake.
  ASSERT_TRUE(farm.StartWorkerWith(
      "forged", {"--public-key", key, "--join-token", "tsrj-" + std::string(64, 'a')}));
  EXPECT_EQ(farm.worker("forged").Wait(20s), 1);
  EXPECT_TRUE(Contains(farm.WorkerLog("forged"), "refused the join token"))
      << farm.WorkerLog("forged");

  // A revoked token likewise.
  const std::string revoked = farm.CreateJoinToken(nullptr);
  nlohmann::json tokens = farm.Get("/api/v1/join-tokens")["tokens"];
  ASSERT_EQ(tokens.size(), 2u);
  int status = 0;
  farm.Post("/api/v1/join-tokens/" + std::to_string(tokens[1]["id"].get<int>()) + "/revoke", {},
            &status);
  ASSERT_EQ(status, 200);
  EXPECT_EQ(farm.Get("/api/v1/join-tokens")["tokens"][1]["state"], "revoked");
  ASSERT_TRUE(farm.StartWorkerWith("late", {"--public-key", key, "--join-token", revoked}));
  EXPECT_EQ(farm.worker("late").Wait(20s), 1);
  EXPECT_TRUE(Contains(farm.WorkerLog("late"), "refused the join token"));

  // No token and no key pair: nothing to authenticate with.
  ASSERT_TRUE(farm.StartWorkerWith("bare", {"--public-key", key}));
  EXPECT_EQ(farm.worker("bare").Wait(20s), 1);
  EXPECT_TRUE(Contains(farm.WorkerLog("bare"), "needs a join token")) << farm.WorkerLog("bare");

  // Revoking the enrolled worker disconnects it, and its key is refused from then on.
  farm.Post("/api/v1/workers/w1/revoke", {}, &status);
  ASSERT_EQ(status, 200);
  EXPECT_EQ(farm.worker("w1").Wait(20s), 1) << farm.WorkerLog("w1");
  EXPECT_TRUE(Contains(farm.WorkerLog("w1"), "revoked by an operator"));
  ASSERT_TRUE(farm.StartWorkerWith("w1", {"--public-key", key, "--data-dir", data}));
  EXPECT_EQ(farm.worker("w1").Wait(20s), 1);
  EXPECT_TRUE(Contains(farm.WorkerLog("w1"), "refused this worker's key"));
  const nlohmann::json workers = farm.Get("/api/v1/workers")["workers"];
  for (const auto& w : workers) EXPECT_EQ(w["state"], "offline");
}

TEST(FleetTest, RefusesPeersWithoutCurveOrWithAnUnknownKey) {
  LocalFarm farm("fleet-refuse");
  farm.UseCurve();
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  std::string key;
  ASSERT_FALSE(farm.CreateJoinToken(&key).empty());

  // A DEALER that registers and listens for 2 s (sends never block: no handshake, no pipe).
  zmq::context_t context;
  auto knock = [&](const std::optional<curve::KeyPair>& keys) {
    zmq::socket_t dealer(context, zmq::socket_type::dealer);
    dealer.set(zmq::sockopt::linger, 0);
    if (keys) {
      dealer.set(zmq::sockopt::curve_serverkey, curve::ParseKey(key, "key").value());
      dealer.set(zmq::sockopt::curve_publickey, keys->public_key);
      dealer.set(zmq::sockopt::curve_secretkey, keys->secret_key);
    }
    dealer.connect(farm.broker_endpoint());
    protocol::Register reg;
    reg.name = keys ? "stranger" : "plain";
    auto frames = protocol::Encode(protocol::MessageType::kRegister, reg);
    (void)zmq::send_multipart(dealer, frames, zmq::send_flags::dontwait);
    zmq::pollitem_t item{dealer.handle(), 0, ZMQ_POLLIN, 0};
    return zmq::poll(&item, 1, 2000ms);
  };
  EXPECT_EQ(knock(std::nullopt), 0) << "plain TCP: the handshake cannot even start";
  EXPECT_EQ(knock(curve::Generate()), 0) << "a key the scheduler never enrolled is refused";

  EXPECT_TRUE(farm.Get("/api/v1/workers")["workers"].empty());
  EXPECT_TRUE(
      WaitFor([&] { return Contains(farm.SchedulerLog(), "unknown, revoked or expired"); }, 5s))
      << farm.SchedulerLog();
}

// What a join-token connection is told when it asks to enrol `name` with a fresh key pair:
// ENROLLED or REJECT (nullopt: nothing within 10 s).
std::optional<protocol::Envelope> EnrolWithToken(const LocalFarm& farm, const std::string& key_hex,
                                                 const std::string& token,
                                                 const std::string& name) {
  zmq::context_t context;
  zmq::socket_t dealer(context, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  const curve::KeyPair token_keys = curve::JoinTokenKeys(token).value();
  dealer.set(zmq::sockopt::curve_serverkey, curve::ParseKey(key_hex, "key").value());
  dealer.set(zmq::sockopt::curve_publickey, token_keys.public_key);
  dealer.set(zmq::sockopt::curve_secretkey, token_keys.secret_key);
  dealer.connect(farm.broker_endpoint());
  auto frames = protocol::Encode(protocol::MessageType::kEnrol,
                                 protocol::Enrol{name, curve::Generate().public_key});
  (void)zmq::send_multipart(dealer, frames);
  zmq::pollitem_t item{dealer.handle(), 0, ZMQ_POLLIN, 0};
  if (zmq::poll(&item, 1, 10s) <= 0) return std::nullopt;
  std::vector<zmq::message_t> reply;
  if (!zmq::recv_multipart(dealer, std::back_inserter(reply))) return std::nullopt;
  auto env = protocol::Decode(reply);
  if (!env.ok()) return std::nullopt;
  return std::move(*env);
}

TEST(FleetTest, AJoinTokenDoesNotTakeOverAnEnrolledNameUntilItIsRevokedAndReadmitted) {
  LocalFarm farm("fleet-takeover");
  farm.UseCurve();
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  std::string key;
  const std::string token = farm.CreateJoinToken(&key);
  ASSERT_FALSE(token.empty()) << farm.SchedulerLog();
  const std::string data = farm.dir() + "/w1-data";
  ASSERT_TRUE(
      farm.StartWorkerWith("w1", {"--public-key", key, "--join-token", token, "--data-dir", data}));
  ASSERT_TRUE(farm.WaitForWorkers(1, 30s)) << farm.WorkerLog("w1") << farm.SchedulerLog();

  // Whoever else holds a join token asks for w1's name with a key of its own: refused, and the
  // real w1 keeps its key, its connection and its work.
  auto refused = EnrolWithToken(farm, key, token, "w1");
  ASSERT_TRUE(refused) << farm.SchedulerLog();
  ASSERT_EQ(refused->type, protocol::MessageType::kReject) << farm.SchedulerLog();
  EXPECT_TRUE(
      Contains(refused->As<protocol::Reject>()->reason, "already enrolled with another key"))
      << refused->As<protocol::Reject>()->reason;
  EXPECT_TRUE(Contains(farm.SchedulerLog(), "enrolment_refused")) << farm.SchedulerLog();
  std::string error;
  int64_t job = farm.Submit("name: still\nrenderer: noop\nframes: 1-2\n", "", &error);
  ASSERT_GT(job, 0) << error;
  EXPECT_EQ(farm.WaitForJob(job, 30s)["state"], "done") << farm.SchedulerLog();

  // Revoked, the name is still not free: an operator readmits it first.
  int status = 0;
  farm.Post("/api/v1/workers/w1/revoke", {}, &status);
  ASSERT_EQ(status, 200);
  EXPECT_EQ(farm.worker("w1").Wait(20s), 1) << farm.WorkerLog("w1");
  refused = EnrolWithToken(farm, key, token, "w1");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->type, protocol::MessageType::kReject);
  farm.Post("/api/v1/workers/w1/readmit", {}, &status);
  ASSERT_EQ(status, 200);
  auto enrolled = EnrolWithToken(farm, key, token, "w1");
  ASSERT_TRUE(enrolled) << farm.SchedulerLog();
  EXPECT_EQ(enrolled->type, protocol::MessageType::kEnrolled) << farm.SchedulerLog();

  // The name is taken again; only a join token made for it (the API's `worker` field) moves it
  // to another key, as when a machine is replaced.
  refused = EnrolWithToken(farm, key, token, "w1");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->type, protocol::MessageType::kReject);
  nlohmann::json named =
      farm.Post("/api/v1/join-tokens", {{"note", "replace w1"}, {"worker", "w1"}}, &status);
  ASSERT_EQ(status, 201) << named.dump();
  EXPECT_EQ(named["join_token"]["worker"], "w1");
  auto moved = EnrolWithToken(farm, key, named["token"], "w1");
  ASSERT_TRUE(moved) << farm.SchedulerLog();
  EXPECT_EQ(moved->type, protocol::MessageType::kEnrolled) << farm.SchedulerLog();
  // A token for one name enrols no other.
  named = farm.Post("/api/v1/join-tokens", {{"worker", "w9"}}, &status);
  ASSERT_EQ(status, 201);
  auto other = EnrolWithToken(farm, key, named["token"], "w3");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->type, protocol::MessageType::kReject);
}

// ---- results, drain, spot ---------------------------------------------------------------------

TEST(FleetTest, SpooledResultSurvivesASchedulerRestartAndIsDeliveredOnce) {
  LocalFarm farm("fleet-spool");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  const std::string data = farm.dir() + "/w1-data";
  ASSERT_TRUE(farm.StartWorkerWith("w1", {"--data-dir", data}));
  ASSERT_TRUE(farm.WaitForWorkers(1, 20s));
  std::string error;
  int64_t job = farm.Submit(JobYaml("spool", "1"), SlowScene(), &error);
  ASSERT_GT(job, 0) << error;
  ASSERT_TRUE(WaitUntilRendering(farm, job, 0.05)) << farm.SchedulerLog();

  // The scheduler dies mid-render; the worker finishes while it is down.
  farm.KillScheduler();
  ASSERT_TRUE(WaitFor([&] { return Contains(farm.WorkerLog("w1"), "done, 1 frame(s)"); }, 120s))
      << farm.WorkerLog("w1");
  EXPECT_FALSE(fs::is_empty(data + "/spool")) << "the result waits in the spool";

  ASSERT_TRUE(farm.StartScheduler(/*reuse_ports=*/true)) << farm.SchedulerLog();
  nlohmann::json done = farm.WaitForJob(job, 60s);
  ASSERT_EQ(done["state"], "done") << farm.SchedulerLog() << farm.WorkerLog("w1");
  EXPECT_EQ(Tasks(farm, job)[0]["attempt"], 1) << "delivered, not rendered again";
  EXPECT_TRUE(fs::exists(Exr(done, "spool", 1)));
  EXPECT_TRUE(WaitFor([&] { return fs::is_empty(data + "/spool"); }, 10s))
      << "acknowledged results leave the spool";

  // One after the other, each result is acknowledged inside the next assignment (the worker
  // says it reads them there): those leave the spool too.
  job = farm.Submit("name: acks\nrenderer: noop\nframes: 1-5\n", "", &error);
  ASSERT_GT(job, 0) << error;
  ASSERT_EQ(farm.WaitForJob(job, 30s)["state"], "done") << farm.SchedulerLog();
  EXPECT_TRUE(WaitFor([&] { return fs::is_empty(data + "/spool"); }, 10s))
      << "results acknowledged inside assignments leave the spool";
}

TEST(FleetTest, DrainFinishesTheRunningTaskTakesNoNewOnesAndExits) {
  LocalFarm farm("fleet-drain");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("w1"));
  ASSERT_TRUE(farm.WaitForWorkers(1, 20s));
  std::string error;
  int64_t job = farm.Submit(JobYaml("drain", "1-2"), SlowScene(), &error);
  ASSERT_GT(job, 0) << error;
  ASSERT_TRUE(WaitUntilRendering(farm, job, 0.05));

  // SIGTERM: the running task finishes and is delivered; the other one is not taken.
  farm.worker("w1").Signal(SIGTERM);
  EXPECT_EQ(farm.worker("w1").Wait(120s), 0) << farm.WorkerLog("w1");
  EXPECT_TRUE(Contains(farm.WorkerLog("w1"), "drained: every result delivered"));
  nlohmann::json tasks = Tasks(farm, job);
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0]["state"], "done");
  EXPECT_EQ(tasks[1]["state"], "queued");

  // `tessera worker drain` (the API) on an idle worker: it leaves at once; another finishes.
  ASSERT_TRUE(farm.StartWorker("w2"));
  ASSERT_TRUE(farm.WaitForWorkers(1, 20s));
  EXPECT_EQ(farm.WaitForJob(job, 120s)["state"], "done");
  int status = 0;
  farm.Post("/api/v1/workers/w2/drain", {}, &status);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(farm.worker("w2").Wait(30s), 0) << farm.WorkerLog("w2");
  farm.Post("/api/v1/workers/nobody/drain", {}, &status);
  EXPECT_EQ(status, 404);
}

// The instance metadata service of a GCP spot VM, on loopback: preempted flips to TRUE on
// request.
class GcpMetadataStub {
 public:
  GcpMetadataStub() {
    auto reply = [this](const std::string& value) {
      return [value](const httplib::Request& req, httplib::Response& res) {
        if (req.get_header_value("Metadata-Flavor") != "Google") {
          res.status = 403;
          return;
        }
        res.set_content(value, "text/plain");
      };
    };
    server_.Get("/computeMetadata/v1/instance/machine-type",
                reply("projects/7/machineTypes/g2-standard-8"));
    server_.Get("/computeMetadata/v1/instance/zone", reply("projects/7/zones/us-central1-a"));
    server_.Get("/computeMetadata/v1/instance/scheduling/preemptible", reply("TRUE"));
    server_.Get("/computeMetadata/v1/instance/preempted",
                [this](const httplib::Request&, httplib::Response& res) {
                  res.set_content(preempted_.load() ? "TRUE" : "FALSE", "text/plain");
                });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~GcpMetadataStub() {
    server_.stop();
    thread_.join();
  }
  void Preempt() { preempted_.store(true); }
  std::string url() const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/computeMetadata/v1/";
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::atomic<bool> preempted_{false};
  std::thread thread_;
};

TEST(FleetTest, SpotNoticeHandsBackACheckpointAndAnotherWorkerResumesToTheSameImage) {
  GcpMetadataStub metadata;
  LocalFarm farm("fleet-spot");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  const std::string config = farm.dir() + "/spot-worker.yaml";
  WriteFile(config, "cloud:\n  provider: gcp\n  metadata_url: " + metadata.url() +
                        "\n  poll_interval_ms: 200\n");
  ASSERT_TRUE(farm.StartWorkerWith("spot", {"--config", config}));
  ASSERT_TRUE(farm.WaitForWorkers(1, 20s)) << farm.WorkerLog("spot");
  const nlohmann::json worker = farm.Get("/api/v1/workers")["workers"][0];
  EXPECT_EQ(worker["cloud"]["provider"], "gcp") << worker.dump();
  EXPECT_EQ(worker["cloud"]["lifecycle"], "spot");

  std::string error;
  int64_t job = farm.Submit(JobYaml("spot", "1"), SlowScene(), &error);
  ASSERT_GT(job, 0) << error;
  ASSERT_TRUE(WaitUntilRendering(farm, job, 0.2)) << farm.SchedulerLog();

  // The cloud takes the machine back: checkpoint, hand back, leave.
  metadata.Preempt();
  EXPECT_EQ(farm.worker("spot").Wait(60s), 0) << farm.WorkerLog("spot");
  EXPECT_TRUE(Contains(farm.WorkerLog("spot"), "spot interruption notice"));
  EXPECT_TRUE(WaitFor([&] { return Contains(farm.SchedulerLog(), "checkpoint after"); }, 10s))
      << farm.SchedulerLog();

  // Another worker resumes from the checkpoint, and nothing was charged.
  ASSERT_TRUE(farm.StartWorker("steady"));
  nlohmann::json resumed = farm.WaitForJob(job, 120s);
  ASSERT_EQ(resumed["state"], "done") << farm.SchedulerLog();
  nlohmann::json task = Tasks(farm, job)[0];
  EXPECT_EQ(task["attempt"], 2);
  EXPECT_EQ(task["failures"], 0) << "a hand-back is not the task's fault";
  EXPECT_TRUE(Contains(farm.WorkerLog("steady"), "done, 1 frame(s)")) << farm.WorkerLog("steady");
  // It fetched the checkpoint (a blob, like an asset) and continued from it.
  EXPECT_TRUE(Contains(farm.WorkerLog("steady"), "fetching 1 of its 1 asset(s)"))
      << farm.WorkerLog("steady");
  EXPECT_TRUE(Contains(farm.WorkerLog("steady"), "from a checkpoint of"))
      << farm.WorkerLog("steady");

  // The same frame rendered without interruption is bit-identical.
  int64_t whole = farm.Submit(JobYaml("whole", "1"), SlowScene(), &error);
  ASSERT_GT(whole, 0) << error;
  nlohmann::json reference = farm.WaitForJob(whole, 120s);
  ASSERT_EQ(reference["state"], "done");
  auto a = image::Read(Exr(resumed, "spot", 1));
  auto b = image::Read(Exr(reference, "whole", 1));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_TRUE(a->pixels == b->pixels) << "the resumed frame differs from an uninterrupted one";
}

TEST(FleetTest, TwoSimulatedGpusGiveTwoSlotsEachTaskPinnedToOne) {
  LocalFarm farm("fleet-gpus");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  const std::string config = farm.dir() + "/gpu-worker.yaml";
  WriteFile(config, "worker:\n  simulate_gpus: 2\n");
  ASSERT_TRUE(farm.StartWorkerWith("gpus", {"--config", config}));
  ASSERT_TRUE(farm.WaitForWorkers(1, 20s));
  const nlohmann::json worker = farm.Get("/api/v1/workers")["workers"][0];
  ASSERT_EQ(worker["gpus"].size(), 2u) << worker.dump();

  std::string error;
  int64_t job = farm.Submit(JobYaml("gpus", "1-2", "resources:\n  gpus: 1\n"), SlowScene(), &error);
  ASSERT_GT(job, 0) << error;
  EXPECT_TRUE(WaitFor(
      [&] {
        int running = 0;
        for (const auto& t : Tasks(farm, job)) running += t["state"] == "running";
        return running == 2;
      },
      60s, 100ms))
      << "both tasks run at once, one per GPU";
  EXPECT_EQ(farm.WaitForJob(job, 180s)["state"], "done");
  const std::string log = farm.WorkerLog("gpus");
  EXPECT_TRUE(Contains(log, "2 GPU(s)")) << log;
  // The two tasks ran at once, so each was pinned to a GPU of its own: one says GPU 0, the other
  // GPU 1 (the first line of each task's log names the GPU it was given).
  std::set<std::string> pinned;
  for (const auto& t : Tasks(farm, job)) {
    const nlohmann::json task_log =
        farm.Get("/api/v1/tasks/" + std::to_string(t["id"].get<int64_t>()) + "/log");
    ASSERT_FALSE(task_log["attempts"].empty()) << task_log.dump();
    const std::string first = task_log["attempts"][0]["log"].get<std::string>();
    for (const std::string gpu : {"GPU 0", "GPU 1"}) {
      if (Contains(first, ", " + gpu)) pinned.insert(gpu);
    }
  }
  EXPECT_EQ(pinned, (std::set<std::string>{"GPU 0", "GPU 1"}));
}

// A 2-GPU path-tracer task splits each frame over both GPUs (here simulated: two shares of the
// CPU) and renders the same image, bit for bit, as a 1-GPU task; a budget smaller than the
// scene's need fails the task with both numbers before it renders.
TEST(FleetTest, TwoGpuTaskRendersTheSameImageAsOneGpuAndBudgetsAreChecked) {
  LocalFarm farm("fleet-multigpu");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  const std::string config = farm.dir() + "/gpu-worker.yaml";
  WriteFile(config, "worker:\n  simulate_gpus: 2\n  threads: 2\n");
  ASSERT_TRUE(farm.StartWorkerWith("gpus", {"--config", config}));
  ASSERT_TRUE(farm.WaitForWorkers(1, 20s));

  std::string error;
  const std::string scene = TinySceneYaml(48, 32, 8);
  const int64_t one = farm.Submit(JobYaml("one", "1", "resources:\n  gpus: 1\n"), scene, &error);
  ASSERT_GT(one, 0) << error;
  const int64_t two = farm.Submit(
      JobYaml("two", "1", "resources:\n  gpus: 2\n  gpu_memory_mb: 1000\n"), scene, &error);
  ASSERT_GT(two, 0) << error;
  const int64_t small = farm.Submit(
      JobYaml("small", "1", "max_retries: 0\nresources:\n  gpus: 2\n  gpu_memory_mb: 1\n"),
      TinySceneYaml(1024, 1024, 64), &error);
  ASSERT_GT(small, 0) << error;

  const nlohmann::json job_one = farm.WaitForJob(one, 120s);
  const nlohmann::json job_two = farm.WaitForJob(two, 120s);
  ASSERT_EQ(job_one["state"], "done") << job_one.dump() << farm.WorkerLog("gpus");
  ASSERT_EQ(job_two["state"], "done") << job_two.dump() << farm.WorkerLog("gpus");
  StatusOr<image::ImageBuffer> a = image::Read(Exr(job_one, "one", 1));
  StatusOr<image::ImageBuffer> b = image::Read(Exr(job_two, "two", 1));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_EQ(a->pixels.size(), b->pixels.size());
  EXPECT_EQ(std::memcmp(a->pixels.data(), b->pixels.data(), a->pixels.size() * sizeof(float)), 0)
      << "the 2-GPU frame differs from the 1-GPU frame";
  const auto first_log = [&](int64_t job) {
    const nlohmann::json task = Tasks(farm, job).at(0);
    const nlohmann::json log =
        farm.Get("/api/v1/tasks/" + std::to_string(task["id"].get<int64_t>()) + "/log");
    return log["attempts"].at(0);
  };
  EXPECT_TRUE(Contains(first_log(two)["log"].get<std::string>(), ", GPUs 0,1"))
      << first_log(two).dump();

  const nlohmann::json job_small = farm.WaitForJob(small, 120s);
  EXPECT_EQ(job_small["state"], "failed") << job_small.dump();
  const std::string message = first_log(small)["message"].get<std::string>();
  EXPECT_TRUE(Contains(message,
                       "MiB of GPU memory, the task's budget is 1 MiB "
                       "(resources.gpu_memory_mb)"))
      << message;
}

// A command renderer on a 2-GPU task sees both GPUs, and only them, in CUDA_VISIBLE_DEVICES.
TEST(FleetTest, CommandRendererSeesTheTasksGpus) {
  LocalFarm farm("fleet-gpu-env");
  const std::string png = farm.dir() + "/frame.png";
  image::ImageBuffer image{8, 8, 3, std::vector<float>(8 * 8 * 3, 0.5f), {}};
  ASSERT_TRUE(image::WriteSrgb8(png, image).ok());
  const std::string script = farm.dir() + "/env.sh";
  WriteFile(script, "#!/bin/sh\necho \"visible=[${CUDA_VISIBLE_DEVICES-unset}]\"\ncp '" + png +
                        "' \"$1/frame_000001.png\"\n");
  ::chmod(script.c_str(), 0755);
  farm.set_command_programs({script});
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  const std::string config = farm.dir() + "/gpu-worker.yaml";
  WriteFile(config, "worker:\n  simulate_gpus: 3\n");
  ASSERT_TRUE(farm.StartWorkerWith("gpus", {"--config", config}));
  ASSERT_TRUE(farm.WaitForWorkers(1, 20s));
  std::string error;
  const int64_t id = farm.Submit(
      "name: env\nrenderer: command\nframes: 1\nmax_retries: 0\nresources: {gpus: 2}\n"
      "output: {pattern: 'env.####', formats: [png]}\nsettings: {program: " +
          script + ", outputs: images, argv: ['{output_dir}']}\n",
      "", &error);
  ASSERT_GT(id, 0) << error;
  const nlohmann::json job = farm.WaitForJob(id, 60s);
  ASSERT_EQ(job["state"], "done") << job.dump() << farm.WorkerLog("gpus");
  const nlohmann::json task = Tasks(farm, id).at(0);
  const nlohmann::json log =
      farm.Get("/api/v1/tasks/" + std::to_string(task["id"].get<int64_t>()) + "/log");
  const std::string text = log["attempts"].at(0)["log"].get<std::string>();
  EXPECT_TRUE(Contains(text, "visible=[0,1]")) << text;
}

}  // namespace
}  // namespace tessera::testing
