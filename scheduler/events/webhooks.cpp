#include "scheduler/events/webhooks.h"

// cpp-httplib's pkg-config flags turn on its OpenSSL support: https receivers work.
#include <httplib.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "shared/base/http_url.h"
#include "shared/base/utf8.h"
#include "shared/base/wall_time.h"
#include "shared/base/yaml_util.h"

namespace tessera::events {

namespace {

constexpr int kEventsPerRead = 100;

// The file's first line: a secret kept out of the config (and of `ps`, the environment).
StatusOr<std::string> ReadSecretFile(const std::string& path, const std::string& field) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument(field + ": cannot read '" + path + "'");
  std::string secret;
  std::getline(in, secret);
  if (!secret.empty() && secret.back() == '\r') secret.pop_back();
  return secret;
}

}  // namespace

const std::vector<std::string>& WebhookEventKinds() {
  static const std::vector<std::string> kinds = {
      "job_submitted",   "job_done",           "job_failed",        "job_canceled",
      "job_paused",      "job_resumed",        "job_infeasible",    "step_failed",
      "frame_flagged",   "frame_failed",       "worker_registered", "worker_lost",
      "worker_draining", "worker_blocklisted", "worker_gpu_fault",  "worker_disk_full",
      "outputs_full",    "outputs_space_back", "data_space_back",   "worker_revoked"};
  return kinds;
}

StatusOr<std::vector<WebhookReceiver>> ParseNotifications(const YAML::Node& node) {
  std::vector<WebhookReceiver> out;
  if (!node.IsDefined() || node.IsNull()) return out;
  if (!node.IsSequence()) {
    return Status::InvalidArgument(
        "notifications: expected a list of {url, events, secret | secret_file}");
  }
  TSR_RETURN_IF_ERROR(yaml::CheckListSize(node, "notifications", kMaxReceivers));
  std::set<std::string> urls;
  for (size_t i = 0; i < node.size(); ++i) {
    const std::string field = "notifications[" + std::to_string(i) + "]";
    WebhookReceiver r;
    std::string secret_file;
    yaml::MapReader m(node[i], field);
    m.Required("url", &r.url)
        .Required("events", &r.events)
        .Optional("secret", &r.secret)
        .Optional("secret_file", &secret_file)
        .Optional("timeout_ms", &r.timeout_ms)
        .Optional("max_backoff_ms", &r.max_backoff_ms);
    TSR_RETURN_IF_ERROR(m.Finish());
    TSR_RETURN_IF_ERROR(utf8::Check(r.url, field + ".url"));
    std::string origin, path;
    if (!http_url::Split(r.url, &origin, &path)) {
      return Status::InvalidArgument(field +
                                     ".url: expected http://HOST[:PORT]/PATH or "
                                     "https://..., got '" +
                                     r.url.substr(0, 200) + "'");
    }
    if (!urls.insert(r.url).second) {
      return Status::InvalidArgument(field + ".url: another receiver has that URL");
    }
    if (r.events.empty()) {
      return Status::InvalidArgument(field + ".events: list at least one event");
    }
    for (size_t e = 0; e < r.events.size(); ++e) {
      const auto& kinds = WebhookEventKinds();
      if (std::find(kinds.begin(), kinds.end(), r.events[e]) == kinds.end()) {
        std::string known;
        for (const std::string& k : kinds) known += (known.empty() ? "" : ", ") + k;
        return Status::InvalidArgument(field + ".events[" + std::to_string(e) + "]: '" +
                                       r.events[e].substr(0, 64) + "' is not an event (" + known +
                                       ")");
      }
    }
    if (!secret_file.empty()) {
      if (!r.secret.empty()) {
        return Status::InvalidArgument(field + ": give secret or secret_file, not both");
      }
      TSR_ASSIGN_OR_RETURN(r.secret, ReadSecretFile(secret_file, field + ".secret_file"));
    }
    if (r.secret.size() > kMaxSecretBytes) {
      return Status::InvalidArgument(field + ".secret: at most " + std::to_string(kMaxSecretBytes) +
                                     " bytes");
    }
    if (r.timeout_ms < 100 || r.timeout_ms > 600000) {
      return Status::InvalidArgument(field + ".timeout_ms: must be in [100, 600000]");
    }
    if (r.max_backoff_ms < 100 || r.max_backoff_ms > 3600000) {
      return Status::InvalidArgument(field + ".max_backoff_ms: must be in [100, 3600000]");
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::string SignBody(std::string_view secret, std::string_view body) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(body.data()), body.size(), mac, &length);
  static const char* kHex = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    hex += kHex[mac[i] >> 4];
    hex += kHex[mac[i] & 15];
  }
  return hex;
}

std::string ReceiverLabel(const std::string& url) { return url.substr(0, url.find_first_of("?#")); }

WebhookNotifier::WebhookNotifier(store::Store& store, std::vector<WebhookReceiver> receivers,
                                 Options options)
    : store_(store), receivers_(std::move(receivers)), options_(options) {}

WebhookNotifier::~WebhookNotifier() { Stop(); }

void WebhookNotifier::Start() {
  for (size_t i = 0; i < receivers_.size(); ++i) {
    threads_.emplace_back([this, i] { Run(i); });
  }
}

void WebhookNotifier::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

std::map<std::string, WebhookNotifier::Counts> WebhookNotifier::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

bool WebhookNotifier::Sleep(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  wake_.wait_for(lock, d, [this] { return stop_.load(); });
  return !stop_;
}

std::string WebhookNotifier::BodyOf(const store::EventRecord& event) {
  nlohmann::json job = nullptr;
  if (event.job_id) {
    StatusOr<store::JobRecord> rec = store_.GetJob(*event.job_id);
    job = {{"id", *event.job_id}};
    if (rec.ok()) {
      job.update(
          {{"name", rec->name},
           {"state", store::JobStateName(rec->state)},
           {"user", rec->user},
           {"project", rec->project},
           {"renderer", rec->renderer},
           {"tasks",
            {{"total", rec->tasks.total},
             {"done", rec->tasks.done},
             {"failed", rec->tasks.failed}}},
           {"output_dir", rec->output_dir},
           {"error", rec->error ? nlohmann::json(*rec->error) : nlohmann::json(nullptr)},
           {"pipeline_id",
            rec->pipeline_id ? nlohmann::json(*rec->pipeline_id) : nlohmann::json(nullptr)},
           {"step", rec->pipeline_id ? nlohmann::json(rec->step) : nlohmann::json(nullptr)}});
    }
  }
  auto opt = [](const std::optional<int64_t>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  };
  return nlohmann::json{{"id", event.id},
                        {"event", event.kind},
                        {"at", wall_time::IsoTime(event.at_ms)},
                        {"message", event.message},
                        {"job", std::move(job)},
                        {"task_id", opt(event.task_id)},
                        {"worker_id", opt(event.worker_id)}}
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Status WebhookNotifier::Deliver(const WebhookReceiver& receiver, const store::EventRecord& event) {
  std::string origin, path;
  if (!http_url::Split(receiver.url, &origin, &path)) {
    return Status::InvalidArgument("not an http(s) URL");
  }
  const std::string body = BodyOf(event);
  httplib::Headers headers = {{"User-Agent", "tessera-scheduler"},
                              {"X-Tessera-Event", event.kind},
                              {"X-Tessera-Delivery", std::to_string(event.id)}};
  if (!receiver.secret.empty()) {
    headers.emplace("X-Tessera-Signature", "sha256=" + SignBody(receiver.secret, body));
  }
  try {
    httplib::Client client(origin);
    if (!client.is_valid()) return Status::InvalidArgument("cannot make a client for " + origin);
    const auto timeout = std::chrono::milliseconds(receiver.timeout_ms);
    client.set_connection_timeout(timeout);
    client.set_read_timeout(timeout);
    client.set_write_timeout(timeout);
    client.set_follow_location(false);
    httplib::Result result = client.Post(path, headers, body, "application/json");
    if (!result) return Status::Unavailable(httplib::to_string(result.error()));
    if (result->status < 200 || result->status > 299) {
      return Status::Unavailable("answered HTTP " + std::to_string(result->status));
    }
  } catch (const std::exception& e) {
    return Status::Unavailable(e.what());
  }
  return Status::Ok();
}

void WebhookNotifier::Run(size_t index) {
  const WebhookReceiver& receiver = receivers_[index];
  const std::string label = ReceiverLabel(receiver.url);
  StatusOr<int64_t> cursor = store_.WebhookCursor(receiver.url);
  while (!cursor.ok()) {
    spdlog::error("webhook {}: cannot read its cursor: {}", label, cursor.status().ToString());
    if (!Sleep(std::chrono::seconds(5))) return;
    cursor = store_.WebhookCursor(receiver.url);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    counts_[label].last_event_id = *cursor;
  }
  std::chrono::milliseconds backoff(0);
  while (!stop_) {
    StatusOr<std::vector<store::EventRecord>> events =
        store_.EventsAfter(*cursor, receiver.events, kEventsPerRead);
    if (!events.ok() || events->empty()) {
      if (!events.ok()) spdlog::warn("webhook {}: {}", label, events.status().ToString());
      if (!Sleep(options_.poll)) return;
      continue;
    }
    for (const store::EventRecord& event : *events) {
      // The same event until it is acknowledged (or the scheduler stops).
      for (;;) {
        Status sent = Deliver(receiver, event);
        if (sent.ok()) break;
        backoff = std::min(std::chrono::milliseconds(receiver.max_backoff_ms),
                           std::max(std::chrono::milliseconds(250), backoff * 2));
        {
          std::lock_guard<std::mutex> lock(mu_);
          ++counts_[label].failed_attempts;
        }
        spdlog::warn("webhook {}: event {} ({}) not delivered: {}; retrying in {} ms", label,
                     event.id, event.kind, sent.message(), backoff.count());
        if (!Sleep(backoff)) return;
      }
      backoff = std::chrono::milliseconds(0);
      *cursor = event.id;
      if (Status s = store_.SetWebhookCursor(receiver.url, event.id); !s.ok()) {
        // Delivered but not recorded: it goes again after a restart (receivers de-duplicate).
        spdlog::warn("webhook {}: cannot record delivery of event {}: {}", label, event.id,
                     s.ToString());
      }
      std::lock_guard<std::mutex> lock(mu_);
      ++counts_[label].delivered;
      counts_[label].last_event_id = event.id;
    }
  }
}

}  // namespace tessera::events
