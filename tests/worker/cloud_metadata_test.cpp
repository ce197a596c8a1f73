// Cloud instance metadata and the spot-interruption watcher, against a metadata service played by
// a small HTTP server on 127.0.0.1 that answers each provider's documented paths.
#include "worker/cloud_metadata.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "worker/worker_config.h"

namespace tessera::worker {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// An instance metadata service: fixed answers per "METHOD PATH" (404 for anything else), an
// optional gate every request must pass first, and a record of what was asked.
class MetadataStub {
 public:
  using Gate = std::function<bool(const httplib::Request&, httplib::Response&)>;

  MetadataStub() {
    auto handle = [this](const httplib::Request& req, httplib::Response& res) { Handle(req, res); };
    server_.Get(".*", handle);
    server_.Put(".*", handle);
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // stop() before the accept loop runs would be lost and the join would hang.
    while (!server_.is_running()) std::this_thread::sleep_for(1ms);
  }
  ~MetadataStub() {
    server_.stop();
    thread_.join();
  }

  std::string Url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  void Serve(const std::string& method, const std::string& path, int status,
             const std::string& body) {
    std::lock_guard<std::mutex> lock(mu_);
    routes_[method + " " + path] = {status, body};
  }
  void SetGate(Gate gate) {
    std::lock_guard<std::mutex> lock(mu_);
    gate_ = std::move(gate);
  }
  std::vector<std::string> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  int CountOf(const std::string& request) const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(std::count(requests_.begin(), requests_.end(), request));
  }

 private:
  void Handle(const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back(req.method + " " + req.path);
    if (gate_ && !gate_(req, res)) return;
    auto it = routes_.find(req.method + " " + req.path);
    if (it == routes_.end()) {
      res.status = 404;
      return;
    }
    res.status = it->second.first;
    res.set_content(it->second.second, "text/plain");
  }

  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mu_;
  std::map<std::string, std::pair<int, std::string>> routes_;
  Gate gate_;
  std::vector<std::string> requests_;
};

// A port on 127.0.0.1 that refuses connections: bound, never listening, held for the test.
class RefusingPort {
 public:
  RefusingPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) == 0) {
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
      port_ = ntohs(addr.sin_port);
    }
  }
  ~RefusingPort() { ::close(fd_); }
  std::string Url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// The AWS stub enforces IMDSv2: every GET needs the token that a PUT api/token (with a TTL
// header) handed out.
void ServeAws(MetadataStub& stub, const std::string& lifecycle) {
  stub.Serve("PUT", "/latest/api/token", 200, "token-abc");
  stub.Serve("GET", "/latest/meta-data/instance-type", 200, "g5.xlarge");
  stub.Serve("GET", "/latest/meta-data/placement/region", 200, "us-east-1");
  stub.Serve("GET", "/latest/meta-data/placement/availability-zone", 200, "us-east-1a");
  stub.Serve("GET", "/latest/meta-data/instance-life-cycle", 200, lifecycle);
  stub.SetGate([](const httplib::Request& req, httplib::Response& res) {
    if (req.method == "PUT") {
      if (req.get_header_value("X-aws-ec2-metadata-token-ttl-seconds").empty()) {
        res.status = 400;
        return false;
      }
      return true;
    }
    if (req.get_header_value("X-aws-ec2-metadata-token") != "token-abc") {
      res.status = 401;
      return false;
    }
    return true;
  });
}

void ServeGcp(MetadataStub& stub, const std::string& preemptible) {
  const std::string base = "/computeMetadata/v1/";
  stub.Serve("GET", base + "instance/machine-type", 200,
             "projects/123456789/machineTypes/n1-standard-8");
  stub.Serve("GET", base + "instance/zone", 200, "projects/123456789/zones/europe-west4-b");
  stub.Serve("GET", base + "instance/scheduling/preemptible", 200, preemptible);
  stub.Serve("GET", base + "instance/preempted", 200, "FALSE");
  stub.SetGate([](const httplib::Request& req, httplib::Response& res) {
    if (req.get_header_value("Metadata-Flavor") != "Google") {
      res.status = 403;
      return false;
    }
    return true;
  });
}

CloudConfig Config(const std::string& provider, const std::string& metadata_url,
                   int poll_interval_ms = 100) {
  CloudConfig c;
  c.provider = provider;
  c.metadata_url = metadata_url;
  c.poll_interval_ms = poll_interval_ms;
  return c;
}

// Collects notices; waits for them.
class NoticeSink {
 public:
  std::function<void(std::string)> Callback() {
    return [this](std::string reason) {
      std::lock_guard<std::mutex> lock(mu_);
      reasons_.push_back(std::move(reason));
      cv_.notify_all();
    };
  }
  bool WaitForOne(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [this] { return !reasons_.empty(); });
  }
  std::vector<std::string> reasons() {
    std::lock_guard<std::mutex> lock(mu_);
    return reasons_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> reasons_;
};

bool WaitUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!done()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

// ---- ProbeCloud -------------------------------------------------------------------------------

TEST(ProbeCloud, AwsUsesImdsV2AndReportsASpotInstance) {
  MetadataStub stub;
  ServeAws(stub, "spot");
  StatusOr<protocol::CloudInfo> info = ProbeCloud(Config("aws", stub.Url("/latest/")));
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->provider, "aws");
  EXPECT_EQ(info->instance_type, "g5.xlarge");
  EXPECT_EQ(info->region, "us-east-1");
  EXPECT_EQ(info->zone, "us-east-1a");
  EXPECT_EQ(info->lifecycle, "spot");
  EXPECT_EQ(stub.CountOf("PUT /latest/api/token"), 1) << "one IMDSv2 token for the whole probe";
  EXPECT_EQ(stub.CountOf("GET /latest/meta-data/instance-type"), 1)
      << "no GET was refused for a missing token";
}

TEST(ProbeCloud, AwsOnDemandInstance) {
  MetadataStub stub;
  ServeAws(stub, "on-demand");
  StatusOr<protocol::CloudInfo> info = ProbeCloud(Config("aws", stub.Url("/latest")));
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->lifecycle, "on-demand");
  EXPECT_EQ(info->instance_type, "g5.xlarge") << "a metadata_url without the final / works too";
}

TEST(ProbeCloud, AwsWithoutATokenEndpointIsUnavailable) {
  MetadataStub stub;  // answers 404 to everything, like a server that is not IMDS
  StatusOr<protocol::CloudInfo> info = ProbeCloud(Config("aws", stub.Url("/latest/")));
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(info.status().message(), HasSubstr("IMDSv2 token: HTTP 404"));
  EXPECT_EQ(stub.requests().size(), 1u) << "nothing else is asked once the first request fails";
}

TEST(ProbeCloud, GcpSendsMetadataFlavorAndDerivesTheRegion) {
  MetadataStub stub;
  ServeGcp(stub, "TRUE");
  StatusOr<protocol::CloudInfo> info = ProbeCloud(Config("gcp", stub.Url("/computeMetadata/v1/")));
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->provider, "gcp");
  EXPECT_EQ(info->instance_type, "n1-standard-8");
  EXPECT_EQ(info->zone, "europe-west4-b");
  EXPECT_EQ(info->region, "europe-west4");
  EXPECT_EQ(info->lifecycle, "spot");

  ServeGcp(stub, "FALSE");
  info = ProbeCloud(Config("gcp", stub.Url("/computeMetadata/v1/")));
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->lifecycle, "on-demand");
}

TEST(ProbeCloud, AlibabaPaths) {
  MetadataStub stub;
  const std::string base = "/latest/meta-data/";
  stub.Serve("GET", base + "instance/instance-type", 200, "ecs.gn7i-c8g1.2xlarge");
  stub.Serve("GET", base + "region-id", 200, "cn-hangzhou");
  stub.Serve("GET", base + "zone-id", 200, "cn-hangzhou-i\n");
  StatusOr<protocol::CloudInfo> info = ProbeCloud(Config("alibaba", stub.Url(base)));
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->provider, "alibaba");
  EXPECT_EQ(info->instance_type, "ecs.gn7i-c8g1.2xlarge");
  EXPECT_EQ(info->region, "cn-hangzhou");
  EXPECT_EQ(info->zone, "cn-hangzhou-i") << "answers are trimmed";
  EXPECT_EQ(info->lifecycle, "") << "Alibaba publishes no lifecycle";
}

TEST(ProbeCloud, TencentPaths) {
  MetadataStub stub;
  const std::string base = "/latest/meta-data/";
  stub.Serve("GET", base + "instance/instance-type", 200, "GN7.2XLARGE32");
  stub.Serve("GET", base + "placement/region", 200, "ap-guangzhou");
  stub.Serve("GET", base + "placement/zone", 200, "ap-guangzhou-3");
  StatusOr<protocol::CloudInfo> info = ProbeCloud(Config("tencent", stub.Url(base)));
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->provider, "tencent");
  EXPECT_EQ(info->instance_type, "GN7.2XLARGE32");
  EXPECT_EQ(info->region, "ap-guangzhou");
  EXPECT_EQ(info->zone, "ap-guangzhou-3");
}

TEST(ProbeCloud, MissingOptionalItemsAreLeftEmpty) {
  MetadataStub stub;
  stub.Serve("GET", "/latest/meta-data/instance/instance-type", 200, "S5.MEDIUM4");
  StatusOr<protocol::CloudInfo> info =
      ProbeCloud(Config("tencent", stub.Url("/latest/meta-data/")));
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->instance_type, "S5.MEDIUM4");
  EXPECT_EQ(info->region, "");
  EXPECT_EQ(info->zone, "");
}

TEST(ProbeCloud, ProviderNoneSendsNothing) {
  MetadataStub stub;
  ServeAws(stub, "spot");
  StatusOr<protocol::CloudInfo> info = ProbeCloud(Config("none", stub.Url("/latest/")));
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->provider, "");
  EXPECT_EQ(info->instance_type, "");

  SpotNoticeWatcher watcher(Config("none", stub.Url("/latest/")));
  NoticeSink sink;
  ASSERT_TRUE(watcher.Start(sink.Callback()).ok());
  std::this_thread::sleep_for(300ms);
  watcher.Stop();
  EXPECT_TRUE(stub.requests().empty());
  EXPECT_TRUE(sink.reasons().empty());
}

TEST(ProbeCloud, UnreachableEndpointFailsQuickly) {
  RefusingPort refusing;
  ASSERT_GT(refusing.port(), 0);
  for (const char* provider : {"aws", "gcp", "alibaba", "tencent"}) {
    const auto start = Clock::now();
    StatusOr<protocol::CloudInfo> info = ProbeCloud(Config(provider, refusing.Url("/latest/")));
    EXPECT_LT(Clock::now() - start, 2500ms) << provider;
    ASSERT_FALSE(info.ok()) << provider;
    EXPECT_EQ(info.status().code(), StatusCode::kUnavailable) << provider;
    EXPECT_THAT(info.status().message(), StartsWith(std::string(provider) + " instance metadata"));
  }
}

TEST(ProbeCloud, InvalidConfigIsRejectedWithoutTraffic) {
  MetadataStub stub;
  StatusOr<protocol::CloudInfo> info = ProbeCloud(Config("azure", stub.Url("/")));
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(stub.requests().empty());
}

// ---- config -----------------------------------------------------------------------------------

TEST(CloudConfig, BadValuesNameTheField) {
  auto message = [](CloudConfig c) { return ValidateCloudConfig(c).message(); };
  EXPECT_TRUE(ValidateCloudConfig(CloudConfig{}).ok());
  CloudConfig c;
  c.provider = "azure";
  EXPECT_THAT(message(c), StartsWith("cloud.provider: 'azure'"));
  c = Config("aws", "ftp://169.254.169.254/latest/");
  EXPECT_THAT(message(c), StartsWith("cloud.metadata_url: "));
  c = Config("aws", "http:///latest/");
  EXPECT_THAT(message(c), StartsWith("cloud.metadata_url: ")) << "a URL needs a host";
  c = Config("aws", "");
  c.spot_notice_url = "169.254.169.254/latest/meta-data/spot/instance-action";
  EXPECT_THAT(message(c), StartsWith("cloud.spot_notice_url: "));
  c = Config("gcp", "", 99);
  EXPECT_THAT(message(c), StartsWith("cloud.poll_interval_ms: 99 is not in 100..600000"));
  c = Config("gcp", "", 600001);
  EXPECT_THAT(message(c), StartsWith("cloud.poll_interval_ms: "));
  EXPECT_TRUE(ValidateCloudConfig(Config("gcp", "https://metadata.example/v1/", 100)).ok());
  EXPECT_TRUE(ValidateCloudConfig(Config("tencent", "", 600000)).ok());
}

TEST(CloudConfig, EmptyUrlsMeanTheProvidersEndpoints) {
  EXPECT_EQ(EffectiveMetadataUrl(Config("aws", "")), "http://169.254.169.254/latest/");
  EXPECT_EQ(EffectiveSpotNoticeUrl(Config("aws", "")),
            "http://169.254.169.254/latest/meta-data/spot/instance-action");
  EXPECT_EQ(EffectiveSpotNoticeUrl(Config("gcp", "")),
            "http://metadata.google.internal/computeMetadata/v1/instance/preempted");
  EXPECT_EQ(EffectiveSpotNoticeUrl(Config("alibaba", "")),
            "http://100.100.100.200/latest/meta-data/instance/spot/termination-time");
  EXPECT_EQ(EffectiveSpotNoticeUrl(Config("tencent", "")),
            "http://metadata.tencentyun.com/latest/meta-data/spot/termination-time");
  CloudConfig c = Config("aws", "http://10.0.0.1:8080/latest");
  EXPECT_EQ(EffectiveMetadataUrl(c), "http://10.0.0.1:8080/latest/");
  c.spot_notice_url = "http://10.0.0.2/notice";
  EXPECT_EQ(EffectiveSpotNoticeUrl(c), "http://10.0.0.2/notice");
  EXPECT_EQ(EffectiveMetadataUrl(Config("none", "")), "");
}

TEST(CloudConfig, WorkerConfigSectionAndEnvironmentOverrides) {
  StatusOr<WorkerConfig> c = ParseWorkerConfig(YAML::Load("{}"), "host-a");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->cloud.provider, "none");
  EXPECT_EQ(c->cloud.metadata_url, "");
  EXPECT_EQ(c->cloud.spot_notice_url, "");
  EXPECT_EQ(c->cloud.poll_interval_ms, 5000);

  c = ParseWorkerConfig(YAML::Load("cloud:\n  provider: gcp\n  poll_interval_ms: 2000\n"
                                   "  metadata_url: http://127.0.0.1:1/v1/\n"
                                   "  spot_notice_url: http://127.0.0.1:1/notice\n"),
                        "host-a");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->cloud.provider, "gcp");
  EXPECT_EQ(c->cloud.poll_interval_ms, 2000);
  EXPECT_EQ(c->cloud.metadata_url, "http://127.0.0.1:1/v1/");
  EXPECT_EQ(c->cloud.spot_notice_url, "http://127.0.0.1:1/notice");

  c = ParseWorkerConfig(YAML::Load("cloud:\n  provider: azure\n"), "host-a");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), StartsWith("cloud.provider: "));
  c = ParseWorkerConfig(YAML::Load("cloud:\n  region: us-east-1\n"), "host-a");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("cloud.region"));

  std::string a = "TESSERA_CLOUD_PROVIDER=aws";
  std::string b = "TESSERA_CLOUD_POLL_INTERVAL_MS=250";
  std::string d = "TESSERA_CLOUD_METADATA_URL=http://127.0.0.1:2/latest/";
  char* env[] = {a.data(), b.data(), d.data(), nullptr};
  std::string path = ::testing::TempDir() + "/worker_cloud.yaml";
  {
    FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("cloud:\n  provider: gcp\n  poll_interval_ms: 1000\n", f);
    std::fclose(f);
  }
  ConfigFlags flags;
  flags.config_path = path;
  c = LoadWorkerConfig(flags, env, "host-a");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->cloud.provider, "aws") << "the environment beats the file";
  EXPECT_EQ(c->cloud.poll_interval_ms, 250);
  EXPECT_EQ(c->cloud.metadata_url, "http://127.0.0.1:2/latest/");
}

// ---- SpotNoticeWatcher ------------------------------------------------------------------------

TEST(SpotNoticeWatcher, AwsFiresOnceWhenTheInstanceActionAppears) {
  MetadataStub stub;
  ServeAws(stub, "spot");
  const std::string notice = "GET /latest/meta-data/spot/instance-action";
  SpotNoticeWatcher watcher(Config("aws", stub.Url("/latest/")));
  NoticeSink sink;
  ASSERT_TRUE(watcher.Start(sink.Callback()).ok());
  ASSERT_TRUE(WaitUntil([&] { return stub.CountOf(notice) >= 3; }, 5s)) << "404s: keep polling";
  EXPECT_TRUE(sink.reasons().empty());

  stub.Serve("GET", "/latest/meta-data/spot/instance-action", 200,
             R"({"action": "terminate", "time": "2026-12-02T20:40:00Z"})");
  ASSERT_TRUE(sink.WaitForOne(5s));
  const int polls = stub.CountOf(notice);
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(sink.reasons(), std::vector<std::string>{
                                "aws spot instance-action: terminate at 2026-12-02T20:40:00Z"});
  EXPECT_EQ(stub.CountOf(notice), polls) << "polling stops after the notice";
  EXPECT_EQ(stub.CountOf("PUT /latest/api/token"), 1) << "the IMDSv2 token is reused";
  watcher.Stop();
}

TEST(SpotNoticeWatcher, GcpFalseThenTrue) {
  MetadataStub stub;
  ServeGcp(stub, "TRUE");
  const std::string path = "/computeMetadata/v1/instance/preempted";
  SpotNoticeWatcher watcher(Config("gcp", stub.Url("/computeMetadata/v1/")));
  NoticeSink sink;
  ASSERT_TRUE(watcher.Start(sink.Callback()).ok());
  ASSERT_TRUE(WaitUntil([&] { return stub.CountOf("GET " + path) >= 2; }, 5s));
  EXPECT_TRUE(sink.reasons().empty()) << "FALSE is no notice";
  stub.Serve("GET", path, 200, "TRUE");
  ASSERT_TRUE(sink.WaitForOne(5s));
  EXPECT_EQ(sink.reasons(), std::vector<std::string>{"gcp instance preempted"});
}

TEST(SpotNoticeWatcher, AlibabaAndTencentTerminationTime) {
  for (const std::string provider : {"alibaba", "tencent"}) {
    MetadataStub stub;
    const std::string path = provider == "alibaba"
                                 ? "/latest/meta-data/instance/spot/termination-time"
                                 : "/latest/meta-data/spot/termination-time";
    SpotNoticeWatcher watcher(Config(provider, stub.Url("/latest/meta-data/")));
    NoticeSink sink;
    ASSERT_TRUE(watcher.Start(sink.Callback()).ok());
    ASSERT_TRUE(WaitUntil([&] { return stub.CountOf("GET " + path) >= 2; }, 5s)) << provider;
    EXPECT_TRUE(sink.reasons().empty());
    stub.Serve("GET", path, 200, "2026-12-02T20:40:00Z");
    ASSERT_TRUE(sink.WaitForOne(5s)) << provider;
    EXPECT_EQ(sink.reasons(), std::vector<std::string>{
                                  provider + " spot termination-time: " + "2026-12-02T20:40:00Z"});
  }
}

TEST(SpotNoticeWatcher, SpotNoticeUrlOverridesThePath) {
  MetadataStub stub;
  CloudConfig config = Config("tencent", stub.Url("/latest/meta-data/"));
  config.spot_notice_url = stub.Url("/custom/notice");
  stub.Serve("GET", "/custom/notice", 200, "2026-12-02 12:05:33");
  SpotNoticeWatcher watcher(config);
  NoticeSink sink;
  ASSERT_TRUE(watcher.Start(sink.Callback()).ok());
  ASSERT_TRUE(sink.WaitForOne(5s));
  EXPECT_EQ(sink.reasons()[0], "tencent spot termination-time: 2026-12-02 12:05:33");
}

TEST(SpotNoticeWatcher, KeepsPollingThroughErrorsAndStopsPromptly) {
  RefusingPort refusing;
  // The longest interval: only Stop() can end the wait between polls.
  SpotNoticeWatcher watcher(Config("gcp", refusing.Url("/v1/"), 600000));
  NoticeSink sink;
  ASSERT_TRUE(watcher.Start(sink.Callback()).ok());
  std::this_thread::sleep_for(200ms);
  const auto start = Clock::now();
  watcher.Stop();
  EXPECT_LT(Clock::now() - start, 500ms);
  EXPECT_TRUE(sink.reasons().empty());

  MetadataStub stub;
  stub.Serve("GET", "/latest/meta-data/spot/termination-time", 500, "");
  SpotNoticeWatcher erring(Config("tencent", stub.Url("/latest/meta-data/")));
  ASSERT_TRUE(erring.Start(sink.Callback()).ok());
  ASSERT_TRUE(WaitUntil(
      [&] { return stub.CountOf("GET /latest/meta-data/spot/termination-time") >= 3; }, 5s))
      << "an HTTP error is logged and polling goes on";
  EXPECT_TRUE(sink.reasons().empty());
  // The destructor stops it.
}

TEST(SpotNoticeWatcher, StartRejectsAnInvalidConfig) {
  SpotNoticeWatcher watcher(Config("aws", "", 50));
  Status s = watcher.Start([](std::string) {});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), StartsWith("cloud.poll_interval_ms"));
}

}  // namespace
}  // namespace tessera::worker
