#include "shared/jobs/job_file.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <ctime>

namespace tessera::spec {
namespace {

StatusOr<JobSpec> Parse(const std::string& extra, const std::string& frames = "1-12") {
  return ParseJobYaml("name: shot_010\nscene: scene.yaml\nframes: " + frames + "\n" + extra);
}

void ExpectError(const StatusOr<JobSpec>& job, const std::string& field) {
  ASSERT_FALSE(job.ok()) << "expected an error naming " << field;
  EXPECT_EQ(job.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(job.status().message().rfind(field, 0), 0u)
      << "'" << job.status().message() << "' should start with " << field;
}

void ExpectError(const Status& status, const std::string& field) {
  ASSERT_FALSE(status.ok()) << "expected an error naming " << field;
  EXPECT_EQ(status.message().rfind(field, 0), 0u)
      << "'" << status.message() << "' should start with " << field;
}

TEST(JobSpecTest, ParsesDefaults) {
  auto job = Parse("");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->name, "shot_010");
  EXPECT_EQ(job->scene_path, "scene.yaml");
  EXPECT_EQ(job->frame_start, 1);
  EXPECT_EQ(job->frame_end, 12);
  EXPECT_EQ(job->chunk_size, 1);
  EXPECT_EQ(job->priority, 50);
  EXPECT_EQ(job->max_retries, 3);
  EXPECT_EQ(job->task_timeout, 0);
  EXPECT_EQ(job->blocklist_after, 3);
  EXPECT_EQ(job->checkpoint_interval_s, 300);
  EXPECT_EQ(job->output.formats, (std::vector<std::string>{"exr", "png"}));
  EXPECT_EQ(EffectivePattern(*job), "shot_010.####");
}

TEST(JobSpecTest, ParsesEveryField) {
  auto job = Parse(
      "chunk_size: 5\npriority: 90\nmax_retries: 0\noutput:\n  directory: shots/a\n"
      "  pattern: beauty.######\n  formats: [png]\n",
      "-3--1");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->frame_start, -3);
  EXPECT_EQ(job->frame_end, -1);
  EXPECT_EQ(job->chunk_size, 5);
  EXPECT_EQ(job->priority, 90);
  EXPECT_EQ(job->max_retries, 0);
  EXPECT_EQ(job->output.directory, "shots/a");
  EXPECT_EQ(OutputFileName(job->output.pattern, 42, "png"), "beauty.000042.png");
}

TEST(JobSpecTest, SingleFrameAndInlineScene) {
  auto job = ParseJobYaml("name: a\nframes: 7\nscene:\n  width: 4\n");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->frame_start, 7);
  EXPECT_EQ(job->frame_end, 7);
  EXPECT_TRUE(job->scene_path.empty());
  EXPECT_NE(job->scene_yaml.find("width: 4"), std::string::npos);
}

TEST(JobSpecTest, CheckpointIntervalIsOffOrWithinItsBounds) {
  for (int ok : {0, 5, 300, 86400}) {
    auto job = Parse("checkpoint_interval_s: " + std::to_string(ok) + "\n");
    ASSERT_TRUE(job.ok()) << ok << ": " << job.status().ToString();
    EXPECT_EQ(job->checkpoint_interval_s, ok);
  }
  for (const char* bad : {"-1", "1", "4", "86401", "999999999", "often"}) {
    ExpectError(Parse(std::string("checkpoint_interval_s: ") + bad + "\n"),
                "checkpoint_interval_s");
  }
}

TEST(JobSpecTest, RejectsBadInputNamingTheField) {
  ExpectError(Parse("colour: red\n"), "colour");
  ExpectError(Parse("", "12-1"), "frames");
  ExpectError(Parse("", "1-100001"), "frames");
  ExpectError(Parse("", "a-b"), "frames");
  ExpectError(Parse("", "99999999999"), "frames");
  ExpectError(Parse("chunk_size: 0\n"), "chunk_size");
  ExpectError(Parse("chunk_size: two\n"), "chunk_size");
  ExpectError(Parse("priority: 101\n"), "priority");
  ExpectError(Parse("max_retries: -1\n"), "max_retries");
  ExpectError(Parse("task_timeout: -5\n"), "task_timeout");
  ExpectError(Parse("task_timeout: 99999999\n"), "task_timeout");
  ExpectError(Parse("progress_timeout: -1\n"), "progress_timeout");
  ExpectError(Parse("blocklist_after: many\n"), "blocklist_after");
  ExpectError(Parse("depends_on: [3, 0]\n"), "depends_on[1]");
  ExpectError(Parse("depends_on: 3\n"), "depends_on");
  ExpectError(Parse("output:\n  directory: ../up\n"), "output.directory");
  ExpectError(Parse("output:\n  directory: /abs\n"), "output.directory");
  ExpectError(Parse("output:\n  pattern: a/b.####\n"), "output.pattern");
  ExpectError(Parse("output:\n  pattern: nohash\n"), "output.pattern");
  ExpectError(Parse("output:\n  pattern: a##b##\n"), "output.pattern");
  ExpectError(Parse("output:\n  formats: [gif]\n"), "output.formats[0]");
  ExpectError(Parse("output:\n  formats: [png, png]\n"), "output.formats");
  ExpectError(Parse("output:\n  exr: double\n"), "output.exr");
  ExpectError(Parse("deadline: tomorrow\n"), "deadline");
  ExpectError(Parse("deadline: 2026-12-03T09:00\n"), "deadline");      // no offset
  ExpectError(Parse("deadline: 2001-01-01T00:00:00Z\n"), "deadline");  // passed
  ExpectError(Parse("deadline: 2999-01-01T00:00:00Z\n"), "deadline");  // too far
  ExpectError(Parse("interruptible: maybe\n"), "interruptible");
  ExpectError(Parse("output:\n  bogus: 1\n"), "output.bogus");
  ExpectError(ParseJobYaml("scene: s.yaml\nframes: 1\n"), "name");
  ExpectError(ParseJobYaml("name: a b\nscene: s.yaml\nframes: 1\n"), "name");
  ExpectError(ParseJobYaml("name: a\nframes: 1\n"), "scene");
  ExpectError(ParseJobYaml("name: a\nscene: s\n"), "frames");
  ExpectError(ParseJobYaml("- just a list"), "job");
  ExpectError(ParseJobYaml("name: [unclosed"), "job");
}

TEST(JobSpecTest, AGpuShareIsAFractionOfOneGpu) {
  auto job = Parse("resources:\n  gpu_share: 0.25\n  gpu_memory_mb: 6000\n");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_DOUBLE_EQ(job->resources.gpu_share, 0.25);
  EXPECT_EQ(job->resources.gpu_memory_mb, 6000) << "still per task";
  EXPECT_DOUBLE_EQ(Parse("resources: {gpu_share: 1}\n")->resources.gpu_share, 1.0);
  EXPECT_TRUE(Parse("resources: {gpu_share: 0.5, gpus: 1}\n").ok());
  EXPECT_DOUBLE_EQ(Parse("")->resources.gpu_share, 0.0) << "absent: whole GPUs";
  ExpectError(Parse("resources: {gpu_share: 0}\n"), "resources.gpu_share");
  ExpectError(Parse("resources: {gpu_share: -0.25}\n"), "resources.gpu_share");
  ExpectError(Parse("resources: {gpu_share: 1.5}\n"), "resources.gpu_share");
  ExpectError(Parse("resources: {gpu_share: .nan}\n"), "resources.gpu_share");
  ExpectError(Parse("resources: {gpu_share: half}\n"), "resources.gpu_share");
  ExpectError(Parse("resources: {gpu_share: 0.5, gpus: 2}\n"), "resources.gpu_share");
  // The share survives the JSON the scheduler stores a job's resources as.
  ResourceSpec back = nlohmann::json(job->resources).get<ResourceSpec>();
  EXPECT_DOUBLE_EQ(back.gpu_share, 0.25);
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(R"({"gpus": 1})").get<ResourceSpec>().gpu_share, 0.0)
      << "jobs stored before shares existed";
}

TEST(JobSpecTest, AssetsAndSharedOutputsAreCheckedNamingTheField) {
  auto job = Parse(
      "assets: [tex/wood.png, 'includes/colors v2.inc']\n"
      "output: {shared_dir: /mnt/projects/sh010}\n");
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_EQ(job->asset_files.size(), 2u);
  EXPECT_EQ(job->output.shared_dir, "/mnt/projects/sh010");
  auto error = [](const std::string& extra) { return Parse(extra).status().message(); };
  EXPECT_NE(error("assets: [../secret]\n").find("assets[0]"), std::string::npos);
  EXPECT_NE(error("assets: [a, /etc/passwd]\n").find("assets[1]"), std::string::npos);
  EXPECT_NE(error("assets: ['a;rm -rf x']\n").find("assets[0]"), std::string::npos);
  EXPECT_NE(error("assets: [-rf]\n").find("starting with '-'"), std::string::npos);
  EXPECT_NE(error("output: {shared_dir: relative/dir}\n").find("output.shared_dir"),
            std::string::npos);
  EXPECT_NE(error("output: {shared_dir: /mnt/../etc}\n").find("output.shared_dir"),
            std::string::npos);
  EXPECT_NE(error("output: {shared_dir: /mnt/a, directory: b}\n").find("output.directory"),
            std::string::npos);
  // The scheduler's side of an upload: path -> SHA-256.
  JobSpec spec;
  EXPECT_TRUE(SetAssets({{"tex/wood.png", std::string(64, 'a')}}, &spec).ok());
  EXPECT_NE(SetAssets({{"tex/wood.png", "abc"}}, &spec).message().find("assets[tex/wood.png]"),
            std::string::npos);
  EXPECT_NE(SetAssets(nlohmann::json::array(), &spec).message().find("assets:"), std::string::npos);
}

TEST(JobSpecTest, SplitsFramesIntoTilesAndSamplePartsCoveringEachPixelAndSampleOnce) {
  auto job = Parse("tiles: 3x2\nsample_parts: 2\n");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->tiles_x, 3);
  EXPECT_EQ(job->tiles_y, 2);
  ASSERT_TRUE(SplitFrames(&*job, 100, 51, 9).ok());
  ASSERT_EQ(job->parts.size(), 12u);
  std::vector<int> covered(100 * 51, 0);
  int samples = 0;
  for (const protocol::FramePart& p : job->parts) {
    ASSERT_FALSE(p.whole_region());
    for (int y = p.y0; y < p.y1; ++y) {
      for (int x = p.x0; x < p.x1; ++x) ++covered[y * 100 + x];
    }
    if (p.x0 == 0 && p.y0 == 0) samples += p.sample_end - p.sample_begin;
  }
  for (int c : covered) ASSERT_EQ(c, 2) << "each pixel once per sample part";
  EXPECT_EQ(samples, 9) << "the sample parts of a tile cover all samples once";

  auto whole = Parse("");
  ASSERT_TRUE(SplitFrames(&*whole, 100, 51, 9).ok());
  EXPECT_TRUE(whole->parts.empty()) << "an unsplit job renders whole frames";

  ExpectError(Parse("tiles: 3\n"), "tiles:");
  ExpectError(Parse("tiles: 0x2\n"), "tiles:");
  ExpectError(Parse("tiles: 65x1\n"), "tiles:");
  ExpectError(Parse("sample_parts: 0\n"), "sample_parts:");
  ExpectError(Parse("tiles: 2x2\nchunk_size: 4\n"), "chunk_size:");
  ExpectError(Parse("sample_parts: 2\nrenderer: noop\n"), "sample_parts:");
  ExpectError(Parse("tiles: 64x64\nsample_parts: 256\n", "1-1000"), "frames:");
  auto too_many = Parse("tiles: 8x8\n");
  ASSERT_TRUE(too_many.ok());
  EXPECT_EQ(SplitFrames(&*too_many, 4, 100, 4).code(), StatusCode::kInvalidArgument);
  auto too_few_samples = Parse("sample_parts: 8\n");
  ASSERT_TRUE(too_few_samples.ok());
  EXPECT_EQ(SplitFrames(&*too_few_samples, 64, 64, 4).message().rfind("sample_parts:", 0), 0u);
}

TEST(JobSpecTest, ExpandsFramesIntoChunks) {
  JobSpec job;
  job.frame_start = 1;
  job.frame_end = 10;
  job.chunk_size = 4;
  auto chunks = ExpandFrames(job);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].frame_start, 1);
  EXPECT_EQ(chunks[0].frame_end, 4);
  EXPECT_EQ(chunks[2].index, 2);
  EXPECT_EQ(chunks[2].frame_start, 9);
  EXPECT_EQ(chunks[2].frame_end, 10);
  // Counted without building them: chunks times the parts of a frame.
  EXPECT_EQ(TaskCount(job), 3);
  job.parts.resize(4);
  EXPECT_EQ(TaskCount(job), 12);
  job.parts.clear();

  job.frame_start = job.frame_end = 5;
  job.chunk_size = 1;
  ASSERT_EQ(ExpandFrames(job).size(), 1u);

  job.frame_start = 1;
  job.frame_end = static_cast<int>(kMaxFramesPerJob);
  auto all = ExpandFrames(job);
  ASSERT_EQ(all.size(), static_cast<size_t>(kMaxFramesPerJob));
  EXPECT_EQ(all.back().frame_end, kMaxFramesPerJob);
}

TEST(JobSpecTest, OutputFileNamesPadFrames) {
  EXPECT_EQ(OutputFileName("a.####", 7, "exr"), "a.0007.exr");
  EXPECT_EQ(OutputFileName("a.#", 123, "png"), "a.123.png");
  EXPECT_EQ(OutputFileName("v2_##_final", 3, "exr"), "v2_03_final.exr");
}

}  // namespace
}  // namespace tessera::spec

namespace tessera::spec {
namespace {

TEST(JobSpecTest, DeadlinesAreIsoTimesWithTheirOffset) {
  EXPECT_EQ(*ParseIsoTime("2026-12-03T09:00:00Z"), int64_t{1796288400} * 1000);
  EXPECT_EQ(*ParseIsoTime("2026-12-03T17:00+08:00"), int64_t{1796288400} * 1000);
  EXPECT_EQ(*ParseIsoTime("2026-12-03 04:00:00-05:00"), int64_t{1796288400} * 1000);
  for (const char* bad : {"2026-12-03", "2026-12-03T09:00", "2026-13-03T09:00Z",
                          "2026-12-03T25:00Z", "2026-12-03T09:00Zjunk", "nine o'clock"}) {
    EXPECT_FALSE(ParseIsoTime(bad).ok()) << bad;
  }
  // A month from now (deadlines must lie ahead, within a year).
  const std::time_t later = std::time(nullptr) + 30 * 86400;
  char iso[32];
  std::strftime(iso, sizeof(iso), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&later));
  auto job = ParseJobYaml(std::string("name: a\nscene: s.yaml\nframes: 1\ninterruptible: false\n") +
                          "deadline: " + iso + "\n");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_FALSE(job->interruptible);
  EXPECT_EQ(job->deadline_ms, int64_t{later} * 1000);
  auto defaults = ParseJobYaml("name: a\nscene: s.yaml\nframes: 1\n");
  ASSERT_TRUE(defaults.ok());
  EXPECT_TRUE(defaults->interruptible);
  EXPECT_FALSE(defaults->deadline_ms.has_value());
  EXPECT_FALSE(defaults->output.exr_float);
}

// A document already parsed reads exactly as its text would (a job file read once, a step).
TEST(JobSpecTest, ADocumentReadsAsItsText) {
  const std::string text =
      "name: shot\nscene: s.yaml\nframes: 3-9\ntiles: 2x2\npriority: 70\ntags: [a, b]\n"
      "resources: {cpu_cores: 4}\noutput: {pattern: \"b.####\", formats: [exr]}\n";
  StatusOr<JobSpec> from_text = ParseJobYaml(text);
  ASSERT_TRUE(from_text.ok()) << from_text.status().ToString();
  StatusOr<JobSpec> from_node = ParseJobNode(YAML::Load(text));
  ASSERT_TRUE(from_node.ok()) << from_node.status().ToString();
  EXPECT_EQ(from_node->frame_start, 3);
  EXPECT_EQ(from_node->tiles_x * from_node->tiles_y, 4);
  EXPECT_EQ(from_node->priority, from_text->priority);
  EXPECT_EQ(from_node->tags, from_text->tags);
  EXPECT_EQ(from_node->resources.cpu_cores, 4);
  EXPECT_EQ(from_node->output.pattern, from_text->output.pattern);
  const std::string bad = "name: shot\nframes: 1\nprority: 3\n";
  EXPECT_EQ(ParseJobNode(YAML::Load(bad)).status().message(), ParseJobYaml(bad).status().message());
}

// ValidateJob runs its checks in a fixed order, the first problem reported: a job wrong in
// several ways is refused for the earliest field in that order.
TEST(JobSpecTest, TheFirstProblemInCheckOrderIsReported) {
  JobSpec job;
  job.name = "bad name";
  job.project = "";
  job.frame_start = 9;
  job.frame_end = 1;
  job.priority = 101;
  job.output.formats = {};
  ExpectError(ValidateJob(job), "name:");
  job.name = "ok";
  ExpectError(ValidateJob(job), "project:");
  job.project = "p";
  ExpectError(ValidateJob(job), "scene:");
  job.renderer = kRendererNoop;
  ExpectError(ValidateJob(job), "frames:");
  job.frame_start = 1;
  ExpectError(ValidateJob(job), "priority:");
  job.priority = 50;
  job.resources.gpus = -1;
  ExpectError(ValidateJob(job), "resources.gpus:");
  job.resources.gpus = 0;
  ExpectError(ValidateJob(job), "output.formats:");
  job.output.formats = {"png"};
  EXPECT_TRUE(ValidateJob(job).ok());
}

}  // namespace
}  // namespace tessera::spec
