#include "tests/support/farm.h"

#include <httplib.h>

#include <filesystem>

namespace tessera::testing {

namespace fs = std::filesystem;

LocalFarm::LocalFarm(const std::string& name, int heartbeat_ms, int liveness)
    : dir_(MakeTempDir("tessera-" + name)) {
  WriteFile(dir_ + "/scheduler.yaml", "broker:\n  heartbeat_ms: " + std::to_string(heartbeat_ms) +
                                          "\n  liveness: " + std::to_string(liveness) + "\n");
}

void LocalFarm::AppendSchedulerConfig(const std::string& yaml) {
  WriteFile(dir_ + "/scheduler.yaml", ReadFile(dir_ + "/scheduler.yaml") + yaml);
}

LocalFarm::~LocalFarm() {
  workers_.clear();  // stops every worker
  scheduler_.Stop();
  std::error_code ec;
  if (!std::getenv("TESSERA_KEEP_TEST_DATA")) fs::remove_all(dir_, ec);
}

bool LocalFarm::StartScheduler(bool reuse_ports) {
  std::error_code ec;
  fs::remove(dir_ + "/data/scheduler.json", ec);
  std::string api = "127.0.0.1:0", broker = "tcp://127.0.0.1:0";
  if (reuse_ports && !api_url_.empty()) {
    api = api_url_.substr(std::string("http://").size());
    broker = broker_endpoint_;
  }
  scheduler_ =
      Process::Start({Bin("tessera-scheduler"), "--config", dir_ + "/scheduler.yaml", "--data",
                      dir_ + "/data", "--api", api, "--broker", broker, "--log-level", "debug"},
                     dir_ + "/scheduler.log");
  bool ready =
      WaitFor([&] { return fs::exists(dir_ + "/data/scheduler.json") || !scheduler_.running(); },
              std::chrono::seconds(15));
  if (!ready || !scheduler_.running()) return false;
  auto info = nlohmann::json::parse(ReadFile(dir_ + "/data/scheduler.json"));
  api_url_ = info["api_url"].get<std::string>();
  broker_endpoint_ = info["broker_endpoint"].get<std::string>();
  return true;
}

void LocalFarm::KillScheduler(int sig) {
  scheduler_.Signal(sig);
  scheduler_.Wait(std::chrono::seconds(10));
}

bool LocalFarm::StartWorker(const std::string& name, int threads) {
  workers_.erase(name);
  workers_.emplace(
      name, Process::Start({Bin("tessera-worker"), "--scheduler", broker_endpoint_, "--name", name,
                            "--backend", "cpu", "--threads", std::to_string(threads)},
                           dir_ + "/worker-" + name + ".log"));
  return workers_.at(name).running();
}

nlohmann::json LocalFarm::Get(const std::string& path, int* status) {
  httplib::Client cli(api_url_);
  cli.set_connection_timeout(2);
  cli.set_read_timeout(10);
  auto res = cli.Get(path);
  if (status) *status = res ? res->status : -1;
  if (!res) return nullptr;
  return nlohmann::json::parse(res->body, nullptr, false);
}

nlohmann::json LocalFarm::Post(const std::string& path, const nlohmann::json& body, int* status) {
  httplib::Client cli(api_url_);
  cli.set_connection_timeout(2);
  cli.set_read_timeout(10);
  auto res = cli.Post(path, body.dump(), "application/json");
  if (status) *status = res ? res->status : -1;
  if (!res) return nullptr;
  return nlohmann::json::parse(res->body, nullptr, false);
}

int LocalFarm::Delete(const std::string& path) {
  httplib::Client cli(api_url_);
  cli.set_connection_timeout(2);
  cli.set_read_timeout(10);
  auto res = cli.Delete(path);
  return res ? res->status : -1;
}

int64_t LocalFarm::Submit(const std::string& job_yaml, const std::string& scene_yaml,
                          std::string* error) {
  int status = 0;
  nlohmann::json res =
      Post("/api/v1/jobs", {{"job_yaml", job_yaml}, {"scene_yaml", scene_yaml}}, &status);
  if (status != 201) {
    if (error) *error = res.is_object() ? res.value("error", res.dump()) : "no response";
    return -1;
  }
  return res["job"]["id"].get<int64_t>();
}

nlohmann::json LocalFarm::WaitForJob(int64_t id, std::chrono::seconds timeout) {
  nlohmann::json job;
  WaitFor(
      [&] {
        auto res = Get("/api/v1/jobs/" + std::to_string(id));
        if (!res.is_object() || !res.contains("job")) return false;
        job = res["job"];
        std::string state = job["state"];
        return state == "done" || state == "failed" || state == "canceled";
      },
      timeout, std::chrono::milliseconds(100));
  return job;
}

bool LocalFarm::WaitForWorkers(size_t n, std::chrono::seconds timeout) {
  return WaitFor(
      [&] {
        auto res = Get("/api/v1/workers");
        if (!res.is_object() || !res.contains("workers")) return false;
        size_t live = 0;
        for (const auto& w : res["workers"]) live += w["state"] != "offline";
        return live >= n;
      },
      timeout, std::chrono::milliseconds(100));
}

std::string LocalFarm::SchedulerLog() const { return ReadFile(dir_ + "/scheduler.log"); }

}  // namespace tessera::testing
