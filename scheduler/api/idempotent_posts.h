#pragma once
// Idempotency-Key on the POSTs that create something (jobs, API tokens, join tokens), after
// the IETF httpapi draft: a client whose answer was lost re-sends the request with the same key
// and gets the first result; nothing new is stored. Keys are per user and kept a day; the same
// key with another request answers 422.

#include <functional>
#include <optional>
#include <string>

#include "scheduler/http/message.h"
#include "scheduler/security/api_auth.h"
#include "scheduler/store/store.h"
#include "shared/base/status.h"

namespace tessera::api {

inline constexpr int64_t kIdempotencyWindowMs = 24LL * 3600 * 1000;

// The request's Idempotency-Key as a record to store (resource and id left for the caller):
// nullopt without the header; InvalidArgument for a key that is empty, over 255 characters or
// not printable ASCII.
StatusOr<std::optional<store::IdempotentRequest>> IdempotencyKeyOf(const http::Request& req,
                                                                   const security::Caller& caller);

// What `key` created before, if it was used within the window. A key first used for another
// request (method, path or body) is an error the caller answers with 422 (kFailedPrecondition
// here; IsKeyMismatch tells it apart).
StatusOr<std::optional<store::IdempotentRequest>> EarlierRequest(
    store::Store& store, const store::IdempotentRequest& key);
bool IsKeyMismatch(const Status& status);

// Answers a key first used for another request: 422.
void ReplyKeyMismatch(http::Response& res, const Status& status);

// A create whose result holds a secret shown once (API and join tokens): `create` fills `res`
// and returns the new id, or nullopt when it failed. With a key used before, nothing is
// created: the answer is 409 naming what the key created (the secret cannot be shown again),
// or 422 for another request. Otherwise the key is recorded with the new id.
void CreateOnce(store::Store& store, const http::Request& req, http::Response& res,
                const security::Caller& caller, const std::string& resource,
                const std::function<std::optional<int64_t>(http::Response&)>& create);

}  // namespace tessera::api
