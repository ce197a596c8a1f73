#pragma once
// The cloud a worker runs in, read from the provider's instance metadata service (AWS, GCP,
// Alibaba Cloud, Tencent Cloud): where it runs and whether it is a spot (preemptible) instance,
// reported in kRegister; and a watcher that notices when the provider is about to reclaim a spot
// instance. Plain HTTP to the link-local metadata endpoint with short timeouts (1 s to connect,
// 2 s to read); nothing here throws, and provider "none" sends nothing at all.
//
// Default endpoints (metadata_url) and what is read under them:
//   aws      http://169.254.169.254/latest/   IMDSv2: PUT api/token, then GETs with the token;
//            meta-data/instance-type, placement/region, placement/availability-zone,
//            instance-life-cycle; notice meta-data/spot/instance-action (404: none)
//   gcp      http://metadata.google.internal/computeMetadata/v1/   (Metadata-Flavor: Google)
//            instance/machine-type, instance/zone, instance/scheduling/preemptible;
//            notice instance/preempted ("TRUE")
//   alibaba  http://100.100.100.200/latest/meta-data/
//            instance/instance-type, region-id, zone-id; notice instance/spot/termination-time
//   tencent  http://metadata.tencentyun.com/latest/meta-data/
//            instance/instance-type, placement/region, placement/zone; notice spot/termination-time

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "shared/base/status.h"
#include "shared/wire/protocol.h"

namespace tessera::worker {

struct CloudConfig {
  std::string provider = "none";  // none | aws | gcp | alibaba | tencent
  std::string metadata_url;       // empty: the provider's documented endpoint (above)
  std::string spot_notice_url;    // empty: the provider's notice path under metadata_url
  int poll_interval_ms = 5000;    // how often the watcher asks, 100..600000
};

// Checks every field; the error names it ("cloud.provider: 'azure' is not one of ...").
[[nodiscard]] Status ValidateCloudConfig(const CloudConfig& config);

// The endpoints `config` resolves to, defaults applied (empty for provider none). The metadata
// URL always ends in '/'.
std::string EffectiveMetadataUrl(const CloudConfig& config);
std::string EffectiveSpotNoticeUrl(const CloudConfig& config);

// Reads the instance's provider, region, zone, instance type and lifecycle. Provider none: an
// empty CloudInfo without any traffic. An invalid config is kInvalidArgument; a metadata service
// that cannot be reached or does not know the instance type (the machine is not in that cloud)
// is kUnavailable. Other items that are missing are left empty.
[[nodiscard]] StatusOr<protocol::CloudInfo> ProbeCloud(const CloudConfig& config);

// Polls the provider's spot-interruption notice every poll_interval_ms on its own thread and
// calls on_notice once, on that thread, when the instance is about to be reclaimed; it then stops
// polling. Errors reaching the endpoint are logged (rate-limited) and polling goes on. Start and
// Stop may be called from any thread; Stop may also be called from inside on_notice.
class SpotNoticeWatcher {
 public:
  explicit SpotNoticeWatcher(CloudConfig config);
  ~SpotNoticeWatcher();  // Stop()
  SpotNoticeWatcher(const SpotNoticeWatcher&) = delete;
  SpotNoticeWatcher& operator=(const SpotNoticeWatcher&) = delete;

  // Starts the polling thread. Provider none: does nothing and returns Ok. An invalid config is
  // kInvalidArgument; a second Start while one is running does nothing.
  [[nodiscard]] Status Start(std::function<void(std::string reason)> on_notice);
  // Wakes the thread and joins it: returns at once between polls, and within one request's
  // timeout (3 s) when a poll is in flight.
  void Stop();

 private:
  void Loop(std::function<void(std::string reason)> on_notice);

  const CloudConfig config_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace tessera::worker
