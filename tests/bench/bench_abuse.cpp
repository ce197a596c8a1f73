// tessera-bench abuse: does the API keep answering while it is being abused? Starts a real
// tessera-scheduler (any build: --scheduler names the binary, so two builds can be compared in
// one run), opens --connections hostile connections from loopback addresses 127.0.1.x, and
// times --requests normal requests (GET /api/v1/summary with the admin token, each on a fresh
// connection from 127.0.0.1) while they are held open. Modes:
//   idle:    connections that send nothing
//   slow:    connections that dribble a header line a byte at a time, one byte per second each
//   headers: one request with --header-lines header lines (the answer's status is reported)
// Figures: answered=N/M, p50_ms, p99_ms, max_ms (unanswered requests count as the timeout),
// held=K (hostile connections still open at the end, per the attacker's view).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/bench/bench.h"
#include "tests/support/process.h"

namespace tessera::bench {

namespace {

using Clock = std::chrono::steady_clock;

int ConnectFrom(const std::string& source, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in src{};
  src.sin_family = AF_INET;
  inet_pton(AF_INET, source.c_str(), &src.sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof(src)) != 0) {
    close(fd);
    return -1;
  }
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&dst), sizeof(dst)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Sends `request` on a fresh connection and reads until the server closes it or `timeout`
// passes. Returns the status line's code, or 0 when nothing complete came back in time.
int Exchange(int port, const std::string& request, std::chrono::milliseconds timeout) {
  const int fd = ConnectFrom("127.0.0.1", port);
  if (fd < 0) return 0;
  const auto deadline = Clock::now() + timeout;
  size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  std::string reply;
  char buf[8192];
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) break;
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    reply.append(buf, static_cast<size_t>(n));
    // A whole JSON answer (Connection: close): stop at the end of its body.
    if (reply.find("\r\n\r\n") != std::string::npos && reply.back() == '}') break;
  }
  close(fd);
  if (reply.rfind("HTTP/1.", 0) != 0 || reply.size() < 12) return 0;
  return std::atoi(reply.c_str() + 9);
}

bool StillOpen(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 0) <= 0) return true;  // nothing to read: open and quiet
  char c;
  return recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

void Run(const std::string& scheduler, const std::string& mode, int connections, int requests,
         int header_lines, int port) {
  TempDir dir("tessera-bench-abuse");
  const std::string data = dir.path() + "/data";
  const std::string api = "127.0.0.1:" + std::to_string(port);
  const std::string broker = "tcp://127.0.0.1:" + std::to_string(port + 1);
  // Its log goes to this program's stderr, away from the figures.
  testing::Process server = testing::Process::Start(
      {scheduler, "--data", data, "--api", api, "--broker", broker, "--log-level", "warn"},
      "/dev/stderr");
  if (server.pid() <= 0) {
    std::fprintf(stderr, "cannot start %s\n", scheduler.c_str());
    return;
  }
  std::string token;
  for (int i = 0; i < 300 && token.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (Exchange(port, "GET /healthz HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n",
                 std::chrono::milliseconds(1000)) == 200) {
      std::ifstream in(data + "/admin.token");
      std::getline(in, token);
    }
  }
  const std::string normal = "GET /api/v1/summary HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer " +
                             token + "\r\nConnection: close\r\n\r\n";
  std::printf("scheduler %s up on %d; mode %s\n", scheduler.c_str(), port, mode.c_str());

  Figures figures = {{"mode", mode}};
  if (mode == "headers") {
    std::string request = "GET /api/v1/summary HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer " +
                          token + "\r\nConnection: close\r\n";
    for (int i = 0; i < header_lines; ++i) request += "X-Filler-" + std::to_string(i) + ": x\r\n";
    request += "\r\n";
    const auto t0 = Clock::now();
    const int status = Exchange(port, request, std::chrono::milliseconds(30000));
    figures.push_back({"header_lines", std::to_string(header_lines)});
    figures.push_back({"header_bytes", std::to_string(request.size())});
    figures.push_back({"status", std::to_string(status)});
    figures.push_back(
        {"ms", Fixed(std::chrono::duration<double, std::milli>(Clock::now() - t0).count(), 1)});
  } else {
    std::vector<int> fds;
    for (int i = 0; i < connections; ++i) {
      // 100 per source address: an attacker with a handful of addresses.
      const std::string source = "127.0.1." + std::to_string(1 + i / 100);
      const int fd = ConnectFrom(source, port);
      if (fd >= 0) fds.push_back(fd);
    }
    std::atomic<bool> stop{false};
    std::thread dribbler;
    if (mode == "slow") {
      dribbler = std::thread([&] {
        const std::string line = "GET /api/v1/summary HTTP/1.1\r\nX-Slow: ";
        for (size_t at = 0; !stop; ++at) {
          const char c = at < line.size() ? line[at] : 'a';
          for (int fd : fds) send(fd, &c, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
          for (int i = 0; i < 10 && !stop; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
          }
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
    std::vector<double> ms;
    int answered = 0;
    constexpr auto kTimeout = std::chrono::milliseconds(5000);
    for (int i = 0; i < requests; ++i) {
      const auto t0 = Clock::now();
      const int status = Exchange(port, normal, kTimeout);
      const double took = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      if (status == 200) ++answered;
      ms.push_back(status == 200 ? took : static_cast<double>(kTimeout.count()));
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    stop = true;
    if (dribbler.joinable()) dribbler.join();
    int held = 0;
    for (int fd : fds) held += StillOpen(fd) ? 1 : 0;
    for (int fd : fds) close(fd);
    figures.push_back({"connections", std::to_string(fds.size())});
    figures.push_back({"held", std::to_string(held)});
    figures.push_back({"answered", std::to_string(answered) + "/" + std::to_string(requests)});
    figures.push_back({"p50_ms", Fixed(Percentile(ms, 50), 1)});
    figures.push_back({"p99_ms", Fixed(Percentile(ms, 99), 1)});
    figures.push_back({"max_ms", Fixed(Percentile(ms, 100), 1)});
  }
  server.Stop(std::chrono::minutes(5));
  PrintFigures(figures);
}

}  // namespace

void AddAbuseCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("abuse", "normal requests answered while the API is abused");
  static std::string scheduler;
  static std::string mode = "idle";
  static int connections = 1000, requests = 20, header_lines = 20000, port = 18570;
  cmd->add_option("--scheduler", scheduler, "tessera-scheduler binary [next to tessera-bench]");
  cmd->add_option("--mode", mode, "idle, slow or headers")->capture_default_str();
  cmd->add_option("--connections", connections, "hostile connections")->capture_default_str();
  cmd->add_option("--requests", requests, "normal requests timed")->capture_default_str();
  cmd->add_option("--header-lines", header_lines, "headers mode: lines")->capture_default_str();
  cmd->add_option("--port", port, "API port (the broker takes the next)")->capture_default_str();
  cmd->callback([] {
    std::string binary = scheduler;
    if (binary.empty()) {
      binary = (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "tessera-scheduler")
                   .string();
    }
    Run(binary, mode, connections, requests, header_lines, port);
  });
}

}  // namespace tessera::bench
