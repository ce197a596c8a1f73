#include "scheduler/security/key_ring.h"

#include <spdlog/spdlog.h>
#include <zmq.h>

#include <charconv>
#include <zmq_addon.hpp>

#include "scheduler/store/store.h"
#include "shared/base/wall_time.h"

namespace tessera::security {

Admission Admission::Worker(std::string name) {
  Admission a;
  a.kind = Kind::kWorker;
  a.worker_name = std::move(name);
  return a;
}

Admission Admission::JoinToken(int64_t id, std::optional<int64_t> expires_at_ms) {
  Admission a;
  a.kind = Kind::kJoinToken;
  a.token_id = id;
  a.expires_at_ms = expires_at_ms;
  return a;
}

std::string Admission::user_id() const {
  return kind == Kind::kWorker ? "worker:" + worker_name : "join:" + std::to_string(token_id);
}

std::optional<Admission> ParseUserId(const std::string& user_id) {
  if (user_id.rfind("worker:", 0) == 0 && user_id.size() > 7) {
    return Admission::Worker(user_id.substr(7));
  }
  if (user_id.rfind("join:", 0) == 0) {
    int64_t id = 0;
    const char* begin = user_id.data() + 5;
    const char* end = user_id.data() + user_id.size();
    if (std::from_chars(begin, end, id).ptr == end && id > 0) {
      return Admission::JoinToken(id, std::nullopt);
    }
  }
  return std::nullopt;
}

std::optional<Admission> KeyRing::Admit(const std::string& public_key, int64_t now_ms) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_key_.find(public_key);
  if (it == by_key_.end()) return std::nullopt;
  if (it->second.expires_at_ms && *it->second.expires_at_ms <= now_ms) return std::nullopt;
  return it->second;
}

void KeyRing::Put(const std::string& public_key, Admission admission) {
  std::lock_guard<std::mutex> lock(mu_);
  by_key_[public_key] = std::move(admission);
}

void KeyRing::Remove(const std::string& public_key) {
  std::lock_guard<std::mutex> lock(mu_);
  by_key_.erase(public_key);
}

bool KeyRing::RemoveWorker(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  return std::erase_if(by_key_, [&](const auto& entry) {
           return entry.second.kind == Admission::Kind::kWorker && entry.second.worker_name == name;
         }) > 0;
}

void KeyRing::RemoveToken(int64_t token_id) {
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(by_key_, [&](const auto& entry) {
    return entry.second.kind == Admission::Kind::kJoinToken && entry.second.token_id == token_id;
  });
}

bool KeyRing::HasWorker(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, admission] : by_key_) {
    if (admission.kind == Admission::Kind::kWorker && admission.worker_name == name) return true;
  }
  return false;
}

// ---- ZAP -------------------------------------------------------------------------------------

StatusOr<std::unique_ptr<ZapHandler>> ZapHandler::Start(zmq::context_t& context,
                                                        const KeyRing& keys) {
  auto socket = std::make_unique<zmq::socket_t>(context, zmq::socket_type::rep);
  try {
    socket->set(zmq::sockopt::linger, 0);
    socket->bind("inproc://zeromq.zap.01");
  } catch (const zmq::error_t& e) {
    return Status::Internal(std::string("cannot start the ZAP handler: ") + e.what());
  }
  std::unique_ptr<ZapHandler> handler(new ZapHandler(keys, std::move(socket)));
  handler->thread_ = std::thread([h = handler.get()] { h->Run(); });
  return handler;
}

ZapHandler::~ZapHandler() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

void ZapHandler::Run() {
  // RFC 27 request: version, request id, domain, address, identity, mechanism, credentials...
  // Reply: version, request id, status code, status text, user id, metadata.
  while (!stop_.load()) {
    zmq::pollitem_t item{socket_->handle(), 0, ZMQ_POLLIN, 0};
    try {
      zmq::poll(&item, 1, std::chrono::milliseconds(200));
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
      continue;
    }
    if (!(item.revents & ZMQ_POLLIN)) continue;
    std::vector<zmq::message_t> request;
    try {
      if (!zmq::recv_multipart(*socket_, std::back_inserter(request))) continue;
    } catch (const zmq::error_t&) {
      return;
    }
    const std::string version = request.size() > 0 ? request[0].to_string() : "";
    const std::string request_id = request.size() > 1 ? request[1].to_string() : "";
    const std::string address = request.size() > 3 ? request[3].to_string() : "?";
    const std::string mechanism = request.size() > 5 ? request[5].to_string() : "";
    std::string code = "400", text = "refused", user_id;
    if (version != "1.0") {
      code = "500";
      text = "unsupported ZAP version";
    } else if (mechanism != "CURVE" || request.size() < 7 || request[6].size() != 32) {
      text = "only CURVE peers are admitted";
    } else {
      char key[41];
      zmq_z85_encode(key, static_cast<const uint8_t*>(request[6].data()), 32);
      if (std::optional<Admission> admitted =
              keys_.Admit(std::string(key, 40), wall_time::NowMs())) {
        code = "200";
        text = "OK";
        user_id = admitted->user_id();
      } else {
        text = "unknown, revoked or expired key";
      }
    }
    if (code != "200") {
      // A peer that retries in a loop (or a scan) writes a line per interval, not per attempt.
      refused_.Log(spdlog::level::warn, text, "refused a connection from {}: {}", address, text);
    }
    std::vector<zmq::message_t> reply;
    reply.emplace_back(version.data(), version.size());
    reply.emplace_back(request_id.data(), request_id.size());
    reply.emplace_back(code.data(), code.size());
    reply.emplace_back(text.data(), text.size());
    reply.emplace_back(user_id.data(), user_id.size());
    reply.emplace_back();
    try {
      zmq::send_multipart(*socket_, reply);
    } catch (const zmq::error_t&) {
      return;
    }
  }
}

}  // namespace tessera::security
