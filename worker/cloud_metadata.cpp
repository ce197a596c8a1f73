#include "worker/cloud_metadata.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <exception>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "shared/base/http_url.h"

namespace tessera::worker {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kConnectTimeoutS = 1;
constexpr int kReadTimeoutS = 2;
constexpr int kMinPollMs = 100;
constexpr int kMaxPollMs = 600000;
// IMDSv2 tokens live at most 6 h; the watcher renews its token well before that.
constexpr const char* kAwsTokenTtlS = "21600";
constexpr auto kAwsTokenRenewAfter = std::chrono::hours(3);
// A metadata service that keeps failing is logged once a minute, not on every poll.
constexpr auto kErrorLogEvery = std::chrono::minutes(1);

enum class Provider { kNone, kAws, kGcp, kAlibaba, kTencent };

std::optional<Provider> ParseProvider(const std::string& name) {
  if (name == "none") return Provider::kNone;
  if (name == "aws") return Provider::kAws;
  if (name == "gcp") return Provider::kGcp;
  if (name == "alibaba") return Provider::kAlibaba;
  if (name == "tencent") return Provider::kTencent;
  return std::nullopt;
}

// Where a provider keeps each fact, relative to its metadata URL; "" = it does not publish it.
struct ProviderPaths {
  const char* name;
  const char* default_url;
  const char* instance_type;
  const char* region;
  const char* zone;
  const char* lifecycle;
  const char* notice;
};

const ProviderPaths& Paths(Provider provider) {
  static const ProviderPaths kAws{"aws",
                                  "http://169.254.169.254/latest/",
                                  "meta-data/instance-type",
                                  "meta-data/placement/region",
                                  "meta-data/placement/availability-zone",
                                  "meta-data/instance-life-cycle",
                                  "meta-data/spot/instance-action"};
  static const ProviderPaths kGcp{"gcp",
                                  "http://metadata.google.internal/computeMetadata/v1/",
                                  "instance/machine-type",
                                  "",
                                  "instance/zone",
                                  "instance/scheduling/preemptible",
                                  "instance/preempted"};
  static const ProviderPaths kAlibaba{"alibaba",
                                      "http://100.100.100.200/latest/meta-data/",
                                      "instance/instance-type",
                                      "region-id",
                                      "zone-id",
                                      "",
                                      "instance/spot/termination-time"};
  static const ProviderPaths kTencent{"tencent",
                                      "http://metadata.tencentyun.com/latest/meta-data/",
                                      "instance/instance-type",
                                      "placement/region",
                                      "placement/zone",
                                      "",
                                      "spot/termination-time"};
  switch (provider) {
    case Provider::kAws:
      return kAws;
    case Provider::kGcp:
      return kGcp;
    case Provider::kAlibaba:
      return kAlibaba;
    case Provider::kTencent:
    case Provider::kNone:
      break;
  }
  return kTencent;
}

std::string Trim(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(" \t\r\n") - begin + 1);
}

// GCP answers with resource paths ("projects/123/zones/us-central1-a"): keep the last part.
std::string LastSegment(const std::string& text) {
  const size_t slash = text.rfind('/');
  return slash == std::string::npos ? text : text.substr(slash + 1);
}

// "http://host:port/a/b" -> origin "http://host:port", path "/a/b". False unless http(s) with a
// host.
std::string Describe(httplib::Error error) {
  switch (error) {
    case httplib::Error::Connection:
      return "cannot connect";
    case httplib::Error::ConnectionTimeout:
      return "no connection within " + std::to_string(kConnectTimeoutS) + " s";
    case httplib::Error::Read:
      return "no answer within " + std::to_string(kReadTimeoutS) + " s";
    default:
      return "request failed (" + httplib::to_string(error) + ")";
  }
}

struct Reply {
  int status = 0;  // 0: no HTTP answer; `error` says why
  std::string body;
  std::string error;
};

// One request with the short timeouts. Never throws.
Reply Send(const std::string& method, const std::string& url, const httplib::Headers& headers) {
  Reply reply;
  std::string origin, path;
  if (!http_url::Split(url, &origin, &path)) {
    reply.error = "not an http(s) URL: " + url;
    return reply;
  }
  try {
    httplib::Client client(origin);
    if (!client.is_valid()) {
      reply.error = "cannot make a client for " + origin;
      return reply;
    }
    client.set_connection_timeout(kConnectTimeoutS, 0);
    client.set_read_timeout(kReadTimeoutS, 0);
    client.set_write_timeout(kReadTimeoutS, 0);
    httplib::Result result =
        method == "PUT" ? client.Put(path, headers, "", "text/plain") : client.Get(path, headers);
    if (!result) {
      reply.error = url + ": " + Describe(result.error());
      return reply;
    }
    reply.status = result->status;
    reply.body = result->body;
  } catch (const std::exception& e) {
    reply.error = url + ": " + e.what();
  }
  return reply;
}

// Requests to one provider's metadata service, with the headers it wants (and, for AWS, the
// IMDSv2 token, fetched when first needed and renewed). One thread at a time.
class MetadataClient {
 public:
  MetadataClient(Provider provider, std::string base_url)
      : provider_(provider), base_url_(std::move(base_url)) {}

  Reply Get(const std::string& url) {
    if (provider_ == Provider::kGcp) return Send("GET", url, {{"Metadata-Flavor", "Google"}});
    if (provider_ != Provider::kAws) return Send("GET", url, {});
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (token_.empty() || Clock::now() - token_at_ > kAwsTokenRenewAfter) {
        Reply token = Send("PUT", base_url_ + "api/token",
                           {{"X-aws-ec2-metadata-token-ttl-seconds", kAwsTokenTtlS}});
        if (token.status != 200) {
          if (token.status != 0) token.error = "IMDSv2 token: HTTP " + std::to_string(token.status);
          token.status = 0;
          return token;
        }
        token_ = Trim(token.body);
        token_at_ = Clock::now();
      }
      Reply reply = Send("GET", url, {{"X-aws-ec2-metadata-token", token_}});
      if (reply.status != 401) return reply;
      token_.clear();  // expired or revoked: one more try with a fresh token
    }
    return {0, "", "IMDSv2 token refused (HTTP 401)"};
  }

 private:
  const Provider provider_;
  const std::string base_url_;
  std::string token_;
  Clock::time_point token_at_;
};

// One look at the notice endpoint: a notice, nothing, or an error reaching it.
struct NoticeCheck {
  std::optional<std::string> notice;
  std::string error;
};

NoticeCheck CheckNotice(MetadataClient& client, Provider provider, const std::string& url) {
  NoticeCheck check;
  Reply reply = client.Get(url);
  if (reply.status == 0) {
    check.error = reply.error;
    return check;
  }
  if (reply.status == 404) return check;  // no notice (yet)
  if (reply.status != 200) {
    check.error = url + ": HTTP " + std::to_string(reply.status);
    return check;
  }
  const std::string body = Trim(reply.body);
  switch (provider) {
    case Provider::kAws: {
      // {"action": "terminate", "time": "2026-12-02T20:40:00Z"}
      const nlohmann::json notice =
          nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
      if (notice.is_object() && notice.value("action", nlohmann::json()).is_string() &&
          notice.value("time", nlohmann::json()).is_string()) {
        check.notice = "aws spot instance-action: " + notice["action"].get<std::string>() + " at " +
                       notice["time"].get<std::string>();
      } else {
        check.notice = "aws spot instance-action: " + body;
      }
      break;
    }
    case Provider::kGcp:
      if (body == "TRUE") check.notice = "gcp instance preempted";
      break;
    case Provider::kAlibaba:
      check.notice = "alibaba spot termination-time: " + body;
      break;
    case Provider::kTencent:
      check.notice = "tencent spot termination-time: " + body;
      break;
    case Provider::kNone:
      break;
  }
  return check;
}

}  // namespace

Status ValidateCloudConfig(const CloudConfig& config) {
  if (!ParseProvider(config.provider)) {
    return Status::InvalidArgument("cloud.provider: '" + config.provider +
                                   "' is not one of none, aws, gcp, alibaba, tencent");
  }
  TSR_RETURN_IF_ERROR(http_url::Check("cloud.metadata_url", config.metadata_url));
  TSR_RETURN_IF_ERROR(http_url::Check("cloud.spot_notice_url", config.spot_notice_url));
  if (config.poll_interval_ms < kMinPollMs || config.poll_interval_ms > kMaxPollMs) {
    return Status::InvalidArgument(
        "cloud.poll_interval_ms: " + std::to_string(config.poll_interval_ms) + " is not in " +
        std::to_string(kMinPollMs) + ".." + std::to_string(kMaxPollMs));
  }
  return Status::Ok();
}

std::string EffectiveMetadataUrl(const CloudConfig& config) {
  const std::optional<Provider> provider = ParseProvider(config.provider);
  if (!provider || *provider == Provider::kNone) return "";
  std::string url =
      config.metadata_url.empty() ? Paths(*provider).default_url : config.metadata_url;
  if (url.back() != '/') url += '/';
  return url;
}

std::string EffectiveSpotNoticeUrl(const CloudConfig& config) {
  const std::optional<Provider> provider = ParseProvider(config.provider);
  if (!provider || *provider == Provider::kNone) return "";
  if (!config.spot_notice_url.empty()) return config.spot_notice_url;
  return EffectiveMetadataUrl(config) + Paths(*provider).notice;
}

StatusOr<protocol::CloudInfo> ProbeCloud(const CloudConfig& config) {
  TSR_RETURN_IF_ERROR(ValidateCloudConfig(config));
  const Provider provider = *ParseProvider(config.provider);
  if (provider == Provider::kNone) return protocol::CloudInfo{};
  const ProviderPaths& paths = Paths(provider);
  const std::string base = EffectiveMetadataUrl(config);
  MetadataClient client(provider, base);

  // The instance type comes first: when it cannot be read the machine is not in this cloud, and
  // nothing else is asked (so a wrong provider costs one timeout at most, not five).
  Reply type = client.Get(base + paths.instance_type);
  if (type.status != 200 || Trim(type.body).empty()) {
    const std::string why = type.status == 0 ? type.error
                                             : "HTTP " + std::to_string(type.status) + " for " +
                                                   base + paths.instance_type;
    return Status::Unavailable(std::string(paths.name) + " instance metadata: " + why);
  }
  auto item = [&](const char* path) -> std::string {
    if (*path == '\0') return "";
    Reply reply = client.Get(base + path);
    if (reply.status != 200) {
      spdlog::debug("{} instance metadata {}: {}", paths.name, path,
                    reply.status == 0 ? reply.error : "HTTP " + std::to_string(reply.status));
      return "";
    }
    return Trim(reply.body);
  };

  protocol::CloudInfo info;
  info.provider = paths.name;
  info.instance_type = Trim(type.body);
  info.region = item(paths.region);
  info.zone = item(paths.zone);
  const std::string lifecycle = item(paths.lifecycle);
  switch (provider) {
    case Provider::kAws:
      // "spot", "on-demand", or "scheduled" (reserved time slots, not interruptible).
      if (!lifecycle.empty()) info.lifecycle = lifecycle == "spot" ? "spot" : "on-demand";
      break;
    case Provider::kGcp:
      info.instance_type = LastSegment(info.instance_type);
      info.zone = LastSegment(info.zone);
      // Zones are named REGION-LETTER.
      if (const size_t dash = info.zone.rfind('-'); dash != std::string::npos) {
        info.region = info.zone.substr(0, dash);
      }
      if (lifecycle == "TRUE") info.lifecycle = "spot";
      if (lifecycle == "FALSE") info.lifecycle = "on-demand";
      break;
    case Provider::kAlibaba:
    case Provider::kTencent:
    case Provider::kNone:
      break;
  }
  spdlog::info("cloud: {} {}, lifecycle {}, zone {}, region {}", info.provider, info.instance_type,
               info.lifecycle.empty() ? "unknown" : info.lifecycle,
               info.zone.empty() ? "unknown" : info.zone,
               info.region.empty() ? "unknown" : info.region);
  return info;
}

SpotNoticeWatcher::SpotNoticeWatcher(CloudConfig config) : config_(std::move(config)) {}

SpotNoticeWatcher::~SpotNoticeWatcher() {
  Stop();
  // Only when the last owner let go from inside on_notice: the thread is ending on its own.
  if (thread_.joinable()) thread_.detach();
}

Status SpotNoticeWatcher::Start(std::function<void(std::string reason)> on_notice) {
  TSR_RETURN_IF_ERROR(ValidateCloudConfig(config_));
  if (config_.provider == "none") return Status::Ok();
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable()) return Status::Ok();
  stop_ = false;
  thread_ = std::thread(&SpotNoticeWatcher::Loop, this, std::move(on_notice));
  return Status::Ok();
}

void SpotNoticeWatcher::Stop() {
  std::thread thread;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    if (!thread_.joinable() || thread_.get_id() == std::this_thread::get_id()) return;
    thread = std::move(thread_);
  }
  wake_.notify_all();
  thread.join();
}

void SpotNoticeWatcher::Loop(std::function<void(std::string reason)> on_notice) {
  const Provider provider = *ParseProvider(config_.provider);
  const std::string url = EffectiveSpotNoticeUrl(config_);
  MetadataClient client(provider, EffectiveMetadataUrl(config_));
  spdlog::info("watching for spot interruption notices at {} every {} ms", url,
               config_.poll_interval_ms);
  std::optional<Clock::time_point> last_error_log;
  int unlogged_errors = 0;
  for (;;) {
    NoticeCheck check = CheckNotice(client, provider, url);
    if (check.notice) {
      spdlog::warn("spot interruption notice: {}", *check.notice);
      if (on_notice) on_notice(*check.notice);
      return;
    }
    const Clock::time_point now = Clock::now();
    if (!check.error.empty()) {
      if (!last_error_log || now - *last_error_log >= kErrorLogEvery) {
        spdlog::warn("spot notice check failed: {}{}", check.error,
                     unlogged_errors > 0
                         ? " (" + std::to_string(unlogged_errors) + " more since the last report)"
                         : "");
        last_error_log = now;
        unlogged_errors = 0;
      } else {
        ++unlogged_errors;
      }
    } else if (last_error_log) {
      spdlog::info("spot notice endpoint answers again");
      last_error_log.reset();
      unlogged_errors = 0;
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (wake_.wait_for(lock, std::chrono::milliseconds(config_.poll_interval_ms),
                       [this] { return stop_; })) {
      return;
    }
  }
}

}  // namespace tessera::worker
