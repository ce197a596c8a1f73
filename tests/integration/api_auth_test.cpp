// The HTTP API's credentials, against a real scheduler: bearer tokens with roles on every
// endpoint, submitters confined to their own jobs, revocation and expiry, tokens stored only as
// hashes and surviving a restart; HTTPS with TLS 1.2 (or 1.3) or later; output folders and
// dependencies a submitter may name, and the server paths a viewer may not see; and the CLI
// finding its server and token in flags, the environment and its config file.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "tests/support/farm.h"
#include "tests/support/process.h"
#include "tests/support/require.h"

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const std::string kNoopJob = "renderer: noop\nname: auth\nframes: 1-4\n";

bool Contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// An API token for `user` with `role`, created with the farm's admin token.
std::string CreateToken(LocalFarm& farm, const std::string& user, const std::string& role,
                        int64_t ttl_s = 0) {
  int status = 0;
  nlohmann::json res =
      farm.Post("/api/v1/tokens",
                {{"user", user}, {"role", role}, {"note", "test"}, {"ttl_s", ttl_s}}, &status);
  EXPECT_EQ(status, 201) << res.dump();
  return status == 201 ? res["token"].get<std::string>() : "";
}

// The HTTP status `token` gets for one request (the farm's own token is restored after).
int StatusAs(LocalFarm& farm, const std::string& token, const std::string& method,
             const std::string& path, const nlohmann::json& body = nlohmann::json::object(),
             nlohmann::json* reply = nullptr) {
  const std::string own = farm.token();
  farm.set_token(token);
  int status = -1;
  nlohmann::json res;
  if (method == "GET") {
    res = farm.Get(path, &status);
  } else if (method == "POST") {
    res = farm.Post(path, body, &status);
  } else {
    status = farm.Delete(path);
  }
  farm.set_token(own);
  if (reply) *reply = res;
  return status;
}

TEST(ApiAuthTest, RolesGateEveryEndpointAndSubmittersOwnTheirJobs) {
  LocalFarm farm("auth-roles");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();

  // The first start wrote an admin token only its owner can read.
  const std::string admin_file = farm.dir() + "/data/admin.token";
  struct stat st {};
  ASSERT_EQ(stat(admin_file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(farm.token().rfind("tsra-", 0), 0u);
  EXPECT_EQ(farm.Get("/api/v1/whoami")["role"], "admin");

  // Without a token, or with a wrong one, every endpoint answers 401.
  const std::vector<std::pair<std::string, std::string>> endpoints = {
      {"GET", "/api/v1/whoami"},
      {"GET", "/api/v1/jobs"},
      {"POST", "/api/v1/jobs"},
      {"GET", "/api/v1/jobs/1"},
      {"GET", "/api/v1/jobs/1/tasks"},
      {"POST", "/api/v1/jobs/1/cancel"},
      {"POST", "/api/v1/jobs/1/pause"},
      {"POST", "/api/v1/jobs/1/resume"},
      {"POST", "/api/v1/jobs/1/retry"},
      {"POST", "/api/v1/jobs/1/priority"},
      {"POST", "/api/v1/jobs/1/rerender"},
      {"DELETE", "/api/v1/jobs/1"},
      {"GET", "/api/v1/tasks/1/why"},
      {"GET", "/api/v1/workers"},
      {"POST", "/api/v1/workers/w/drain"},
      {"POST", "/api/v1/workers/w/revoke"},
      {"POST", "/api/v1/workers/w/readmit"},
      {"GET", "/api/v1/plugins"},
      {"GET", "/api/v1/summary"},
      {"GET", "/api/v1/tokens"},
      {"POST", "/api/v1/tokens"},
      {"POST", "/api/v1/tokens/1/revoke"},
      {"GET", "/api/v1/join-tokens"},
      {"POST", "/api/v1/join-tokens"},
      {"POST", "/api/v1/join-tokens/1/revoke"},
      {"GET", "/metrics"}};
  const std::string forged = "tsra-" + std::string(64, 'a');
  for (const auto& [method, path] : endpoints) {
    nlohmann::json reply;
    EXPECT_EQ(StatusAs(farm, "", method, path, {}, &reply), 401) << method << " " << path;
    if (method != "DELETE" && path != "/metrics") {  // bodies that are JSON
      ASSERT_TRUE(reply.is_object()) << method << " " << path;
      EXPECT_EQ(reply.value("code", ""), "unauthenticated") << method << " " << path;
    }
    EXPECT_EQ(StatusAs(farm, forged, method, path), 401) << method << " " << path;
    EXPECT_EQ(StatusAs(farm, "not-a-token", method, path), 401) << method << " " << path;
  }
  // Liveness and the dashboard page itself need no token.
  int status = 0;
  EXPECT_EQ(StatusAs(farm, "", "GET", "/healthz"), 200);

  const std::string viewer = CreateToken(farm, "vera", "viewer");
  const std::string alice = CreateToken(farm, "alice", "submitter");
  const std::string bob = CreateToken(farm, "bob", "submitter");
  const std::string oper = CreateToken(farm, "olga", "operator");
  ASSERT_FALSE(alice.empty());

  // A viewer reads but changes nothing.
  EXPECT_EQ(StatusAs(farm, viewer, "GET", "/api/v1/summary"), 200);
  nlohmann::json reply;
  EXPECT_EQ(StatusAs(farm, viewer, "POST", "/api/v1/jobs", {{"job_yaml", kNoopJob}}, &reply), 403);
  EXPECT_TRUE(Contains(reply.value("error", ""), "submitter")) << reply.dump();

  // A submitter's job is its own, whatever the job file says about the user.
  ASSERT_EQ(StatusAs(farm, alice, "POST", "/api/v1/jobs", {{"job_yaml", kNoopJob}}, &reply), 201)
      << reply.dump();
  const int64_t job = reply["job"]["id"].get<int64_t>();
  EXPECT_EQ(reply["job"]["user"], "alice");
  EXPECT_EQ(StatusAs(farm, alice, "POST", "/api/v1/jobs", {{"job_yaml", kNoopJob + "user: bob\n"}},
                     &reply),
            403);
  EXPECT_TRUE(Contains(reply.value("error", ""), "user: this token submits as 'alice'"))
      << reply.dump();
  // An operator submits on behalf of someone else.
  ASSERT_EQ(StatusAs(farm, oper, "POST", "/api/v1/jobs", {{"job_yaml", kNoopJob + "user: bob\n"}},
                     &reply),
            201);
  EXPECT_EQ(reply["job"]["user"], "bob");

  // Filters and keyset pages over the jobs list.
  nlohmann::json mine = farm.Get("/api/v1/jobs?user=alice");
  ASSERT_EQ(mine["jobs"].size(), 1u) << mine.dump();
  EXPECT_EQ(mine["jobs"][0]["id"], job);
  nlohmann::json page = farm.Get("/api/v1/jobs?limit=1");
  ASSERT_EQ(page["jobs"].size(), 1u);
  ASSERT_TRUE(page.contains("next_before")) << page.dump();
  nlohmann::json next =
      farm.Get("/api/v1/jobs?limit=1&before=" + std::to_string(page["next_before"].get<int>()));
  ASSERT_EQ(next["jobs"].size(), 1u);
  EXPECT_EQ(next["jobs"][0]["id"], job);  // the older of the two
  EXPECT_TRUE(farm.Get("/api/v1/jobs?user=nobody")["jobs"].empty());
  farm.Get("/api/v1/jobs?before=x", &status);
  EXPECT_EQ(status, 400);

  const std::string job_path = "/api/v1/jobs/" + std::to_string(job);
  EXPECT_EQ(StatusAs(farm, bob, "GET", job_path), 200);
  EXPECT_EQ(StatusAs(farm, bob, "POST", job_path + "/cancel", {}, &reply), 403);
  EXPECT_TRUE(Contains(reply.value("error", ""), "belongs to 'alice'")) << reply.dump();
  EXPECT_EQ(StatusAs(farm, bob, "POST", job_path + "/priority", {{"priority", 90}}), 403);
  EXPECT_EQ(StatusAs(farm, alice, "POST", job_path + "/pause"), 200);
  EXPECT_EQ(StatusAs(farm, oper, "POST", job_path + "/resume"), 200);
  EXPECT_EQ(StatusAs(farm, alice, "POST", job_path + "/priority", {{"priority", 70}}), 200);
  EXPECT_EQ(farm.Get(job_path)["job"]["priority"], 70);

  // Workers are an operator's business, credentials an admin's.
  EXPECT_EQ(StatusAs(farm, alice, "POST", "/api/v1/workers/w1/drain"), 403);
  EXPECT_EQ(StatusAs(farm, oper, "POST", "/api/v1/workers/w1/drain"), 404);  // allowed; no w1
  EXPECT_EQ(StatusAs(farm, oper, "POST", "/api/v1/tokens", {{"user", "x"}, {"role", "admin"}}),
            403);
  EXPECT_EQ(StatusAs(farm, oper, "POST", "/api/v1/join-tokens"), 403);
  EXPECT_EQ(StatusAs(farm, oper, "GET", "/api/v1/tokens"), 403);

  // Bad token requests name the field.
  farm.Post("/api/v1/tokens", {{"user", "x"}, {"role", "root"}}, &status);
  EXPECT_EQ(status, 400);
  farm.Post("/api/v1/tokens", {{"user", "x y"}, {"role", "viewer"}}, &status);
  EXPECT_EQ(status, 400);

  // Revoked and expired tokens stop working at once.
  nlohmann::json tokens = farm.Get("/api/v1/tokens")["tokens"];
  int64_t bob_id = 0;
  for (const auto& t : tokens) {
    if (t["user"] == "bob") bob_id = t["id"].get<int64_t>();
    EXPECT_FALSE(t.contains("token"));
    EXPECT_FALSE(t.contains("secret_hash"));
  }
  ASSERT_GT(bob_id, 0);
  farm.Post("/api/v1/tokens/" + std::to_string(bob_id) + "/revoke", {}, &status);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(StatusAs(farm, bob, "GET", "/api/v1/jobs", {}, &reply), 401);
  EXPECT_TRUE(Contains(reply.value("error", ""), "revoked")) << reply.dump();
  const std::string brief = CreateToken(farm, "tmp", "viewer", /*ttl_s=*/1);
  EXPECT_EQ(StatusAs(farm, brief, "GET", "/api/v1/jobs"), 200);
  std::this_thread::sleep_for(1200ms);
  EXPECT_EQ(StatusAs(farm, brief, "GET", "/api/v1/jobs", {}, &reply), 401);
  EXPECT_TRUE(Contains(reply.value("error", ""), "expired")) << reply.dump();

  // The database holds hashes only: no token text in any of its files.
  for (const auto& entry : fs::directory_iterator(farm.dir() + "/data")) {
    if (entry.path().filename().string().rfind("tessera.db", 0) != 0) continue;
    const std::string bytes = ReadFile(entry.path().string());
    for (const std::string& t : {farm.token(), viewer, alice, bob, oper}) {
      EXPECT_FALSE(Contains(bytes, t)) << entry.path();
      EXPECT_FALSE(Contains(bytes, t.substr(5))) << entry.path();
    }
  }

  // Tokens survive a restart; the admin token file is not rewritten.
  const std::string admin_before = ReadFile(admin_file);
  farm.KillScheduler(SIGKILL);
  ASSERT_TRUE(farm.StartScheduler(/*reuse_ports=*/true)) << farm.SchedulerLog();
  EXPECT_EQ(ReadFile(admin_file), admin_before);
  EXPECT_EQ(StatusAs(farm, alice, "GET", "/api/v1/whoami", {}, &reply), 200);
  EXPECT_EQ(reply["user"], "alice");
  EXPECT_EQ(reply["role"], "submitter");
  EXPECT_EQ(StatusAs(farm, bob, "GET", "/api/v1/whoami"), 401);
}

// ---- TLS --------------------------------------------------------------------------------------

// A self-signed certificate for 127.0.0.1 made with the openssl tool; false when it is missing.
bool MakeCertificate(const std::string& dir, std::string* cert, std::string* key) {
  *cert = dir + "/api.crt";
  *key = dir + "/api.key";
  RunResult r = RunProcess(
      {"/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
       "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", *key, "-out", *cert},
      30s);
  return r.exit_code == 0 && fs::exists(*cert);
}

// Whether a TLS handshake with 127.0.0.1:port succeeds when the client offers at most
// `max_version`. The client itself allows every version down to TLS 1.0 (security level 0), so
// a refusal comes from the server.
bool Handshake(int port, int max_version) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_security_level(ctx, 0);
  SSL_CTX_set_cipher_list(ctx, "DEFAULT:@SECLEVEL=0");
  SSL_CTX_set_min_proto_version(ctx, TLS1_VERSION);
  SSL_CTX_set_max_proto_version(ctx, max_version);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = false;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    SSL* ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    ok = SSL_connect(ssl) == 1;
    if (ok) SSL_shutdown(ssl);
    SSL_free(ssl);
  }
  close(fd);
  SSL_CTX_free(ctx);
  ERR_clear_error();
  return ok;
}

TEST(ApiAuthTest, HttpsServesTls12AndLaterOnly) {
  LocalFarm farm("auth-tls");
  std::string cert, key;
  TSR_REQUIRE(MakeCertificate(farm.dir(), &cert, &key),
              "the openssl tool cannot make a test certificate (apt-get install openssl)");
  farm.AppendSchedulerConfig("api:\n  tls_cert_file: " + cert + "\n  tls_key_file: " + key + "\n");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  ASSERT_EQ(farm.api_url().rfind("https://127.0.0.1:", 0), 0u) << farm.api_url();
  const int port = std::stoi(farm.api_url().substr(farm.api_url().rfind(':') + 1));

  // Verified against the certificate as CA, with the admin token.
  farm.set_ca_file(cert);
  int status = 0;
  nlohmann::json me = farm.Get("/api/v1/whoami", &status);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(me.value("role", ""), "admin");

  EXPECT_TRUE(Handshake(port, TLS1_3_VERSION));
  EXPECT_TRUE(Handshake(port, TLS1_2_VERSION));
  EXPECT_FALSE(Handshake(port, TLS1_1_VERSION));
  EXPECT_FALSE(Handshake(port, TLS1_VERSION));

  // Plain HTTP to the TLS port gets no API answer.
  httplib::Client plain("127.0.0.1", port);
  plain.set_connection_timeout(2);
  plain.set_read_timeout(2);
  auto res = plain.Get("/healthz");
  EXPECT_TRUE(!res || res->status == 400) << (res ? res->body : "");

  // The CLI: trusts the certificate given with --ca-file; refuses an unknown one.
  const std::string cli = Bin("tessera");
  RunResult ok = RunProcess(
      {cli, "whoami", "--server", farm.api_url(), "--ca-file", cert, "--token", farm.token()}, 30s);
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_TRUE(Contains(ok.out, "admin (admin)")) << ok.out;
  RunResult untrusted =
      RunProcess({cli, "whoami", "--server", farm.api_url(), "--token", farm.token()}, 30s);
  EXPECT_EQ(untrusted.exit_code, 3) << untrusted.err;
  EXPECT_TRUE(Contains(untrusted.err, "TLS certificate not trusted")) << untrusted.err;
}

TEST(ApiAuthTest, HttpsCanRequireTls13) {
  LocalFarm farm("auth-tls13");
  std::string cert, key;
  TSR_REQUIRE(MakeCertificate(farm.dir(), &cert, &key),
              "the openssl tool cannot make a test certificate (apt-get install openssl)");
  farm.AppendSchedulerConfig("api:\n  tls_cert_file: " + cert + "\n  tls_key_file: " + key +
                             "\n  tls_min_version: \"1.3\"\n");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  const int port = std::stoi(farm.api_url().substr(farm.api_url().rfind(':') + 1));
  EXPECT_TRUE(Handshake(port, TLS1_3_VERSION));
  EXPECT_FALSE(Handshake(port, TLS1_2_VERSION));
  farm.set_ca_file(cert);
  int status = 0;
  farm.Get("/api/v1/whoami", &status);
  EXPECT_EQ(status, 200);
}

// ---- the CLI's credentials ------------------------------------------------------------------

TEST(ApiAuthTest, CliFindsServerAndTokenInFlagsEnvironmentAndConfigFile) {
  LocalFarm farm("auth-cli");
  farm.UseCurve();  // join tokens exist only on a CURVE farm
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  const std::string cli = Bin("tessera");
  const std::string server = farm.api_url();
  auto run = [&](std::vector<std::string> args, std::vector<std::string> env = {}) {
    args.insert(args.begin(), cli);
    return RunProcess(args, 30s, env);
  };

  // No token: exit 4 with the reason and where a token goes.
  RunResult none = run({"whoami", "--server", server});
  EXPECT_EQ(none.exit_code, 4) << none.err;
  EXPECT_TRUE(Contains(none.err, "needs a bearer token")) << none.err;
  EXPECT_TRUE(Contains(none.err, "TESSERA_TOKEN")) << none.err;

  RunResult by_env = run({"whoami", "--server", server}, {"TESSERA_TOKEN=" + farm.token()});
  EXPECT_EQ(by_env.exit_code, 0) << by_env.err;
  EXPECT_TRUE(Contains(by_env.out, "admin (admin)")) << by_env.out;

  // The config file: server and a token file beside it (relative paths are relative to it).
  const std::string config_dir = farm.dir() + "/xdg/tessera";
  fs::create_directories(config_dir);
  WriteFile(config_dir + "/token", farm.token() + "\n");
  WriteFile(config_dir + "/config.yaml", "server: " + server + "\ntoken_file: token\n");
  RunResult by_file = run({"whoami"}, {"XDG_CONFIG_HOME=" + farm.dir() + "/xdg"});
  EXPECT_EQ(by_file.exit_code, 0) << by_file.err;
  EXPECT_TRUE(Contains(by_file.out, "admin (admin) at " + server)) << by_file.out;
  WriteFile(farm.dir() + "/bad.yaml", "server: " + server + "\ntokn: x\n");
  RunResult bad = run({"whoami"}, {"TESSERA_CONFIG=" + farm.dir() + "/bad.yaml"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(Contains(bad.err, "tokn: unknown key")) << bad.err;

  // `tessera token`: create, use, list, revoke.
  const std::vector<std::string> as_admin = {"TESSERA_TOKEN=" + farm.token(),
                                             "TESSERA_SERVER=" + server};
  RunResult created =
      run({"token", "create", "--user", "carol", "--role", "viewer", "--note", "ci"}, as_admin);
  ASSERT_EQ(created.exit_code, 0) << created.err;
  const size_t at = created.out.find("tsra-");
  ASSERT_NE(at, std::string::npos) << created.out;
  const std::string carol = created.out.substr(at, 69);
  RunResult me = run({"whoami", "--server", server, "--token", carol});
  EXPECT_TRUE(Contains(me.out, "carol (viewer)")) << me.out << me.err;
  // A viewer may not submit: exit 4 and the role in the message.
  const std::string job_file = farm.dir() + "/job.yaml";
  WriteFile(job_file, kNoopJob);
  RunResult denied = run({"submit", job_file, "--server", server, "--token", carol});
  EXPECT_EQ(denied.exit_code, 4) << denied.err;
  EXPECT_TRUE(Contains(denied.err, "needs the submitter role")) << denied.err;

  RunResult listed = run({"token", "list", "--json"}, as_admin);
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  nlohmann::json list = nlohmann::json::parse(listed.out);
  int64_t carol_id = 0;
  for (const auto& t : list["tokens"]) {
    if (t["user"] == "carol") carol_id = t["id"].get<int64_t>();
  }
  ASSERT_GT(carol_id, 0) << listed.out;
  RunResult table = run({"token", "list"}, as_admin);
  EXPECT_TRUE(Contains(table.out, "carol")) << table.out;
  EXPECT_TRUE(Contains(table.out, "viewer")) << table.out;
  EXPECT_EQ(run({"token", "revoke", std::to_string(carol_id)}, as_admin).exit_code, 0);
  EXPECT_EQ(run({"whoami", "--server", server, "--token", carol}).exit_code, 4);

  // Join tokens are their own command.
  RunResult join = run({"join-token", "create", "--uses", "1"}, as_admin);
  EXPECT_EQ(join.exit_code, 0) << join.err;
  EXPECT_TRUE(Contains(join.out, "tsrj-")) << join.out;
  RunResult joins = run({"join-token", "list"}, as_admin);
  EXPECT_TRUE(Contains(joins.out, "valid") && Contains(joins.out, "0/1")) << joins.out;
  RunResult unjoin = run({"join-token", "revoke", "1"}, as_admin);
  EXPECT_EQ(unjoin.exit_code, 0) << unjoin.err;
  EXPECT_TRUE(Contains(run({"join-token", "list"}, as_admin).out, "revoked"));
  RunResult bad_ttl =
      run({"token", "create", "--user", "d", "--role", "viewer", "--ttl", "soon"}, as_admin);
  EXPECT_EQ(bad_ttl.exit_code, 2);
  EXPECT_TRUE(Contains(bad_ttl.err, "--ttl")) << bad_ttl.err;
}

// ---- what a submitter may write and see -----------------------------------------------------

int SubmitAs(LocalFarm& farm, const std::string& token, const std::string& job_yaml,
             nlohmann::json* reply) {
  return StatusAs(farm, token, "POST", "/api/v1/jobs", {{"job_yaml", job_yaml}}, reply);
}

TEST(ApiAuthTest, AJobsOutputFolderIsItsOwn) {
  LocalFarm farm("auth-folders");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  const std::string ana = CreateToken(farm, "ana", "submitter");
  const std::string bob = CreateToken(farm, "bob", "submitter");
  const std::string into_a = kNoopJob + "output:\n  directory: shots/a\n";
  nlohmann::json reply;
  ASSERT_EQ(SubmitAs(farm, ana, into_a, &reply), 201) << reply.dump();
  const int64_t first = reply["job"]["id"];

  // Another user may not write into it (not even through another spelling of the path)...
  for (const std::string dir : {"shots/a", "shots/a/"}) {
    EXPECT_EQ(SubmitAs(farm, bob, kNoopJob + "output:\n  directory: " + dir + "\n", &reply), 403)
        << dir << ": " << reply.dump();
    EXPECT_TRUE(Contains(reply.value("error", ""), "output.directory")) << reply.dump();
    EXPECT_TRUE(Contains(reply.value("error", ""), "job " + std::to_string(first))) << reply.dump();
  }
  // ... nor, with reuse, even if asked.
  EXPECT_EQ(SubmitAs(farm, bob, into_a + "  reuse: true\n", &reply), 403) << reply.dump();
  // Its owner only when asking explicitly.
  EXPECT_EQ(SubmitAs(farm, ana, into_a, &reply), 409) << reply.dump();
  EXPECT_TRUE(Contains(reply.value("error", ""), "output.reuse")) << reply.dump();
  EXPECT_EQ(SubmitAs(farm, ana, into_a + "  reuse: true\n", &reply), 201) << reply.dump();
  // Refusals stored nothing: two jobs in all.
  int status = 0;
  EXPECT_EQ(farm.Get("/api/v1/jobs", &status)["jobs"].size(), 2u);
  // Default folders (<name>-<id>) never collide.
  EXPECT_EQ(SubmitAs(farm, bob, kNoopJob, &reply), 201) << reply.dump();
}

TEST(ApiAuthTest, DependenciesMustNameJobsThatExist) {
  LocalFarm farm("auth-deps");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  nlohmann::json reply;
  const std::string admin = farm.token();
  ASSERT_EQ(SubmitAs(farm, admin, kNoopJob, &reply), 201) << reply.dump();
  const int64_t first = reply["job"]["id"];
  int64_t newest = first;
  for (const std::string field : {"depends_on", "frame_depends_on"}) {
    // The id the next job will get is not a job yet: naming it (a job waiting on itself
    // forever) is refused like any other id that does not exist.
    for (int64_t id : {newest + 1, int64_t{999999}}) {
      const std::string job =
          kNoopJob + field + ": [" + std::to_string(first) + ", " + std::to_string(id) + "]\n";
      EXPECT_EQ(SubmitAs(farm, admin, job, &reply), 400) << job << reply.dump();
      EXPECT_TRUE(Contains(reply.value("error", ""),
                           field + "[1]: job " + std::to_string(id) + " does not exist"))
          << reply.dump();
    }
    ASSERT_EQ(
        SubmitAs(farm, admin, kNoopJob + field + ": [" + std::to_string(first) + "]\n", &reply),
        201)
        << reply.dump();
    newest = reply["job"]["id"];
  }
}

TEST(ApiAuthTest, ViewersSeeNoServerPaths) {
  LocalFarm farm("auth-paths");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  const std::string ana = CreateToken(farm, "ana", "submitter");
  const std::string viewer = CreateToken(farm, "vic", "viewer");
  nlohmann::json reply;
  ASSERT_EQ(SubmitAs(farm, ana, kNoopJob + "output:\n  directory: shots/p\n", &reply), 201);
  const std::string path = "/api/v1/jobs/" + std::to_string(reply["job"]["id"].get<int64_t>());
  const std::string absolute = reply["job"]["output_dir"];
  EXPECT_EQ(absolute.front(), '/') << absolute;

  // The owner and the admin see where the frames are on the scheduler's disk...
  ASSERT_EQ(StatusAs(farm, ana, "GET", path, {}, &reply), 200);
  EXPECT_EQ(reply["job"]["output_dir"], absolute);
  ASSERT_EQ(StatusAs(farm, farm.token(), "GET", path, {}, &reply), 200);
  EXPECT_EQ(reply["job"]["output_dir"], absolute);
  // ... a viewer only the folder under the output root, in the job and in the list.
  ASSERT_EQ(StatusAs(farm, viewer, "GET", path, {}, &reply), 200);
  EXPECT_EQ(reply["job"]["output_dir"], "shots/p");
  ASSERT_EQ(StatusAs(farm, viewer, "GET", "/api/v1/jobs", {}, &reply), 200);
  EXPECT_EQ(reply["jobs"][0]["output_dir"], "shots/p");
  EXPECT_FALSE(Contains(reply.dump(), farm.dir())) << reply.dump();
}

}  // namespace
}  // namespace tessera::testing
