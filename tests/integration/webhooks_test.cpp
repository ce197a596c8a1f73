// Webhooks on a real farm: a real scheduler POSTs its events to a real HTTP receiver on loopback
// (this test's own), signed with HMAC-SHA256. The receiver is down, then slow, then back up:
// every event arrives, at least once, with one delivery id; events a receiver never acknowledged
// survive a kill -9 of the scheduler and arrive after it restarts, those it acknowledged are not
// sent again.

#include <gtest/gtest.h>
#include <httplib.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "tests/support/farm.h"
#include "tests/support/http_get.h"

namespace tessera::testing {
namespace {

using namespace std::chrono_literals;

std::string Hmac(const std::string& key, const std::string& body) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(body.data()), body.size(), mac, &n);
  std::string hex;
  char byte[3];
  for (unsigned int i = 0; i < n; ++i) {
    std::snprintf(byte, sizeof(byte), "%02x", mac[i]);
    hex += byte;
  }
  return hex;
}

// The receiver: records each POST it answered 200 (by delivery id); the first `slow` requests
// it answers only after `delay` (past the scheduler's timeout).
class Receiver {
 public:
  explicit Receiver(int port) : port_(port) {}
  ~Receiver() { Stop(); }

  void Start(int slow = 0, std::chrono::milliseconds delay = 0ms) {
    slow_ = slow;
    server_ = std::make_unique<httplib::Server>();
    server_->Post("/hook", [this, delay](const httplib::Request& req, httplib::Response& res) {
      if (slow_ > 0) {
        --slow_;
        std::this_thread::sleep_for(delay);
      }
      std::lock_guard<std::mutex> lock(mu_);
      ++posts_;
      Delivery d;
      d.body = req.body;
      d.event = req.get_header_value("X-Tessera-Event");
      d.delivery = req.get_header_value("X-Tessera-Delivery");
      d.signature = req.get_header_value("X-Tessera-Signature");
      by_id_[d.delivery].push_back(d);
      res.status = 200;
    });
    thread_ = std::thread([this] { server_->listen("127.0.0.1", port_); });
    while (!server_->is_running()) std::this_thread::sleep_for(5ms);
  }
  void Stop() {
    if (!server_) return;
    server_->stop();
    thread_.join();
    server_.reset();
  }

  struct Delivery {
    std::string body, event, delivery, signature;
  };
  // The deliveries of the event about `job_id` of `kind` (empty when none arrived).
  std::vector<Delivery> Of(int64_t job_id, const std::string& kind) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Delivery> out;
    for (const auto& [id, list] : by_id_) {
      for (const Delivery& d : list) {
        const nlohmann::json body = nlohmann::json::parse(d.body, nullptr, false);
        if (d.event == kind && body.is_object() && body["job"].is_object() &&
            body["job"]["id"] == job_id) {
          out.push_back(d);
        }
      }
    }
    return out;
  }
  int posts() {
    std::lock_guard<std::mutex> lock(mu_);
    return posts_;
  }

 private:
  const int port_;
  std::atomic<int> slow_{0};
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::mutex mu_;
  int posts_ = 0;
  std::map<std::string, std::vector<Delivery>> by_id_;
};

TEST(WebhooksTest, EventsReachAReceiverThatWasDownSlowAndRestartedSignedAndOnce) {
  const int port = FreePort();
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/hook";
  LocalFarm farm("webhooks");
  farm.AppendSchedulerConfig("notifications:\n  - url: " + url +
                             "\n    events: [job_done, job_failed, job_canceled]\n"
                             "    secret: s3cret\n    timeout_ms: 300\n    max_backoff_ms: 400\n");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("w1"));
  ASSERT_TRUE(farm.WaitForWorkers(1, 30s));
  Receiver receiver(port);

  // Down: the job ends while nothing listens; the scheduler keeps trying.
  const int64_t first = farm.Submit("name: a\nrenderer: noop\nframes: 1-3\n", "");
  ASSERT_GT(first, 0);
  ASSERT_EQ(farm.WaitForJob(first, 60s)["state"], "done");
  std::this_thread::sleep_for(1s);
  // Slow: the first answer comes after the scheduler's timeout, so that attempt counts as failed
  // and the event goes again; then it answers at once.
  receiver.Start(/*slow=*/1, 800ms);
  ASSERT_TRUE(WaitFor([&] { return receiver.Of(first, "job_done").size() >= 2; }, 30s))
      << farm.SchedulerLog();
  for (const Receiver::Delivery& d : receiver.Of(first, "job_done")) {
    const nlohmann::json body = nlohmann::json::parse(d.body);
    EXPECT_EQ(d.signature, "sha256=" + Hmac("s3cret", d.body));
    EXPECT_EQ(d.delivery, std::to_string(body["id"].get<int64_t>()));
    EXPECT_EQ(body["event"], "job_done");
    EXPECT_EQ(body["job"]["state"], "done");
    EXPECT_EQ(body["job"]["name"], "a");
  }
  // Every attempt of one event carries the same delivery id.
  EXPECT_EQ(receiver.Of(first, "job_done").front().delivery,
            receiver.Of(first, "job_done").back().delivery);

  // Down again: a canceled job's event is stored, not delivered; the scheduler dies (kill -9)
  // and comes back; the event arrives then, and the acknowledged one is not sent again.
  receiver.Stop();
  const int posts_before = receiver.posts();
  // (No worker is in its pool: it waits until canceled.)
  const int64_t second = farm.Submit("name: b\nrenderer: noop\nframes: 1\npools: [nowhere]\n", "");
  ASSERT_GT(second, 0);
  int status = 0;
  farm.Post("/api/v1/jobs/" + std::to_string(second) + "/cancel", nlohmann::json::object(),
            &status);
  ASSERT_EQ(status, 200);
  std::this_thread::sleep_for(1s);
  farm.KillScheduler(SIGKILL);
  receiver.Start();
  ASSERT_TRUE(farm.StartScheduler(/*reuse_ports=*/true)) << farm.SchedulerLog();
  ASSERT_TRUE(WaitFor([&] { return !receiver.Of(second, "job_canceled").empty(); }, 30s))
      << farm.SchedulerLog();
  EXPECT_EQ(receiver.Of(second, "job_canceled").front().signature,
            "sha256=" + Hmac("s3cret", receiver.Of(second, "job_canceled").front().body));
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(receiver.posts(), posts_before + 1) << "only the undelivered event was sent";
}

TEST(WebhooksTest, DeliveriesAreCountedOnMetrics) {
  const int port = FreePort();
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/hook";
  Receiver receiver(port);
  receiver.Start();
  LocalFarm farm("webhooks-metrics");
  farm.AppendSchedulerConfig("notifications:\n  - url: " + url + "?token=abc\n" +
                             "    events: [job_done]\n");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_TRUE(farm.StartWorker("w1"));
  const int64_t job = farm.Submit("name: a\nrenderer: noop\nframes: 1\n", "");
  ASSERT_GT(job, 0);
  ASSERT_TRUE(WaitFor([&] { return !receiver.Of(job, "job_done").empty(); }, 60s))
      << farm.SchedulerLog();
  // Unsigned without a secret; named on /metrics without the query string.
  EXPECT_EQ(receiver.Of(job, "job_done").front().signature, "");
  std::string metrics;
  ASSERT_TRUE(WaitFor(
      [&] {
        metrics = Metrics(farm);
        return metrics.find("tessera_webhook_deliveries_total{receiver=\"" + url + "\"} 1") !=
               std::string::npos;
      },
      10s))
      << metrics;
  EXPECT_EQ(metrics.find("token=abc"), std::string::npos);
}

}  // namespace
}  // namespace tessera::testing
