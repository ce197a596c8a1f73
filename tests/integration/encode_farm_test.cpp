// The `encode` step on a real farm: a real scheduler and real workers over ZeroMQ render frames
// with the path tracer, and Debian's ffmpeg (plugins/encode/plugin.yaml) makes an H.264 movie of
// them on a worker that has no shared storage with the scheduler: the frames travel to it through
// the blob store, the movie comes back like any returned file. The movie is checked with ffprobe
// (codec, size, frame count, rate), listed and served under the job, fetched by `tessera fetch`;
// a frame missing when the encode starts ends the step with the reason; bad encode steps are
// refused at submit with nothing stored.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "shared/base/sha256.h"
#include "tests/support/farm.h"
#include "tests/support/http_get.h"
#include "tests/support/process.h"
#include "tests/support/require.h"
#include "tests/support/scenes.h"

namespace tessera::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using nlohmann::json;

// POSTs a job file with steps and its steps' scenes; returns the job id or -1 with *error.
int64_t SubmitSteps(LocalFarm& farm, const std::string& job_yaml, const json& step_scenes,
                    std::string* error) {
  int status = 0;
  json res =
      farm.Post("/api/v1/jobs", {{"job_yaml", job_yaml}, {"step_scenes", step_scenes}}, &status);
  if (status != 201) {
    *error = res.is_object() ? res.value("error", res.dump()) : "no response";
    return -1;
  }
  return res["job"]["id"].get<int64_t>();
}

json StepOf(LocalFarm& farm, int64_t id, const std::string& name) {
  const json job = farm.Get("/api/v1/jobs/" + std::to_string(id))["job"];
  for (const json& step : job["steps"]) {
    if (step["step"] == name) return step;
  }
  return nullptr;
}

// ffprobe's view of the movie's first video stream (frames counted by decoding them all).
json Probe(const std::string& movie) {
  RunResult r = RunProcess(
      {"/usr/bin/ffprobe", "-v", "error", "-select_streams", "v:0", "-count_frames",
       "-show_entries", "stream=codec_name,width,height,pix_fmt,nb_read_frames,r_frame_rate", "-of",
       "json", movie},
      60s, {});
  if (r.exit_code != 0) return {{"error", r.err}};
  json streams = json::parse(r.out, nullptr, false);
  if (!streams.is_object() || streams["streams"].empty()) return {{"error", r.out}};
  return streams["streams"][0];
}

class EncodeFarmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TSR_REQUIRE_TOOL("/usr/bin/ffmpeg", "no movie can be encoded (apt-get install ffmpeg)");
    TSR_REQUIRE_TOOL("/usr/bin/ffprobe", "the movie cannot be checked (apt-get install ffmpeg)");
  }
};

TEST_F(EncodeFarmTest, AnEncodeStepMakesAnH264MovieOfAnotherStepsFrames) {
  LocalFarm farm("encode");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("w1"));
  ASSERT_TRUE(farm.StartWorker("w2"));
  ASSERT_TRUE(farm.WaitForWorkers(2, 30s));
  // Odd sizes: the movie is padded to even ones (4:2:0).
  const std::string job_yaml =
      "name: shot\nframes: 1-12\nsteps:\n"
      "  - {name: render, scene: scene.yaml, chunk_size: 3}\n"
      "  - name: movie\n    renderer: encode\n"
      "    settings: {frames_from: render, fps: 12, crf: 20, preset: ultrafast}\n";
  std::string error;
  const int64_t id = SubmitSteps(farm, job_yaml, {{"render", TinySceneYaml(33, 21, 1)}}, &error);
  ASSERT_GT(id, 0) << error;
  const json done = farm.WaitForJob(id, 180s);
  ASSERT_EQ(done["state"], "done") << done.dump(2) << farm.SchedulerLog();

  // One encode task over the render step's twelve frames, started after the last of them.
  const json render = StepOf(farm, id, "render"), movie = StepOf(farm, id, "movie");
  ASSERT_TRUE(movie.is_object());
  EXPECT_EQ(movie["step_depends_on"][0]["step"], "render") << movie.dump(2);
  const json movie_tasks = Tasks(farm, movie["id"]);
  ASSERT_EQ(movie_tasks.size(), 1u) << movie_tasks.dump(2);
  EXPECT_EQ(movie_tasks[0]["frame_start"], 1);
  EXPECT_EQ(movie_tasks[0]["frame_end"], 12);
  std::string last_frame;
  for (const json& t : Tasks(farm, render["id"])) {
    last_frame = std::max(last_frame, t["finished_at"].get<std::string>());
  }
  EXPECT_GE(movie_tasks[0]["started_at"].get<std::string>(), last_frame);

  // The movie, as ffprobe reads it.
  const std::string path = movie["output_dir"].get<std::string>() + "/preview.mp4";
  ASSERT_TRUE(fs::exists(path)) << farm.SchedulerLog();
  const json stream = Probe(path);
  EXPECT_EQ(stream["codec_name"], "h264") << stream.dump();
  EXPECT_EQ(stream["width"], 34) << stream.dump();
  EXPECT_EQ(stream["height"], 22) << stream.dump();
  EXPECT_EQ(stream["pix_fmt"], "yuv420p") << stream.dump();
  EXPECT_EQ(stream["nb_read_frames"], "12") << stream.dump();
  EXPECT_EQ(stream["r_frame_rate"], "12/1") << stream.dump();

  // Listed with the job's outputs (by its path in the job's folder) and served as a video.
  const json listing = farm.Get("/api/v1/jobs/" + std::to_string(id) + "/outputs");
  bool listed = false;
  for (const json& f : listing["files"]) {
    if (f["name"] == "movie/preview.mp4") {
      listed = true;
      EXPECT_EQ(f["step"], "movie");
      EXPECT_EQ(f["size"], fs::file_size(path));
    }
  }
  EXPECT_TRUE(listed) << listing.dump(2);
  EXPECT_EQ(listing["steps"].size(), 2u) << listing.dump(2);
  int status = 0;
  httplib::Headers headers;
  const std::string body = RawGet(
      farm, "/api/v1/jobs/" + std::to_string(id) + "/outputs/movie/preview.mp4", &status, &headers);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(body.size(), fs::file_size(path));
  EXPECT_EQ(headers.find("Content-Type")->second, "video/mp4");

  // The CLI lists and fetches it.
  const std::vector<std::string> env = {"TESSERA_SERVER=" + farm.api_url(),
                                        "TESSERA_TOKEN=" + farm.token()};
  RunResult outputs = RunProcess({Bin("tessera"), "outputs", std::to_string(id)}, 60s, env);
  EXPECT_EQ(outputs.exit_code, 0) << outputs.err;
  EXPECT_NE(outputs.out.find("movie/preview.mp4"), std::string::npos) << outputs.out;
  const std::string fetched = farm.dir() + "/fetched";
  RunResult fetch = RunProcess({Bin("tessera"), "fetch", std::to_string(id), fetched}, 60s, env);
  EXPECT_EQ(fetch.exit_code, 0) << fetch.out << fetch.err;
  EXPECT_EQ(ReadFile(fetched + "/movie/preview.mp4"), ReadFile(path));

  // The input frames are the encode step's assets: blobs the store keeps while the job lives.
  EXPECT_NE(farm.SchedulerLog().find("12 input frames"), std::string::npos);
}

// A frame gone, or replaced by a link (a worker writing to shared storage could plant one to
// read the scheduler's files), or by something that is not a PNG, when the encode starts: the
// step ends with the reason, and nothing but the plain PNG frames ever reaches the blob store.
TEST_F(EncodeFarmTest, AFrameMissingOrALinkWhenTheEncodeStartsEndsTheStepWithTheReason) {
  LocalFarm farm("encode-missing");
  // A step between render and the encode removes frame 2's PNG and puts $2 (if any) there: a
  // link to the path $3, or the text $4.
  const std::string script = farm.dir() + "/replace.sh";
  WriteFile(script,
            "#!/bin/sh\nrm -f \"$1\"\n"
            "if [ \"$2\" = link ]; then ln -s \"$3\" \"$1\"; fi\n"
            "if [ \"$2\" = text ]; then echo \"$3\" > \"$1\"; fi\n");
  ::chmod(script.c_str(), 0755);
  const std::string secret = farm.dir() + "/secret.txt";
  WriteFile(secret, "the scheduler's secret\n");
  farm.set_command_programs({script});
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("w1"));
  ASSERT_TRUE(farm.WaitForWorkers(1, 30s));
  struct Case {
    std::string name, how, arg, reason;
  };
  for (const Case& c : {Case{"gone", "none", "x", "cannot open"},
                        Case{"linked", "link", secret, "is a link, not a plain file"},
                        Case{"text", "text", "not an image", "is not a PNG file"}}) {
    const std::string frame2 = farm.dir() + "/data/outputs/" + c.name + "/render/shot.0002.png";
    const std::string job_yaml =
        "name: shot\nframes: 1-3\noutput: {directory: " + c.name +
        "}\nsteps:\n"
        "  - {name: render, scene: scene.yaml}\n"
        "  - name: replace\n    renderer: command\n    frames: '1'\n"
        "    settings: {program: " +
        script + ", argv: ['" + frame2 + "', '" + c.how + "', '" + c.arg +
        "']}\n"
        "    depends_on: [{step: render}]\n"
        "  - name: movie\n    renderer: encode\n    settings: {frames_from: render}\n"
        "    depends_on: [{step: replace}]\n";
    std::string error;
    const int64_t id = SubmitSteps(farm, job_yaml, {{"render", TinySceneYaml(16, 12, 1)}}, &error);
    ASSERT_GT(id, 0) << error;
    const json ended = farm.WaitForJob(id, 120s);
    EXPECT_NE(ended["state"], "done") << c.name << ended.dump(2);
    const json movie = StepOf(farm, id, "movie");
    EXPECT_EQ(movie["state"], "canceled") << c.name << movie.dump(2);
    ASSERT_TRUE(movie["error"].is_string()) << c.name << movie.dump(2);
    const std::string why = movie["error"];
    EXPECT_NE(why.find("cannot take its input frames: "), std::string::npos) << why;
    EXPECT_NE(why.find(frame2), std::string::npos) << why;
    EXPECT_NE(why.find(c.reason), std::string::npos) << c.name << ": " << why;
    const json job = farm.Get("/api/v1/jobs/" + std::to_string(id))["job"];
    EXPECT_NE(job.value("error", "").find("step movie: cannot take its input frames"),
              std::string::npos)
        << job.dump(2);
  }
  // The secret never became a blob a worker could fetch.
  EXPECT_FALSE(fs::exists(farm.dir() + "/data/blobs/" + Sha256Hex(ReadFile(secret)).substr(0, 2) +
                          "/" + Sha256Hex(ReadFile(secret))));
  EXPECT_TRUE(fs::exists(farm.dir() + "/data/blobs")) << "the frames before frame 2 were stored";
}

// The colour of the movie's first frame, as ffmpeg decodes it (one pixel: the frame's mean), as
// {red, green, blue}; empty when it cannot be decoded.
std::vector<int> FirstPixel(const std::string& movie) {
  RunResult r = RunProcess({"/usr/bin/ffmpeg", "-v", "error", "-i", movie, "-frames:v", "1", "-vf",
                            "scale=1:1", "-f", "rawvideo", "-pix_fmt", "rgb24", "-"},
                           60s, {});
  if (r.exit_code != 0 || r.out.size() != 3) return {};
  return {static_cast<unsigned char>(r.out[0]), static_cast<unsigned char>(r.out[1]),
          static_cast<unsigned char>(r.out[2])};
}

// The encode takes the frames as they are when it starts: after the frames step is re-rendered
// (and the scheduler killed -9 on the way), the movie is made again of the new frames.
TEST_F(EncodeFarmTest, AReRenderedJobEncodesTheNewFramesAcrossAKill) {
  LocalFarm farm("encode-again");
  // A frames step made by a command: each frame a flat colour read from a file.
  const std::string colour = farm.dir() + "/colour", script = farm.dir() + "/flat.sh";
  WriteFile(colour, "red");
  WriteFile(script, "#!/bin/sh\nexec /usr/bin/ffmpeg -v error -f lavfi -i \"color=c=$(cat " +
                        colour +
                        "):s=16x12\" -frames:v 1 -y \"$1/$(printf frame_%06d.png \"$2\")\"\n");
  ::chmod(script.c_str(), 0755);
  farm.set_command_programs({script});
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("w1"));
  ASSERT_TRUE(farm.WaitForWorkers(1, 30s));
  const std::string job_yaml =
      "name: flat\nframes: 1-4\noutput: {directory: flat}\nsteps:\n"
      "  - name: frames\n    renderer: command\n"
      "    settings: {program: " +
      script +
      ", argv: ['{output_dir}', '{frame_start}'], outputs: images}\n"
      "  - {name: movie, renderer: encode, settings: {frames_from: frames, crf: 0}}\n";
  std::string error;
  const int64_t id = SubmitSteps(farm, job_yaml, json::object(), &error);
  ASSERT_GT(id, 0) << error;
  ASSERT_EQ(farm.WaitForJob(id, 120s)["state"], "done") << farm.SchedulerLog();
  const std::string movie = farm.dir() + "/data/outputs/flat/movie/preview.mp4";
  const std::vector<int> red = FirstPixel(movie);
  ASSERT_EQ(red.size(), 3u);
  EXPECT_GT(red[0], 200) << red[0] << " " << red[1] << " " << red[2];
  EXPECT_LT(red[2], 60) << red[0] << " " << red[1] << " " << red[2];

  WriteFile(colour, "blue");
  int status = 0;
  farm.Post("/api/v1/jobs/" + std::to_string(id) + "/rerender", {{"frames", "1-4"}}, &status);
  ASSERT_EQ(status, 200);
  farm.KillScheduler(SIGKILL);
  ASSERT_TRUE(farm.StartScheduler(/*reuse_ports=*/true)) << farm.SchedulerLog();
  const json done = farm.WaitForJob(id, 120s);
  ASSERT_EQ(done["state"], "done") << done.dump(2) << farm.SchedulerLog();
  const std::vector<int> blue = FirstPixel(movie);
  ASSERT_EQ(blue.size(), 3u);
  EXPECT_LT(blue[0], 60) << blue[0] << " " << blue[1] << " " << blue[2];
  EXPECT_GT(blue[2], 200) << blue[0] << " " << blue[1] << " " << blue[2];
  EXPECT_EQ(Probe(movie)["nb_read_frames"], "4");
}

TEST_F(EncodeFarmTest, BadEncodeStepsAreRefusedAtSubmitNamingTheField) {
  LocalFarm farm("encode-bad");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  const std::string render = "  - {name: render, scene: scene.yaml}\n";
  const json scenes = {{"render", TinySceneYaml(16, 12, 1)}};
  const std::vector<std::pair<std::string, std::string>> cases = {
      {render + "  - {name: movie, renderer: encode, settings: {frames_from: rendr}}\n",
       "steps[1] (movie): settings.frames_from: 'rendr' is not another step"},
      {render + "  - {name: movie, renderer: encode, settings: {frames_from: movie}}\n",
       "'movie' is not another step"},
      {"  - {name: render, scene: scene.yaml, output: {formats: [exr]}}\n"
       "  - {name: movie, renderer: encode, settings: {frames_from: render}}\n",
       "step 'render' writes no PNG frames"},
      {render + "  - name: movie\n    renderer: encode\n"
                "    settings: {frames_from: render}\n"
                "    depends_on: [{step: render, per_frame: true}]\n",
       "steps[1] (movie).depends_on[0].per_frame"},
      {render + "  - name: movie\n    renderer: encode\n"
                "    settings: {frames_from: render, files: [x.mp4]}\n",
       "settings.files: fixed by renderer encode"},
      {render + "  - {name: movie, renderer: encode, settings: {frames_from: "
                "render, crf: 60}}\n",
       "settings.crf"},
  };
  for (const auto& [steps, expected] : cases) {
    std::string error;
    EXPECT_EQ(SubmitSteps(farm, "name: shot\nframes: 1-3\nsteps:\n" + steps, scenes, &error), -1)
        << steps;
    EXPECT_NE(error.find(expected), std::string::npos) << error;
  }
  // An encode is a step: alone it has no frames to take.
  std::string error;
  EXPECT_EQ(farm.Submit("name: m\nframes: 1-3\nrenderer: encode\nsettings: {frames_from: x}\n", "",
                        &error),
            -1);
  EXPECT_NE(error.find("renderer: encode takes the frames of another step"), std::string::npos)
      << error;
  EXPECT_EQ(farm.Get("/api/v1/jobs?steps=true")["jobs"].size(), 0u);
}

}  // namespace
}  // namespace tessera::testing
