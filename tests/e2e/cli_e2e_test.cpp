// End-to-end tests of the `tessera` CLI against real processes: the client binary alone (local
// validation, unreachable server) and a whole local farm started with `tessera up`.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/process.h"
#include "tests/support/require.h"
#include "tests/support/scenes.h"

namespace tessera::e2e {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using std::chrono::seconds;
using testing::FreePort;
using testing::Process;
using testing::ProcessAlive;
using testing::RunProcess;
using testing::RunResult;

const std::string kBinDir = TSR_BIN_DIR;
const std::string kTessera = kBinDir + "/tessera";

// A scene small enough to render in milliseconds on one CPU thread.
const std::string kTinyScene = tessera::testing::TinySceneYaml();

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

int CountLines(const std::string& s) {
  int lines = 0;
  for (char c : s) lines += (c == '\n');
  if (!s.empty() && s.back() != '\n') ++lines;
  return lines;
}

class CliE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tessera-cli-e2e-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    // A port nobody listens on: a client that tried to talk to the server would say so.
    dead_server_ = "http://127.0.0.1:" + std::to_string(FreePort());
  }
  void TearDown() override {
    std::error_code ec;
    if (!HasFailure())
      fs::remove_all(dir_, ec);
    else
      std::fprintf(stderr, "kept %s for inspection\n", dir_.c_str());
  }

  std::string Write(const std::string& name, const std::string& text) {
    fs::path path = fs::path(dir_) / name;
    std::ofstream(path) << text;
    return path.string();
  }

  RunResult Tessera(std::vector<std::string> args, seconds timeout = seconds(30)) {
    args.insert(args.begin(), kTessera);
    return RunProcess(args, timeout);
  }

  std::string dir_;
  std::string dead_server_;
};

// ---- (1) local validation: errors name the field, nothing is sent ----------------------------

struct BadJobCase {
  const char* label;
  const char* job;       // job file text; scene.yaml is the tiny scene unless `scene` is set
  const char* scene;     // nullptr: kTinyScene
  const char* expected;  // must appear in the error
};

TEST_F(CliE2eTest, SubmitRejectsBadJobFilesWithoutAServer) {
  const BadJobCase cases[] = {
      {"unknown key", "name: a\nscene: scene.yaml\nframes: 1-2\ncolour: red\n", nullptr, "colour"},
      {"inverted frames", "name: a\nscene: scene.yaml\nframes: 12-3\n", nullptr, "frames"},
      {"too many frames", "name: a\nscene: scene.yaml\nframes: 1-200000\n", nullptr, "frames"},
      {"zero resolution", "name: a\nscene: scene.yaml\nframes: 1-2\n", "zero", "width"},
      {"missing scene file", "name: a\nscene: no-such-scene.yaml\nframes: 1-2\n", nullptr, "scene"},
      {"unknown plugin setting",
       "name: a\nrenderer: povray\nscene: a.pov\nframes: 1\nsettings: {widht: 64}\n", nullptr,
       "settings.widht: unknown setting"},
      {"option injection", "name: a\nrenderer: command\nframes: 1\nsettings: {program: -rf}\n",
       nullptr, "settings.program"},
      {"binary blend scene", "name: a\nrenderer: blender\nscene: shot.blend\nframes: 1\n", nullptr,
       ".blend"},
      {"wrong scene type", "name: a\nrenderer: povray\nscene: scene.yaml\nframes: 1\n", nullptr,
       ".pov"},
  };
  for (const BadJobCase& c : cases) {
    SCOPED_TRACE(c.label);
    std::string scene = kTinyScene;
    if (c.scene != nullptr) scene.replace(scene.find("width: 64"), 9, "width: 0");
    Write("scene.yaml", scene);
    std::string job = Write("job.yaml", c.job);
    RunResult r = Tessera({"submit", job, "--server", dead_server_});
    ASSERT_FALSE(r.timed_out);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("error: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("cannot reach"), std::string::npos) << "it tried to submit: " << r.err;
    EXPECT_EQ(CountLines(r.err), 1) << r.err;
    EXPECT_EQ(r.out, "");
  }
}

// `tessera check` tells each kind of file apart by its one parse (a job, a job with steps, an
// OpenJD job or environment template) and names the problem in each, without a server.
TEST_F(CliE2eTest, CheckTellsEachKindOfFileAndNamesItsProblem) {
  Write("scene.yaml", kTinyScene);
  const std::string job = Write("job.yaml", "name: a\nscene: scene.yaml\nframes: 1-2\n");
  const std::string steps =
      Write("steps.yaml", "name: s\nframes: 1-2\nsteps:\n  - {name: a, renderer: noop}\n");
  const std::string job_template =
      Write("template.yaml",
            "specificationVersion: jobtemplate-2023-09\nname: t\nsteps:\n  - name: Run\n"
            "    script: {actions: {onRun: {command: /bin/true}}}\n");
  const std::string environment = Write(
      "environment.yaml",
      "specificationVersion: environment-2023-09\nenvironment: {name: E, variables: {A: b}}\n");
  RunResult r = Tessera({"check", job, steps, job_template, environment});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const auto& [file, what] :
       {std::pair{job, "a Tessera job file"}, std::pair{steps, "a Tessera job file with steps"},
        std::pair{job_template, "an Open Job Description job template"},
        std::pair{environment, "an Open Job Description environment template"}}) {
    EXPECT_NE(r.out.find(file + ": valid, " + what + "\n"), std::string::npos) << r.out;
  }
  const std::string bad_steps = Write(
      "bad-steps.yaml",
      "name: s\nframes: 1-2\nsteps:\n  - {name: a, renderer: noop, depends_on: [{step: b}]}\n");
  const std::string bad_template =
      Write("bad-template.yaml",
            "specificationVersion: jobtemplate-2023-09\nname: t\ncolour: red\nsteps:\n"
            "  - name: Run\n    script: {actions: {onRun: {command: /bin/true}}}\n");
  const std::string bad_yaml = Write("bad-yaml.yaml", "name: a\nframes: [1\n");
  r = Tessera({"check", bad_steps, bad_template, bad_yaml});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("error: " + bad_steps + ": steps[0].depends_on[0].step: no step named 'b'"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("error: " + bad_template + ": colour"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("error: " + bad_yaml + ": job: YAML syntax error"), std::string::npos)
      << r.err;
  EXPECT_EQ(CountLines(r.err), 3) << r.err;
}

TEST_F(CliE2eTest, BytesThatAreNotUtf8AreAnErrorNotACrash) {
  Write("scene.yaml", kTinyScene);
  // In the job file: refused with the byte offset (the CLI used to abort in a JSON dump).
  const std::string text = "name: a\nscene: scene.yaml\nframes: 1\ntags: [\xff\xfe]\n";
  std::string job = Write("job.yaml", text);
  RunResult r = Tessera({"submit", job, "--server", dead_server_});
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("job: not valid UTF-8 (byte " + std::to_string(text.find('\xff')) + ")"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("cannot reach"), std::string::npos) << r.err;
  // In a plugin's scene file, which the CLI does not parse but sends as text.
  Write("a.pov", "sphere { 0, 1 } // caf\xe9\n");
  job = Write("pov.yaml", "name: a\nrenderer: povray\nscene: a.pov\nframes: 1\n");
  r = Tessera({"submit", job, "--server", dead_server_});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("a.pov: scene: not valid UTF-8 (byte 22)"), std::string::npos) << r.err;
  // In an argument that becomes a name.
  r = Tessera(
      {"token", "create", "--user", "ana\xff", "--role", "submitter", "--server", dead_server_});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--user: not valid UTF-8 (byte 3)"), std::string::npos) << r.err;
}

TEST_F(CliE2eTest, SubmitNamesTheSceneFileForSceneErrors) {
  std::string scene = kTinyScene;
  scene.replace(scene.find("height: 48"), 10, "height: -4");
  std::string scene_path = Write("bad-scene.yaml", scene);
  std::string job = Write("job.yaml", "name: a\nscene: bad-scene.yaml\nframes: 1\n");
  RunResult r = Tessera({"submit", job, "--server", dead_server_});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("bad-scene.yaml"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("height"), std::string::npos) << r.err;
}

// ---- (2) unreachable scheduler: one line naming the address, exit 3 --------------------------

TEST_F(CliE2eTest, UnreachableServerGivesOneLineWithTheAddress) {
  Write("scene.yaml", kTinyScene);
  std::string job = Write("job.yaml", "name: a\nscene: scene.yaml\nframes: 1-2\n");
  const std::vector<std::vector<std::string>> commands = {{"jobs"},
                                                          {"jobs", "--json"},
                                                          {"status", "1"},
                                                          {"workers"},
                                                          {"wait", "1", "--timeout", "5"},
                                                          {"cancel", "1"},
                                                          {"submit", job}};
  for (auto args : commands) {
    SCOPED_TRACE(args[0]);
    args.push_back("--server");
    args.push_back(dead_server_);
    RunResult r = Tessera(args);
    ASSERT_FALSE(r.timed_out);
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_EQ(CountLines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find("cannot reach the Tessera scheduler at " + dead_server_),
              std::string::npos)
        << r.err;
    EXPECT_EQ(r.out, "");
  }
}

TEST_F(CliE2eTest, UpFailsFastWhenThePortIsTaken) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  std::string port = std::to_string(ntohs(addr.sin_port));
  RunResult r = Tessera({"up", "--port", port, "--data", dir_ + "/data"}, seconds(20));
  ASSERT_FALSE(r.timed_out);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("port " + port), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("in use"), std::string::npos) << r.err;
  // The workers' port too, named by its flag.
  RunResult broker = Tessera(
      {"up", "--port", std::to_string(FreePort()), "--broker-port", port, "--data", dir_ + "/data"},
      seconds(20));
  close(fd);
  ASSERT_FALSE(broker.timed_out);
  EXPECT_NE(broker.exit_code, 0);
  EXPECT_NE(broker.err.find("error: --broker-port: port " + port), std::string::npos) << broker.err;
}

// ---- (3) a whole local farm --------------------------------------------------------------------

json ParseJson(const RunResult& r) {
  json j = json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << "not JSON: " << r.out << "\nstderr: " << r.err;
  return j;
}

TEST_F(CliE2eTest, LocalFarmRunsSubmitsWaitsCancelsAndStops) {
  TSR_REQUIRE(fs::exists(kBinDir + "/tessera-scheduler") && fs::exists(kBinDir + "/tessera-worker"),
              "tessera-scheduler / tessera-worker are not built in " << kBinDir);
  const std::string port = std::to_string(FreePort());
  const std::string broker_port = std::to_string(FreePort());
  const std::string server = "http://127.0.0.1:" + port;
  const std::string data = dir_ + "/data";
  Process up = Process::StartClient({kTessera, "up", "--workers", "2", "--data", data, "--port",
                                     port, "--broker-port", broker_port, "--threads", "1"},
                                    dir_ + "/up.stderr");
  std::optional<std::string> ready = up.ReadLine(seconds(60));
  ASSERT_TRUE(ready.has_value()) << "no ready line; see " << dir_ << "/up.stderr";
  EXPECT_EQ(*ready, "Tessera farm ready: API " + server + "  (scheduler + 2 workers, data " +
                        fs::weakly_canonical(data).string() + ")");
  std::optional<std::string> workers_port = up.ReadLine(seconds(5));
  ASSERT_TRUE(workers_port.has_value());
  EXPECT_EQ(workers_port->rfind("Workers' port: tcp://127.0.0.1:" + broker_port + " ", 0), 0u)
      << *workers_port;
  std::vector<pid_t> children = up.Descendants();
  EXPECT_EQ(children.size(), 3u) << "expected a scheduler and 2 workers";

  // A small 2-frame job renders and lands on disk.
  Write("scene.yaml", kTinyScene);
  std::string small = Write("small.yaml", "name: small\nscene: scene.yaml\nframes: 1-2\n");
  RunResult submit = Tessera({"submit", small, "--server", server});
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  std::string id = Trim(submit.out);
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(id.find_first_not_of("0123456789"), std::string::npos) << submit.out;

  RunResult wait = Tessera({"wait", id, "--timeout", "120", "--server", server}, seconds(150));
  EXPECT_EQ(wait.exit_code, 0) << wait.out << wait.err;

  // Every worker lists the plugins whose programs it found.
  RunResult plugins = Tessera({"plugins", "--server", server});
  EXPECT_EQ(plugins.exit_code, 0) << plugins.err;
  EXPECT_NE(plugins.out.find("command"), std::string::npos) << plugins.out;
  EXPECT_NE(plugins.out.find("Renderers this farm knows: pathtracer, noop"), std::string::npos)
      << plugins.out;
  if (std::system("command -v povray >/dev/null 2>&1") == 0) {
    Write("ball.pov",
          "camera { location <0, 1, -4> look_at 0 }\nlight_source { <2, 4, -3> color rgb 1 }\n"
          "sphere { 0, 1 pigment { color rgb <1, 0.3, 0.2> } }\n");
    std::string pov = Write("pov.yaml",
                            "name: ball\nrenderer: povray\nscene: ball.pov\nframes: 1-2\n"
                            "settings: {width: 32, height: 24}\n");
    RunResult pov_submit = Tessera({"submit", pov, "--server", server});
    ASSERT_EQ(pov_submit.exit_code, 0) << pov_submit.err;
    RunResult pov_wait =
        Tessera({"wait", Trim(pov_submit.out), "--timeout", "60", "--server", server}, seconds(90));
    EXPECT_EQ(pov_wait.exit_code, 0) << pov_wait.out << pov_wait.err;
  }

  json jobs = ParseJson(Tessera({"jobs", "--json", "--server", server}));
  bool listed_done = false;
  for (const json& j : jobs.value("jobs", json::array())) {
    if (j.value("id", int64_t{0}) == std::stoll(id)) listed_done = j.value("state", "") == "done";
  }
  EXPECT_TRUE(listed_done) << jobs.dump(2);

  json status = ParseJson(Tessera({"status", id, "--json", "--server", server}));
  const json& job = status["job"];
  EXPECT_EQ(job.value("state", ""), "done");
  EXPECT_EQ(job["tasks"].value("done", -1), 2) << status.dump(2);
  EXPECT_EQ(job["tasks"].value("total", -1), 2) << status.dump(2);
  std::string output_dir = job.value("output_dir", "");
  for (const char* file :
       {"small.0001.exr", "small.0001.png", "small.0002.exr", "small.0002.png"}) {
    EXPECT_TRUE(fs::exists(fs::path(output_dir) / file)) << output_dir << "/" << file;
  }

  json workers = ParseJson(Tessera({"workers", "--json", "--server", server}));
  std::vector<std::string> names;
  for (const json& w : workers.value("workers", json::array()))
    names.push_back(w.value("name", ""));
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"local-1", "local-2"})) << workers.dump(2);

  // A noop job needs no scene (a farm check); the CLI records who submitted it.
  std::string noop = Write("noop.yaml", "name: check\nrenderer: noop\nframes: 1-3\nproject: rnd\n");
  submit = Tessera({"submit", noop, "--server", server});
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  std::string noop_id = Trim(submit.out);
  wait = Tessera({"wait", noop_id, "--timeout", "60", "--server", server}, seconds(90));
  EXPECT_EQ(wait.exit_code, 0) << wait.out << wait.err;
  const char* env_user = std::getenv("USER");
  const std::string user = env_user && *env_user ? env_user : "unknown";
  RunResult human = Tessera({"status", noop_id, "--server", server});
  EXPECT_NE(human.out.find("owner      " + user + " (project rnd)"), std::string::npos)
      << human.out;
  EXPECT_NE(human.out.find("renderer   noop"), std::string::npos) << human.out;

  // A long job is canceled: wait fails and the job says canceled.
  std::string heavy_scene = kTinyScene;
  heavy_scene.replace(heavy_scene.find("samples: 4"), 10, "samples: 64");
  Write("heavy.yaml", heavy_scene);
  std::string long_job = Write("long.yaml", "name: long\nscene: heavy.yaml\nframes: 1-200\n");
  submit = Tessera({"submit", long_job, "--server", server});
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  std::string long_id = Trim(submit.out);
  RunResult cancel = Tessera({"cancel", long_id, "--server", server});
  EXPECT_EQ(cancel.exit_code, 0) << cancel.err;
  wait = Tessera({"wait", long_id, "--timeout", "60", "--server", server}, seconds(90));
  EXPECT_NE(wait.exit_code, 0);
  EXPECT_NE(wait.err.find("canceled"), std::string::npos) << wait.err;
  status = ParseJson(Tessera({"status", long_id, "--json", "--server", server}));
  EXPECT_EQ(status["job"].value("state", ""), "canceled") << status.dump(2);

  // Ctrl-C stops the workers, then the scheduler, and `up` exits 0 leaving nothing behind.
  ASSERT_EQ(kill(up.pid(), SIGINT), 0);
  std::optional<int> code = up.Wait(seconds(40));
  ASSERT_TRUE(code.has_value()) << "tessera up did not exit after SIGINT";
  EXPECT_EQ(*code, 0);
  for (pid_t child : children) EXPECT_FALSE(ProcessAlive(child)) << "pid " << child;
  for (const char* log : {"scheduler.log", "local-1.log", "local-2.log"}) {
    EXPECT_TRUE(fs::exists(fs::path(data) / "logs" / log)) << log;
  }
}

}  // namespace
}  // namespace tessera::e2e
