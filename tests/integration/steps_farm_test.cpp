// Jobs with steps on a real farm: a real scheduler, real workers over ZeroMQ, a real store.
// Steps run in their dependency order (whole steps and frame by frame), a failed step cancels
// the steps after it and fails the job, a retry runs them again, operations on the job reach its
// steps, a restart loses nothing, and bad step files are refused naming the field.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/farm.h"
#include "tests/support/scenes.h"

namespace tessera::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// POSTs a job file (with steps) and its steps' scenes; returns the job id or -1 with *error.
int64_t SubmitSteps(LocalFarm& farm, const std::string& job_yaml,
                    const nlohmann::json& step_scenes = nlohmann::json::object(),
                    std::string* error = nullptr) {
  int status = 0;
  nlohmann::json body = {{"job_yaml", job_yaml}};
  if (!step_scenes.empty()) body["step_scenes"] = step_scenes;
  nlohmann::json res = farm.Post("/api/v1/jobs", body, &status);
  if (status != 201) {
    if (error) *error = res.is_object() ? res.value("error", res.dump()) : "no response";
    return -1;
  }
  return res["job"]["id"].get<int64_t>();
}

nlohmann::json JobOf(LocalFarm& farm, int64_t id) {
  return farm.Get("/api/v1/jobs/" + std::to_string(id))["job"];
}

// The step of a job named `name` from GET /api/v1/jobs/{id}.
nlohmann::json StepOf(const nlohmann::json& job, const std::string& name) {
  for (const nlohmann::json& step : job["steps"]) {
    if (step["step"] == name) return step;
  }
  return nullptr;
}

// A program for command steps: touches DIR/<frame> for frames [$2, $3].
std::string MarkScript(LocalFarm& farm) {
  const std::string script = farm.dir() + "/mark.sh";
  WriteFile(script,
            "#!/bin/sh\ni=$2\nwhile [ \"$i\" -le \"$3\" ]; do : > \"$1/$i\"; "
            "i=$((i + 1)); done\n");
  ::chmod(script.c_str(), 0755);
  return script;
}

TEST(StepsFarmTest, StepsRunInDependencyOrderWholeAndFrameByFrame) {
  LocalFarm farm("steps-order");
  const std::string script = MarkScript(farm);
  const std::string sim_marks = farm.dir() + "/sim", encode_marks = farm.dir() + "/encode";
  fs::create_directories(sim_marks);
  fs::create_directories(encode_marks);
  farm.set_command_programs({script});
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("w1"));
  ASSERT_TRUE(farm.StartWorker("w2"));
  ASSERT_TRUE(farm.WaitForWorkers(2, 30s));
  const std::string job_yaml =
      "name: shot\nframes: 1-6\nsteps:\n"
      "  - name: sim\n    renderer: command\n    chunk_size: 2\n"
      "    settings: {program: " +
      script + ", argv: ['" + sim_marks +
      "', '{frame_start}', '{frame_end}']}\n"
      "  - name: render\n    scene: scene.yaml\n"
      "    depends_on: [{step: sim, per_frame: true}]\n"
      "  - name: encode\n    renderer: command\n    frames: '1'\n"
      "    settings: {program: " +
      script + ", argv: ['" + encode_marks +
      "', '1', '1']}\n"
      "    depends_on: [{step: render}]\n";
  std::string error;
  const int64_t id = SubmitSteps(farm, job_yaml, {{"render", TinySceneYaml(16, 12, 1)}}, &error);
  ASSERT_GT(id, 0) << error;
  const nlohmann::json done = farm.WaitForJob(id, 120s);
  ASSERT_EQ(done["state"], "done") << done.dump(2) << farm.SchedulerLog();
  // The job's counters are its steps' together: 3 sim chunks, 6 frames, 1 encode.
  EXPECT_EQ(done["renderer"], "steps");
  EXPECT_EQ(done["tasks"]["total"], 10);
  EXPECT_EQ(done["tasks"]["done"], 10);
  const nlohmann::json job = JobOf(farm, id);
  ASSERT_EQ(job["steps"].size(), 3u) << job.dump(2);
  const nlohmann::json sim = StepOf(job, "sim"), render = StepOf(job, "render"),
                       encode = StepOf(job, "encode");
  for (const nlohmann::json& step : {sim, render, encode}) {
    EXPECT_EQ(step["state"], "done") << step.dump(2);
    EXPECT_EQ(step["pipeline_id"], id);
  }
  EXPECT_EQ(render["step_depends_on"][0]["step"], "sim");
  EXPECT_EQ(render["step_depends_on"][0]["per_frame"], true);
  // Frame N of render started once the sim chunk holding frame N was done, not before.
  const nlohmann::json sim_tasks = Tasks(farm, sim["id"]);
  const nlohmann::json render_tasks = Tasks(farm, render["id"]);
  ASSERT_EQ(sim_tasks.size(), 3u);
  ASSERT_EQ(render_tasks.size(), 6u);
  std::string last_render;
  for (const nlohmann::json& r : render_tasks) {
    const int frame = r["frame_start"];
    const nlohmann::json& holder = sim_tasks[(frame - 1) / 2];
    EXPECT_GE(r["started_at"].get<std::string>(), holder["finished_at"].get<std::string>())
        << "frame " << frame;
    last_render = std::max(last_render, r["finished_at"].get<std::string>());
  }
  // The encode waited for the whole render step.
  const nlohmann::json encode_task = Tasks(farm, encode["id"])[0];
  EXPECT_GE(encode_task["started_at"].get<std::string>(), last_render);
  for (int f = 1; f <= 6; ++f) EXPECT_TRUE(fs::exists(sim_marks + "/" + std::to_string(f)));
  EXPECT_TRUE(fs::exists(encode_marks + "/1"));
  // Each step writes into a folder named after it inside the job's.
  EXPECT_EQ(render["output_dir"], job["output_dir"].get<std::string>() + "/render");
  EXPECT_TRUE(fs::exists(render["output_dir"].get<std::string>() + "/shot.0006.png"));
  // Listed once; the steps with ?steps=true.
  EXPECT_EQ(farm.Get("/api/v1/jobs")["jobs"].size(), 1u);
  EXPECT_EQ(farm.Get("/api/v1/jobs?steps=true")["jobs"].size(), 4u);
}

TEST(StepsFarmTest, AFailedStepCancelsTheStepsAfterItAndARetryRunsThemAgain) {
  LocalFarm farm("steps-fail");
  const std::string marker = farm.dir() + "/sim-input";
  farm.set_command_programs({"ls"});
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("w1"));
  ASSERT_TRUE(farm.WaitForWorkers(1, 30s));
  // sim fails until its input exists; render and encode come after it, other does not.
  const std::string job_yaml =
      "name: shot\nframes: 1-3\nrenderer: noop\nsteps:\n"
      "  - name: sim\n    renderer: command\n    max_retries: 0\n    blocklist_after: 0\n"
      "    settings: {program: ls, argv: ['" +
      marker +
      "']}\n"
      "  - name: render\n    depends_on: [{step: sim, per_frame: true}]\n"
      "  - name: encode\n    depends_on: [{step: render}]\n"
      "  - name: other\n";
  std::string error;
  const int64_t id = SubmitSteps(farm, job_yaml, nlohmann::json::object(), &error);
  ASSERT_GT(id, 0) << error;
  const nlohmann::json failed = farm.WaitForJob(id, 60s);
  ASSERT_EQ(failed["state"], "failed") << failed.dump(2) << farm.SchedulerLog();
  EXPECT_NE(failed["error"].get<std::string>().find("step sim failed"), std::string::npos)
      << failed.dump(2);
  nlohmann::json job = JobOf(farm, id);
  EXPECT_EQ(StepOf(job, "sim")["state"], "failed");
  EXPECT_EQ(StepOf(job, "render")["state"], "canceled");
  EXPECT_EQ(StepOf(job, "encode")["state"], "canceled");
  EXPECT_EQ(StepOf(job, "other")["state"], "done");
  EXPECT_NE(StepOf(job, "render")["error"].get<std::string>().find("step sim failed"),
            std::string::npos);

  // With its input there, a retry of the job runs sim again and the steps it had canceled.
  WriteFile(marker, "x");
  int status = 0;
  farm.Post("/api/v1/jobs/" + std::to_string(id) + "/retry", nlohmann::json::object(), &status);
  ASSERT_EQ(status, 200);
  const nlohmann::json retried = farm.WaitForJob(id, 60s);
  ASSERT_EQ(retried["state"], "done") << JobOf(farm, id).dump(2) << farm.SchedulerLog();
  job = JobOf(farm, id);
  for (const char* step : {"sim", "render", "encode", "other"}) {
    EXPECT_EQ(StepOf(job, step)["state"], "done") << step;
  }
  EXPECT_EQ(job["tasks"]["done"], 3 + 3 + 3 + 3);
}

TEST(StepsFarmTest, JobOperationsReachEveryStepAndARestartLosesNothing) {
  LocalFarm farm("steps-ops");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  const std::string job_yaml =
      "name: shot\nframes: 1-4\nrenderer: noop\nsteps:\n"
      "  - name: a\n  - name: b\n    depends_on: [{step: a, per_frame: true}]\n";
  const int64_t kept = SubmitSteps(farm, job_yaml);
  const int64_t canceled = SubmitSteps(farm, job_yaml);
  ASSERT_GT(kept, 0);
  ASSERT_GT(canceled, 0);
  const std::string base = "/api/v1/jobs/" + std::to_string(kept);
  int status = 0;
  farm.Post(base + "/priority", {{"priority", 80}}, &status);
  EXPECT_EQ(status, 200);
  farm.Post(base + "/pause", nlohmann::json::object(), &status);
  EXPECT_EQ(status, 200);
  nlohmann::json job = JobOf(farm, kept);
  EXPECT_EQ(job["state"], "paused");
  for (const nlohmann::json& step : job["steps"]) {
    EXPECT_EQ(step["priority"], 80);
    EXPECT_EQ(step["paused"], true);
  }
  // A task of step b says what it waits for, by the step's name.
  const int64_t b_task = Tasks(farm, StepOf(job, "b")["id"])[0]["id"];
  farm.Post(base + "/resume", nlohmann::json::object(), &status);
  EXPECT_EQ(status, 200);
  const std::string why =
      farm.Get("/api/v1/tasks/" + std::to_string(b_task) + "/why")["reason"].get<std::string>();
  EXPECT_EQ(why, "waiting for frame 1 of step a");

  farm.Post("/api/v1/jobs/" + std::to_string(canceled) + "/cancel", nlohmann::json::object(),
            &status);
  EXPECT_EQ(status, 200);
  job = JobOf(farm, canceled);
  EXPECT_EQ(job["state"], "canceled");
  for (const nlohmann::json& step : job["steps"]) EXPECT_EQ(step["state"], "canceled");
  EXPECT_EQ(job["tasks"]["canceled"], 8);
  // A step alone cannot be deleted; the finished job goes with its steps.
  EXPECT_EQ(farm.Delete("/api/v1/jobs/" + std::to_string(job["steps"][0]["id"].get<int64_t>())),
            409);
  EXPECT_EQ(farm.Delete("/api/v1/jobs/" + std::to_string(canceled)), 200);
  EXPECT_EQ(farm.Get("/api/v1/jobs?steps=true")["jobs"].size(), 3u);

  // kill -9 with nothing run: the job, its steps and their dependencies come back.
  farm.KillScheduler(SIGKILL);
  ASSERT_TRUE(farm.StartScheduler(/*reuse_ports=*/true)) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("w1"));
  const nlohmann::json done = farm.WaitForJob(kept, 60s);
  ASSERT_EQ(done["state"], "done") << JobOf(farm, kept).dump(2) << farm.SchedulerLog();
  EXPECT_EQ(done["tasks"]["done"], 8);
}

TEST(StepsFarmTest, BadStepFilesAreRefusedNamingTheFieldAndNothingIsStored) {
  LocalFarm farm("steps-bad");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  const std::string head = "name: j\nframes: 1-4\nrenderer: noop\n";
  std::string error;
  EXPECT_EQ(SubmitSteps(farm,
                        head + "steps:\n  - {name: a, depends_on: [{step: b}]}\n"
                               "  - {name: b, depends_on: [{step: a}]}\n",
                        nlohmann::json::object(), &error),
            -1);
  EXPECT_EQ(error, "steps: the steps' dependencies form a cycle: a -> b -> a");
  EXPECT_EQ(SubmitSteps(farm, head + "steps:\n  - {name: a, depends_on: [{step: x}]}\n",
                        nlohmann::json::object(), &error),
            -1);
  EXPECT_EQ(error, "steps[0].depends_on[0].step: no step named 'x' (a)");
  // A path-tracer step without its scene, a scene for no step, a job-wide scene_yaml.
  EXPECT_EQ(SubmitSteps(farm, "name: j\nframes: 1\nsteps:\n  - {name: r, scene: scene.yaml}\n",
                        nlohmann::json::object(), &error),
            -1);
  EXPECT_NE(error.find("step r: scene:"), std::string::npos) << error;
  EXPECT_EQ(SubmitSteps(farm, head + "steps:\n  - {name: a}\n", {{"b", "x"}}, &error), -1);
  EXPECT_EQ(error, "body.step_scenes.b: the job has no step of that name");
  EXPECT_EQ(farm.Submit(head + "steps:\n  - {name: a}\n", "width: 1", &error), -1);
  EXPECT_EQ(error, "body.scene_yaml: a job with steps sends each step's scene in step_scenes");
  // Over the farm's task limit over all steps (each step alone is within it).
  EXPECT_EQ(SubmitSteps(farm,
                        "name: j\nrenderer: noop\nframes: 1-100000\nsteps:\n"
                        "  - {name: a}\n  - {name: b}\n  - {name: c}\n  - {name: d}\n"
                        "  - {name: e}\n  - {name: f}\n  - {name: g}\n  - {name: h}\n"
                        "  - {name: i}\n  - {name: k}\n  - {name: l}\n",
                        nlohmann::json::object(), &error),
            -1);
  EXPECT_EQ(error, "steps: 1100000 tasks over all steps; a job may have at most 1000000");
  EXPECT_EQ(farm.Get("/api/v1/jobs?steps=true")["jobs"].size(), 0u);
}

}  // namespace
}  // namespace tessera::testing
