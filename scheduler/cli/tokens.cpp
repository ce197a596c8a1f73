// Credential commands: worker join tokens (`tessera join-token`) and API bearer tokens
// (`tessera token`, `tessera whoami`). Both kinds of token are printed once, when created.

#include <iostream>

#include "scheduler/cli/commands.h"
#include "scheduler/cli/format.h"

namespace tessera::cli {

namespace {

std::string Expiry(const json& record) {
  return Member(record, "expires_at").is_string() ? FormatTimestamp(Member(record, "expires_at"))
                                                  : std::string("never");
}

}  // namespace

int RunJoinTokenCreate(const ClientOptions& options, const std::string& note, int64_t ttl_seconds,
                       int uses, const std::string& worker) {
  int rc = kExitOk;
  std::optional<json> reply = Call(
      options,
      [&](ApiClient& c) {
        json body = {{"note", note}, {"ttl_s", ttl_seconds}, {"uses", uses}};
        if (!worker.empty()) body["worker"] = worker;
        return c.Post("/api/v1/join-tokens", body);
      },
      &rc);
  if (!reply) return rc;
  const json& token = Member(*reply, "join_token");
  std::cout << "Join token " << Str(token, "id") << " (shown only now; expires " << Expiry(token)
            << ", "
            << (Int(token, "max_uses") == 0 ? std::string("unlimited uses")
                                            : Str(token, "max_uses") + " use(s)")
            << "):\n\n  " << Str(*reply, "token") << "\n\n"
            << "In each new worker's /etc/tessera/worker.yaml (or TESSERA_SCHEDULER_* variables):\n"
            << "  scheduler:\n"
            << "    address: tcp://<this scheduler's host>:8471\n"
            << "    public_key: " << Str(*reply, "scheduler_public_key") << "\n"
            << "    join_token: " << Str(*reply, "token") << "\n";
  return kExitOk;
}

int RunJoinTokenList(const ClientOptions& options) {
  int rc = kExitOk;
  std::optional<json> reply = Call(
      options, [](ApiClient& c) { return c.Get("/api/v1/join-tokens"); }, &rc);
  if (!reply) return rc;
  std::cout << "Worker link: " << Str(*reply, "security");
  if (!Str(*reply, "scheduler_public_key", "").empty()) {
    std::cout << ", scheduler public key " << Str(*reply, "scheduler_public_key");
  }
  std::cout << "\n";
  const json& tokens = Member(*reply, "tokens");
  if (!tokens.is_array() || tokens.empty()) {
    std::cout << "No join tokens.\n";
    return kExitOk;
  }
  Table table({"ID", "STATE", "USES", "CREATED", "EXPIRES", "NOTE"});
  for (const json& t : tokens) {
    const std::string max = Int(t, "max_uses") == 0 ? "-" : Str(t, "max_uses");
    table.AddRow({Str(t, "id"), Str(t, "state"), Str(t, "uses") + "/" + max,
                  FormatTimestamp(Member(t, "created_at")), Expiry(t), Str(t, "note")});
  }
  table.Print(std::cout);
  return kExitOk;
}

int RunJoinTokenRevoke(const ClientOptions& options, int64_t token_id) {
  int rc = kExitOk;
  std::optional<json> reply = Call(
      options,
      [&](ApiClient& c) {
        return c.Post("/api/v1/join-tokens/" + std::to_string(token_id) + "/revoke",
                      json::object());
      },
      &rc);
  if (!reply) return rc;
  std::cout << "join token " << token_id
            << " revoked: it enrols no new worker (workers it enrolled keep their own keys)\n";
  return kExitOk;
}

int RunApiTokenCreate(const ClientOptions& options, const std::string& user,
                      const std::string& role, const std::string& note, int64_t ttl_seconds) {
  int rc = kExitOk;
  std::optional<json> reply = Call(
      options,
      [&](ApiClient& c) {
        return c.Post("/api/v1/tokens",
                      {{"user", user}, {"role", role}, {"note", note}, {"ttl_s", ttl_seconds}});
      },
      &rc);
  if (!reply) return rc;
  const json& token = Member(*reply, "api_token");
  std::cout << "API token " << Str(token, "id") << " for " << Str(token, "user") << " ("
            << Str(token, "role") << "; expires " << Expiry(token) << "; shown only now):\n\n  "
            << Str(*reply, "token") << "\n\n"
            << "Give it to the CLI as TESSERA_TOKEN, --token, or `token:` / `token_file:` in\n"
            << "~/.config/tessera/config.yaml; the dashboard asks for it once.\n";
  return kExitOk;
}

int RunApiTokenList(const ClientOptions& options) {
  int rc = kExitOk;
  std::optional<json> reply = Call(
      options, [](ApiClient& c) { return c.Get("/api/v1/tokens"); }, &rc);
  if (!reply) return rc;
  const json& tokens = Member(*reply, "tokens");
  if (!tokens.is_array() || tokens.empty()) {
    std::cout << "No API tokens (the API runs with auth: " << Str(*reply, "auth") << ").\n";
    return kExitOk;
  }
  Table table({"ID", "USER", "ROLE", "STATE", "CREATED", "EXPIRES", "NOTE"});
  for (const json& t : tokens) {
    table.AddRow({Str(t, "id"), Str(t, "user"), Str(t, "role"), Str(t, "state"),
                  FormatTimestamp(Member(t, "created_at")), Expiry(t), Str(t, "note")});
  }
  table.Print(std::cout);
  return kExitOk;
}

int RunApiTokenRevoke(const ClientOptions& options, int64_t token_id) {
  int rc = kExitOk;
  std::optional<json> reply = Call(
      options,
      [&](ApiClient& c) {
        return c.Post("/api/v1/tokens/" + std::to_string(token_id) + "/revoke", json::object());
      },
      &rc);
  if (!reply) return rc;
  std::cout << "API token " << token_id << " revoked: the scheduler refuses it from now on\n";
  return kExitOk;
}

int RunWhoami(const ClientOptions& options) {
  int rc = kExitOk;
  std::optional<json> reply = Call(
      options, [](ApiClient& c) { return c.Get("/api/v1/whoami"); }, &rc);
  if (!reply) return rc;
  std::cout << Str(*reply, "user") << " (" << Str(*reply, "role") << ") at "
            << options.connection.server;
  if (Str(*reply, "auth") == "none") std::cout << "; this API takes no tokens (loopback only)";
  std::cout << "\n";
  return kExitOk;
}

}  // namespace tessera::cli
