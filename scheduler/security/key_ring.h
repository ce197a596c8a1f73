#pragma once
// Who may connect to the broker on a CURVE farm, and the ZAP handler that asks.
//
// The KeyRing maps CURVE public keys to what they stand for: an enrolled worker (by name), or a
// join token (by id, with its expiry), which may only enrol. It is loaded from the store at
// start-up and kept in step by the broker (enrolment, revocation) and the HTTP API (new and
// revoked tokens); every method is thread-safe.
//
// The ZapHandler answers ZeroMQ's ZAP requests (RFC 27) for the broker's ROUTER on its own
// thread: it admits a CURVE peer only when the KeyRing knows its key, and tags the connection
// with a user id ("worker:NAME" or "join:ID") that every message from it carries. Anything
// else -- an unknown, revoked or expired key, another mechanism -- is refused: it fails closed.

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <zmq.hpp>

#include "shared/base/logging.h"
#include "shared/base/status.h"

namespace tessera::security {

struct Admission {
  enum class Kind { kWorker, kJoinToken };
  Kind kind = Kind::kWorker;
  std::string worker_name;               // kWorker
  int64_t token_id = 0;                  // kJoinToken
  std::optional<int64_t> expires_at_ms;  // kJoinToken: none = never
  static Admission Worker(std::string name);
  static Admission JoinToken(int64_t id, std::optional<int64_t> expires_at_ms);
  // The ZAP user id of a connection admitted with it.
  std::string user_id() const;
};

// Parses a ZAP user id back ("worker:NAME" / "join:ID"); nullopt for anything else.
std::optional<Admission> ParseUserId(const std::string& user_id);

class KeyRing {
 public:
  // The admission of `public_key` (Z85) now, if any (expired tokens are not admitted).
  std::optional<Admission> Admit(const std::string& public_key, int64_t now_ms) const;
  void Put(const std::string& public_key, Admission admission);
  void Remove(const std::string& public_key);
  // Removes the key enrolled for the worker; returns whether there was one.
  bool RemoveWorker(const std::string& name);
  void RemoveToken(int64_t token_id);
  // Whether the worker still holds an enrolled key (a connection admitted before a revocation
  // keeps its user id; the broker checks this when it registers).
  bool HasWorker(const std::string& name) const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, Admission> by_key_;
};

class ZapHandler {
 public:
  // Binds inproc://zeromq.zap.01 in `context` (before any CURVE server socket of that context
  // binds) and starts answering.
  static StatusOr<std::unique_ptr<ZapHandler>> Start(zmq::context_t& context, const KeyRing& keys);
  ~ZapHandler();  // stops the thread
  ZapHandler(const ZapHandler&) = delete;
  ZapHandler& operator=(const ZapHandler&) = delete;

 private:
  ZapHandler(const KeyRing& keys, std::unique_ptr<zmq::socket_t> socket)
      : keys_(keys), socket_(std::move(socket)) {}
  void Run();

  const KeyRing& keys_;
  logging::RateLimitedLog refused_;  // refusals, by reason
  std::unique_ptr<zmq::socket_t> socket_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace tessera::security
