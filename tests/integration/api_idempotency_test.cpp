// Submitting twice is safe: a POST that creates something and carries an Idempotency-Key is
// answered, when re-sent with that key, with what the first one created, and nothing new is
// stored. Against a real scheduler, and through the real CLI over a link that drops the first
// answer after the scheduler stored the job.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/support/farm.h"
#include "tests/support/process.h"

namespace tessera::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

const std::string kJob = "renderer: noop\nname: once\nframes: 1-3\n";

struct Answer {
  int status = -1;
  json body;
  bool replayed = false;
};

Answer Post(const LocalFarm& farm, const std::string& path, const json& body,
            const std::string& key, const std::string& token) {
  httplib::Client client(farm.api_url());
  client.set_bearer_token_auth(token);
  httplib::Headers headers;
  if (!key.empty()) headers.emplace("Idempotency-Key", key);
  Answer out;
  if (auto res = client.Post(path, headers, body.dump(), "application/json")) {
    out.status = res->status;
    out.body = json::parse(res->body, nullptr, false);
    out.replayed = res->get_header_value("Idempotent-Replayed") == "true";
  }
  return out;
}

size_t JobCount(LocalFarm& farm) { return farm.Get("/api/v1/jobs")["jobs"].size(); }

TEST(ApiIdempotencyTest, ARepeatedSubmissionReturnsTheFirstJob) {
  LocalFarm farm("idem-jobs");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  const json body = {{"job_yaml", kJob}};

  Answer first = Post(farm, "/api/v1/jobs", body, "k-1", farm.token());
  ASSERT_EQ(first.status, 201) << first.body.dump();
  EXPECT_FALSE(first.replayed);
  Answer again = Post(farm, "/api/v1/jobs", body, "k-1", farm.token());
  ASSERT_EQ(again.status, 201) << again.body.dump();
  EXPECT_TRUE(again.replayed);
  EXPECT_EQ(again.body["job"]["id"], first.body["job"]["id"]);
  EXPECT_EQ(JobCount(farm), 1u);

  // The same key for another request is refused; without a key every POST is a new job.
  Answer other =
      Post(farm, "/api/v1/jobs", {{"job_yaml", kJob + "priority: 70\n"}}, "k-1", farm.token());
  EXPECT_EQ(other.status, 422) << other.body.dump();
  EXPECT_NE(other.body.value("error", "").find("another request"), std::string::npos);
  EXPECT_EQ(Post(farm, "/api/v1/jobs", body, "", farm.token()).status, 201);
  EXPECT_EQ(JobCount(farm), 2u);

  // Keys belong to their user: another user's "k-1" is its own.
  int status = 0;
  const json token = farm.Post("/api/v1/tokens", {{"user", "ana"}, {"role", "submitter"}}, &status);
  ASSERT_EQ(status, 201);
  Answer ana = Post(farm, "/api/v1/jobs", body, "k-1", token["token"]);
  EXPECT_EQ(ana.status, 201);
  EXPECT_FALSE(ana.replayed);
  EXPECT_EQ(JobCount(farm), 3u);

  // Malformed keys are refused naming the header, and nothing is stored.
  for (const std::string& bad : {std::string("has space"), std::string(256, 'x'), std::string()}) {
    Answer refused = Post(farm, "/api/v1/jobs", body, bad.empty() ? "\"\"" : bad, farm.token());
    EXPECT_EQ(refused.status, 400) << bad;
    EXPECT_NE(refused.body.value("error", "").find("Idempotency-Key"), std::string::npos);
  }
  EXPECT_EQ(JobCount(farm), 3u);

  // A job the key created and that was deleted since is not silently created again.
  const std::string id = std::to_string(first.body["job"]["id"].get<int64_t>());
  farm.Post("/api/v1/jobs/" + id + "/cancel", json::object(), &status);
  ASSERT_EQ(status, 200);
  ASSERT_EQ(farm.Delete("/api/v1/jobs/" + id), 200);
  Answer gone = Post(farm, "/api/v1/jobs", body, "k-1", farm.token());
  EXPECT_EQ(gone.status, 409) << gone.body.dump();
  EXPECT_NE(gone.body.value("error", "").find("deleted"), std::string::npos);
  EXPECT_EQ(JobCount(farm), 2u);
}

TEST(ApiIdempotencyTest, TokensAreCreatedOnceAndTheirSecretsNeverReplayed) {
  LocalFarm farm("idem-tokens");
  farm.UseCurve();  // join tokens exist on CURVE farms only
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  const json body = {{"user", "bo"}, {"role", "viewer"}};
  Answer first = Post(farm, "/api/v1/tokens", body, "t-1", farm.token());
  ASSERT_EQ(first.status, 201) << first.body.dump();
  Answer again = Post(farm, "/api/v1/tokens", body, "t-1", farm.token());
  EXPECT_EQ(again.status, 409) << again.body.dump();
  const std::string error = again.body.value("error", "");
  EXPECT_NE(error.find("api_token " + std::to_string(first.body["api_token"]["id"].get<int64_t>())),
            std::string::npos)
      << error;
  EXPECT_EQ(error.find(first.body["token"].get<std::string>()), std::string::npos);
  // The admin's own token and bo's: two in all.
  EXPECT_EQ(farm.Get("/api/v1/tokens")["tokens"].size(), 2u);

  Answer join = Post(farm, "/api/v1/join-tokens", {{"note", "fleet"}}, "j-1", farm.token());
  ASSERT_EQ(join.status, 201) << join.body.dump();
  EXPECT_EQ(Post(farm, "/api/v1/join-tokens", {{"note", "fleet"}}, "j-1", farm.token()).status,
            409);
  EXPECT_EQ(farm.Get("/api/v1/join-tokens")["tokens"].size(), 1u);
}

// A TCP relay that drops the first answer: the request reaches the scheduler (which stores the
// job), the client sees the connection close with no reply. Later connections are relayed whole.
class AnswerDroppingRelay {
 public:
  explicit AnswerDroppingRelay(int upstream_port) : upstream_(upstream_port) {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    socklen_t len = sizeof(addr);
    getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    listen(listener_, 16);
    thread_ = std::thread([this] { Run(); });
  }
  ~AnswerDroppingRelay() {
    stop_ = true;
    shutdown(listener_, SHUT_RDWR);
    close(listener_);
    thread_.join();
  }
  int port() const { return port_; }
  int dropped() const { return dropped_.load(); }

 private:
  void Run() {
    while (!stop_) {
      const int client = accept(listener_, nullptr, nullptr);
      if (client < 0) return;
      const int server = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(static_cast<uint16_t>(upstream_));
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      if (connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
        close(client);
        close(server);
        continue;
      }
      // One request per connection is all the CLI sends here: forward it, then the answer.
      const std::string request = ReadMessage(client);
      send(server, request.data(), request.size(), MSG_NOSIGNAL);
      const std::string answer = ReadMessage(server);
      const bool drop = request.rfind("POST /api/v1/jobs ", 0) == 0 && dropped_ == 0;
      if (drop) {
        ++dropped_;
      } else {
        send(client, answer.data(), answer.size(), MSG_NOSIGNAL);
      }
      close(server);
      close(client);
    }
  }

  // One HTTP message: headers, then Content-Length bytes of body.
  static std::string ReadMessage(int fd) {
    std::string data;
    char buf[65536];
    size_t want = std::string::npos;
    while (want == std::string::npos || data.size() < want) {
      const ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) break;
      data.append(buf, static_cast<size_t>(n));
      const size_t end = data.find("\r\n\r\n");
      if (want == std::string::npos && end != std::string::npos) {
        size_t length = 0;
        std::string lower = data.substr(0, end);
        for (char& c : lower) c = static_cast<char>(std::tolower(c));
        if (size_t at = lower.find("content-length:"); at != std::string::npos) {
          length = std::stoul(lower.substr(at + 15));
        }
        want = end + 4 + length;
      }
    }
    return data;
  }

  int upstream_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> dropped_{0};
  std::thread thread_;
};

TEST(ApiIdempotencyTest, TheCliRetriesALostAnswerWithoutASecondJob) {
  LocalFarm farm("idem-cli");
  ASSERT_TRUE(farm.StartScheduler()) << farm.SchedulerLog();
  const int port = std::stoi(farm.api_url().substr(farm.api_url().rfind(':') + 1));
  AnswerDroppingRelay relay(port);
  const std::string job_file = farm.dir() + "/once.yaml";
  std::ofstream(job_file) << kJob;

  RunResult run =
      RunProcess({std::string(TSR_BIN_DIR) + "/tessera", "submit", job_file, "--server",
                  "http://127.0.0.1:" + std::to_string(relay.port()), "--token", farm.token()},
                 60s);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_EQ(relay.dropped(), 1) << "the first answer was lost on the way";
  EXPECT_NE(run.err.find("retrying"), std::string::npos) << run.err;
  // One job, and the id the CLI printed is that job's.
  const json jobs = farm.Get("/api/v1/jobs")["jobs"];
  ASSERT_EQ(jobs.size(), 1u) << jobs.dump();
  EXPECT_EQ(run.out, std::to_string(jobs[0]["id"].get<int64_t>()) + "\n");
}

}  // namespace
}  // namespace tessera::testing
