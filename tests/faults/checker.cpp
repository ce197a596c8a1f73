#include "tests/faults/checker.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>

#include "shared/images/image_io.h"

namespace tessera::faults {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::WaitFor;
using namespace std::chrono_literals;

namespace {

std::string Tail(const std::string& text, size_t n = 6000) {
  return text.size() <= n ? text : "..." + text.substr(text.size() - n);
}

std::string FrameFile(const std::string& name, int frame, const std::string& format) {
  char buf[32];
  std::snprintf(buf, sizeof buf, ".%04d.", frame);
  return name + buf + format;
}

}  // namespace

uint64_t ScenarioSeed(const std::string& scenario) {
  uint64_t seed = 0;
  const char* env = std::getenv("TESSERA_FAULT_SEED");
  if (env != nullptr && *env != '\0') {
    seed = std::strtoull(env, nullptr, 10);
  } else {
    std::random_device rd;
    seed = (static_cast<uint64_t>(rd()) << 20 ^ rd()) % 1000000000ULL;
  }
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string test =
      info ? std::string(info->test_suite_name()) + "." + info->name() : scenario;
  std::printf("[faults] scenario %s: seed %" PRIu64 " (replay: TESSERA_FAULT_SEED=%" PRIu64
              " build/bin/faults_test --gtest_filter=%s)\n",
              scenario.c_str(), seed, seed, test.c_str());
  std::fflush(stdout);
  ::testing::Test::RecordProperty("fault_seed", std::to_string(seed));
  return seed;
}

std::chrono::milliseconds Between(std::mt19937_64& rng, int lo_ms, int hi_ms) {
  return std::chrono::milliseconds(std::uniform_int_distribution<int>(lo_ms, hi_ms)(rng));
}

void FaultLog::Add(const std::string& what) {
  const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  char at[32];
  std::snprintf(at, sizeof at, "t=%.2fs ", t);
  events.push_back(at + what);
  std::printf("[faults]   %s%s\n", at, what.c_str());
  std::fflush(stdout);
}

// ---- ApiProber -----------------------------------------------------------------------------

ApiProber::ApiProber(LocalFarm& farm) : farm_(farm) {
  thread_ = std::thread([this] { Run(); });
}

ApiProber::~ApiProber() {
  stop_ = true;
  thread_.join();
}

void ApiProber::SchedulerDown() { up_ = false; }

void ApiProber::SchedulerUp() {
  {
    std::lock_guard lock(mu_);
    url_ = farm_.api_url();
    token_ = farm_.token();
  }
  ++incarnation_;
  up_ = true;
}

ApiProber::Counts ApiProber::counts() {
  std::lock_guard lock(mu_);
  return counts_;
}

void ApiProber::Run() {
  auto next = std::chrono::steady_clock::now();
  while (!stop_) {
    next += 100ms;
    if (up_) {
      std::string url, token;
      {
        std::lock_guard lock(mu_);
        url = url_;
        token = token_;
      }
      const int run = incarnation_;
      for (const char* path : {"/healthz", "/api/v1/summary"}) {
        httplib::Client client(url);
        client.set_connection_timeout(2);
        client.set_read_timeout(5);
        httplib::Headers headers;
        if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
        const auto begin = std::chrono::steady_clock::now();
        httplib::Result res = client.Get(path, headers);
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin)
                .count();
        // A request the scenario's kill overlapped says nothing about the API.
        if (!up_ || incarnation_ != run) break;
        std::lock_guard lock(mu_);
        ++counts_.probes;
        if (res && res->status == 200) {
          const json body = json::parse(res->body, nullptr, /*allow_exceptions=*/false);
          if (std::string(path) == "/healthz" && body.is_object()) {
            const bool read_only = body.value("status", "") == "degraded";
            if (read_only && !read_only_) ++read_only_episodes_;
            read_only_ = read_only;
            counts_.degraded += read_only;
          }
          if (body.is_object() && body.contains("alerts") && body["alerts"].is_array()) {
            for (const json& a : body["alerts"]) {
              if (a.is_object()) counts_.alerts_seen.insert(a.value("kind", ""));
            }
          }
        }
        if (!res || res->status != 200) {
          ++counts_.failures;
          if (counts_.samples.size() < 5) {
            counts_.samples.push_back(std::string(path) + " in scheduler run " +
                                      std::to_string(run) + ": " +
                                      (res ? "HTTP " + std::to_string(res->status)
                                           : "no answer (" + httplib::to_string(res.error()) +
                                                 ") after " + std::to_string(ms) + " ms"));
          }
        }
      }
    }
    std::this_thread::sleep_until(next);
    if (std::chrono::steady_clock::now() > next + 1s) next = std::chrono::steady_clock::now();
  }
}

// ---- OutputWatcher -------------------------------------------------------------------------

OutputWatcher::OutputWatcher(const ApiProber& prober) : prober_(prober) {
  fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  EXPECT_GE(fd_, 0) << "inotify_init1 failed";
  thread_ = std::thread([this] { Run(); });
}

OutputWatcher::~OutputWatcher() {
  stop_ = true;
  thread_.join();
  if (fd_ >= 0) ::close(fd_);
}

void OutputWatcher::Watch(const std::string& dir) {
  std::lock_guard lock(mu_);
  pending_.insert(dir);
}

std::map<std::string, std::map<int, int>> OutputWatcher::Writes(const std::string& dir) {
  std::this_thread::sleep_for(200ms);  // the last events of the folder read by Run
  std::lock_guard lock(mu_);
  auto it = writes_.find(dir);
  return it == writes_.end() ? std::map<std::string, std::map<int, int>>{} : it->second;
}

void OutputWatcher::Run() {
  while (!stop_ && fd_ >= 0) {
    {
      std::lock_guard lock(mu_);
      for (auto it = pending_.begin(); it != pending_.end();) {
        std::error_code ec;
        if (!fs::is_directory(*it, ec)) {
          ++it;
          continue;
        }
        const int wd = ::inotify_add_watch(fd_, it->c_str(), IN_MOVED_TO | IN_CLOSE_WRITE);
        if (wd >= 0) watches_[wd] = *it;
        it = pending_.erase(it);
      }
    }
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    std::lock_guard lock(mu_);
    ReadEvents();
  }
}

void OutputWatcher::SchedulerKilled() {
  std::lock_guard lock(mu_);
  ReadEvents();
  ++kills_;
}

void OutputWatcher::ReadEvents() {
  alignas(inotify_event) char buf[64 * 1024];
  // The run: one per start (counted by kills here, not by the prober's start, which a restarted
  // scheduler may write before), and one per read-only episode the prober saw.
  const int run = 1 + kills_ + (prober_.run() - prober_.incarnation());
  for (ssize_t n; (n = ::read(fd_, buf, sizeof buf)) > 0;) {
    for (char* at = buf; at < buf + n;) {
      const auto* e = reinterpret_cast<const inotify_event*>(at);
      at += sizeof(inotify_event) + e->len;
      if (e->len == 0 || !watches_.count(e->wd)) continue;
      const std::string name = e->name;
      // Writers fill a hidden temporary file and rename it: the rename is the write.
      const bool temp = name[0] == '.' || (name.size() > 4 && name.ends_with(".tmp"));
      if ((e->mask & IN_MOVED_TO) || ((e->mask & IN_CLOSE_WRITE) && !temp)) {
        ++writes_[watches_[e->wd]][name][run];
      }
    }
  }
}

// ---- temporary files -----------------------------------------------------------------------

std::vector<std::string> LeftoverTempFiles(const std::string& root) {
  static const std::regex kImageTemp(R"(^\..+\.tmp-[0-9]+-[0-9]+$)");
  std::vector<std::string> found;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(
           root, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (std::regex_match(name, kImageTemp) || (name.size() > 4 && name.ends_with(".tmp"))) {
      found.push_back(it->path().string());
    }
  }
  return found;
}

// ---- Checker -------------------------------------------------------------------------------

int Checker::Check(const JobUnderTest& job, const FaultLog& faults, std::chrono::seconds deadline) {
  const auto start = std::chrono::steady_clock::now();
  int violations = 0;
  // No stuck task: the job (so every task) reaches a terminal state within the deadline.
  const json view = farm_.WaitForJob(job.job_id, deadline);
  const std::string state = view.is_object() ? view.value("state", "") : "";
  if (state != "done") {
    ADD_FAILURE() << "seed " << seed_ << ": job " << job.job_id << " is '" << state
                  << "', not done, " << deadline.count() << " s after the last fault\n"
                  << view.dump(2) << "\nscheduler log:\n"
                  << Tail(farm_.SchedulerLog());
    return 1;
  }
  // Counters agree with the expected task count and with each other.
  const json& counts = view["tasks"];
  for (const char* s : {"queued", "running", "failed", "canceled"}) {
    if (counts.value(s, -1) != 0) {
      ++violations;
      ADD_FAILURE() << "seed " << seed_ << ": job " << job.job_id << " done with " << s << " = "
                    << counts.value(s, -1);
    }
  }
  if (counts.value("total", -1) != job.expected_tasks ||
      counts.value("done", -1) != job.expected_tasks) {
    ++violations;
    ADD_FAILURE() << "seed " << seed_ << ": job " << job.job_id << " counts " << counts.dump()
                  << ", expected " << job.expected_tasks << " tasks all done";
  }
  if (job.storage == StorageFault::kDataFull) violations += CheckDataFull(job);
  violations += CheckTasks(job, view);
  violations += CheckFrames(job, view);
  violations += CheckWrites(job, view.value("output_dir", ""));
  if (job.storage == StorageFault::kOutputsFull) violations += CheckOutputsFull(job);
  const double check_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "[faults] job %" PRId64 " (%s) seed %" PRIu64
      ": %d faults survived (scheduler kills %d, worker kills %d, freezes %d, partitions %d, "
      "disk fills %d); %d tasks, %d violations; checked in %.1f s\n",
      job.job_id, job.name.c_str(), seed_, faults.total(), faults.scheduler_kills,
      faults.worker_kills, faults.freezes, faults.partitions, faults.storage_faults,
      job.expected_tasks, violations, check_s);
  std::fflush(stdout);
  return violations;
}

int Checker::CheckDataFull(const JobUnderTest& job) {
  int violations = 0;
  const ApiProber::Counts probes = prober_.counts();
  // Read-only rather than exiting: the run the scenario started is the only one, and it said so.
  if (prober_.incarnation() != 1) {
    ++violations;
    ADD_FAILURE() << "seed " << seed_ << ": job " << job.job_id << ": the scheduler ran "
                  << prober_.incarnation() << " times; a full data folder must not stop it";
  }
  if (probes.degraded == 0) {
    ++violations;
    ADD_FAILURE() << "seed " << seed_ << ": /healthz never said \"degraded\" while the data "
                  << "folder was full";
  }
  if (!probes.alerts_seen.count("data_full")) {
    ++violations;
    ADD_FAILURE() << "seed " << seed_ << ": no summary showed the data_full alert";
  }
  // Resumed by itself: the alert is gone.
  for (const json& a : farm_.Get("/api/v1/summary").value("alerts", json::array())) {
    if (a.value("kind", "") == "data_full") {
      ++violations;
      ADD_FAILURE() << "seed " << seed_ << ": the data_full alert is still active: " << a.dump();
    }
  }
  return violations;
}

int Checker::CheckTasks(const JobUnderTest& job, const json& view) {
  int violations = 0;
  json tasks = json::array();
  const std::string base = "/api/v1/jobs/" + std::to_string(job.job_id) + "/tasks?limit=1000";
  std::string after;
  for (int page = 0; page < 1000; ++page) {
    const json res = farm_.Get(base + after);
    if (!res.is_object() || !res.contains("tasks")) {
      ADD_FAILURE() << "seed " << seed_ << ": GET tasks failed: " << res.dump();
      return 1;
    }
    for (const json& t : res["tasks"]) tasks.push_back(t);
    if (!res.contains("next_after")) break;
    after = "&after=" + res["next_after"].dump();
  }
  if (tasks.size() != static_cast<size_t>(job.expected_tasks)) {
    ++violations;
    ADD_FAILURE() << "seed " << seed_ << ": job " << job.job_id << " has " << tasks.size()
                  << " task rows, expected " << job.expected_tasks;
  }
  int lost = 0, duplicated = 0, reruns = 0, charged = 0;
  for (const json& t : tasks) {
    const int64_t id = t.value("id", int64_t{0});
    const int attempt = t.value("attempt", 0);
    if (t.value("state", "") != "done") ++lost;
    if (t.value("failures", 0) != 0) ++charged;
    reruns += std::max(0, attempt - 1);
    // The attempt history: exactly one attempt ended done, the task's current one, on the worker
    // the task names; no attempt number twice, none past the counter; none still running once
    // the task is done; every charged failure counted in the task's failures_total (which no
    // retry resets). Every attempt has a row, logged or not (noop tasks log nothing).
    const json log = farm_.Get("/api/v1/tasks/" + std::to_string(id) + "/log");
    std::set<int> seen;
    int done = 0, running = 0, charged_failures = 0;
    for (const json& a : log.value("attempts", json::array())) {
      const int n = a.value("attempt", 0);
      const std::string outcome = a.value("outcome", a.value("state", ""));
      if (!seen.insert(n).second || n < 1 || n > attempt) {
        ++violations;
        ADD_FAILURE() << "seed " << seed_ << ": task " << id << " attempt history inconsistent "
                      << "with its counter (attempt " << attempt << "): " << log.dump(2);
      }
      if (outcome == "running") ++running;
      if (outcome == "failed" && a.value("charged", json()) == true) ++charged_failures;
      if (outcome == "done") {
        ++done;
        if (n != attempt || a.value("worker", json()) != t["worker_name"]) {
          ++violations;
          ADD_FAILURE() << "seed " << seed_ << ": task " << id << " done by attempt " << n << " on "
                        << a.value("worker", json()).dump() << " but the task says " << attempt
                        << " on " << t["worker_name"].dump();
        }
      }
    }
    if (static_cast<int>(seen.size()) != attempt) {
      ++violations;
      ADD_FAILURE() << "seed " << seed_ << ": task " << id << " started " << attempt
                    << " attempts but its history records " << seen.size() << ": " << log.dump(2);
    }
    if (done != 1) {
      if (done > 1) ++duplicated;
      ++violations;
      ADD_FAILURE() << "seed " << seed_ << ": task " << id << " has " << done
                    << " attempts that ended done (exactly one expected): " << log.dump(2);
    }
    if (running > 0) {
      ++violations;
      ADD_FAILURE() << "seed " << seed_ << ": task " << id << " is done but " << running
                    << " of its attempts are still recorded running: " << log.dump(2);
    }
    if (log.value("failures_total", 0) < charged_failures) {
      ++violations;
      ADD_FAILURE() << "seed " << seed_ << ": task " << id << " counts "
                    << log.value("failures_total", 0) << " failures in all but its history has "
                    << charged_failures << " charged failed attempts: " << log.dump(2);
    }
  }
  if (lost || charged) {
    violations += lost + charged;
    ADD_FAILURE() << "seed " << seed_ << ": " << lost << " tasks not done, " << charged
                  << " tasks charged a failure for a fault that was not theirs";
  }
  std::printf("[faults] job %" PRId64
              ": %zu tasks, lost %d, duplicated %d, re-run attempts %d, "
              "charged failures %d\n",
              job.job_id, tasks.size(), lost, duplicated, reruns, charged);
  return violations;
}

int Checker::CheckFrames(const JobUnderTest& job, const json& view) {
  int violations = 0;
  const std::string out = view.value("output_dir", "");
  if (job.reference_job_id == 0) return 0;
  const json ref_view = farm_.Get("/api/v1/jobs/" + std::to_string(job.reference_job_id))["job"];
  if (!ref_view.is_object() || ref_view.value("state", "") != "done") {
    ADD_FAILURE() << "reference job " << job.reference_job_id << " is not done: " << ref_view;
    return 1;
  }
  const std::string ref_out = ref_view.value("output_dir", "");
  std::set<std::string> expected;
  for (int f = job.first_frame; f <= job.last_frame; ++f) {
    for (const std::string& format : job.formats) {
      const std::string name = FrameFile(job.name, f, format);
      expected.insert(name);
      auto got = image::Read(out + "/" + name);
      auto ref = image::Read(ref_out + "/" + FrameFile(job.reference_name, f, format));
      if (!got.ok() || !ref.ok()) {
        ++violations;
        ADD_FAILURE() << "seed " << seed_ << ": frame " << f << " (" << format << ") missing: "
                      << (got.ok() ? ref.status().ToString() : got.status().ToString());
        continue;
      }
      if (got->width != ref->width || got->height != ref->height ||
          got->channels != ref->channels || got->pixels != ref->pixels) {
        ++violations;
        ADD_FAILURE() << "seed " << seed_ << ": " << name
                      << " differs from the fault-free reference render";
      }
    }
  }
  // Nothing else in the folder: no stray frame, and the split-frame parts are gone (removed
  // right after the commit that records the frame, which the API may report first).
  WaitFor([&] { return !fs::exists(out + "/.parts"); }, 10s);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(out, ec)) {
    const std::string name = e.path().filename().string();
    if (name == ".thumbnails" || expected.count(name)) continue;
    ++violations;
    ADD_FAILURE() << "seed " << seed_ << ": unexpected file in the output folder: " << e.path();
  }
  return violations;
}

int Checker::CheckWrites(const JobUnderTest& job, const std::string& output_dir) {
  int violations = 0, rewritten_after_restart = 0;
  for (const auto& [name, runs] : watcher_.Writes(output_dir)) {
    for (const auto& [run, n] : runs) {
      if (n > 1) {
        ++violations;
        ADD_FAILURE() << "seed " << seed_ << ": " << output_dir << "/" << name << " written " << n
                      << " times in scheduler run " << run << " (a duplicate output write)";
      }
    }
    // Written again by a later run: the frame was on disk but not yet recorded done when the
    // scheduler was killed, so the restarted one made it again (same pixels).
    if (runs.size() > 1) ++rewritten_after_restart;
  }
  if (rewritten_after_restart > 0) {
    std::printf(
        "[faults] job %" PRId64
        ": %d files written again in a later scheduler run (a restart, or a read-only episode)\n",
        job.job_id, rewritten_after_restart);
  }
  return violations;
}

int Checker::CheckOutputsFull(const JobUnderTest& job) {
  int violations = 0;
  // The job's events, from the start of the live stream: read until both were seen (or the
  // stream went quiet).
  const std::string held = "\"event\":\"outputs_full\",\"job_id\":" + std::to_string(job.job_id);
  const std::string back =
      "\"event\":\"outputs_space_back\",\"job_id\":" + std::to_string(job.job_id);
  httplib::Client client(farm_.api_url());
  client.set_bearer_token_auth(farm_.token());
  client.set_read_timeout(3, 0);
  std::string raw;
  (void)client.Get(
      "/api/v1/events?since=0", httplib::Headers{}, [&](const char* data, size_t size) {
        raw.append(data, size);
        return raw.find(held) == std::string::npos || raw.find(back) == std::string::npos;
      });
  for (const std::string* event : {&held, &back}) {
    if (raw.find(*event) != std::string::npos) continue;
    ++violations;
    ADD_FAILURE() << "seed " << seed_ << ": job " << job.job_id << " has no " << *event
                  << " event: the full outputs went unnoticed or never cleared";
  }
  // The alert cleared by itself (the job being done needs only the space back).
  const json alerts = farm_.Get("/api/v1/summary").value("alerts", json::array());
  for (const json& a : alerts) {
    if (a.value("kind", "") != "outputs_full") continue;
    ++violations;
    ADD_FAILURE() << "seed " << seed_ << ": an outputs_full alert is still active: " << a.dump();
  }
  std::printf("[faults] job %" PRId64 ": outputs full and back: events %s, alerts left %zu\n",
              job.job_id, violations == 0 ? "seen" : "missing", alerts.size());
  return violations;
}

int Checker::CheckFarm(const std::vector<std::string>& more_dirs) {
  int violations = 0;
  // Every result a worker spooled was acknowledged and dropped.
  std::vector<std::string> spooled;
  WaitFor(
      [&] {
        spooled.clear();
        std::error_code ec;
        for (auto it = fs::recursive_directory_iterator(farm_.dir(), ec);
             !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
          if (it->is_regular_file() && it->path().parent_path().filename() == "spool") {
            spooled.push_back(it->path().string());
          }
        }
        return spooled.empty();
      },
      10s, 200ms);
  for (const std::string& s : spooled) {
    ++violations;
    ADD_FAILURE() << "seed " << seed_ << ": a result left in a worker's spool: " << s;
  }
  std::vector<std::string> roots = more_dirs;
  roots.push_back(farm_.dir());
  for (const std::string& root : roots) {
    for (const std::string& temp : LeftoverTempFiles(root)) {
      ++violations;
      ADD_FAILURE() << "seed " << seed_ << ": leftover temporary file " << temp;
    }
  }
  const ApiProber::Counts c = prober_.counts();
  std::string samples;
  for (const std::string& s : c.samples) samples += "\n  " + s;
  if (c.probes == 0) {
    ++violations;
    ADD_FAILURE() << "the API prober made no request while the scheduler was up";
  }
  if (c.failures > 0) {
    ++violations;
    ADD_FAILURE() << "seed " << seed_ << ": the API failed " << c.failures << " of " << c.probes
                  << " probes while the scheduler was up:" << samples;
  }
  std::printf("[faults] farm: API probes %d, failures %d; spool empty: %s; temporary files: %s\n",
              c.probes, c.failures, spooled.empty() ? "yes" : "no",
              violations == 0 ? "none" : "see failures");
  std::fflush(stdout);
  return violations;
}

}  // namespace tessera::faults
