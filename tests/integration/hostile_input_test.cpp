// A submitter attacking a real farm (scheduler + workers over loopback): an alias bomb in a job
// file, a scene naming files outside the worker's input roots (directly and through a symlink),
// a renderer printing bytes that are not UTF-8, and worker start-up refusing a run_as it cannot
// honour. Each is refused with an error that names what and why, and nothing is stored.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "shared/base/utf8.h"
#include "tests/support/farm.h"
#include "tests/support/process.h"
#include "tests/support/scenes.h"

namespace tessera::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// A scene whose only object is a mesh read from `file`.
std::string MeshScene(const std::string& file) {
  return "width: 8\nheight: 8\nsamples: 1\nmax_depth: 1\nbackground: {color: [1, 1, 1]}\n"
         "camera: {keyframes: [{frame: 1, position: [0, 0, 3], look_at: [0, 0, 0], fov: 40}]}\n"
         "materials: {m: {type: diffuse, color: [0.5, 0.5, 0.5]}}\n"
         "objects: [{type: mesh, file: '" +
         file + "', material: m}]\n";
}

constexpr const char* kTriangle = "v -1 -1 0\nv 1 -1 0\nv 0 1 0\nf 1 2 3\n";

// The first task of the job and its message once the job has ended.
nlohmann::json FirstTask(LocalFarm& farm, int64_t job) {
  nlohmann::json tasks = farm.Get("/api/v1/jobs/" + std::to_string(job) + "/tasks")["tasks"];
  return tasks.empty() ? nlohmann::json() : tasks[0];
}

TEST(HostileInputTest, AliasBombIsRefusedAndNothingIsStored) {
  LocalFarm farm("alias-bomb");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  std::string tags = "tags: [&t " + std::string(20000, 'x');
  for (int i = 0; i < 1000; ++i) tags += ", *t";
  const std::string job = "name: bomb\nscene: s.yaml\nframes: 1\n" + tags + "]\n";
  ASSERT_LT(job.size(), 25000u);
  int status = 0;
  nlohmann::json reply = farm.Post(
      "/api/v1/jobs", {{"job_yaml", job}, {"scene_yaml", TinySceneYaml(8, 8, 1)}}, &status);
  EXPECT_EQ(status, 400) << reply.dump();
  EXPECT_NE(reply.dump().find("alias bomb"), std::string::npos) << reply.dump();
  EXPECT_TRUE(farm.Get("/api/v1/jobs")["jobs"].empty()) << "nothing stored";
}

TEST(HostileInputTest, SceneFilesOutsideTheInputRootsFailTheTaskNamingKeyAndPath) {
  LocalFarm farm("input-roots");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  const std::string root = farm.dir() + "/projects";
  fs::create_directories(root);
  WriteFile(root + "/tri.obj", kTriangle);
  WriteFile(farm.dir() + "/outside.obj", kTriangle);
  fs::create_symlink(farm.dir() + "/outside.obj", root + "/escape.obj");

  // A worker with no input roots reads nothing by absolute path.
  ASSERT_TRUE(farm.StartWorker("closed"));
  ASSERT_TRUE(farm.WaitForWorkers(1, 30s));
  std::string error;
  int64_t id = farm.Submit("name: shadow\nscene: s.yaml\nframes: 1\nmax_retries: 0\n",
                           MeshScene("/etc/shadow"), &error);
  ASSERT_GT(id, 0) << error;
  EXPECT_EQ(farm.WaitForJob(id, 60s).value("state", ""), "failed");
  std::string message = FirstTask(farm, id).dump();
  EXPECT_NE(message.find("objects[0].file: '/etc/shadow' is an absolute path; this worker reads "
                         "no files outside the task folder (worker.input_roots is empty)"),
            std::string::npos)
      << message;
  farm.worker("closed").Stop();

  // One whose root holds the mesh renders it; a symlink out of the root is refused.
  ASSERT_TRUE(farm.StartWorkerWith("open", {"--input-root", root}));
  id = farm.Submit("name: inside\nscene: s.yaml\nframes: 1\nmax_retries: 0\n",
                   MeshScene(root + "/tri.obj"), &error);
  ASSERT_GT(id, 0) << error;
  nlohmann::json done = farm.WaitForJob(id, 60s);
  EXPECT_EQ(done.value("state", ""), "done") << FirstTask(farm, id).dump();
  id = farm.Submit("name: escape\nscene: s.yaml\nframes: 1\nmax_retries: 0\n",
                   MeshScene(root + "/escape.obj"), &error);
  ASSERT_GT(id, 0) << error;
  EXPECT_EQ(farm.WaitForJob(id, 60s).value("state", ""), "failed");
  message = FirstTask(farm, id).dump();
  EXPECT_NE(message.find("objects[0].file: '" + root + "/escape.obj' (" + farm.dir() +
                         "/outside.obj) is outside this worker's input roots"),
            std::string::npos)
      << message;
}

TEST(HostileInputTest, RendererOutputThatIsNotUtf8IsStoredSanitised) {
  LocalFarm farm("garbage-output");
  const std::string script = farm.dir() + "/garbage.sh";
  WriteFile(script, "#!/bin/sh\nprintf 'noise \\377\\376 here\\n'\nexit 1\n");
  ::chmod(script.c_str(), 0755);
  farm.set_command_programs({script});
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("w1"));
  ASSERT_TRUE(farm.WaitForWorkers(1, 30s));
  std::string error;
  const int64_t id = farm.Submit(
      "name: noisy\nrenderer: command\nframes: 1\nmax_retries: 0\nsettings: {program: " + script +
          "}\n",
      "", &error);
  ASSERT_GT(id, 0) << error;
  EXPECT_EQ(farm.WaitForJob(id, 60s).value("state", ""), "failed");
  const nlohmann::json task = FirstTask(farm, id);
  ASSERT_TRUE(task.is_object());
  int status = 0;
  const nlohmann::json log =
      farm.Get("/api/v1/tasks/" + std::to_string(task["id"].get<int64_t>()) + "/log", &status);
  ASSERT_EQ(status, 200) << log.dump();
  const std::string text = log["attempts"][0]["log"].get<std::string>();
  EXPECT_NE(text.find("noise \xEF\xBF\xBD\xEF\xBF\xBD here"), std::string::npos) << text;
  EXPECT_EQ(farm.Get("/api/v1/jobs", &status)["jobs"].size(), 1u);
  EXPECT_EQ(status, 200) << "the farm answers every user";
}

TEST(HostileInputTest, WorkerRefusesToStartWithARunAsItCannotUse) {
  LocalFarm farm("run-as");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  farm.StartWorkerWith("w1", {"--run-as", "no-such-user-here"});
  EXPECT_EQ(farm.worker("w1").Wait(10s), 2);
  EXPECT_NE(farm.WorkerLog("w1").find(
                "worker.run_as: user 'no-such-user-here' does not exist on this machine"),
            std::string::npos)
      << farm.WorkerLog("w1");
}

}  // namespace
}  // namespace tessera::testing
