#include "scheduler/security/api_auth.h"

#include <sodium.h>

#include <array>
#include <mutex>

#include "shared/base/file_io.h"
#include "shared/base/sha256.h"
#include "shared/base/wall_time.h"

namespace tessera::security {
namespace {

constexpr size_t kSecretBytes = 32;
constexpr size_t kMaxUserLength = 64;

std::string Hex(const unsigned char* bytes, size_t n) {
  std::string out(2 * n + 1, '\0');
  sodium_bin2hex(out.data(), out.size(), bytes, n);
  out.pop_back();
  return out;
}

bool ValidUser(const std::string& user) {
  if (user.empty() || user.size() > kMaxUserLength) return false;
  for (char c : user) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '@' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

const char* RoleName(Role role) {
  switch (role) {
    case Role::kViewer:
      return "viewer";
    case Role::kSubmitter:
      return "submitter";
    case Role::kOperator:
      return "operator";
    case Role::kAdmin:
      return "admin";
  }
  return "viewer";
}

std::optional<Role> ParseRole(std::string_view name) {
  for (Role r : {Role::kViewer, Role::kSubmitter, Role::kOperator, Role::kAdmin}) {
    if (name == RoleName(r)) return r;
  }
  return std::nullopt;
}

ApiAuth::ApiAuth(store::Store& store, bool enabled) : store_(store), enabled_(enabled) {
  TSR_CHECK(sodium_init() >= 0);  // thread-safe and idempotent; fails only without entropy
}

std::string ApiAuth::Hash(std::string_view token) { return Sha256Hex(token); }

Status ApiAuth::Load() {
  TSR_ASSIGN_OR_RETURN(std::vector<store::ApiTokenRecord> tokens, store_.ListApiTokens());
  std::unique_lock lock(mu_);
  by_hash_.clear();
  for (store::ApiTokenRecord& t : tokens) {
    std::string hash = t.secret_hash;
    by_hash_.emplace(std::move(hash), std::move(t));
  }
  return Status::Ok();
}

StatusOr<Caller> ApiAuth::Authenticate(std::string_view authorization) const {
  if (!enabled_) return Caller{"anonymous", Role::kAdmin, 0};
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.empty()) {
    return Status::Unauthenticated(
        "this API needs a bearer token (Authorization: Bearer tsra-...); the CLI reads it from "
        "--token, $TESSERA_TOKEN or its config file");
  }
  if (authorization.substr(0, kBearer.size()) != kBearer) {
    return Status::Unauthenticated("Authorization: expected 'Bearer <token>'");
  }
  std::string_view token = authorization.substr(kBearer.size());
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  if (token.substr(0, kTokenPrefix.size()) != kTokenPrefix ||
      token.size() != kTokenPrefix.size() + 2 * kSecretBytes) {
    return Status::Unauthenticated("Authorization: not a Tessera API token (tsra-...)");
  }
  const std::string hash = Hash(token);
  std::shared_lock lock(mu_);
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return Status::Unauthenticated("this API token is not known");
  const store::ApiTokenRecord& t = it->second;
  if (t.revoked_at_ms) {
    return Status::Unauthenticated("API token " + std::to_string(t.id) + " was revoked");
  }
  if (!t.usable(wall_time::NowMs())) {
    return Status::Unauthenticated("API token " + std::to_string(t.id) + " has expired");
  }
  return Caller{t.user, *ParseRole(t.role), t.id};
}

StatusOr<NewApiToken> ApiAuth::Create(const std::string& user, Role role, const std::string& note,
                                      int64_t ttl_s) {
  if (!ValidUser(user)) {
    return Status::InvalidArgument("user: expected 1-64 letters, digits or ._@-, got '" + user +
                                   "'");
  }
  if (ttl_s < 0 || ttl_s > 10LL * 365 * 24 * 3600) {
    return Status::InvalidArgument("ttl_s: expected 0 (never) .. 10 years in seconds");
  }
  if (note.size() > 200) return Status::InvalidArgument("note: at most 200 characters");
  std::array<unsigned char, kSecretBytes> secret{};
  randombytes_buf(secret.data(), secret.size());
  NewApiToken created;
  created.token = std::string(kTokenPrefix) + Hex(secret.data(), secret.size());
  store::ApiTokenRecord rec;
  rec.secret_hash = Hash(created.token);
  rec.user = user;
  rec.role = RoleName(role);
  rec.note = note;
  if (ttl_s > 0) rec.expires_at_ms = wall_time::NowMs() + ttl_s * 1000;
  TSR_ASSIGN_OR_RETURN(created.record, store_.CreateApiToken(rec));
  std::unique_lock lock(mu_);
  by_hash_[created.record.secret_hash] = created.record;
  return created;
}

StatusOr<store::ApiTokenRecord> ApiAuth::Revoke(int64_t token_id) {
  TSR_ASSIGN_OR_RETURN(store::ApiTokenRecord rec, store_.RevokeApiToken(token_id));
  std::unique_lock lock(mu_);
  by_hash_[rec.secret_hash] = rec;
  return rec;
}

StatusOr<std::vector<store::ApiTokenRecord>> ApiAuth::List() { return store_.ListApiTokens(); }

StatusOr<bool> ApiAuth::BootstrapAdmin(const std::string& path) {
  TSR_ASSIGN_OR_RETURN(std::vector<store::ApiTokenRecord> tokens, store_.ListApiTokens());
  if (!tokens.empty()) return false;
  TSR_ASSIGN_OR_RETURN(NewApiToken admin,
                       Create("admin", Role::kAdmin, "created at first start", 0));
  const std::string line = admin.token + "\n";
  TSR_RETURN_IF_ERROR(file_io::WriteAtomically(path, {line}, 0600));
  return true;
}

}  // namespace tessera::security
