// Integration tests for GET /metrics: a real scheduler and real workers render a split job, then
// the exposition is checked line by line and its numbers against the farm's own API, and a real
// Prometheus (when installed) scrapes the scheduler and answers queries with the same numbers.

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <regex>
#include <set>

#include "tests/support/farm.h"
#include "tests/support/require.h"

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr char kPrometheus[] = "/usr/bin/prometheus";

// ---- a strict reader of the text exposition format (0.0.4) -----------------------------------

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct Exposition {
  std::vector<Sample> samples;
  std::map<std::string, std::string> help, type;  // by metric family name
  std::vector<std::string> errors;                // what does not follow the format

  // The value of the series, or NaN when it is missing.
  double Value(const std::string& name, const std::map<std::string, std::string>& labels = {}) {
    for (const Sample& s : samples) {
      if (s.name == name && s.labels == labels) return s.value;
    }
    return std::nan("");
  }
  // The value of the series with the one label `label`="`value`", or NaN.
  double Value(const std::string& name, const std::string& label, const std::string& value) {
    return Value(name, std::map<std::string, std::string>{{label, value}});
  }
};

bool ParseValue(const std::string& text, double* value) {
  if (text == "NaN" || text == "+Inf" || text == "-Inf") {
    *value = text == "NaN" ? std::nan("") : text == "+Inf" ? HUGE_VAL : -HUGE_VAL;
    return true;
  }
  char* end = nullptr;
  *value = std::strtod(text.c_str(), &end);
  return !text.empty() && end == text.c_str() + text.size();
}

// Reads `{name="value",...}` at text[*pos] (on the '{'), unescaping the values.
bool ParseLabels(const std::string& text, size_t* pos, std::map<std::string, std::string>* out) {
  static const std::regex kLabelName("[a-zA-Z_][a-zA-Z0-9_]*");
  size_t i = *pos + 1;
  while (i < text.size() && text[i] != '}') {
    const size_t eq = text.find("=\"", i);
    if (eq == std::string::npos) return false;
    const std::string name = text.substr(i, eq - i);
    if (!std::regex_match(name, kLabelName)) return false;
    std::string value;
    for (i = eq + 2; i < text.size() && text[i] != '"'; ++i) {
      if (text[i] != '\\') {
        value += text[i];
        continue;
      }
      if (++i == text.size()) return false;
      if (text[i] == 'n') {
        value += '\n';
      } else if (text[i] == '\\' || text[i] == '"') {
        value += text[i];
      } else {
        return false;
      }
    }
    if (i == text.size() || !out->emplace(name, value).second) return false;
    ++i;  // the closing quote
    if (i < text.size() && text[i] == ',') {
      ++i;
    } else if (i < text.size() && text[i] != '}') {
      return false;
    }
  }
  if (i == text.size()) return false;
  *pos = i + 1;
  return true;
}

Exposition ParseExposition(const std::string& text) {
  static const std::regex kName("[a-zA-Z_:][a-zA-Z0-9_:]*");
  static const std::regex kMeta("# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)");
  static const std::set<std::string> kTypes = {"counter", "gauge", "histogram", "summary",
                                               "untyped"};
  Exposition out;
  std::set<std::string> series;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) {
      out.errors.push_back("the last line has no newline");
      nl = text.size();
    }
    const std::string line = text.substr(start, nl - start);
    start = nl + 1;
    auto error = [&](const std::string& why) { out.errors.push_back(why + ": '" + line + "'"); };
    std::smatch m;
    if (std::regex_match(line, m, kMeta)) {
      auto& field = m[1] == "HELP" ? out.help : out.type;
      if (!field.emplace(m[2], m[3]).second) error("repeated " + m[1].str());
      if (m[1] == "TYPE" && !kTypes.count(m[3])) error("unknown type");
      continue;
    }
    if (line.empty() || line[0] == '#') continue;  // blank lines and plain comments are allowed
    Sample s;
    size_t pos = line.find_first_of("{ ");
    s.name = line.substr(0, pos);
    if (!std::regex_match(s.name, kName)) {
      error("bad metric name");
      continue;
    }
    if (pos < line.size() && line[pos] == '{' && !ParseLabels(line, &pos, &s.labels)) {
      error("bad labels");
      continue;
    }
    if (pos >= line.size() || line[pos] != ' ' || !ParseValue(line.substr(pos + 1), &s.value)) {
      error("expected one space and a number after the series");
      continue;
    }
    if (!out.type.count(s.name)) error("sample before its TYPE line");
    if (!out.help.count(s.name)) error("sample before its HELP line");
    if (!series.insert(line.substr(0, pos)).second) error("repeated series");
    out.samples.push_back(std::move(s));
  }
  for (const auto& [name, type] : out.type) {
    if (type == "counter" && !name.ends_with("_total")) {
      out.errors.push_back("counter " + name + " does not end in _total");
    }
  }
  return out;
}

TEST(MetricsFormatTest, ReaderRejectsWhatPrometheusWould) {
  // The reader is the test's judge of the format: make sure it judges.
  const std::string good =
      "# HELP a_total A \\\\ help.\n# TYPE a_total counter\na_total{x=\"q\\\"\\n\\\\\"} 1.5\n";
  Exposition ok = ParseExposition(good);
  EXPECT_TRUE(ok.errors.empty()) << ok.errors.front();
  EXPECT_EQ(ok.Value("a_total", "x", "q\"\n\\"), 1.5);
  for (const std::string& bad : {
           std::string("# TYPE a gauge\na 1\n"),                      // no HELP
           std::string("# HELP a A.\na 1\n"),                         // no TYPE
           std::string("# HELP a A.\n# TYPE a gauge\na one\n"),       // not a number
           std::string("# HELP a A.\n# TYPE a gauge\na{x=\"1} 1\n"),  // unterminated label
           std::string("# HELP a A.\n# TYPE a gauge\na 1\na 2\n"),    // repeated series
           std::string("# HELP a A.\n# TYPE a counter\na 1\n"),       // counter without _total
           std::string("# HELP a A.\n# TYPE a gauge\na{x=\"1\"y=\"2\"} 1\n"),  // no comma
       }) {
    EXPECT_FALSE(ParseExposition(bad).errors.empty()) << bad;
  }
}

// ---- one farm for the suite: two workers, one finished split job ------------------------------

class MetricsTest : public ::testing::Test {
 protected:
  static constexpr int kFrames = 2;
  static constexpr int kTilesPerFrame = 2;

  static void TearDownTestSuite() { farm_.reset(); }

  void SetUp() override {
    if (!farm_ && setup_error_.empty()) setup_error_ = StartFarm();
    ASSERT_TRUE(setup_error_.empty()) << setup_error_;
  }

  // Starts the farm and renders the job; returns what went wrong, or "".
  static std::string StartFarm() {
    auto farm = std::make_unique<LocalFarm>("metrics");
    if (!farm->StartScheduler()) return "scheduler did not start:\n" + farm->SchedulerLog();
    if (!farm->StartWorker("w1") || !farm->StartWorker("w2") || !farm->WaitForWorkers(2, 20s)) {
      return "workers did not register:\n" + farm->SchedulerLog();
    }
    std::string error;
    job_id_ = farm->Submit("name: tiled\nscene: scene.yaml\nframes: 1-" + std::to_string(kFrames) +
                               "\ntiles: " + std::to_string(kTilesPerFrame) + "x1\n",
                           TinySceneYaml(64, 48, 4), &error);
    if (job_id_ <= 0) return "submit failed: " + error;
    job_ = farm->WaitForJob(job_id_, 60s);
    if (job_["state"] != "done") return "job did not finish: " + job_.dump(2);
    farm_ = std::move(farm);
    return "";
  }

  // GET /metrics as Prometheus would (with the farm's bearer token when API auth is on).
  static std::string Scrape(std::string* content_type = nullptr) {
    httplib::Client cli(farm_->api_url());
    cli.set_connection_timeout(2);
    cli.set_read_timeout(10);
    if (!farm_->token().empty()) cli.set_bearer_token_auth(farm_->token().c_str());
    auto res = cli.Get("/metrics");
    if (!res || res->status != 200) return "";
    if (content_type) *content_type = res->get_header_value("Content-Type");
    return res->body;
  }

  // Farm counts through the JSON API, to compare the metrics with.
  static int64_t TasksDone() {
    return farm_->Get("/api/v1/summary")["tasks"]["done"].get<int64_t>();
  }
  static int64_t IdleWorkers() {
    int64_t idle = 0;
    const nlohmann::json workers = farm_->Get("/api/v1/workers")["workers"];
    for (const auto& w : workers) idle += w["state"] == "idle";
    return idle;
  }

  static inline std::unique_ptr<LocalFarm> farm_;
  static inline std::string setup_error_;
  static inline int64_t job_id_ = 0;
  static inline nlohmann::json job_;
};

TEST_F(MetricsTest, ExpositionIsWellFormedAndCountsTheFinishedJob) {
  const int64_t tasks = job_["tasks"]["total"].get<int64_t>();
  ASSERT_EQ(tasks, kFrames * kTilesPerFrame);
  std::string content_type;
  Exposition m;
  // Workers are written idle in the pass that ends their last lease; give that a moment.
  ASSERT_TRUE(WaitFor(
      [&] {
        m = ParseExposition(Scrape(&content_type));
        return m.Value("tessera_workers", "state", "idle") == 2;
      },
      5s))
      << Scrape();
  EXPECT_EQ(content_type, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_TRUE(m.errors.empty()) << m.errors.size() << " format errors, first: " << m.errors[0];

  for (const char* state : {"queued", "running", "done", "failed", "canceled"}) {
    EXPECT_FALSE(std::isnan(m.Value("tessera_tasks", "state", state))) << state;
    EXPECT_FALSE(std::isnan(m.Value("tessera_jobs", "state", state))) << state;
  }
  for (const char* state : {"idle", "busy", "offline"}) {
    EXPECT_FALSE(std::isnan(m.Value("tessera_workers", "state", state))) << state;
  }
  EXPECT_EQ(m.Value("tessera_tasks", "state", "done"), tasks);
  EXPECT_EQ(m.Value("tessera_tasks", "state", "running"), 0);
  EXPECT_EQ(m.Value("tessera_jobs", "state", "done"), 1);
  EXPECT_EQ(m.Value("tessera_workers", "state", "busy"), 0);
  EXPECT_EQ(m.Value("tessera_queue_depth"), 0);
  EXPECT_EQ(m.Value("tessera_gpus"), 0) << "the test workers render on the CPU";
  EXPECT_GE(m.Value("tessera_tasks_dispatched_total"), tasks);
  EXPECT_EQ(m.Value("tessera_tasks_completed_total"), tasks);
  // The attempt history's outcomes: one done attempt per task, as the store recorded them.
  EXPECT_EQ(m.Value("tessera_attempts_total", "outcome", "done"), tasks);
  for (const char* outcome : {"lost", "handed_back", "canceled"}) {
    EXPECT_EQ(m.Value("tessera_attempts_total", "outcome", outcome), 0) << outcome;
  }
  EXPECT_GT(m.Value("tessera_render_seconds_total"), 0);
  EXPECT_EQ(m.Value("tessera_frames_assembled_total"), kFrames)
      << "each frame is assembled once from its tiles";
  EXPECT_GT(m.Value("tessera_assembly_seconds_total"), 0);
  EXPECT_EQ(m.Value("tessera_build_info", "version", TESSERA_VERSION), 1);
  const double started = m.Value("process_start_time_seconds");
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_GT(started, now - 600);
  EXPECT_LE(started, now);
}

// ---- a real Prometheus scraping the scheduler
// --------------------------------------------------

// A scrape config for the scheduler at `api_url`; with API auth on, Prometheus reads the admin
// token from its file (credentials_file), as a deployment would.
std::string PrometheusConfig(const std::string& api_url, const std::string& token_file) {
  const bool https = api_url.starts_with("https://");
  std::string yaml =
      "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
      "scrape_configs:\n  - job_name: tessera\n    metrics_path: /metrics\n"
      "    scheme: " +
      std::string(https ? "https" : "http") +
      "\n"
      "    static_configs:\n      - targets: ['" +
      api_url.substr(api_url.find("://") + 3) + "']\n";
  if (https) yaml += "    tls_config:\n      insecure_skip_verify: true\n";
  if (fs::exists(token_file)) {
    yaml += "    authorization:\n      type: Bearer\n      credentials_file: " + token_file + "\n";
  }
  return yaml;
}

// An instant query; the value of its single result, or NaN.
double Query(httplib::Client& prometheus, const std::string& promql) {
  auto res = prometheus.Get("/api/v1/query", httplib::Params{{"query", promql}}, {});
  if (!res || res->status != 200) return std::nan("");
  auto body = nlohmann::json::parse(res->body, nullptr, false);
  if (!body.is_object() || body["status"] != "success") return std::nan("");
  const auto& result = body["data"]["result"];
  if (!result.is_array() || result.size() != 1) return std::nan("");
  return std::stod(result[0]["value"][1].get<std::string>());
}

TEST_F(MetricsTest, RealPrometheusScrapesTheScheduler) {
  TSR_REQUIRE_TOOL(kPrometheus,
                   "no real Prometheus scrapes the scheduler (apt-get install prometheus)");
  const std::string dir = MakeTempDir("tessera-prometheus");
  ASSERT_FALSE(dir.empty());
  const std::string token_file = farm_->dir() + "/data/admin.token";
  WriteFile(dir + "/prometheus.yml", PrometheusConfig(farm_->api_url(), token_file));
  const int port = FreePort();
  ASSERT_GT(port, 0);
  Process prometheus = Process::Start({kPrometheus, "--config.file=" + dir + "/prometheus.yml",
                                       "--storage.tsdb.path=" + dir + "/tsdb",
                                       "--web.listen-address=127.0.0.1:" + std::to_string(port)},
                                      dir + "/prometheus.log");
  auto log = [&] {
    return "prometheus.yml:\n" + ReadFile(dir + "/prometheus.yml") + "\nprometheus log:\n" +
           ReadFile(dir + "/prometheus.log");
  };

  httplib::Client cli("127.0.0.1", port);
  cli.set_connection_timeout(1);
  cli.set_read_timeout(5);
  ASSERT_TRUE(WaitFor(
                  [&] {
                    auto res = cli.Get("/-/ready");
                    return (res && res->status == 200) || !prometheus.running();
                  },
                  20s, 100ms) &&
              prometheus.running())
      << log();
  EXPECT_TRUE(WaitFor([&] { return Query(cli, "up{job=\"tessera\"}") == 1; }, 15s, 200ms))
      << "the scrape of " << farm_->api_url() << "/metrics never succeeded\n"
      << log();

  // The farm is at rest: the latest scrape holds the same numbers as the API.
  const int64_t idle = IdleWorkers(), done = TasksDone();
  EXPECT_EQ(idle, 2);
  EXPECT_EQ(done, kFrames * kTilesPerFrame);
  EXPECT_EQ(Query(cli, "tessera_workers{state=\"idle\"}"), idle);
  EXPECT_EQ(Query(cli, "tessera_tasks{state=\"done\"}"), done);
  EXPECT_EQ(Query(cli, "tessera_tasks_completed_total"), done);

  prometheus.Stop(3000ms);
  std::error_code ec;
  if (!std::getenv("TESSERA_KEEP_TEST_DATA")) fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace tessera::testing
