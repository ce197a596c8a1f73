#include "scheduler/api/idempotent_posts.h"

#include <spdlog/spdlog.h>

#include "scheduler/api/reply.h"
#include "shared/base/sha256.h"

namespace tessera::api {

namespace {
constexpr size_t kMaxKeyLength = 255;
constexpr std::string_view kMismatch = "Idempotency-Key mismatch: ";
}  // namespace

StatusOr<std::optional<store::IdempotentRequest>> IdempotencyKeyOf(const http::Request& req,
                                                                   const security::Caller& caller) {
  if (!req.HasHeader("Idempotency-Key")) return std::optional<store::IdempotentRequest>();
  std::string key = req.Header("Idempotency-Key");
  // The draft writes the key as a structured-field string ("..."); a bare token is accepted too.
  if (key.size() >= 2 && key.front() == '"' && key.back() == '"')
    key = key.substr(1, key.size() - 2);
  if (key.empty() || key.size() > kMaxKeyLength) {
    return Status::InvalidArgument("Idempotency-Key: 1 to 255 characters, got " +
                                   std::to_string(key.size()));
  }
  for (char c : key) {
    if (c < 0x21 || c > 0x7E) {
      return Status::InvalidArgument(
          "Idempotency-Key: printable ASCII without spaces only (a UUID is usual)");
    }
  }
  store::IdempotentRequest out;
  out.user = caller.user;
  out.key = key;
  out.request_hash = Sha256Hex(req.method + " " + req.path + "\n" + req.body);
  return std::optional<store::IdempotentRequest>(std::move(out));
}

StatusOr<std::optional<store::IdempotentRequest>> EarlierRequest(
    store::Store& store, const store::IdempotentRequest& key) {
  TSR_ASSIGN_OR_RETURN(std::optional<store::IdempotentRequest> earlier,
                       store.FindIdempotentRequest(key.user, key.key, kIdempotencyWindowMs));
  if (earlier && earlier->request_hash != key.request_hash) {
    return Status::FailedPrecondition(std::string(kMismatch) + "'" + key.key +
                                      "' was first used for another request (" + earlier->resource +
                                      " " + std::to_string(earlier->resource_id) +
                                      "); use a new key for a new request");
  }
  return earlier;
}

bool IsKeyMismatch(const Status& status) {
  return status.code() == StatusCode::kFailedPrecondition &&
         status.message().rfind(kMismatch, 0) == 0;
}

void ReplyKeyMismatch(http::Response& res, const Status& status) {
  http::SetError(res, 422, "invalid_argument", status.message());
}

void CreateOnce(store::Store& store, const http::Request& req, http::Response& res,
                const security::Caller& caller, const std::string& resource,
                const std::function<std::optional<int64_t>(http::Response&)>& create) {
  StatusOr<std::optional<store::IdempotentRequest>> key = IdempotencyKeyOf(req, caller);
  if (!key.ok()) return ReplyError(res, key.status());
  if (*key) {
    StatusOr<std::optional<store::IdempotentRequest>> earlier = EarlierRequest(store, **key);
    if (!earlier.ok()) {
      return IsKeyMismatch(earlier.status()) ? ReplyKeyMismatch(res, earlier.status())
                                             : ReplyError(res, earlier.status());
    }
    if (*earlier) {
      return ReplyError(
          res, Status::AlreadyExists("Idempotency-Key '" + (*key)->key + "' already created " +
                                     resource + " " + std::to_string((*earlier)->resource_id) +
                                     "; its secret was shown once: if that answer was lost, "
                                     "revoke it and create another with a new key"));
    }
  }
  std::optional<int64_t> id = create(res);
  if (!id || !*key) return;
  (*key)->resource = resource;
  (*key)->resource_id = *id;
  if (Status st = store.RecordIdempotentRequest(**key); !st.ok()) {
    spdlog::warn("Idempotency-Key '{}' of {} not recorded: {}", (*key)->key, caller.user,
                 st.message());
  }
}

}  // namespace tessera::api
