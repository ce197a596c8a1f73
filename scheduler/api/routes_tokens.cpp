#include <spdlog/spdlog.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "scheduler/api/http_api.h"
#include "scheduler/api/idempotent_posts.h"
#include "scheduler/api/reply.h"
#include "scheduler/api/views.h"
#include "scheduler/broker/broker.h"

namespace tessera::api {

namespace fs = std::filesystem;
using nlohmann::json;
using security::Caller;
using security::Role;

namespace {
// A join token created without a ttl_s lives a day: long enough to boot a batch of machines,
// short enough that a leaked one soon admits nobody.
constexpr int64_t kDefaultJoinTokenTtlS = 24 * 3600;
}  // namespace

void HttpApi::TokenRoutes() {
  // ---- worker join tokens (admin) ---------------------------------------------------------
  auto security_view = [this] {
    return json{{"security", broker_.secure() ? "curve" : "insecure"},
                {"scheduler_public_key", broker_.public_key_hex()}};
  };
  Handle("POST", "/api/v1/join-tokens", Role::kAdmin,
         [this, security_view](Req req, Res res, const Caller& c) {
           json body = req.body.empty() ? json::object() : json::parse(req.body, nullptr, false);
           if (!body.is_object()) {
             return ReplyError(res,
                               Status::InvalidArgument(
                                   "body: expected {\"note\": TEXT, \"ttl_s\": N, \"uses\": N, "
                                   "\"worker\": NAME}"));
           }
           for (const auto& [key, value] : body.items()) {
             if (key != "note" && key != "ttl_s" && key != "uses" && key != "worker") {
               return ReplyError(
                   res, Status::InvalidArgument("body." + key +
                                                ": unknown field (note, ttl_s, uses, worker)"));
             }
           }
           const json note = body.value("note", json(""));
           const json ttl = body.value("ttl_s", json(kDefaultJoinTokenTtlS));
           const json uses = body.value("uses", json(0));
           // A token for one worker name: the only kind that may replace the key that name is
           // enrolled with (moving a name to a new machine).
           const json worker = body.value("worker", json(""));
           if (!worker.is_string()) {
             return ReplyError(res, Status::InvalidArgument("worker: expected a worker name"));
           }
           if (!note.is_string()) {
             return ReplyError(res, Status::InvalidArgument("note: expected text"));
           }
           if (!ttl.is_number_integer()) {
             return ReplyError(res,
                               Status::InvalidArgument("ttl_s: expected whole seconds (0: never)"));
           }
           if (!uses.is_number_integer() || uses.get<int64_t>() > 1000000) {
             return ReplyError(res,
                               Status::InvalidArgument("uses: expected 0 (unlimited) .. 1000000"));
           }
           CreateOnce(store_, req, res, c, "join_token", [&](Res answer) -> std::optional<int64_t> {
             StatusOr<broker::NewJoinToken> created = broker_.CreateJoinToken(
                 note.get<std::string>(), ttl.get<int64_t>(), static_cast<int>(uses.get<int64_t>()),
                 worker.get<std::string>());
             if (!created.ok()) {
               ReplyError(answer, created.status());
               return std::nullopt;
             }
             spdlog::info("join token {} created by {}", created->record.id, c.user);
             json out = security_view();
             out["token"] = created->token;
             out["join_token"] = JoinTokenView(created->record);
             Reply(answer, 201, out);
             return created->record.id;
           });
         });
  Handle("GET", "/api/v1/join-tokens", Role::kAdmin,
         [this, security_view](Req, Res res, const Caller&) {
           auto tokens = store_.ListJoinTokens();
           if (!tokens.ok()) return ReplyError(res, tokens.status());
           json out = security_view();
           out["tokens"] = json::array();
           for (const auto& t : *tokens) out["tokens"].push_back(JoinTokenView(t));
           Reply(res, 200, out);
         });
  Handle("POST", R"(/api/v1/join-tokens/([^/]+)/revoke)", Role::kAdmin,
         WithId([this](Req, Res res, const Caller&, int64_t id) {
           auto revoked = broker_.RevokeJoinToken(id);
           if (!revoked.ok()) return ReplyError(res, revoked.status());
           Reply(res, 200, {{"join_token", JoinTokenView(*revoked)}});
         }));

  // ---- API tokens (admin) -----------------------------------------------------------------
  Handle("POST", "/api/v1/tokens", Role::kAdmin, [this](Req req, Res res, const Caller& c) {
    json body = json::parse(req.body, nullptr, false);
    if (!body.is_object()) {
      return ReplyError(res, Status::InvalidArgument(
                                 "body: expected {\"user\": NAME, \"role\": ROLE, \"note\": TEXT, "
                                 "\"ttl_s\": N}"));
    }
    for (const auto& [key, value] : body.items()) {
      if (key != "user" && key != "role" && key != "note" && key != "ttl_s") {
        return ReplyError(res, Status::InvalidArgument(
                                   "body." + key + ": unknown field (user, role, note, ttl_s)"));
      }
    }
    const json user = body.value("user", json(nullptr));
    const json role = body.value("role", json(nullptr));
    const json note = body.value("note", json(""));
    const json ttl = body.value("ttl_s", json(0));
    if (!user.is_string()) return ReplyError(res, Status::InvalidArgument("user: required text"));
    std::optional<security::Role> parsed =
        role.is_string() ? security::ParseRole(role.get<std::string>()) : std::nullopt;
    if (!parsed) {
      return ReplyError(
          res, Status::InvalidArgument("role: expected viewer, submitter, operator or admin"));
    }
    if (!note.is_string()) return ReplyError(res, Status::InvalidArgument("note: expected text"));
    if (!ttl.is_number_integer()) {
      return ReplyError(res, Status::InvalidArgument("ttl_s: expected whole seconds (0: never)"));
    }
    CreateOnce(store_, req, res, c, "api_token", [&](Res answer) -> std::optional<int64_t> {
      StatusOr<security::NewApiToken> created = auth_.Create(
          user.get<std::string>(), *parsed, note.get<std::string>(), ttl.get<int64_t>());
      if (!created.ok()) {
        ReplyError(answer, created.status());
        return std::nullopt;
      }
      spdlog::info("API token {} ({} {}) created by {}", created->record.id, created->record.role,
                   created->record.user, c.user);
      Reply(answer, 201, {{"token", created->token}, {"api_token", ApiTokenView(created->record)}});
      return created->record.id;
    });
  });
  Handle("GET", "/api/v1/tokens", Role::kAdmin, [this](Req, Res res, const Caller&) {
    auto tokens = auth_.List();
    if (!tokens.ok()) return ReplyError(res, tokens.status());
    json out = json::array();
    for (const auto& t : *tokens) out.push_back(ApiTokenView(t));
    Reply(res, 200, {{"auth", auth_.enabled() ? "token" : "none"}, {"tokens", out}});
  });
  Handle("POST", R"(/api/v1/tokens/([^/]+)/revoke)", Role::kAdmin,
         WithId([this](Req, Res res, const Caller& c, int64_t id) {
           auto revoked = auth_.Revoke(id);
           if (!revoked.ok()) return ReplyError(res, revoked.status());
           spdlog::info("API token {} revoked by {}", id, c.user);
           Reply(res, 200, {{"api_token", ApiTokenView(*revoked)}});
         }));
}

}  // namespace tessera::api
