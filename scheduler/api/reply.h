#pragma once
// How every API route answers and reads its parameters: JSON replies (never throwing, whatever
// the strings hold), errors in one shape {"error", "code"} with the status code that fits,
// and whole numbers from query parameters and path segments checked against their range.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "scheduler/http/router.h"
#include "scheduler/security/api_auth.h"
#include "shared/base/status.h"

namespace tessera::api {

int HttpCode(StatusCode code);

// A JSON reply. Text that is not valid UTF-8 (none should get this far) is replaced, never
// thrown on.
void Reply(http::Response& res, int code, const nlohmann::json& body);
void ReplyError(http::Response& res, const Status& status);

// `text` as a whole number, every character of it.
std::optional<int64_t> WholeNumber(const std::string& text);
// A whole number in [min, max] from a query parameter or path segment, named `field` in errors.
StatusOr<int64_t> ParseInt(const std::string& text, const std::string& field, int64_t min,
                           int64_t max);
// A positive id from a path segment.
StatusOr<int64_t> ParseId(const std::string& text);

// The state (of a job or a task) called `name`, if there is one.
template <typename State>
std::optional<State> StateNamed(const std::string& name, const char* (*name_of)(State)) {
  for (State s :
       {State::kQueued, State::kRunning, State::kDone, State::kFailed, State::kCanceled}) {
    if (name == name_of(s)) return s;
  }
  return std::nullopt;
}

// A handler of /api/v1/{jobs,tasks,tokens,...}/{id}...: `fn(req, res, caller, id)` runs with
// the id in the path's first group parsed; a malformed id is answered with 400.
template <typename Fn>
auto WithId(Fn fn) {
  return [fn = std::move(fn)](const http::Request& req, http::Response& res,
                              const security::Caller& caller) {
    StatusOr<int64_t> id = ParseId(req.matches.size() > 1 ? req.matches[1] : std::string());
    if (!id.ok()) return ReplyError(res, id.status());
    fn(req, res, caller, *id);
  };
}

}  // namespace tessera::api
