#pragma once
// Webhooks: the scheduler POSTs the farm's events to the receivers its config names.
//
//   notifications:
//     - url: https://hooks.example.com/tessera     # http:// or https://, no credentials in it
//       events: [job_done, job_failed, frame_flagged]
//       secret_file: /etc/tessera/hook.secret      # or secret: "..." (the file keeps it out
//                                                  #   of the config and the environment)
//
// Each event is one POST with a JSON body {"id", "event", "at", "message", "job": {...} | null,
// "task_id", "worker_id"} and the headers X-Tessera-Event (the kind), X-Tessera-Delivery (the
// event id, the same on every attempt: a receiver de-duplicates by it) and, with a secret,
// X-Tessera-Signature: sha256=<hex HMAC-SHA256 of the body with the secret>. Delivery is at
// least once, in event order, per receiver: the events come from the store's events table (a
// job's end is recorded in the transaction that ends it), each receiver's thread sends them one
// by one and moves its cursor in the store once a 2xx answers, so a restart resends what was not
// acknowledged. A receiver that is down, slow (no answer within timeout_ms) or answers anything
// but 2xx is retried with doubling back-off up to max_backoff_ms; the other receivers and the
// broker never wait on it.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "scheduler/store/store.h"
#include "shared/base/status.h"

namespace YAML {
class Node;
}

namespace tessera::events {

// The kinds of event a receiver may ask for (the store's events table).
const std::vector<std::string>& WebhookEventKinds();

struct WebhookReceiver {
  std::string url;
  std::vector<std::string> events;
  std::string secret;  // empty: bodies are not signed
  int timeout_ms = 5000;
  int max_backoff_ms = 60000;
};

inline constexpr size_t kMaxReceivers = 32;
inline constexpr size_t kMaxSecretBytes = 4096;

// The scheduler config's `notifications:` list (absent or null: none). Errors name the field
// ("notifications[0].url: ...", "notifications[1].events[2]: 'job_dun' is not an event ...").
StatusOr<std::vector<WebhookReceiver>> ParseNotifications(const YAML::Node& node);

// Hex HMAC-SHA256 of `body` with `secret` (what X-Tessera-Signature carries after "sha256=").
std::string SignBody(std::string_view secret, std::string_view body);

// How a receiver is named in logs and metrics: its origin and path, never a query string (which
// may hold a token).
std::string ReceiverLabel(const std::string& url);

class WebhookNotifier {
 public:
  struct Options {
    std::chrono::milliseconds poll{500};  // how often an idle receiver looks for new events
  };
  // Per receiver, for /metrics.
  struct Counts {
    int64_t delivered = 0;
    int64_t failed_attempts = 0;
    int64_t last_event_id = 0;  // acknowledged
  };

  WebhookNotifier(store::Store& store, std::vector<WebhookReceiver> receivers, Options options);
  WebhookNotifier(store::Store& store, std::vector<WebhookReceiver> receivers)
      : WebhookNotifier(store, std::move(receivers), Options{}) {}
  ~WebhookNotifier();
  WebhookNotifier(const WebhookNotifier&) = delete;
  WebhookNotifier& operator=(const WebhookNotifier&) = delete;

  void Start();
  void Stop();
  // By receiver label.
  std::map<std::string, Counts> counts() const;

 private:
  void Run(size_t index);
  // One POST; an error says why it was not acknowledged.
  Status Deliver(const WebhookReceiver& receiver, const store::EventRecord& event);
  std::string BodyOf(const store::EventRecord& event);
  // Waits `d` or until Stop; false once stopping.
  bool Sleep(std::chrono::milliseconds d);

  store::Store& store_;
  const std::vector<WebhookReceiver> receivers_;
  const Options options_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::map<std::string, Counts> counts_;
};

}  // namespace tessera::events
