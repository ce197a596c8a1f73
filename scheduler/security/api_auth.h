#pragma once
// Who may call the HTTP API: bearer tokens, each speaking for one user with one role.
//
//   viewer     reads everything: jobs, tasks, workers, summary, metrics, events
//   submitter  viewer + submits jobs (as its own user) and operates on its own jobs
//   operator   submitter on every job + operates workers (drain, revoke, readmit)
//   admin      operator + API tokens and worker join tokens
//
// A token is "tsra-" followed by 64 hex digits (256 random bits). The store keeps only its
// SHA-256, so a copy of the database admits nobody; a token is shown once, when it is created.
// Tokens are cached in memory: checking a request costs one hash and one map lookup.
//
// With auth off (api.auth: none, allowed only on a loopback listener) every caller is an
// anonymous admin.

#include <cstdint>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "scheduler/store/store.h"
#include "shared/base/status.h"

namespace tessera::security {

enum class Role { kViewer = 0, kSubmitter = 1, kOperator = 2, kAdmin = 3 };

const char* RoleName(Role role);
std::optional<Role> ParseRole(std::string_view name);

// The authenticated caller of one request.
struct Caller {
  std::string user;
  Role role = Role::kViewer;
  int64_t token_id = 0;  // 0: auth is off

  bool may(Role needed) const { return role >= needed; }
  // Whether the caller may operate on a job submitted by `owner`.
  bool owns(const std::string& owner) const { return role >= Role::kOperator || owner == user; }
};

struct NewApiToken {
  std::string token;  // the secret, shown once
  store::ApiTokenRecord record;
};

class ApiAuth {
 public:
  static constexpr std::string_view kTokenPrefix = "tsra-";

  ApiAuth(store::Store& store, bool enabled);

  bool enabled() const { return enabled_; }
  // Reads the stored tokens into the cache.
  Status Load();

  // The caller behind an Authorization header value ("Bearer tsra-..."). kUnauthenticated when
  // it is missing, malformed, unknown, revoked or expired.
  StatusOr<Caller> Authenticate(std::string_view authorization) const;

  // `user`: letters, digits and ._@- (1..64); `ttl_s` 0: never expires.
  StatusOr<NewApiToken> Create(const std::string& user, Role role, const std::string& note,
                               int64_t ttl_s);
  StatusOr<store::ApiTokenRecord> Revoke(int64_t token_id);
  StatusOr<std::vector<store::ApiTokenRecord>> List();

  // On a farm with no API tokens at all, creates an admin token and writes it to `path` (one
  // line, mode 0600). Returns whether it did.
  StatusOr<bool> BootstrapAdmin(const std::string& path);

  // Hex SHA-256 of a token's text: what the store keeps.
  static std::string Hash(std::string_view token);

 private:
  store::Store& store_;
  const bool enabled_;
  mutable std::shared_mutex mu_;
  std::unordered_map<std::string, store::ApiTokenRecord> by_hash_;
};

}  // namespace tessera::security
