// The systemd units, container files and scripts under deploy/: the units pass
// systemd-analyze with the built programs and keep the worker's drain-on-SIGTERM contract; the
// images build the worker by default and carry every library the programs link against; the
// scripts parse. Checks needing a tool this machine lacks (systemd-analyze, shellcheck, dpkg)
// skip with a message, and fail under CI=true (tests/support/require.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <tuple>

#include "tests/deploy/deploy_files.h"
#include "tests/support/require.h"

namespace tessera::deploy_test {
namespace {

using ::testing::HasSubstr;

// A systemd time span ("1h", "90min", "1h 30min", "3600") in seconds; -1 when unreadable.
long SpanSeconds(const std::string& span) {
  static const std::map<std::string, long> kUnits = {{"", 1},      {"s", 1},     {"sec", 1},
                                                     {"m", 60},    {"min", 60},  {"h", 3600},
                                                     {"hr", 3600}, {"d", 86400}, {"day", 86400}};
  const std::regex part(R"((\d+)\s*([a-z]*))");
  long total = -1;
  std::string rest = span;
  for (std::smatch m; std::regex_search(rest, m, part); rest = m.suffix()) {
    auto unit = kUnits.find(m[2].str());
    if (unit == kUnits.end()) return -1;
    total = std::max(total, 0L) + std::stol(m[1].str()) * unit->second;
  }
  return total;
}

struct Stage {
  std::string base, name, body;
};

std::vector<Stage> Stages(const std::string& dockerfile) {
  std::vector<Stage> stages;
  std::istringstream in(dockerfile);
  const std::regex from(R"(^FROM\s+(\S+)(?:\s+AS\s+(\S+))?)", std::regex::icase);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, from)) {
      stages.push_back({m[1], m[2], ""});
    } else if (!stages.empty()) {
      stages.back().body += line + "\n";
    }
  }
  return stages;
}

const Stage* FindStage(const std::vector<Stage>& stages, const std::string& name) {
  for (const Stage& s : stages) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

// The whitespace-separated words of `text`, so "libfmt9" is not found inside "libfmt9-dev".
std::set<std::string> Words(const std::string& text) {
  std::set<std::string> words;
  std::istringstream in(text);
  for (std::string w; in >> w;) words.insert(w);
  return words;
}

// ---- systemd units -------------------------------------------------------------------------

TEST(SystemdUnits, PassSystemdAnalyzeVerifyWithTheBuiltPrograms) {
  TSR_REQUIRE_TOOL("systemd-analyze", "the units are not verified");
  const std::string dir = MakeTempDir("units");
  ASSERT_FALSE(dir.empty());
  for (const auto& [program, built] : std::vector<std::pair<std::string, std::string>>{
           {"tessera-scheduler", TSR_SCHEDULER_BIN}, {"tessera-worker", TSR_WORKER_BIN}}) {
    const std::string name = program + ".service";
    std::string text = ReadFile(kDeploy / "systemd" / name);
    // verify insists that ExecStart= names an existing program: point it at the built one.
    const std::string exec = "ExecStart=/usr/local/bin/" + program + " ";
    const size_t at = text.find(exec);
    ASSERT_NE(at, std::string::npos) << name;
    text.replace(at, exec.size(), "ExecStart=" + built + " ");
    std::ofstream(dir + "/" + name) << text;
    CommandResult r = RunCommand("systemd-analyze verify --man=no " + Quote(dir + "/" + name));
    EXPECT_EQ(r.code, 0) << name << ":\n" << r.output;
    // Unknown keys and bad values are only warnings (exit 0): any line about the unit fails.
    std::istringstream lines(r.output);
    for (std::string line; std::getline(lines, line);) {
      EXPECT_THAT(line, ::testing::Not(HasSubstr(name))) << "systemd-analyze warns";
    }
  }
}

TEST(SystemdUnits, SchedulerRunsSandboxedWithItsStateDirectory) {
  const Unit u = LoadUnit("tessera-scheduler.service");
  EXPECT_EQ(One(u, "Service.ExecStart"),
            "/usr/local/bin/tessera-scheduler --config /etc/tessera/scheduler.yaml");
  EXPECT_EQ(One(u, "Service.User"), "tessera");
  EXPECT_EQ(One(u, "Service.StateDirectory"), "tessera");
  EXPECT_EQ(One(u, "Service.Restart"), "on-failure");
  // A failure a restart does not cure is retried slowly and then left to an operator, never in
  // a tight loop (a full data folder is not one: the scheduler turns read-only instead).
  EXPECT_GE(SpanSeconds(One(u, "Service.RestartSec")), 30);
  EXPECT_EQ(One(u, "Unit.StartLimitIntervalSec"), "600");
  EXPECT_EQ(One(u, "Unit.StartLimitBurst"), "5");
  EXPECT_EQ(One(u, "Service.LimitNOFILE"), "65536");
  EXPECT_EQ(One(u, "Service.NoNewPrivileges"), "yes");
  EXPECT_EQ(One(u, "Service.ProtectSystem"), "strict");
  EXPECT_EQ(One(u, "Service.ProtectHome"), "yes");
  EXPECT_EQ(One(u, "Service.PrivateTmp"), "yes");
  EXPECT_THAT(One(u, "Service.ReadWritePaths"), HasSubstr("/var/lib/tessera"));
  EXPECT_EQ(One(u, "Install.WantedBy"), "multi-user.target");
}

TEST(SystemdUnits, WorkerDrainsOnSigtermAndSeesTheGpus) {
  const Unit u = LoadUnit("tessera-worker.service");
  EXPECT_EQ(One(u, "Service.ExecStart"),
            "/usr/local/bin/tessera-worker --config /etc/tessera/worker.yaml");
  EXPECT_EQ(One(u, "Service.User"), One(LoadUnit("tessera-scheduler.service"), "Service.User"));
  EXPECT_EQ(One(u, "Service.StateDirectory"), "tessera-worker");
  EXPECT_THAT(One(u, "Unit.After"), HasSubstr("network-online.target"));
  EXPECT_THAT(One(u, "Unit.Wants"), HasSubstr("network-online.target"));
  // A drain ends in exit 0, which must not restart the worker.
  EXPECT_EQ(One(u, "Service.Restart"), "on-failure");
  EXPECT_EQ(One(u, "Service.KillSignal"), "SIGTERM");
  EXPECT_GE(SpanSeconds(One(u, "Service.TimeoutStopSec")), 1800) << "too short to drain";
  // The renderers the worker runs must not get the drain's SIGTERM.
  EXPECT_EQ(One(u, "Service.KillMode"), "mixed");
  EXPECT_THAT(One(u, "Service.SupplementaryGroups"), HasSubstr("video"));
  EXPECT_THAT(One(u, "Service.SupplementaryGroups"), HasSubstr("render"));
  EXPECT_EQ(u.count("Service.DeviceAllow"), 0u) << "every GPU must stay reachable";
  EXPECT_NE(One(u, "Service.PrivateDevices"), "yes") << "every GPU must stay reachable";
  EXPECT_EQ(One(u, "Service.ProtectSystem"), "strict");
  EXPECT_EQ(One(u, "Service.NoNewPrivileges"), "yes");
}

// ---- container files -----------------------------------------------------------------------

TEST(Container, ImagesBuildTheWorkerByDefaultAndTheSchedulerAsATarget) {
  for (const auto& [file, build_base, runtime_base] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"Dockerfile", "debian:12", "debian:12-slim"},
           {"Dockerfile.cuda", "nvidia/cuda:12.4.1-devel-ubuntu22.04",
            "nvidia/cuda:12.4.1-runtime-ubuntu22.04"}}) {
    SCOPED_TRACE(file);
    const std::string text = ReadFile(kDeploy / "container" / file);
    const std::vector<Stage> stages = Stages(text);
    ASSERT_FALSE(stages.empty());
    const Stage* build = FindStage(stages, "build");
    const Stage* runtime = FindStage(stages, "runtime");
    ASSERT_TRUE(build != nullptr && runtime != nullptr);
    EXPECT_EQ(build->base, build_base);
    EXPECT_EQ(runtime->base, runtime_base);
    EXPECT_EQ(stages.back().name, "worker") << "the default (last) target must be the worker";
    for (const std::string& program : std::vector<std::string>{"worker", "scheduler"}) {
      const Stage* s = FindStage(stages, program);
      ASSERT_NE(s, nullptr) << program;
      EXPECT_EQ(s->base, "runtime");
      EXPECT_THAT(s->body, HasSubstr("/usr/local/bin/tessera-" + program + "\"]"));
      std::smatch user;
      ASSERT_TRUE(std::regex_search(s->body, user, std::regex(R"(\nUSER\s+([^:\s]+))")));
      EXPECT_NE(user[1].str(), "0");
      EXPECT_NE(user[1].str(), "root");
    }
    // What is copied from the build context exists.
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("COPY ", 0) != 0 || line.find("--from") != std::string::npos) continue;
      std::vector<std::string> words;
      std::istringstream in(line.substr(5));
      for (std::string w; in >> w;) words.push_back(w);
      for (size_t i = 0; i + 1 < words.size(); ++i) {
        if (words[i] != ".") {
          EXPECT_TRUE(fs::exists(kRepo / words[i])) << line;
        }
      }
    }
  }
}

TEST(Container, DebianBuildStageInstallsTheLibrariesOfInstallDeps) {
  const std::string deps = ReadFile(kDeploy / "install-deps.sh");
  const size_t open = deps.find("PACKAGES=(");
  ASSERT_NE(open, std::string::npos);
  const size_t close = deps.find(')', open);
  const std::set<std::string> listed = Words(deps.substr(open + 10, close - open - 10));
  // The test suite's and the fuzzers' (deploy/run-fuzzers.sh): the images build no tests.
  const std::set<std::string> test_only = {"libgtest-dev", "libgmock-dev", "libbenchmark-dev",
                                           "libfuzzer-14-dev", "libclang-rt-14-dev"};
  const std::vector<Stage> stages = Stages(ReadFile(kDeploy / "container" / "Dockerfile"));
  const Stage* build = FindStage(stages, "build");
  ASSERT_NE(build, nullptr);
  const std::set<std::string> installed = Words(build->body);
  for (const std::string& p : listed) {
    const bool library = p.size() > 4 && p.compare(p.size() - 4, 4, "-dev") == 0;
    if (!library || test_only.count(p)) continue;
    EXPECT_EQ(installed.count(p), 1u) << "the build stage lacks " << p;
  }
}

TEST(Container, DebianRuntimeStageProvidesEveryLibraryTheBinariesLinkAgainst) {
  std::string why;
  std::optional<std::set<std::string>> needed = RuntimePackages(&why);
  TSR_REQUIRE(needed.has_value(), why);
  const std::vector<Stage> stages = Stages(ReadFile(kDeploy / "container" / "Dockerfile"));
  const Stage* runtime = FindStage(stages, "runtime");
  ASSERT_NE(runtime, nullptr);
  const std::set<std::string> installed = Words(runtime->body);
  for (const std::string& package : *needed) {
    EXPECT_EQ(installed.count(package), 1u) << "the runtime stage lacks " << package;
  }
}

// ---- scripts -------------------------------------------------------------------------------

TEST(Scripts, AreExecutableAndParse) {
  const std::vector<fs::path> scripts = FilesIn(kDeploy, ".sh");
  ASSERT_FALSE(scripts.empty());
  for (const fs::path& script : scripts) {
    struct stat st {};
    ASSERT_EQ(stat(script.c_str(), &st), 0) << script;
    EXPECT_NE(st.st_mode & S_IXUSR, 0u) << script << " is not executable";
    CommandResult r = RunCommand("bash -n " + Quote(script.string()));
    EXPECT_EQ(r.code, 0) << script << ":\n" << r.output;
  }
}

TEST(Scripts, PassShellcheck) {
  TSR_REQUIRE_TOOL("shellcheck", "the scripts are not linted");
  for (const fs::path& script : FilesIn(kDeploy, ".sh")) {
    CommandResult r = RunCommand("shellcheck " + Quote(script.string()));
    EXPECT_EQ(r.code, 0) << r.output;
  }
}

}  // namespace
}  // namespace tessera::deploy_test
