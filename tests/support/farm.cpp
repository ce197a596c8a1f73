#include "tests/support/farm.h"

#include <httplib.h>

#include <algorithm>
#include <filesystem>

namespace tessera::testing {

namespace fs = std::filesystem;

LocalFarm::LocalFarm(const std::string& name, int heartbeat_ms, int liveness)
    : dir_(MakeTempDir("tessera-" + name)) {
  // Loopback farms run unencrypted unless a test asks for CURVE (UseCurve).
  WriteFile(dir_ + "/scheduler.yaml",
            "broker:\n  security: insecure\n  heartbeat_ms: " + std::to_string(heartbeat_ms) +
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
  std::string api = "127.0.0.1:0", broker = broker_bind_;
  if (reuse_ports && !api_url_.empty()) {
    api = api_url_.substr(api_url_.find("://") + 3);
    broker = broker_endpoint_;
  }
  scheduler_ =
      Process::Start({Bin("tessera-scheduler"), "--config", dir_ + "/scheduler.yaml", "--data",
                      dir_ + "/data", "--api", api, "--broker", broker, "--log-level", log_level_},
                     dir_ + "/scheduler.log");
  bool ready =
      WaitFor([&] { return fs::exists(dir_ + "/data/scheduler.json") || !scheduler_.running(); },
              std::chrono::seconds(15));
  if (!ready || !scheduler_.running()) return false;
  auto info = nlohmann::json::parse(ReadFile(dir_ + "/data/scheduler.json"));
  api_url_ = info["api_url"].get<std::string>();
  broker_endpoint_ = info["broker_endpoint"].get<std::string>();
  // With api.auth: token (the default) the scheduler wrote the first admin token at first start.
  if (token_.empty() && fs::exists(dir_ + "/data/admin.token")) {
    token_ = ReadFile(dir_ + "/data/admin.token");
    while (!token_.empty() && (token_.back() == '\n' || token_.back() == '\r')) token_.pop_back();
  }
  return true;
}

void LocalFarm::KillScheduler(int sig) {
  scheduler_.Signal(sig);
  scheduler_.Wait(std::chrono::seconds(10));
}

bool LocalFarm::StartWorker(const std::string& name, int threads) {
  return StartWorkerWith(name, {"--threads", std::to_string(threads)});
}

bool LocalFarm::StartWorkerWith(const std::string& name, const std::vector<std::string>& extra,
                                const std::vector<std::string>& launcher) {
  workers_.erase(name);
  std::vector<std::string> argv = launcher;
  argv.insert(argv.end(), {Bin("tessera-worker"), "--scheduler", broker_endpoint_, "--name", name,
                           "--backend", "cpu"});
  argv.insert(argv.end(), extra.begin(), extra.end());
  if (std::find(extra.begin(), extra.end(), "--threads") == extra.end()) {
    argv.insert(argv.end(), {"--threads", "1"});
  }
  if (std::find(extra.begin(), extra.end(), "--command-program") == extra.end()) {
    for (const std::string& program : command_programs_) {
      argv.insert(argv.end(), {"--command-program", program});
    }
  }
  // Appended, so a test that restarts a worker keeps the whole story in one log.
  workers_.emplace(name, Process::Start(argv, dir_ + "/worker-" + name + ".log"));
  return workers_.at(name).running();
}

std::string LocalFarm::WorkerLog(const std::string& name) const {
  return ReadFile(dir_ + "/worker-" + name + ".log");
}

void LocalFarm::UseCurve() {
  std::string config = ReadFile(dir_ + "/scheduler.yaml");
  const std::string insecure = "security: insecure";
  config.replace(config.find(insecure), insecure.size(), "security: curve");
  WriteFile(dir_ + "/scheduler.yaml", config);
}

std::string LocalFarm::CreateJoinToken(std::string* public_key, int uses) {
  int status = 0;
  nlohmann::json res = Post("/api/v1/join-tokens", {{"note", "test"}, {"uses", uses}}, &status);
  if (status != 201 || !res.is_object()) return "";
  if (public_key) *public_key = res["scheduler_public_key"].get<std::string>();
  return res["token"].get<std::string>();
}

nlohmann::json LocalFarm::Request(const std::string& method, const std::string& path,
                                  const nlohmann::json* body, int* status) {
  httplib::Client cli(api_url_);
  cli.set_connection_timeout(2);
  cli.set_read_timeout(10);
  if (!ca_file_.empty()) cli.set_ca_cert_path(ca_file_);
  httplib::Headers headers;
  if (!token_.empty()) headers.emplace("Authorization", "Bearer " + token_);
  httplib::Result res = method == "GET" ? cli.Get(path, headers)
                        : method == "POST"
                            ? cli.Post(path, headers, body->dump(), "application/json")
                            : cli.Delete(path, headers);
  if (status) *status = res ? res->status : -1;
  if (!res) return nullptr;
  return nlohmann::json::parse(res->body, nullptr, false);
}

nlohmann::json LocalFarm::Get(const std::string& path, int* status) {
  return Request("GET", path, nullptr, status);
}

nlohmann::json LocalFarm::Post(const std::string& path, const nlohmann::json& body, int* status) {
  return Request("POST", path, &body, status);
}

int LocalFarm::Delete(const std::string& path) {
  int status = -1;
  Request("DELETE", path, nullptr, &status);
  return status;
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

nlohmann::json Tasks(LocalFarm& farm, int64_t job) {
  return farm.Get("/api/v1/jobs/" + std::to_string(job) + "/tasks")["tasks"];
}

}  // namespace tessera::testing
