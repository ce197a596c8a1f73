// Periodic checkpoints through real daemons: a worker killed without notice (kill -9) after a
// checkpoint reached the scheduler; the task's next attempt, on another worker, resumes from it
// (the samples it holds are not rendered again) and the frame is bit-identical to an
// uninterrupted render of the same job.

#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <string>

#include "plugins/pathtracer/renderer.h"
#include "shared/base/sha256.h"
#include "shared/images/accumulation.h"
#include "shared/images/image_io.h"
#include "shared/scenes/scene_file.h"
#include "tests/support/fake_worker.h"
#include "tests/support/farm.h"

namespace tessera::testing {
namespace {

using namespace std::chrono_literals;

// One frame, small and with many samples: long enough on one core (about 15 s here) for a
// checkpoint at the shortest interval, short enough for a busy two-core machine.
constexpr int kWidth = 128;
constexpr int kHeight = 96;
constexpr int kSamples = 6144;

std::string JobYaml(const std::string& name, int interval_s) {
  return "name: " + name +
         "\nscene: scene.yaml\nframes: 1\ncheckpoint_interval_s: " + std::to_string(interval_s) +
         "\noutput: {formats: [exr], exr: float}\n";
}

nlohmann::json Task(LocalFarm& farm, int64_t job) {
  nlohmann::json tasks = farm.Get("/api/v1/jobs/" + std::to_string(job) + "/tasks")["tasks"];
  return tasks.is_array() && tasks.size() == 1 ? tasks[0] : nlohmann::json();
}

image::ImageBuffer Frame(const nlohmann::json& job, const std::string& name) {
  const std::string path = job["output_dir"].get<std::string>() + "/" + name + ".0001.exr";
  StatusOr<image::ImageBuffer> img = image::Read(path);
  EXPECT_TRUE(img.ok()) << path << ": " << img.status().message();
  return img.ok() ? std::move(*img) : image::ImageBuffer{};
}

// The accumulation of samples [0, samples) of frame 1, as the path tracer checkpoints it.
std::string Accumulation(const std::string& scene_yaml, int samples) {
  StatusOr<spec::SceneSpec> scene = spec::ParseSceneYaml(scene_yaml, "");
  EXPECT_TRUE(scene.ok()) << scene.status().message();
  pathtracer::RenderRequest request;
  request.frame = 1;
  request.backend = pathtracer::Backend::kCpu;
  request.cpu_threads = 1;
  request.sample_end = samples;
  StatusOr<accumulation::RenderedImage> image = pathtracer::RenderFrame(*scene, request);
  EXPECT_TRUE(image.ok()) << image.status().message();
  StatusOr<std::string> bytes = accumulation::SerializeAccumulation(*image);
  EXPECT_TRUE(bytes.ok());
  return bytes.ok() ? *bytes : "";
}

zmq::message_t Payload(const std::string& bytes) {
  return zmq::message_t(bytes.data(), bytes.size());
}

// Only the task's current attempt sets its resume point (fencing); a lost attempt's next one is
// assigned its checkpoint with the samples it holds.
TEST(CheckpointTest, OnlyTheCurrentAttemptsCheckpointIsKeptAndTheNextAttemptResumesFromIt) {
  using protocol::MessageType;
  LocalFarm farm("checkpoint-fence");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  FakeWorker fake(farm.broker_endpoint(), "fake");
  ASSERT_TRUE(fake.WaitFor(MessageType::kWelcome, 5s));
  const std::string scene = TinySceneYaml(32, 24, 16);
  std::string error;
  const int64_t id =
      farm.Submit("name: fence\nscene: s\nframes: 1\ncheckpoint_interval_s: 5\n", scene, &error);
  ASSERT_GT(id, 0) << error;
  std::optional<protocol::Assign> a = fake.NextAssign(5s);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->checkpoint_interval_s, 5);
  EXPECT_TRUE(a->resume_checkpoint.empty());
  fake.running = {{a->task_id, a->attempt}};
  const std::string why_path = "/api/v1/tasks/" + std::to_string(a->task_id) + "/why";
  // Heartbeats go on while the scheduler is asked.
  const auto why_until = [&](auto done) {
    nlohmann::json why;
    const bool ok = WaitFor(
        [&] {
          (void)fake.WaitFor(MessageType::kHeartbeatAck, 50ms);
          why = farm.Get(why_path);
          return done(why);
        },
        10s);
    EXPECT_TRUE(ok) << why.dump(2) << farm.SchedulerLog();
    return why;
  };

  // Another attempt's checkpoint (a fencing token the task does not hold) is refused; the
  // current attempt's is kept. Messages from one worker are handled in order.
  const std::string four = Accumulation(scene, 4), eight = Accumulation(scene, 8),
                    twelve = Accumulation(scene, 12);
  fake.SendWithPayload(MessageType::kCheckpoint,
                       protocol::Checkpoint{a->task_id, a->attempt + 1, 1, 8}, Payload(eight));
  // One of another frame than it says is refused too.
  fake.SendWithPayload(MessageType::kCheckpoint, protocol::Checkpoint{a->task_id, a->attempt, 2, 8},
                       Payload(eight));
  fake.SendWithPayload(MessageType::kCheckpoint, protocol::Checkpoint{a->task_id, a->attempt, 1, 4},
                       Payload(four));
  nlohmann::json why = why_until([](const nlohmann::json& w) { return w.contains("checkpoint"); });
  EXPECT_EQ(why["checkpoint"]["attempt"], a->attempt) << why.dump(2);
  EXPECT_EQ(why["checkpoint"]["samples"], 4) << why.dump(2);
  EXPECT_EQ(why["checkpoint"]["frame"], 1) << why.dump(2);

  // The worker loses the task (its heartbeats stop listing it): the next attempt resumes.
  fake.running.clear();
  std::optional<protocol::Assign> b = fake.NextAssign(10s);
  ASSERT_TRUE(b.has_value()) << farm.SchedulerLog();
  EXPECT_EQ(b->attempt, a->attempt + 1);
  EXPECT_EQ(b->resume_frame, 1);
  EXPECT_EQ(b->resume_samples, 4);
  EXPECT_EQ(b->resume_checkpoint, Sha256Hex(four)) << "the checkpoint kept, as a blob";
  EXPECT_EQ(Tasks(farm, id)[0]["failures"], 0);
  fake.running = {{b->task_id, b->attempt}};

  // The lost attempt's late checkpoint is refused, though ahead of the one kept; the new
  // attempt's replaces the one it resumed from.
  fake.SendWithPayload(MessageType::kCheckpoint,
                       protocol::Checkpoint{a->task_id, a->attempt, 1, 12}, Payload(twelve));
  fake.SendWithPayload(MessageType::kCheckpoint, protocol::Checkpoint{b->task_id, b->attempt, 1, 8},
                       Payload(eight));
  why = why_until([&](const nlohmann::json& w) {
    return w.contains("checkpoint") && w["checkpoint"]["samples"] != 4;
  });
  EXPECT_EQ(why["checkpoint"]["attempt"], b->attempt) << why.dump(2);
  EXPECT_EQ(why["checkpoint"]["samples"], 8) << why.dump(2);

  // One checkpoint per task is kept: the one replaced is deleted, and the last goes with the job.
  const auto stored = [&](const std::string& bytes) {
    return farm.Get("/api/v1/blobs/" + Sha256Hex(bytes))["complete"] == true;
  };
  EXPECT_FALSE(stored(four));
  EXPECT_TRUE(stored(eight));
  int status = 0;
  farm.Post("/api/v1/jobs/" + std::to_string(id) + "/cancel", nlohmann::json::object(), &status);
  ASSERT_EQ(status, 200);
  EXPECT_FALSE(stored(eight)) << "a canceled task's checkpoint is deleted";
}

TEST(CheckpointTest, KilledWorkerTaskResumesFromItsLastCheckpointBitIdentical) {
  LocalFarm farm("checkpoint");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("victim"));
  ASSERT_TRUE(farm.WaitForWorkers(1, 20s)) << farm.SchedulerLog();

  const std::string scene = TinySceneYaml(kWidth, kHeight, kSamples);
  std::string error;
  const int64_t id = farm.Submit(JobYaml("periodic", 5), scene, &error);
  ASSERT_GT(id, 0) << error;
  nlohmann::json task;
  ASSERT_TRUE(WaitFor(
      [&] {
        task = Task(farm, id);
        return task.is_object() && task["state"] == "running";
      },
      20s))
      << task.dump(2);
  const int64_t task_id = task["id"].get<int64_t>();
  const std::string why_path = "/api/v1/tasks/" + std::to_string(task_id) + "/why";

  // The scheduler holds a checkpoint of the running attempt: now the worker dies, no notice.
  nlohmann::json why;
  ASSERT_TRUE(WaitFor(
      [&] {
        why = farm.Get(why_path);
        return why.contains("checkpoint") || why["state"] != "running";
      },
      60s))
      << "no checkpoint arrived: " << why.dump(2) << farm.SchedulerLog();
  ASSERT_EQ(why["state"], "running") << "the frame finished before it could be killed";
  farm.worker("victim").Signal(SIGKILL);
  ASSERT_TRUE(farm.worker("victim").Wait(5s).has_value());
  ASSERT_TRUE(WaitFor([&] { return Task(farm, id)["state"] == "queued"; }, 10s))
      << farm.SchedulerLog();
  why = farm.Get(why_path);
  ASSERT_TRUE(why.contains("checkpoint"))
      << "the lost attempt's checkpoint was dropped: " << why.dump(2);
  const int kept = why["checkpoint"]["samples"].get<int>();
  EXPECT_EQ(why["checkpoint"]["frame"], 1);
  EXPECT_EQ(why["checkpoint"]["attempt"], 1);
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, kSamples);

  // The same job without checkpoints, uninterrupted, next to it: the reference frame.
  const int64_t ref = farm.Submit(JobYaml("reference", 0), scene, &error);
  ASSERT_GT(ref, 0) << error;
  ASSERT_TRUE(farm.StartWorker("rescuer"));
  ASSERT_TRUE(farm.StartWorker("reference"));
  nlohmann::json job = farm.WaitForJob(id, 120s);
  ASSERT_EQ(job["state"], "done") << job.dump(2) << farm.SchedulerLog();
  nlohmann::json ref_job = farm.WaitForJob(ref, 120s);
  ASSERT_EQ(ref_job["state"], "done") << ref_job.dump(2) << farm.SchedulerLog();
  EXPECT_EQ(Task(farm, id)["attempt"], 2);
  EXPECT_EQ(Task(farm, id)["failures"], 0) << "a lost worker is not the task's fault";

  // The second attempt started from the checkpoint's samples, not from zero.
  nlohmann::json log = farm.Get("/api/v1/tasks/" + std::to_string(task_id) + "/log");
  std::string second;
  for (const nlohmann::json& a : log["attempts"]) {
    if (a["attempt"] == 2) second = a["log"].get<std::string>();
  }
  EXPECT_NE(second.find("resuming at frame 1 from a checkpoint after " + std::to_string(kept) +
                        " samples"),
            std::string::npos)
      << log.dump(2);
  EXPECT_NE(
      second.find("resuming frame 1 from a checkpoint of " + std::to_string(kept) + " samples"),
      std::string::npos)
      << "the path tracer did not take the checkpoint: " << second;

  const image::ImageBuffer resumed = Frame(job, "periodic");
  const image::ImageBuffer whole = Frame(ref_job, "reference");
  ASSERT_EQ(resumed.width, kWidth);
  ASSERT_EQ(resumed.channels, whole.channels);
  ASSERT_EQ(resumed.pixels.size(), whole.pixels.size());
  EXPECT_TRUE(resumed.pixels == whole.pixels) << "the resumed frame differs from the whole one";

  // Done: its checkpoint is gone with it.
  why = farm.Get(why_path);
  EXPECT_FALSE(why.contains("checkpoint")) << why.dump(2);
}

}  // namespace
}  // namespace tessera::testing
