// Moving data without shared storage, through a real scheduler and real workers: a scene's mesh
// and texture go up with `tessera submit` as content-addressed blobs and each worker fetches
// them once; a damaged cached copy and a damaged stored blob are caught by their hash; bad
// uploads and submissions are refused naming the field; and a 4096x2160 11-channel frame (far
// above the scheduler's per-message limit) comes back in pieces while another worker keeps
// heartbeating and rendering.

#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "shared/base/sha256.h"
#include "shared/images/image_io.h"
#include "shared/wire/protocol.h"
#include "tests/support/farm.h"
#include "tests/support/process.h"

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// A red texture on a quad that fills the view, and an OBJ triangle beside it: the frame is red
// only if the texture reached the worker.
constexpr char kScene[] = R"(width: 48
height: 32
samples: 4
max_depth: 2
background: {color: [1, 1, 1]}
camera:
  keyframes:
    - {frame: 1, position: [0, 0, 3], look_at: [0, 0, 0], fov: 40}
materials:
  painted: {type: diffuse, color: [1, 1, 1], texture: tex/red.png}
  grey: {type: diffuse, color: [0.5, 0.5, 0.5]}
objects:
  - {type: quad, corner: [-3, -3, 0], u: [6, 0, 0], v: [0, 6, 0], material: painted}
  - type: mesh
    file: models/tri.obj
    material: grey
    transform: {translate: [0.8, 0.3, 0.5], scale: 0.2}
)";

constexpr char kTriangle[] = "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n";

int CountOf(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class AssetsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(farm_.StartScheduler()) << farm_.SchedulerLog();
    job_dir_ = farm_.dir() + "/job";
    fs::create_directories(job_dir_ + "/tex");
    fs::create_directories(job_dir_ + "/models");
    image::ImageBuffer red{4, 4, 3, std::vector<float>(4 * 4 * 3, 0.0f), {}};
    for (int i = 0; i < 16; ++i) red.pixels[i * 3] = 1.0f;
    ASSERT_TRUE(image::WriteSrgb8(job_dir_ + "/tex/red.png", red).ok());
    WriteFile(job_dir_ + "/models/tri.obj", kTriangle);
    WriteFile(job_dir_ + "/scene.yaml", kScene);
    texture_hash_ = *Sha256File(job_dir_ + "/tex/red.png");
    env_ = {"TESSERA_SERVER=" + farm_.api_url(), "TESSERA_TOKEN=" + farm_.token()};
  }

  // Submits a job on the scene through the CLI; returns its id (or -1).
  int64_t Submit(const std::string& name, const std::string& extra = "") {
    const std::string file = job_dir_ + "/" + name + ".yaml";
    WriteFile(file, "name: " + name + "\nscene: scene.yaml\n" + extra);
    RunResult r = RunProcess({Bin("tessera"), "submit", file}, 60s, env_);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return r.exit_code == 0 ? std::stoll(r.out) : -1;
  }

  std::string WorkerLogs() {
    std::string all;
    for (const char* name : {"w1", "w2"}) all += farm_.WorkerLog(name);
    return all;
  }

  LocalFarm farm_{"assets"};
  std::string job_dir_;
  std::string texture_hash_;
  std::vector<std::string> env_;
};

TEST_F(AssetsTest, SceneFilesTravelAsBlobsFetchedOncePerWorker) {
  ASSERT_TRUE(farm_.StartWorker("w1"));
  ASSERT_TRUE(farm_.StartWorker("w2"));
  ASSERT_TRUE(farm_.WaitForWorkers(2, 20s));
  const int64_t id = Submit("textured", "frames: 1-8\n");
  ASSERT_GT(id, 0);
  nlohmann::json job = farm_.WaitForJob(id, 120s);
  ASSERT_EQ(job["state"], "done") << job.dump() << farm_.SchedulerLog();

  // Stored once at the scheduler, under its hash.
  EXPECT_TRUE(
      fs::exists(farm_.dir() + "/data/blobs/" + texture_hash_.substr(0, 2) + "/" + texture_hash_));
  // Each worker fetched the assets at most once for its frames (a worker that got no task
  // fetched nothing), and at least one did.
  const std::string logs = WorkerLogs();
  const int fetches = CountOf(logs, "asset(s) from the scheduler");
  EXPECT_GE(fetches, 1) << logs;
  EXPECT_LE(fetches, 2) << logs;
  // The texture was used: the frame's middle is red.
  const std::string out = job["output_dir"].get<std::string>();
  StatusOr<image::ImageBuffer> frame = image::Read(out + "/textured.0001.exr");
  ASSERT_TRUE(frame.ok()) << frame.status().message();
  const float* mid = &frame->pixels[(16 * 48 + 24) * frame->channels];
  EXPECT_GT(mid[0], 0.5f);
  EXPECT_LT(mid[1], 0.1f * mid[0]);
  EXPECT_LT(mid[2], 0.1f * mid[0]);
}

TEST_F(AssetsTest, DeletingTheLastJobThatUsesABlobRemovesIt) {
  ASSERT_TRUE(farm_.StartWorker("w1"));
  ASSERT_TRUE(farm_.WaitForWorkers(1, 20s));
  const int64_t a = Submit("a", "frames: 1\n");
  const int64_t b = Submit("b", "frames: 1\n");
  ASSERT_EQ(farm_.WaitForJob(a, 60s)["state"], "done");
  ASSERT_EQ(farm_.WaitForJob(b, 60s)["state"], "done");
  const std::string stored =
      farm_.dir() + "/data/blobs/" + texture_hash_.substr(0, 2) + "/" + texture_hash_;
  // Past the grace period that protects a blob a submission has just named.
  fs::last_write_time(stored, fs::file_time_type::clock::now() - std::chrono::hours(1));
  EXPECT_EQ(farm_.Delete("/api/v1/jobs/" + std::to_string(a)), 200);
  EXPECT_TRUE(fs::exists(stored)) << "job b still uses it";
  EXPECT_EQ(farm_.Delete("/api/v1/jobs/" + std::to_string(b)), 200);
  EXPECT_FALSE(fs::exists(stored));
}

TEST_F(AssetsTest, DamagedCachedCopyIsFetchedAgain) {
  const std::string data = farm_.dir() + "/w1-data";
  ASSERT_TRUE(farm_.StartWorkerWith("w1", {"--data-dir", data}));
  ASSERT_TRUE(farm_.WaitForWorkers(1, 20s));
  const int64_t first = Submit("first", "frames: 1\n");
  ASSERT_EQ(farm_.WaitForJob(first, 60s)["state"], "done") << farm_.WorkerLog("w1");
  const std::string cached = data + "/cache/" + texture_hash_;
  ASSERT_TRUE(fs::exists(cached));

  // Bit rot on the worker's disk: same size, other bytes.
  std::string bytes = ReadFile(cached);
  for (char& c : bytes) c = static_cast<char>(c ^ 0x5a);
  WriteFile(cached, bytes);
  const int64_t second = Submit("second", "frames: 1\n");
  ASSERT_EQ(farm_.WaitForJob(second, 60s)["state"], "done") << farm_.WorkerLog("w1");
  EXPECT_NE(farm_.WorkerLog("w1").find("is damaged"), std::string::npos);
  EXPECT_EQ(*Sha256File(cached), texture_hash_);
}

TEST_F(AssetsTest, DamagedStoredBlobFailsTheTaskNamingTheAsset) {
  ASSERT_TRUE(farm_.StartWorker("w1"));
  ASSERT_TRUE(farm_.WaitForWorkers(1, 20s));
  // Upload (the job itself is refused: it depends on a job that does not exist), then damage
  // the scheduler's copy before any worker fetched it.
  WriteFile(job_dir_ + "/held.yaml",
            "name: held\nscene: scene.yaml\nframes: 1\ndepends_on: [999999]\n");
  RunResult held = RunProcess({Bin("tessera"), "submit", job_dir_ + "/held.yaml"}, 60s, env_);
  EXPECT_NE(held.exit_code, 0);
  EXPECT_NE(held.err.find("depends_on[0]"), std::string::npos) << held.err;
  const std::string stored =
      farm_.dir() + "/data/blobs/" + texture_hash_.substr(0, 2) + "/" + texture_hash_;
  ASSERT_TRUE(fs::exists(stored));
  std::string bytes = ReadFile(stored);
  bytes[bytes.size() / 2] ^= 1;
  WriteFile(stored, bytes);

  const int64_t id = Submit("damaged", "frames: 1\nmax_retries: 0\n");
  ASSERT_GT(id, 0);
  nlohmann::json job = farm_.WaitForJob(id, 60s);
  EXPECT_EQ(job["state"], "failed");
  nlohmann::json tasks = farm_.Get("/api/v1/jobs/" + std::to_string(id) + "/tasks");
  ASSERT_FALSE(tasks["tasks"].empty()) << tasks.dump();
  const std::string error = tasks["tasks"][0].value("message", "");
  EXPECT_NE(error.find("asset tex/red.png"), std::string::npos) << error;
  EXPECT_NE(error.find("arrived damaged"), std::string::npos) << error;
  // It was fetched twice (once again after the first damaged arrival) before giving up.
  EXPECT_NE(farm_.WorkerLog("w1").find("fetching it again"), std::string::npos);
}

TEST_F(AssetsTest, BadUploadsAndSubmissionsAreRefusedNamingTheField) {
  // Bytes that do not match the name are discarded.
  const std::string hash = Sha256Hex("the real bytes");
  int status = 0;
  httplib::Client http(farm_.api_url());
  httplib::Headers auth = {{"Authorization", "Bearer " + farm_.token()}};
  auto put = http.Put("/api/v1/blobs/" + hash + "?offset=0&total=9", auth, "not these",
                      "application/octet-stream");
  ASSERT_TRUE(put);
  EXPECT_EQ(put->status, 400);
  EXPECT_NE(put->body.find("hash:"), std::string::npos) << put->body;
  nlohmann::json state = farm_.Get("/api/v1/blobs/" + hash, &status);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(state["complete"], false);
  EXPECT_EQ(state["received"], 0);
  // A resumed upload must continue where the store stands.
  put = http.Put("/api/v1/blobs/" + hash + "?offset=4&total=14", auth, "real bytes",
                 "application/octet-stream");
  ASSERT_TRUE(put);
  EXPECT_EQ(put->status, 409);
  EXPECT_NE(put->body.find("offset:"), std::string::npos) << put->body;
  // Two pieces make the blob.
  put = http.Put("/api/v1/blobs/" + hash + "?offset=0&total=14", auth, "the real", "x/y");
  ASSERT_TRUE(put);
  EXPECT_EQ(put->status, 200);
  put = http.Put("/api/v1/blobs/" + hash + "?offset=8&total=14", auth, " bytes", "x/y");
  ASSERT_TRUE(put);
  EXPECT_EQ(put->status, 201) << put->body;
  EXPECT_EQ(farm_.Get("/api/v1/blobs/" + hash)["size"], 14);

  const nlohmann::json job = {{"job_yaml", "name: a\nscene: scene.yaml\nframes: 1\n"},
                              {"scene_yaml", kScene}};
  // A scene naming files the job does not carry.
  nlohmann::json reply = farm_.Post("/api/v1/jobs", job, &status);
  EXPECT_EQ(status, 400);
  EXPECT_NE(reply.dump().find("scene: the file 'models/tri.obj'"), std::string::npos) << reply;
  // A blob that was never uploaded.
  nlohmann::json body = job;
  body["assets"] = {{"models/tri.obj", hash}, {"tex/red.png", Sha256Hex("missing")}};
  reply = farm_.Post("/api/v1/jobs", body, &status);
  EXPECT_EQ(status, 400);
  EXPECT_NE(reply.dump().find("assets[tex/red.png]: blob"), std::string::npos) << reply;
  // A path leaving the task folder.
  body["assets"] = {{"../tri.obj", hash}};
  reply = farm_.Post("/api/v1/jobs", body, &status);
  EXPECT_EQ(status, 400);
  EXPECT_NE(reply.dump().find("assets[../tri.obj]"), std::string::npos) << reply;
  // The CLI names a listed file that does not exist, and sends nothing.
  WriteFile(job_dir_ + "/missing.yaml",
            "name: m\nscene: scene.yaml\nframes: 1\nassets: [nothere.inc]\n");
  RunResult r = RunProcess({Bin("tessera"), "submit", job_dir_ + "/missing.yaml"}, 60s, env_);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("asset 'nothere.inc': no such file"), std::string::npos) << r.err;
}

TEST_F(AssetsTest, LargeFrameComesBackInPiecesWhileAnotherWorkerKeepsWorking) {
  ASSERT_TRUE(farm_.StartWorker("big"));
  ASSERT_TRUE(farm_.StartWorker("small"));
  ASSERT_TRUE(farm_.WaitForWorkers(2, 20s));
  // 4096x2160 with RGBA + albedo, normal, depth: 11 float channels, 389 MB in one result.
  const std::string big_scene = R"(width: 4096
height: 2160
samples: 1
max_depth: 1
aovs: [albedo, normal, depth]
background: {color: [0.5, 0.6, 0.7]}
camera:
  keyframes:
    - {frame: 1, position: [0, 1, 5], look_at: [0, 0.5, 0], fov: 40}
materials:
  ground: {type: diffuse, color: [0.6, 0.6, 0.6]}
objects:
  - {type: quad, corner: [-10, 0, -10], u: [0, 0, 20], v: [20, 0, 0], material: ground}
  - {type: sphere, center: [0, 0.5, 0], radius: 0.5, material: ground}
)";
  std::string error;
  const int64_t big = farm_.Submit(
      "name: big\nscene: scene.yaml\nframes: 1\n"
      "output: {formats: [exr]}\n",
      big_scene, &error);
  ASSERT_GT(big, 0) << error;
  // Small renders for the other worker while the big frame renders, is spooled and travels.
  const int64_t many = farm_.Submit("name: many\nscene: scene.yaml\nframes: 1-40\n",
                                    TinySceneYaml(160, 120, 64), &error);
  ASSERT_GT(many, 0) << error;

  nlohmann::json job = farm_.WaitForJob(big, 300s);
  ASSERT_EQ(job["state"], "done") << job.dump() << farm_.SchedulerLog();
  EXPECT_EQ(farm_.WaitForJob(many, 120s)["state"], "done");
  StatusOr<image::ImageBuffer> frame =
      image::Read(job["output_dir"].get<std::string>() + "/big.0001.exr");
  ASSERT_TRUE(frame.ok()) << frame.status().message();
  EXPECT_EQ(frame->width, 4096);
  EXPECT_EQ(frame->height, 2160);
  EXPECT_EQ(frame->channels, 11);
  static_assert(int64_t{4096} * 2160 * 11 * 4 > 100 * protocol::kMaxMessageBytes);
  // The other worker kept rendering while the big frame rendered and travelled: tasks of the
  // small job finished, on the other worker, before the big job did.
  const std::string big_worker =
      farm_.Get("/api/v1/jobs/" + std::to_string(big) + "/tasks")["tasks"][0]["worker_name"];
  const std::string big_finished = job["finished_at"];
  const nlohmann::json small_tasks =
      farm_.Get("/api/v1/jobs/" + std::to_string(many) + "/tasks")["tasks"];
  int meanwhile = 0;
  for (const auto& t : small_tasks) {
    meanwhile += t["worker_name"] != big_worker && t["finished_at"].is_string() &&
                 t["finished_at"].get<std::string>() < big_finished;
  }
  EXPECT_GE(meanwhile, 3) << "tasks of the small job done elsewhere while the big one ran (on "
                          << big_worker << ", until " << big_finished
                          << "): " << small_tasks.dump();
  // Nobody was declared dead meanwhile: every heartbeat got through between the pieces.
  EXPECT_EQ(farm_.SchedulerLog().find("removed:"), std::string::npos) << farm_.SchedulerLog();
  nlohmann::json workers = farm_.Get("/api/v1/workers");
  for (const auto& w : workers["workers"]) EXPECT_NE(w["state"], "offline") << w.dump();
}

}  // namespace
}  // namespace tessera::testing

namespace tessera::testing {
namespace {

// A shared-storage farm: the scheduler sees the storage at share/, the worker mounts it at mnt/
// (a link here) and maps one to the other with worker.path_map.
TEST(SharedStorageTest, WorkersWriteFramesThroughTheirPathMap) {
  LocalFarm farm("shared-storage");
  const std::string share = farm.dir() + "/share";
  const std::string mnt = farm.dir() + "/mnt";
  fs::create_directories(share);
  fs::create_directory_symlink(share, mnt);
  farm.AppendSchedulerConfig("storage:\n  shared_roots: [" + share + "]\n");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  WriteFile(farm.dir() + "/worker.yaml", "worker:\n  path_map: {" + share + ": " + mnt + "}\n");
  ASSERT_TRUE(farm.StartWorkerWith("w1", {"--config", farm.dir() + "/worker.yaml"}));
  ASSERT_TRUE(farm.WaitForWorkers(1, 20s));

  // Whole frames: written by the worker, at its own path.
  std::string error;
  const int64_t whole = farm.Submit(
      "name: whole\nscene: scene.yaml\nframes: 1-3\n"
      "output: {shared_dir: " +
          share + "/shot1, formats: [exr, png]}\n",
      TinySceneYaml(), &error);
  ASSERT_GT(whole, 0) << error;
  nlohmann::json job = farm.WaitForJob(whole, 60s);
  ASSERT_EQ(job["state"], "done") << job.dump() << farm.SchedulerLog();
  EXPECT_EQ(job["output_dir"], fs::canonical(share).string() + "/shot1");
  for (int f = 1; f <= 3; ++f) {
    for (const char* ext : {"exr", "png"}) {
      const std::string file = share + "/shot1/whole.000" + std::to_string(f) + "." + ext;
      EXPECT_TRUE(fs::exists(file)) << file;
    }
  }
  // The task's log says where the worker wrote (its own mount point).
  nlohmann::json tasks = farm.Get("/api/v1/jobs/" + std::to_string(whole) + "/tasks");
  ASSERT_FALSE(tasks["tasks"].empty());
  const std::string log =
      farm.Get("/api/v1/tasks/" + std::to_string(tasks["tasks"][0]["id"].get<int64_t>()) + "/log")
          .dump();
  EXPECT_NE(log.find("written to " + mnt + "/shot1"), std::string::npos) << log;
  StatusOr<image::ImageBuffer> frame = image::Read(share + "/shot1/whole.0002.exr");
  ASSERT_TRUE(frame.ok()) << frame.status().message();
  EXPECT_EQ(frame->width, 64);

  // Split frames: the tiles come back and the scheduler assembles into the shared folder.
  const int64_t tiled = farm.Submit(
      "name: tiled\nscene: scene.yaml\nframes: 1\ntiles: 2x1\n"
      "output: {shared_dir: " +
          share + "/shot2}\n",
      TinySceneYaml(), &error);
  ASSERT_GT(tiled, 0) << error;
  ASSERT_EQ(farm.WaitForJob(tiled, 60s)["state"], "done");
  EXPECT_TRUE(fs::exists(share + "/shot2/tiled.0001.exr"));

  // Outside every shared root: refused, naming the field.
  int status = 0;
  nlohmann::json reply = farm.Post(
      "/api/v1/jobs",
      {{"job_yaml", "name: out\nscene: s.yaml\nframes: 1\noutput: {shared_dir: " + farm.dir() +
                        "/elsewhere}\n"},
       {"scene_yaml", TinySceneYaml()}},
      &status);
  EXPECT_EQ(status, 400);
  EXPECT_NE(reply.dump().find("output.shared_dir"), std::string::npos) << reply.dump();
  EXPECT_FALSE(fs::exists(farm.dir() + "/elsewhere/out.0001.exr"));
}

}  // namespace
}  // namespace tessera::testing
