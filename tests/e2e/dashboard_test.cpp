// The dashboard in a real browser: headless Chromium loads it from a real scheduler (bearer-token
// auth on) with real workers, and each page is checked for what a user looks for there. A
// screenshot and the rendered DOM of every page are saved for a person to look at, in
// $TESSERA_SCREENSHOT_DIR (default: dashboard-screenshots/ in the build directory).
// Skipped when Chromium is not installed (a failure under CI=true).

#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "tests/e2e/chromium.h"
#include "tests/support/farm.h"
#include "tests/support/require.h"
#include "tests/support/tmpfs.h"

namespace tessera::testing {
namespace {

using namespace std::chrono_literals;
using e2e::HeadlessBrowser;
using json = nlohmann::json;
namespace fs = std::filesystem;

constexpr int kWidth = 1400;
constexpr int kHeight = 900;

std::string ScreenshotDir() {
  const char* env = std::getenv("TESSERA_SCREENSHOT_DIR");
  fs::path dir =
      env && *env ? fs::path(env) : fs::path(TSR_BIN_DIR).parent_path() / "dashboard-screenshots";
  fs::create_directories(dir);
  return fs::canonical(dir).string();
}

// A JavaScript string literal.
std::string Js(const std::string& text) { return json(text).dump(); }

class DashboardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TSR_REQUIRE_TOOL(e2e::kChromiumPath,
                     "the dashboard is not tested in a browser (apt-get install chromium)");
    profile_ = MakeTempDir("tessera-chromium");
    std::string error;
    browser_ = HeadlessBrowser::Start(profile_, kWidth, kHeight, &error);
    ASSERT_NE(browser_, nullptr) << error;
  }
  void TearDown() override {
    CloseBrowser();
    std::error_code ec;
    if (!profile_.empty()) fs::remove_all(profile_, ec);
  }

  // Checks that the page threw nothing, then closes the browser. Tests call it before their farm
  // goes: the scheduler waits out the browser's idle keep-alive connections when it stops.
  void CloseBrowser() {
    if (!browser_) return;
    EXPECT_TRUE(browser_->page_errors().empty())
        << "errors in the page:\n"
        << ::testing::PrintToString(browser_->page_errors());
    browser_.reset();
  }

  // Waits for the page to show `page` with data on it.
  bool WaitForPage(const std::string& page, std::chrono::milliseconds timeout = 15s) {
    return browser_->WaitFor("document.querySelector('#view[data-ready=" + Js(page) + "]')",
                             timeout);
  }
  // Waits for the page of the job named `name` (a fragment change leaves the previous page up
  // until the router has run).
  bool WaitForJobPage(const std::string& name) {
    return browser_->WaitFor(
        "document.querySelector('#view[data-ready=job] .job-title h1')?.textContent.startsWith(" +
            Js(name + " ") + ")",
        15s);
  }
  std::string Text(const std::string& selector) {
    auto text =
        browser_->Evaluate("document.querySelector(" + Js(selector) + ")?.textContent ?? ''");
    return text && text->is_string() ? text->get<std::string>() : "";
  }
  int Count(const std::string& selector) {
    auto n = browser_->Evaluate("document.querySelectorAll(" + Js(selector) + ").length");
    return n && n->is_number() ? n->get<int>() : -1;
  }
  // Saves a screenshot and the DOM as NAME.png / NAME.html.
  void Snapshot(const std::string& name) {
    const std::string base = ScreenshotDir() + "/" + name;
    EXPECT_TRUE(browser_->Screenshot(base + ".png")) << name;
    std::ofstream(base + ".html") << browser_->Dom();
    std::printf("dashboard screenshot: %s.png\n", base.c_str());
  }
  std::string Dom() { return browser_->Dom(); }

  std::string profile_;
  std::unique_ptr<HeadlessBrowser> browser_;
};

TEST_F(DashboardTest, SignInFormThenAnEmptyFarm) {
  LocalFarm farm("dash-empty");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();

  // The page's own files need no token, and a browser revalidates them after an upgrade.
  httplib::Client http(farm.api_url());
  for (auto [path, type] :
       {std::pair{"/", "text/html"}, {"/app.js", "text/javascript"}, {"/style.css", "text/css"}}) {
    httplib::Result res = http.Get(path);
    ASSERT_TRUE(res) << path;
    EXPECT_EQ(res->status, 200) << path;
    EXPECT_EQ(res->get_header_value("Content-Type").rfind(type, 0), 0u) << path;
    EXPECT_EQ(res->get_header_value("Cache-Control"), "no-cache") << path;
  }

  // Without a token the page asks for one, and says why.
  ASSERT_TRUE(browser_->Navigate(farm.api_url() + "/"));
  ASSERT_TRUE(browser_->WaitFor("!document.getElementById('signin').hidden", 15s)) << Dom();
  EXPECT_NE(Text("#signin-reason").find("needs an API token"), std::string::npos)
      << Text("#signin-reason");
  EXPECT_EQ(Count("#view table"), 0) << "nothing of the farm shows before signing in";
  Snapshot("signin");

  // A wrong token is refused with the API's reason.
  browser_->Evaluate(
      "document.getElementById('signin-token').value = 'tsra-nope';"
      "document.getElementById('signin-form').requestSubmit()");
  ASSERT_TRUE(browser_->WaitFor(
      "document.getElementById('signin-reason').textContent.includes('not a Tessera API token')",
      10s))
      << Text("#signin-reason");

  // A link with the token signs in; the token leaves the address bar for localStorage.
  ASSERT_TRUE(browser_->Navigate(farm.api_url() + "/#token=" + farm.token()));
  ASSERT_TRUE(WaitForPage("jobs")) << Dom();
  EXPECT_EQ(browser_->Evaluate("location.hash"), json("#/jobs"));
  EXPECT_EQ(browser_->Evaluate("localStorage.getItem('tessera.token')"), json(farm.token()));
  EXPECT_NE(Text("#who").find("admin"), std::string::npos) << Text("#who");
  const std::string empty = Text("#view");
  EXPECT_NE(empty.find("No jobs yet"), std::string::npos) << empty;
  EXPECT_NE(empty.find("tessera submit job.yaml"), std::string::npos) << empty;
  Snapshot("jobs-empty");

  browser_->Navigate(farm.api_url() + "/#/workers");
  ASSERT_TRUE(WaitForPage("workers")) << Dom();
  EXPECT_NE(Text("#view").find("No workers yet"), std::string::npos) << Text("#view");
  CloseBrowser();
}

TEST_F(DashboardTest, AnOpenFarmNeedsNoSignIn) {
  LocalFarm farm("dash-open");
  farm.AppendSchedulerConfig("api:\n  auth: none\n");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_TRUE(browser_->Navigate(farm.api_url() + "/"));
  ASSERT_TRUE(WaitForPage("jobs")) << Dom();
  EXPECT_EQ(browser_->Evaluate("document.getElementById('signin').hidden"), json(true));
  EXPECT_NE(Text("#who").find("Open farm"), std::string::npos) << Text("#who");
  CloseBrowser();
}

// A job with steps: its page has a row per step (state, progress, what it waits for) instead of
// a frame grid; a step's page says which job it belongs to.
TEST_F(DashboardTest, AJobWithStepsShowsARowPerStep) {
  LocalFarm farm("dash-steps");
  farm.AppendSchedulerConfig("api:\n  auth: none\n");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  int status = 0;
  const json reply =
      farm.Post("/api/v1/jobs",
                {{"job_yaml",
                  "name: shot\nframes: 1-4\nrenderer: noop\nsteps:\n  - {name: sim}\n"
                  "  - {name: comp, depends_on: [{step: sim, per_frame: true}]}\n"}},
                &status);
  ASSERT_EQ(status, 201) << reply.dump();
  const int64_t job = reply["job"]["id"];
  ASSERT_TRUE(browser_->Navigate(farm.api_url() + "/#/jobs/" + std::to_string(job)));
  ASSERT_TRUE(WaitForJobPage("shot")) << Dom();
  EXPECT_EQ(Count("table.steps tbody tr"), 2) << Dom();
  EXPECT_EQ(Count(".frame"), 0) << "a job with steps has no frames of its own";
  EXPECT_NE(Text("table.steps tbody tr:nth-child(2)").find("sim (per frame)"), std::string::npos)
      << Text("table.steps");
  EXPECT_NE(Text(".count-frames").find("0 of 2 steps done"), std::string::npos)
      << Text(".count-frames");
  Snapshot("job-steps");
  browser_->Evaluate("document.querySelector('table.steps tbody tr a').click()");
  ASSERT_TRUE(WaitForJobPage("shot")) << Dom();
  ASSERT_TRUE(
      browser_->WaitFor("document.querySelector('.facts')?.textContent.includes('sim of job #" +
                            std::to_string(job) + "')",
                        15s))
      << Dom();
  CloseBrowser();
}

TEST_F(DashboardTest, AFarmAlertShowsAsABannerAndGoesByItself) {
  TSR_REQUIRE(::geteuid() == 0, "mounts a tmpfs over an outputs folder");
  LocalFarm farm("dash-alert");
  ScopedTmpfs out(farm.dir() + "/data/outputs/full", 4 << 20);
  ASSERT_TRUE(out.mounted()) << out.error();
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("w1"));
  ASSERT_TRUE(farm.WaitForWorkers(1, 20s)) << farm.SchedulerLog();
  out.Fill();
  struct statvfs vfs {};
  ASSERT_EQ(::statvfs(out.dir().c_str(), &vfs), 0);
  ASSERT_EQ(vfs.f_bavail, 0u) << "the tmpfs is not full";
  std::string error;
  const int64_t id =
      farm.Submit("name: held\nscene: scene.yaml\nframes: 1-2\noutput: {directory: full}\n",
                  TinySceneYaml(32, 24, 2), &error);
  ASSERT_GT(id, 0) << error;
  ASSERT_TRUE(browser_->Navigate(farm.api_url() + "/#token=" + farm.token()));
  ASSERT_TRUE(WaitForPage("jobs")) << Dom();
  ASSERT_TRUE(browser_->WaitFor("!document.getElementById('alerts').hidden", 60s)) << Dom();
  EXPECT_NE(Text("#alerts").find("outputs full"), std::string::npos) << Text("#alerts");
  EXPECT_NE(Text("#alerts").find("no space left on device"), std::string::npos);
  Snapshot("alert-outputs-full");
  out.FreeFiller();
  EXPECT_TRUE(browser_->WaitFor("document.getElementById('alerts').hidden", 60s)) << Dom();
  EXPECT_EQ(farm.WaitForJob(id, 60s)["state"], "done");
  CloseBrowser();
}

TEST_F(DashboardTest, PagesOfAFarmWithFinishedFailedAndPausedJobs) {
  LocalFarm farm("dash-farm");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("render-a"));
  // The second reports two (simulated) GPUs, for the workers page to show, with telemetry read
  // through a fake NVML (tests/worker/fake_nvml.cpp) described in a file.
  const std::string nvml_state = farm.dir() + "/fake-nvml.json";
  WriteFile(nvml_state,
            R"({"gpus": [{"util": 42, "mem_used_mb": 6144, "mem_total_mb": 24576, "temp": 58},)"
            R"( {"util": 7, "mem_used_mb": 512, "mem_total_mb": 24576, "temp": 41}]})");
  ::setenv("TESSERA_FAKE_NVML", nvml_state.c_str(), 1);
  const std::string gpu_config = farm.dir() + "/render-b.yaml";
  WriteFile(gpu_config, std::string("worker:\n  simulate_gpus: 2\ngpu_telemetry:\n") +
                            "  interval_ms: 200\n  nvml_library: " + TSR_FAKE_NVML + "\n");
  ASSERT_TRUE(farm.StartWorkerWith("render-b", {"--config", gpu_config}));
  ASSERT_TRUE(farm.WaitForWorkers(2, 30s)) << farm.SchedulerLog();

  std::string error;
  const int64_t done =
      farm.Submit("name: spheres\nscene: s\nframes: 1-8\n", TinySceneYaml(160, 100, 4), &error);
  ASSERT_GT(done, 0) << error;
  // The command renderer running `false`: the task fails with the exit status, no retries.
  const int64_t failed = farm.Submit(
      "name: broken-comp\nrenderer: command\nframes: 1\nmax_retries: 0\n"
      "settings: {program: 'false'}\n",
      "", &error);
  ASSERT_GT(failed, 0) << error;
  ASSERT_EQ(farm.WaitForJob(done, 60s)["state"], "done") << farm.SchedulerLog();
  ASSERT_EQ(farm.WaitForJob(failed, 30s)["state"], "failed") << farm.SchedulerLog();
  // No worker has the tag, so it waits; paused on top.
  const int64_t held = farm.Submit(
      "name: hero-shot\nscene: s\nframes: 1-24\npriority: 80\n"
      "tags: [gpu-a100]\n",
      TinySceneYaml(), &error);
  ASSERT_GT(held, 0) << error;
  int status = 0;
  farm.Post("/api/v1/jobs/" + std::to_string(held) + "/pause", json::object(), &status);
  ASSERT_EQ(status, 200);
  const std::string message =
      farm.Get("/api/v1/jobs/" + std::to_string(failed) + "/tasks")["tasks"][0]["message"];
  ASSERT_FALSE(message.empty());

  // ---- jobs ----
  ASSERT_TRUE(browser_->Navigate(farm.api_url() + "/#token=" + farm.token()));
  ASSERT_TRUE(WaitForPage("jobs")) << Dom();
  json rows = *browser_->Evaluate(
      "[...document.querySelectorAll('tr.job-row')].map(r => "
      "[r.querySelector('.job-name').textContent, r.querySelector('.badge').textContent])");
  EXPECT_EQ(rows, json::parse(R"([["hero-shot", "paused"], ["broken-comp", "failed"],
                                  ["spheres", "done"]])"))
      << rows.dump();
  Snapshot("jobs");

  // First load, from navigation start to the jobs table on screen (token already stored).
  browser_->Navigate("about:blank");
  ASSERT_TRUE(browser_->Navigate(farm.api_url() + "/#/jobs"));
  ASSERT_TRUE(WaitForPage("jobs")) << Dom();
  ASSERT_EQ(Count("tr.job-row"), 3);
  const double first_load_ms = std::stod(
      browser_->Evaluate("document.documentElement.dataset.firstPaintMs")->get<std::string>());
  std::printf("dashboard first load (navigation start to jobs table): %.0f ms\n", first_load_ms);
  // The target (docs/performance.md) is 1 s; a shared CI machine gets twice that before this fails.
  EXPECT_LT(first_load_ms, 2 * 1000);

  // ---- the finished job: a thumbnail for every frame ----
  ASSERT_TRUE(browser_->Navigate(farm.api_url() + "/#/jobs/" + std::to_string(done)));
  ASSERT_TRUE(WaitForJobPage("spheres")) << Dom();
  EXPECT_EQ(Count(".frame"), 8);
  EXPECT_EQ(Count(".frame.f-done"), 8);
  farm.Get("/api/v1/jobs/" + std::to_string(done) + "/frames", &status);
  ASSERT_EQ(status, 200) << "the frames the page shows come from this endpoint";
  EXPECT_TRUE(
      browser_->WaitFor("[...document.querySelectorAll('.frame img')].filter(i => i.complete && "
                        "i.naturalWidth > 0).length === 8",
                        15s))
      << Dom();
  Snapshot("job-done");

  // ---- the failed job: its task's message, and its log when opened ----
  ASSERT_TRUE(browser_->Navigate(farm.api_url() + "/#/jobs/" + std::to_string(failed)));
  ASSERT_TRUE(WaitForJobPage("broken-comp")) << Dom();
  ASSERT_TRUE(browser_->WaitFor("document.querySelector('details.failure')", 15s)) << Dom();
  EXPECT_NE(Text("details.failure").find(message), std::string::npos) << message << "\n"
                                                                      << Text("details.failure");
  EXPECT_NE(Text(".job-title").find("failed"), std::string::npos) << Text(".job-title");
  browser_->Evaluate("document.querySelector('details.failure summary').click()");
  ASSERT_TRUE(browser_->WaitFor(
      "document.querySelector('.fail-log .attempt, .fail-log .muted:not(:empty)') && "
      "!document.querySelector('.fail-log').textContent.includes('Loading')",
      10s))
      << Dom();
  // The attempt as the history recorded it: its outcome, the failure's class and message.
  EXPECT_EQ(Count(".fail-log .attempt[data-outcome=failed]"), 1) << Dom();
  EXPECT_NE(Text(".fail-log .attempt-class").find("render"), std::string::npos) << Dom();
  EXPECT_NE(Text(".fail-log .attempt-msg").find("exit code 1"), std::string::npos) << Dom();
  Snapshot("job-failed");

  // ---- the paused job: its notice, and actions for an admin (priority set from the page) ----
  ASSERT_TRUE(browser_->Navigate(farm.api_url() + "/#/jobs/" + std::to_string(held)));
  ASSERT_TRUE(WaitForJobPage("hero-shot")) << Dom();
  ASSERT_EQ(Count("form[data-act=priority]"), 1) << Dom();
  EXPECT_NE(Text(".job-title").find("paused"), std::string::npos) << Text(".job-title");
  EXPECT_NE(Text(".actions").find("Resume"), std::string::npos) << Text(".actions");
  browser_->Evaluate(
      "const f = document.querySelector('form[data-act=priority]');"
      "f.elements.priority.value = 90; f.requestSubmit()");
  ASSERT_TRUE(browser_->WaitFor(
      "document.querySelector('.act-msg')?.textContent.includes('Priority set to 90')", 10s))
      << Dom();
  EXPECT_EQ(farm.Get("/api/v1/jobs/" + std::to_string(held))["job"]["priority"], 90);
  Snapshot("job-paused");

  // ---- workers ----
  ASSERT_TRUE(browser_->Navigate(farm.api_url() + "/#/workers"));
  ASSERT_TRUE(WaitForPage("workers")) << Dom();
  const std::string workers = Text("table.workers");
  EXPECT_NE(workers.find("render-a"), std::string::npos) << workers;
  EXPECT_NE(workers.find("render-b"), std::string::npos) << workers;
  EXPECT_EQ(Count(".health.ok"), 2) << "both workers were heard from just now";
  EXPECT_NE(workers.find("Simulated GPU 1"), std::string::npos) << workers;
  // Each GPU's reading and its utilisation and memory chart.
  EXPECT_TRUE(browser_->WaitFor(
      "document.querySelectorAll('.gpu-telemetry svg.sparkline path').length >= 4", 15s))
      << Dom();
  const std::string gpu_figures = Text(".gpu-telemetry[data-gpu='0']");
  EXPECT_NE(gpu_figures.find("GPU 0 · 42% · 6 GB / 24 GB · 58 °C"), std::string::npos)
      << gpu_figures;
  Snapshot("workers");

  // ---- farm ----
  ASSERT_TRUE(browser_->Navigate(farm.api_url() + "/#/farm"));
  ASSERT_TRUE(WaitForPage("farm")) << Dom();
  EXPECT_EQ(Count("svg.chart"), 2);
  EXPECT_NE(Text(".cards").find("Throughput"), std::string::npos);
  // Without autoscaler.groups the farm says so in one line.
  EXPECT_NE(Text(".no-autoscaler").find("no autoscaler"), std::string::npos) << Text("#view");
  EXPECT_EQ(Count("table.groups"), 0);
  Snapshot("farm");

  // ---- a viewer sees everything and can change nothing ----
  json viewer = farm.Post("/api/v1/tokens", {{"user", "vera"}, {"role", "viewer"}}, &status);
  ASSERT_EQ(status, 201) << viewer.dump();
  ASSERT_TRUE(browser_->Navigate(farm.api_url() + "/#/jobs/" + std::to_string(held) +
                                 "?token=" + viewer["token"].get<std::string>()));
  ASSERT_TRUE(
      browser_->WaitFor("document.querySelector('#who')?.textContent.includes('vera')", 10s))
      << Dom();
  ASSERT_TRUE(WaitForJobPage("hero-shot")) << Dom();
  EXPECT_EQ(Count(".actions"), 0) << Text("#view");
  EXPECT_NE(Text("#who").find("viewer"), std::string::npos);

  // ---- live: a job submitted while the page is open appears and finishes on it ----
  ASSERT_TRUE(browser_->Navigate(farm.api_url() + "/#/jobs"));
  ASSERT_TRUE(WaitForPage("jobs")) << Dom();
  ASSERT_EQ(Count("tr.job-row"), 3);
  browser_->Evaluate("window.__sameDocument = true");  // gone if the page reloads
  const int64_t live =
      farm.Submit("name: live-one\nscene: s\nframes: 1-2\n", TinySceneYaml(), &error);
  ASSERT_GT(live, 0) << error;
  const std::string live_row =
      "[...document.querySelectorAll('tr.job-row')].find(r => "
      "r.querySelector('.job-name').textContent === 'live-one')";
  EXPECT_TRUE(browser_->WaitFor(live_row, 15s)) << Dom();
  EXPECT_TRUE(browser_->WaitFor(live_row + "?.querySelector('.badge').textContent === 'done'", 60s))
      << Dom();
  EXPECT_EQ(browser_->Evaluate("window.__sameDocument === true"), json(true))
      << "the page was reloaded instead of updated";

  // ---- the scheduler goes away: a banner, and the page keeps what it showed ----
  farm.KillScheduler();
  ASSERT_TRUE(browser_->WaitFor("!document.getElementById('banner').hidden", 15s)) << Dom();
  EXPECT_NE(Text("#banner").find("Cannot reach the scheduler"), std::string::npos);
  EXPECT_EQ(Count("tr.job-row"), 4);
  Snapshot("unreachable");
}

// Money as the dashboard shows it: two decimals, four below 1 (0 as 0.00).
std::string Money(double amount) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), amount >= 1 || amount == 0 ? "%.2f" : "%.4f", amount);
  return buf;
}

TEST_F(DashboardTest, CostsAndTheAutoscaler) {
  LocalFarm farm("dash-autoscaler");
  // The group's provider runs `false`: the cloud never has capacity, so the group backs off and
  // the autoscaler says why. Workers outside a group cost the default price.
  farm.AppendSchedulerConfig(
      "autoscaler:\n"
      "  interval_s: 1\n"
      "  groups:\n"
      "    - name: spot\n"
      "      provider: {kind: command, create: ['false', '{name}'], terminate: ['false', "
      "'{id}']}\n"
      "      price_per_hour: 1.5\n"
      "      market: spot\n"
      "      max_nodes: 2\n"
      "cost:\n"
      "  default_price_per_hour: 0.5\n");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();

  // Jobs queued with no worker to run them: the autoscaler asks the group for nodes, the cloud
  // refuses, and the decision says why. One must never run on spot nodes, the other must be done
  // within two hours.
  std::string error;
  const int64_t job = farm.Submit("name: priced\nscene: s\nframes: 1-4\ninterruptible: false\n",
                                  TinySceneYaml(160, 100, 4), &error);
  ASSERT_GT(job, 0) << error;
  const std::time_t in_two_hours = std::time(nullptr) + 7200;
  std::tm tm{};
  gmtime_r(&in_two_hours, &tm);
  char deadline[32];
  std::strftime(deadline, sizeof(deadline), "%Y-%m-%dT%H:%M:%SZ", &tm);
  const int64_t rush =
      farm.Submit("name: rush\nscene: s\nframes: 1\ndeadline: '" + std::string(deadline) + "'\n",
                  TinySceneYaml(), &error);
  ASSERT_GT(rush, 0) << error;
  ASSERT_TRUE(WaitFor(
      [&] {
        json as = farm.Get("/api/v1/autoscaler");
        return as.is_object() && !as.value("decisions", json::array()).empty() &&
               !as.value("forecasts", json::array()).empty();
      },
      30s))
      << farm.Get("/api/v1/autoscaler").dump() << "\n"
      << farm.SchedulerLog();

  // ---- farm: cost cards, cost per day, the node group, the deadline and the decisions ----
  ASSERT_TRUE(browser_->Navigate(farm.api_url() + "/#token=" + farm.token()));
  ASSERT_TRUE(WaitForPage("jobs")) << Dom();
  ASSERT_TRUE(browser_->Navigate(farm.api_url() + "/#/farm"));
  ASSERT_TRUE(WaitForPage("farm")) << Dom();
  ASSERT_TRUE(browser_->WaitFor("document.querySelector('tr.decision td.reason')", 15s)) << Dom();
  EXPECT_EQ(Count("svg.chart"), 2);
  EXPECT_EQ(Count(".cost-cards .card"), 3) << Text("#view");
  const std::string cost = Text(".cost-cards");
  for (const char* title : {"Cost today", "Cost per hour", "GPU time today"}) {
    EXPECT_NE(cost.find(title), std::string::npos) << title << "\n" << cost;
  }
  EXPECT_EQ(Count("svg.bar-chart .tick"), 14 + 5) << "a bar per day and five grid lines";
  EXPECT_NE(Text(".cost .chart-title").find("Cost per day"), std::string::npos);
  EXPECT_EQ(Count(".no-autoscaler"), 0);
  EXPECT_EQ(Text("table.groups .group-name"), "spot") << Text(".autoscaler");
  EXPECT_NE(Text("table.groups").find("1.50"), std::string::npos) << Text("table.groups");
  const std::string rush_link = "table.forecasts a[href='#/jobs/" + std::to_string(rush) + "']";
  EXPECT_EQ(Count(rush_link), 1) << Text(".autoscaler");
  // The newest decision on the page is one the scheduler reports.
  const std::string shown = Text("tr.decision td.reason");
  ASSERT_FALSE(shown.empty());
  const json autoscaler = farm.Get("/api/v1/autoscaler");
  bool known = false;
  for (const json& d : autoscaler["decisions"]) known |= d["reason"] == shown;
  EXPECT_TRUE(known) << shown << "\n" << autoscaler.dump();
  EXPECT_LE(Count("tr.decision"), 15);
  Snapshot("farm-costs");
  browser_->Evaluate("document.querySelector('.autoscaler').scrollIntoView()");
  Snapshot("farm-autoscaler");

  // Then a worker outside the group renders both.
  ASSERT_TRUE(farm.StartWorker("render-a"));
  ASSERT_EQ(farm.WaitForJob(job, 60s)["state"], "done") << farm.SchedulerLog();
  ASSERT_EQ(farm.WaitForJob(rush, 60s)["state"], "done") << farm.SchedulerLog();

  // ---- the job: what it cost ----
  const json job_view = farm.Get("/api/v1/jobs/" + std::to_string(job))["job"];
  ASSERT_TRUE(browser_->Navigate(farm.api_url() + "/#/jobs/" + std::to_string(job)));
  ASSERT_TRUE(WaitForJobPage("priced")) << Dom();
  json facts = *browser_->Evaluate(
      "Object.fromEntries([...document.querySelectorAll('.facts div')].map(d => "
      "[d.querySelector('dt').textContent, d.querySelector('dd').textContent]))");
  EXPECT_EQ(facts["Cost"], Money(job_view["cost"].get<double>())) << facts.dump();
  EXPECT_TRUE(facts.contains("GPU time")) << facts.dump();
  EXPECT_FALSE(facts.contains("Deadline")) << "the job has no deadline";
  EXPECT_EQ(facts["Spot"], "never") << facts.dump();
  Snapshot("job-cost");

  // ---- the job with a deadline, met ----
  ASSERT_TRUE(browser_->Navigate(farm.api_url() + "/#/jobs/" + std::to_string(rush)));
  ASSERT_TRUE(WaitForJobPage("rush")) << Dom();
  facts = *browser_->Evaluate(
      "Object.fromEntries([...document.querySelectorAll('.facts div')].map(d => "
      "[d.querySelector('dt').textContent, d.querySelector('dd').textContent]))");
  EXPECT_FALSE(facts.contains("Spot")) << "spot nodes may run it";
  ASSERT_TRUE(facts.contains("Deadline")) << facts.dump();
  EXPECT_NE(facts["Deadline"].get<std::string>().find("on time"), std::string::npos)
      << facts.dump();
  Snapshot("job-deadline");

  // ---- workers: the price of a worker outside any group ----
  ASSERT_TRUE(browser_->Navigate(farm.api_url() + "/#/workers"));
  ASSERT_TRUE(WaitForPage("workers")) << Dom();
  const std::string workers = Text("table.workers");
  EXPECT_NE(workers.find("0.5000 / h"), std::string::npos) << workers;
  Snapshot("workers-cost");
  CloseBrowser();
}

// A file's size as the job page shows it: "812 B", "2.8 KB", "31.5 MB" (powers of 1024, one
// decimal below 100, none after it).
std::string FileSize(uint64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  const char* units[] = {"KB", "MB", "GB", "TB"};
  double value = bytes / 1024.0;
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(units)) {
    value /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), value >= 100 ? "%.0f" : "%.1f", value);
  std::string number = buf;
  if (number.size() > 2 && number.compare(number.size() - 2, 2, ".0") == 0) {
    number.resize(number.size() - 2);
  }
  return number + " " + units[unit];
}

// A JavaScript expression: how many requests the page has made for `path` (with its query) since
// the resource timings were last cleared.
std::string RequestsFor(const std::string& path) {
  return "performance.getEntriesByType('resource').filter(e => { const u = new URL(e.name); "
         "return u.pathname + u.search === " +
         Js(path) + "; }).length";
}

// A command job that returns a movie (ffmpeg encoding H.264): its page lists the file with its
// size and a download, and plays the movie in a <video> fed from a blob the page fetched with
// the token -- once, however often the page refreshes, and the player survives the refreshes.
TEST_F(DashboardTest, AReturnedMoviePlaysOnItsJobPage) {
  TSR_REQUIRE_TOOL("/usr/bin/ffmpeg",
                   "no job makes a movie for the job page to play (apt-get install ffmpeg)");
  LocalFarm farm("dash-movie");
  // The job names `ffmpeg`, as worker.command_programs must list it; the worker finds it on its
  // PATH, /usr/bin/ffmpeg.
  farm.set_command_programs({"ffmpeg"});
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("w1"));
  ASSERT_TRUE(farm.WaitForWorkers(1, 30s)) << farm.SchedulerLog();
  std::string error;
  const int64_t id = farm.Submit(
      "name: turntable\nrenderer: command\nframes: 1\nmax_retries: 0\n"
      "settings:\n"
      "  program: ffmpeg\n"
      "  argv: ['-hide_banner', '-loglevel', 'error', '-f', 'lavfi', '-i',\n"
      "         'testsrc=size=64x48:rate=10', '-frames:v', '10', '-c:v', 'libx264',\n"
      "         '-pix_fmt', 'yuv420p', 'movie.mp4']\n"
      "  outputs: files\n"
      "  files: [movie.mp4]\n",
      "", &error);
  ASSERT_GT(id, 0) << error;
  const json job = farm.WaitForJob(id, 60s);
  ASSERT_EQ(job["state"], "done") << job.dump() << "\n"
                                  << Tasks(farm, id).dump() << "\n"
                                  << farm.SchedulerLog();
  const std::string base = "/api/v1/jobs/" + std::to_string(id);
  const json listing = farm.Get(base + "/outputs");
  uint64_t size = 0;
  for (const json& f : listing["files"]) {
    if (f.value("name", "") == "movie.mp4") size = f["size"];
  }
  ASSERT_GT(size, 0u) << "the job returned no movie.mp4: " << listing.dump();

  ASSERT_TRUE(browser_->Navigate(farm.api_url() + "/#token=" + farm.token()));
  ASSERT_TRUE(WaitForPage("jobs")) << Dom();
  // From here on every request of the page is counted (each fetch leaves a resource timing), and
  // the size of every blob it makes an object URL of is noted.
  browser_->Evaluate(
      "performance.setResourceTimingBufferSize(10000); performance.clearResourceTimings();"
      "window.blobSizes = {};"
      "URL.createObjectURL = (create => (blob) => {"
      "  const url = create(blob); window.blobSizes[url] = blob.size; return url; })("
      "  URL.createObjectURL)");
  ASSERT_TRUE(browser_->Navigate(farm.api_url() + "/#/jobs/" + std::to_string(id)));
  ASSERT_TRUE(WaitForJobPage("turntable")) << Dom();
  const std::string video = "document.querySelector('.outputs:not([hidden]) .movies video')";
  ASSERT_TRUE(browser_->WaitFor(video + "?.src.startsWith('blob:')", 15s))
      << "no player for the movie\n"
      << Dom();
  EXPECT_EQ(Count(".movies video[controls][preload=metadata]"), 1) << Dom();
  EXPECT_EQ(Count("table.files tbody tr"), 1) << Dom();
  EXPECT_EQ(Text("table.files tbody tr .file-name"), "movie.mp4") << Dom();
  EXPECT_EQ(Text("table.files tbody tr td.num"), FileSize(size)) << Dom();
  EXPECT_EQ(Text("table.files button[data-act=download]"), "Download") << Dom();
  EXPECT_EQ(browser_->Evaluate("window.blobSizes[" + video + ".src]"), json(size));

  // Debian's headless Chromium decodes H.264 (canPlayType('video/mp4; codecs="avc1.42E01E"') is
  // "probably"): the player reads the movie's own size.
  ASSERT_TRUE(browser_->WaitFor(video + ".readyState >= 1 || " + video + ".error", 15s)) << Dom();
  const json meta = *browser_->Evaluate(
      "(v => ({error: v.error?.code ?? 0, message: v.error?.message ?? '', width: v.videoWidth, "
      "height: v.videoHeight}))(" +
      video + ")");
  EXPECT_EQ(meta["error"], 0) << "the browser could not play it: " << meta.dump();
  EXPECT_EQ(meta["width"], 64) << meta.dump();
  EXPECT_EQ(meta["height"], 48) << meta.dump();

  // Refreshes (as when the tab comes back into view) neither list the files again nor fetch the
  // movie again, and leave the player as it was.
  browser_->Evaluate(video + ".kept = true");
  for (int i = 0; i < 3; ++i) {
    const json before = *browser_->Evaluate(RequestsFor(base));
    browser_->Evaluate("document.dispatchEvent(new Event('visibilitychange'))");
    ASSERT_TRUE(browser_->WaitFor(RequestsFor(base) + " > " + before.dump(), 10s)) << Dom();
  }
  std::this_thread::sleep_for(1s);  // the last refresh paints
  EXPECT_EQ(browser_->Evaluate(RequestsFor(base + "/outputs?count=1")), json(1));
  EXPECT_EQ(browser_->Evaluate(RequestsFor(base + "/outputs/movie.mp4")), json(1));
  EXPECT_EQ(browser_->Evaluate(video + "?.kept === true"), json(true))
      << "a refresh replaced the player";

  // The download: the file fetched with the token, as an object URL handed to an <a download>
  // (whose click is recorded here instead of saving a file).
  browser_->Evaluate(
      "window.downloads = [];"
      "HTMLAnchorElement.prototype.click = function() {"
      "  window.downloads.push({name: this.download, size: window.blobSizes[this.href] ?? -1}); };"
      "document.querySelector('table.files button[data-act=download]').click()");
  ASSERT_TRUE(browser_->WaitFor("window.downloads.length === 1", 10s)) << Dom();
  EXPECT_EQ(browser_->Evaluate("window.downloads[0]"),
            json({{"name", "movie.mp4"}, {"size", size}}));

  browser_->Evaluate("document.querySelector('.outputs').scrollIntoView()");
  Snapshot("job-movie");
  CloseBrowser();
}

}  // namespace
}  // namespace tessera::testing
