// What the dashboard and `tessera wait` read while a farm works, against a real scheduler and
// workers: the live event stream (server-sent events), the frames of a job with their
// thumbnails, each task attempt's log, the farm's history; and the CLI commands built on them
// (logs, wait, status --watch, completion).

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "shared/images/image_io.h"
#include "tests/support/farm.h"
#include "tests/support/process.h"

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

bool Contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

std::string JobYaml(const std::string& name, const std::string& frames,
                    const std::string& extra = "") {
  return "name: " + name + "\nscene: scene.yaml\nframes: " + frames + "\n" + extra;
}

// Reads GET /api/v1/events on a thread and keeps every event's data.
class EventReader {
 public:
  EventReader(const std::string& url, const std::string& token, const std::string& path)
      : client_(url) {
    client_.set_bearer_token_auth(token);
    client_.set_read_timeout(30, 0);
    thread_ = std::thread([this, path] {
      auto res = client_.Get(
          path, httplib::Headers{},
          [this](const httplib::Response& r) {
            status_ = r.status;
            return true;
          },
          [this](const char* data, size_t size) {
            std::lock_guard lock(mu_);
            raw_.append(data, size);
            return !stop_.load();
          });
      (void)res;
      done_ = true;
    });
  }
  ~EventReader() {
    stop_ = true;
    client_.stop();
    thread_.join();
  }
  // The events so far: (kind, data).
  std::vector<std::pair<std::string, nlohmann::json>> Events() {
    std::lock_guard lock(mu_);
    std::vector<std::pair<std::string, nlohmann::json>> out;
    size_t start = 0;
    for (size_t end; (end = raw_.find("\n\n", start)) != std::string::npos; start = end + 2) {
      std::string kind, data;
      std::istringstream lines(raw_.substr(start, end - start));
      for (std::string line; std::getline(lines, line);) {
        if (line.rfind("event: ", 0) == 0) kind = line.substr(7);
        if (line.rfind("data: ", 0) == 0) data = line.substr(6);
      }
      if (!kind.empty()) out.emplace_back(kind, nlohmann::json::parse(data, nullptr, false));
    }
    return out;
  }
  int status() const { return status_.load(); }
  bool done() const { return done_.load(); }

 private:
  httplib::Client client_;
  std::mutex mu_;
  std::string raw_;
  std::atomic<int> status_{0};
  std::atomic<bool> stop_{false};
  std::atomic<bool> done_{false};
  std::thread thread_;
};

TEST(ApiLiveTest, EventStreamFollowsAJobFromSubmitToLastFrame) {
  LocalFarm farm("live-events");
  farm.AppendSchedulerConfig("api:\n  max_event_streams: 1\n");  // room for one event stream
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("w1"));
  ASSERT_TRUE(farm.WaitForWorkers(1, 20s));

  auto reader = std::make_unique<EventReader>(farm.api_url(), farm.token(), "/api/v1/events");
  ASSERT_TRUE(WaitFor([&] { return reader->status() != 0; }, 10s));
  EXPECT_EQ(reader->status(), 200);
  // Streams are capped: a second one is turned away, requests still work.
  int status = 0;
  nlohmann::json busy = farm.Get("/api/v1/events", &status);
  EXPECT_EQ(status, 503) << busy.dump();
  EXPECT_TRUE(Contains(busy.value("error", ""), "too many open event streams")) << busy.dump();
  farm.Get("/api/v1/summary", &status);
  EXPECT_EQ(status, 200);

  std::string error;
  const int64_t job = farm.Submit(JobYaml("live", "1-2"), TinySceneYaml(), &error);
  ASSERT_GT(job, 0) << error;
  ASSERT_EQ(farm.WaitForJob(job, 60s).value("state", ""), "done");

  std::set<int> frames;
  bool job_event = false, worker_busy = false;
  int64_t last_seq = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        frames.clear();
        for (const auto& [kind, data] : reader->Events()) {
          EXPECT_GT(data.value("seq", int64_t{0}), last_seq) << data.dump();
          last_seq = data.value("seq", int64_t{0});
          EXPECT_EQ(data.value("kind", ""), kind);
          EXPECT_TRUE(data.contains("time"));
          if (kind == "job" && data.value("job_id", int64_t{0}) == job) job_event = true;
          if (kind == "frame" && data.value("job_id", int64_t{0}) == job) {
            frames.insert(data.value("frame", 0));
          }
          if (kind == "worker" && data.value("state", "") == "busy") worker_busy = true;
        }
        last_seq = 0;
        return frames.size() == 2 && job_event && worker_busy;
      },
      10s))
      << "frames " << frames.size() << " job " << job_event << " worker " << worker_busy;

  // A reader that comes back asks for what it missed. (The first stream's slot is freed when
  // the server next writes to it and finds it gone: at the latest with the 15 s keep-alive.)
  reader.reset();
  std::unique_ptr<EventReader> replay;
  ASSERT_TRUE(WaitFor(
      [&] {
        replay =
            std::make_unique<EventReader>(farm.api_url(), farm.token(), "/api/v1/events?since=0");
        WaitFor([&] { return replay->status() != 0; }, 5s);
        return replay->status() == 200;
      },
      30s, 500ms));
  ASSERT_TRUE(WaitFor([&] { return replay->Events().size() >= 3; }, 10s));
  EXPECT_EQ(replay->Events().front().second.value("seq", 0), 1);
  replay.reset();
  farm.Get("/api/v1/events?since=soon", &status);
  EXPECT_EQ(status, 400);
}

TEST(ApiLiveTest, FramesThumbnailsLogsAndHistory) {
  LocalFarm farm("live-frames");
  farm.AppendSchedulerConfig("api:\n  history_interval_s: 1\n");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("w1"));
  ASSERT_TRUE(farm.WaitForWorkers(1, 20s));
  std::string error;
  const int64_t job = farm.Submit(JobYaml("tiled", "1-2", "tiles: 2x1\n"), TinySceneYaml(), &error);
  ASSERT_GT(job, 0) << error;
  ASSERT_EQ(farm.WaitForJob(job, 60s).value("state", ""), "done");
  const std::string base = "/api/v1/jobs/" + std::to_string(job);

  nlohmann::json frames = farm.Get(base + "/frames");
  ASSERT_EQ(frames["frames"].size(), 2u) << frames.dump();
  for (const auto& f : frames["frames"]) {
    EXPECT_EQ(f["state"], "done");
    EXPECT_EQ(f["parts_total"], 2);
    EXPECT_EQ(f["parts_done"], 2);
    EXPECT_EQ(f["thumbnail"], true);
  }
  EXPECT_EQ(farm.Get(base + "/frames?first=2&count=1")["frames"].size(), 1u);
  // Tasks by state, in pages.
  EXPECT_EQ(farm.Get(base + "/tasks?state=done")["tasks"].size(), 4u);
  EXPECT_TRUE(farm.Get(base + "/tasks?state=failed")["tasks"].empty());
  nlohmann::json first_page = farm.Get(base + "/tasks?limit=3");
  ASSERT_EQ(first_page["tasks"].size(), 3u);
  nlohmann::json rest = farm.Get(base + "/tasks?after=" + first_page["next_after"].dump());
  ASSERT_EQ(rest["tasks"].size(), 1u) << rest.dump();
  EXPECT_FALSE(rest.contains("next_after"));
  int status = 0;
  farm.Get(base + "/frames?count=0", &status);
  EXPECT_EQ(status, 400);

  // The thumbnail: a PNG no larger than 256 px, sized like the 64x48 frame.
  httplib::Client cli(farm.api_url());
  cli.set_bearer_token_auth(farm.token());
  auto png = cli.Get(base + "/frames/2/thumbnail");
  ASSERT_TRUE(png);
  ASSERT_EQ(png->status, 200);
  EXPECT_EQ(png->get_header_value("Content-Type"), "image/png");
  const std::string file = farm.dir() + "/thumb.png";
  WriteFile(file, png->body);
  StatusOr<image::ImageBuffer> thumb = image::Read(file);
  ASSERT_TRUE(thumb.ok()) << thumb.status().ToString();
  EXPECT_EQ(thumb->width, 64);
  EXPECT_EQ(thumb->height, 48);
  EXPECT_EQ(cli.Get(base + "/frames/9/thumbnail")->status, 400);  // not one of its frames

  // Each attempt's log: what the path tracer did for its tile.
  nlohmann::json tasks = farm.Get(base + "/tasks")["tasks"];
  ASSERT_FALSE(tasks.empty());
  const int64_t task = tasks[0]["id"].get<int64_t>();
  nlohmann::json log = farm.Get("/api/v1/tasks/" + std::to_string(task) + "/log");
  ASSERT_EQ(log["attempts"].size(), 1u) << log.dump();
  EXPECT_EQ(log["attempts"][0]["worker"], "w1");
  EXPECT_EQ(log["attempts"][0]["state"], "done");
  EXPECT_TRUE(Contains(log["attempts"][0]["log"].get<std::string>(), "frame 1:")) << log.dump();

  // A renderer's own output reaches the log of the attempt that failed.
  const int64_t failing = farm.Submit(
      "name: chatty\nrenderer: command\nframes: 1\nmax_retries: 0\n"
      "settings: {program: echo, outputs: images, argv: ['hello-from-the-renderer']}\n",
      "", &error);
  ASSERT_GT(failing, 0) << error;
  ASSERT_EQ(farm.WaitForJob(failing, 30s).value("state", ""), "failed");
  const int64_t failed_task =
      farm.Get("/api/v1/jobs/" + std::to_string(failing) + "/tasks")["tasks"][0]["id"];
  const std::string cli_bin = Bin("tessera");
  RunResult logs = RunProcess({cli_bin, "logs", std::to_string(failed_task), "--server",
                               farm.api_url(), "--token", farm.token()},
                              30s);
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_TRUE(Contains(logs.out, "attempt 1: failed (render) on w1: ")) << logs.out;
  EXPECT_TRUE(Contains(logs.out, "hello-from-the-renderer")) << logs.out;
  EXPECT_TRUE(Contains(logs.out, "wrote no image")) << logs.out;

  // The history has a point a second: one taken after the tiled job counts its 4 tasks (the
  // job may finish between two samples, so wait for the next).
  nlohmann::json history;
  ASSERT_TRUE(WaitFor(
      [&] {
        history = farm.Get("/api/v1/history");
        const nlohmann::json& last = history["points"].back();
        return history["points"].size() >= 2 && last["done_total"].get<int64_t>() >= 4 &&
               last["workers_idle"].get<int64_t>() == 1 && last["running"].get<int64_t>() == 0;
      },
      10s))
      << history.dump();
  EXPECT_EQ(history["interval_s"], 1);
}

// The value of an unlabelled gauge in GET /metrics, or -1.
double Gauge(LocalFarm& farm, const std::string& name) {
  httplib::Client client(farm.api_url());
  client.set_bearer_token_auth(farm.token());
  auto res = client.Get("/metrics");
  if (!res || res->status != 200) return -1;
  std::istringstream lines(res->body);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  }
  return -1;
}

TEST(ApiLiveTest, CliWaitAndWatchFollowTheJobAndCompletionCompletes) {
  LocalFarm farm("live-cli");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  const std::vector<std::string> env = {"TESSERA_SERVER=" + farm.api_url(),
                                        "TESSERA_TOKEN=" + farm.token()};
  const std::string cli = Bin("tessera");
  std::string error;
  // No worker yet, so the job cannot start, let alone end, before `tessera wait` follows it.
  // Frames of about half a second each, so every task done is a change of its own.
  const int64_t job = farm.Submit(JobYaml("waited", "1-4"), TinySceneYaml(128, 96, 96), &error);
  ASSERT_GT(job, 0) << error;
  Process wait = Process::StartClient({cli, "wait", std::to_string(job), "--timeout", "120",
                                       "--server", farm.api_url(), "--token", farm.token()},
                                      farm.dir() + "/wait.err");
  // Its first line: the job is still queued, nothing done.
  const std::optional<std::string> first = wait.ReadLine(30s);
  ASSERT_TRUE(first.has_value()) << ReadFile(farm.dir() + "/wait.err");
  EXPECT_TRUE(Contains(*first, "queued") && Contains(*first, " 0/4 tasks done")) << *first;
  // And it follows the event stream (the scheduler counts the open stream) before work starts.
  ASSERT_TRUE(WaitFor([&] { return Gauge(farm, "tessera_api_event_streams") == 1; }, 10s))
      << "tessera wait never opened the event stream";
  ASSERT_EQ(farm.Get("/api/v1/jobs/" + std::to_string(job))["job"]["tasks"]["done"], 0);
  ASSERT_TRUE(farm.StartWorker("w1"));
  std::vector<std::string> lines = {*first};
  while (std::optional<std::string> line = wait.ReadLine(120s)) lines.push_back(*line);
  ASSERT_EQ(wait.Wait(10s), 0) << ReadFile(farm.dir() + "/wait.err");
  std::string all;
  for (const std::string& l : lines) all += l + "\n";
  // It saw the job run: each task done as it happened, then the end.
  EXPECT_TRUE(Contains(all, "running")) << all;
  for (int done = 1; done <= 3; ++done) {
    EXPECT_TRUE(Contains(all, " " + std::to_string(done) + "/4 tasks done")) << all;
  }
  EXPECT_TRUE(Contains(lines.back(), "job " + std::to_string(job) + " done")) << all;
  RunResult watch = RunProcess({cli, "status", std::to_string(job), "--watch"}, 30s, env);
  EXPECT_EQ(watch.exit_code, 0) << watch.err;
  EXPECT_TRUE(Contains(watch.out, "state      done")) << watch.out;

  RunResult help = RunProcess({cli, "--help"}, 10s);
  EXPECT_TRUE(Contains(help.out, "Exit codes: 0 success")) << help.out;
  EXPECT_TRUE(Contains(help.out, "4 the scheduler refused the credentials")) << help.out;

  // The completion script is valid bash and completes commands and options.
  RunResult script = RunProcess({cli, "completion", "bash"}, 10s);
  ASSERT_EQ(script.exit_code, 0);
  const std::string path = farm.dir() + "/tessera.bash";
  WriteFile(path, script.out);
  auto complete = [&](const std::string& words, int cword) {
    return RunProcess({"/bin/bash", "-c",
                       "source " + path + "; COMP_WORDS=(" + words + "); COMP_CWORD=" +
                           std::to_string(cword) + "; _tessera_complete; echo \"${COMPREPLY[*]}\""},
                      10s)
        .out;
  };
  EXPECT_EQ(complete("tessera tok", 1), "token\n");
  EXPECT_EQ(complete("tessera join-token cr", 2), "create\n");
  EXPECT_TRUE(Contains(complete("tessera token create --r", 3), "--role")) << "completion";
  EXPECT_EQ(RunProcess({cli, "completion", "fish"}, 10s).exit_code, 2);
}

}  // namespace
}  // namespace tessera::testing
