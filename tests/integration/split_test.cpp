// Integration tests for split frames: one frame spread over many tasks (tiles and sample parts)
// through a real scheduler and real workers, assembled by the scheduler from the parts' exact
// accumulations.

#include <gtest/gtest.h>

#include <filesystem>
#include <limits>
#include <thread>

#include "shared/images/image_io.h"
#include "tests/support/fake_worker.h"
#include "tests/support/farm.h"

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string SplitJobYaml(const std::string& name, const std::string& frames,
                         const std::string& split) {
  return "name: " + name + "\nscene: scene.yaml\nframes: " + frames + "\n" + split;
}

std::string Exr(const nlohmann::json& job, const std::string& name, int frame) {
  char file[64];
  std::snprintf(file, sizeof(file), "%s.%04d.exr", name.c_str(), frame);
  return job["output_dir"].get<std::string>() + "/" + file;
}

// Every frame of `split` equals the same frame of `whole`, bit for bit.
void ExpectSameFrames(const nlohmann::json& whole, const nlohmann::json& split, int first,
                      int last) {
  for (int f = first; f <= last; ++f) {
    auto a = image::Read(Exr(whole, "whole", f));
    auto b = image::Read(Exr(split, "split", f));
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    ASSERT_EQ(a->width, b->width);
    ASSERT_EQ(a->height, b->height);
    ASSERT_EQ(a->channels, b->channels);
    EXPECT_TRUE(a->pixels == b->pixels) << "frame " << f << " differs from the whole render";
  }
  // Removed right after the commit that records the frame, which the API may see first.
  const std::string parts = split["output_dir"].get<std::string>() + "/.parts";
  EXPECT_TRUE(WaitFor([&] { return !fs::exists(parts); }, std::chrono::seconds(10)))
      << "parts are removed once their frame is written";
}

TEST(SplitTest, TilesAndSamplePartsAssembleBitIdenticalToTheWholeFrame) {
  LocalFarm farm("split");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("w1"));
  ASSERT_TRUE(farm.StartWorker("w2"));
  ASSERT_TRUE(farm.WaitForWorkers(2, 20s)) << farm.SchedulerLog();
  const std::string scene = TinySceneYaml(64, 48, 8);

  std::string error;
  int64_t whole = farm.Submit(SplitJobYaml("whole", "1-2", ""), scene, &error);
  ASSERT_GT(whole, 0) << error;
  int64_t split =
      farm.Submit(SplitJobYaml("split", "1-2", "tiles: 3x2\nsample_parts: 2\n"), scene, &error);
  ASSERT_GT(split, 0) << error;
  int64_t parts_only =
      farm.Submit(SplitJobYaml("split", "1-1", "sample_parts: 3\n"), scene, &error);
  ASSERT_GT(parts_only, 0) << error;

  nlohmann::json w = farm.WaitForJob(whole, 90s);
  nlohmann::json s = farm.WaitForJob(split, 90s);
  nlohmann::json p = farm.WaitForJob(parts_only, 90s);
  ASSERT_EQ(w["state"], "done") << w.dump(2) << farm.SchedulerLog();
  ASSERT_EQ(s["state"], "done") << s.dump(2) << farm.SchedulerLog();
  ASSERT_EQ(p["state"], "done") << p.dump(2) << farm.SchedulerLog();
  EXPECT_EQ(s["tasks"]["total"], 2 * 6 * 2) << "frames x tiles x sample parts";
  EXPECT_EQ(p["tasks"]["total"], 3);
  ExpectSameFrames(w, s, 1, 2);
  ExpectSameFrames(w, p, 1, 1);
}

TEST(SplitTest, KilledWorkerMidTileStillYieldsTheCompleteFrame) {
  LocalFarm farm("split-kill");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("w1"));
  ASSERT_TRUE(farm.WaitForWorkers(1, 20s)) << farm.SchedulerLog();
  // Slow enough that a tile is still rendering when its worker dies.
  const std::string scene = TinySceneYaml(160, 120, 256);
  std::string error;
  int64_t split = farm.Submit(SplitJobYaml("split", "1", "tiles: 2x2\n"), scene, &error);
  ASSERT_GT(split, 0) << error;
  bool killed = false;
  for (int i = 0; i < 300 && !killed; ++i) {
    // (The response is kept: iterating a member of a temporary would dangle.)
    const nlohmann::json tasks = farm.Get("/api/v1/jobs/" + std::to_string(split) + "/tasks");
    for (const auto& t : tasks["tasks"]) {
      if (t["state"] == "running") {
        farm.worker("w1").Signal(SIGKILL);
        killed = true;
        break;
      }
    }
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(killed) << "no tile was ever running: "
                      << farm.Get("/api/v1/jobs/" + std::to_string(split)).dump(2)
                      << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("w2"));
  nlohmann::json s = farm.WaitForJob(split, 120s);
  ASSERT_EQ(s["state"], "done") << s.dump(2) << farm.SchedulerLog();

  int64_t whole = farm.Submit(SplitJobYaml("whole", "1", ""), scene, &error);
  ASSERT_GT(whole, 0) << error;
  nlohmann::json w = farm.WaitForJob(whole, 120s);
  ASSERT_EQ(w["state"], "done") << w.dump(2) << farm.SchedulerLog();
  ExpectSameFrames(w, s, 1, 1);
}

TEST(SplitTest, CorruptPartIsRefusedAndItsTaskRenderedAgainCharged) {
  LocalFarm farm("split-corrupt");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  FakeWorker liar(farm.broker_endpoint(), "liar");
  ASSERT_TRUE(liar.WaitFor(protocol::MessageType::kWelcome, 5s));
  std::string error;
  int64_t id =
      farm.Submit(SplitJobYaml("split", "1", "sample_parts: 2\n"), TinySceneYaml(16, 8, 4), &error);
  ASSERT_GT(id, 0) << error;
  auto assign = liar.NextAssign(5s);
  ASSERT_TRUE(assign.has_value());
  ASSERT_FALSE(assign->part.whole());
  liar.running = {{assign->task_id, assign->attempt}};

  // The right size for a 16x8x4 accumulation, but not one: refused when it arrives.
  protocol::FrameResult result;
  result.task_id = assign->task_id;
  result.attempt = assign->attempt;
  result.frame = 1;
  result.width = 16;
  result.height = 8;
  result.channels = 4;
  result.part = assign->part;
  result.encoding = protocol::kEncodingAccumulation;
  std::string garbage(16 * 8 * 4 * sizeof(int64_t) + 200, 'x');
  liar.SendWithPayload(protocol::MessageType::kFrameResult, result,
                       zmq::message_t(garbage.data(), garbage.size()));
  liar.Send(protocol::MessageType::kTaskDone, protocol::TaskDone{assign->task_id, assign->attempt});
  liar.running.clear();  // done, as far as the liar is concerned

  // Charged, and leased again as its next attempt.
  bool again = false;
  for (int i = 0; i < 10 && !again; ++i) {
    auto next = liar.NextAssign(1s);
    again = next && next->task_id == assign->task_id && next->attempt == assign->attempt + 1;
  }
  EXPECT_TRUE(again) << farm.SchedulerLog();
  const nlohmann::json tasks = farm.Get("/api/v1/jobs/" + std::to_string(id) + "/tasks");
  for (const auto& t : tasks["tasks"]) {
    if (t["id"] == assign->task_id) {
      EXPECT_EQ(t["failures"], 1) << t.dump();
    }
  }
  EXPECT_NE(farm.SchedulerLog().find("not an accumulation"), std::string::npos);
  const std::string out =
      farm.Get("/api/v1/jobs/" + std::to_string(id))["job"]["output_dir"].get<std::string>();
  EXPECT_FALSE(fs::exists(out + "/.parts")) << "nothing of the bad part was kept";
}

TEST(OutputValidationTest, BadPixelsAreRenderedOnceMoreThenKeptAndFlagged) {
  LocalFarm farm("bad-pixels");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  FakeWorker nan_box(farm.broker_endpoint(), "nan-box");
  ASSERT_TRUE(nan_box.WaitFor(protocol::MessageType::kWelcome, 5s));
  std::string error;
  int64_t id = farm.Submit(SplitJobYaml("nan", "1", ""), TinySceneYaml(), &error);
  ASSERT_GT(id, 0) << error;
  // Renders the assigned one-pixel frame as `pixel` (RGBA) and reports the task done.
  const auto render = [&](const protocol::Assign& a, const float(&pixel)[4]) {
    nan_box.running = {{a.task_id, a.attempt}};
    nan_box.SendWithPayload(
        protocol::MessageType::kFrameResult,
        protocol::FrameResult{a.task_id, a.attempt, 1, 1, 1, 4, 0.0, "fake", {}},
        zmq::message_t(pixel, sizeof(pixel)));
    nan_box.Done(a);
    nan_box.running.clear();
  };
  const float nan_pixel[4] = {0.5f, std::numeric_limits<float>::quiet_NaN(), 0.5f, 1.0f};
  for (int attempt = 1; attempt <= 2; ++attempt) {
    auto a = nan_box.NextAssign(5s);
    ASSERT_TRUE(a.has_value()) << farm.SchedulerLog();
    EXPECT_EQ(a->attempt, attempt);
    render(*a, nan_pixel);
  }
  nlohmann::json job = farm.WaitForJob(id, 20s);
  EXPECT_EQ(job["state"], "done") << job.dump(2) << farm.SchedulerLog();
  const nlohmann::json tasks = farm.Get("/api/v1/jobs/" + std::to_string(id) + "/tasks");
  EXPECT_EQ(tasks["tasks"][0]["failures"], 1) << "the first bad frame was charged";
  EXPECT_NE(farm.SchedulerLog().find("kept with 1 NaN or infinite values"), std::string::npos)
      << farm.SchedulerLog();
  // The frame carries its flag on the job, with the reason, in the frames and outputs lists.
  const std::string base = "/api/v1/jobs/" + std::to_string(id);
  const nlohmann::json frames = farm.Get(base + "/frames");
  EXPECT_EQ(frames["frames"][0]["flag"], "1 NaN or infinite values") << frames.dump(2);
  const nlohmann::json outputs = farm.Get(base + "/outputs");
  ASSERT_FALSE(outputs["files"].empty()) << outputs.dump(2);
  EXPECT_EQ(outputs["files"][0]["flag"], "1 NaN or infinite values") << outputs.dump(2);

  // Rendered again, clean: the flag goes.
  int status = 0;
  farm.Post(base + "/rerender", {{"frames", "1"}}, &status);
  ASSERT_EQ(status, 200);
  auto again = nan_box.NextAssign(5s);
  ASSERT_TRUE(again.has_value()) << farm.SchedulerLog();
  const float clean_pixel[4] = {0.5f, 0.25f, 0.5f, 1.0f};
  render(*again, clean_pixel);
  EXPECT_TRUE(
      WaitFor([&] { return farm.Get(base + "/frames")["frames"][0]["flag"].is_null(); }, 20s))
      << farm.Get(base + "/frames").dump(2);
}

TEST(SplitTest, SplitsThatDoNotFitAreRefusedNamingTheField) {
  LocalFarm farm("split-bad");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  const std::string scene = TinySceneYaml(16, 8, 4);
  struct Case {
    std::string split, expect;
  };
  for (const Case& c : {Case{"tiles: 32x2\n", "tiles:"}, Case{"tiles: 2x9\n", "tiles:"},
                        Case{"tiles: 0x2\n", "tiles:"}, Case{"tiles: two\n", "tiles:"},
                        Case{"sample_parts: 5\n", "sample_parts:"},
                        Case{"tiles: 2x2\nchunk_size: 2\n", "chunk_size:"},
                        Case{"tiles: 2x2\nrenderer: noop\n", "tiles:"}}) {
    std::string error;
    EXPECT_EQ(farm.Submit(SplitJobYaml("bad", "1-4", c.split), scene, &error), -1) << c.split;
    EXPECT_NE(error.find(c.expect), std::string::npos) << c.split << " -> " << error;
  }
  EXPECT_TRUE(farm.Get("/api/v1/jobs")["jobs"].empty()) << "nothing was stored";
}

}  // namespace
}  // namespace tessera::testing
