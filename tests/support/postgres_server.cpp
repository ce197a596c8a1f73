#include "tests/support/postgres_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace tessera::testing {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

bool Executable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

// Gone, or a zombie nobody reaped yet (a daemonised postmaster is not our child).
bool ProcessGone(pid_t pid) {
  if (pid <= 0) return true;
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos || paren + 2 >= text.size()) return true;
  const char state = text[paren + 2];
  return state == 'Z' || state == 'X';
}

bool WaitGone(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!ProcessGone(pid)) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

int FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

// The user the server runs as: ourselves, or `postgres` when we are root.
Status ServerUser(uid_t* uid, gid_t* gid) {
  if (::geteuid() != 0) {
    *uid = ::geteuid();
    *gid = ::getegid();
    return Status::Ok();
  }
  const passwd* pw = ::getpwnam("postgres");
  if (pw == nullptr) {
    return Status::FailedPrecondition(
        "running as root and there is no 'postgres' user to run PostgreSQL as (the "
        "postgresql-15 package creates it: deploy/install-deps.sh)");
  }
  *uid = pw->pw_uid;
  *gid = pw->pw_gid;
  return Status::Ok();
}

Status Chown(const std::string& path, uid_t uid, gid_t gid) {
  if (::chown(path.c_str(), uid, gid) != 0) {
    return Status::Internal("chown " + path + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The last lines of a log, to say why a tool failed.
std::string Tail(const std::string& path) {
  const std::string text = ReadText(path);
  return text.size() > 1500 ? "..." + text.substr(text.size() - 1500) : text;
}

struct ConnCloser {
  void operator()(PGconn* c) const { PQfinish(c); }
};
struct ResultCloser {
  void operator()(PGresult* r) const { PQclear(r); }
};

// Runs `argv` (argv[0] a path) as uid/gid in `dir`, output appended to `log`, within `timeout_s`;
// returns its exit status (-1 when it ran too long and was killed).
int RunAs(const std::vector<std::string>& argv, const std::string& dir, const std::string& log,
          uid_t uid, gid_t gid, int timeout_s) {
  // Everything the child needs is made before fork: after it, only system calls.
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const char* path_env = std::getenv("PATH");
  std::vector<std::string> env_text = {
      "LC_ALL=C", "LANG=C", std::string("PATH=") + (path_env ? path_env : "/usr/bin:/bin"),
      "HOME=" + dir};
  std::vector<char*> env;
  for (std::string& e : env_text) env.push_back(e.data());
  env.push_back(nullptr);
  const bool switch_user = uid != ::geteuid();
  const pid_t child = ::fork();
  if (child == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    const int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, 0);
    ::setsid();  // our own process group: a timeout kills the tool and what it started
    if (switch_user && (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0)) {
      _exit(126);
    }
    if (::chdir(dir.c_str()) != 0) _exit(126);
    ::execve(args[0], args.data(), env.data());
    _exit(127);
  }
  if (child < 0) return -1;
  const auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(child, &status, WNOHANG);
    if (r == child) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (r < 0) return -1;
    if (Clock::now() > deadline) {
      ::kill(child, SIGKILL);
      ::waitpid(child, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// A folder of ours under /tmp (reachable by the server's user even when $TMPDIR is private).
StatusOr<std::string> MakeFolder(uid_t uid, gid_t gid) {
  std::string tmpl = "/tmp/tessera-pg-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    return Status::Internal(std::string("mkdtemp: ") + std::strerror(errno));
  }
  ::chmod(tmpl.c_str(), 0700);
  TSR_RETURN_IF_ERROR(Chown(tmpl, uid, gid));
  return tmpl;
}

// A cluster made by initdb once per machine, server version and user, copied for each server:
// initdb takes seconds, a copy a fraction of one. Made under a file lock, so test binaries
// starting together make it once.
StatusOr<std::string> TemplateCluster(const std::string& bin, uid_t uid, gid_t gid) {
  const std::string major = fs::path(bin).parent_path().filename().string();
  const std::string dir = "/tmp/tessera-pg-initdb-" + major + "-" + std::to_string(uid);
  const std::string lock_path = dir + ".lock";
  const int lock = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock < 0) return Status::Internal("open " + lock_path + ": " + std::strerror(errno));
  ::flock(lock, LOCK_EX);
  Status made = Status::Ok();
  if (!fs::exists(dir + "/data/PG_VERSION")) {
    std::error_code ec;
    fs::remove_all(dir, ec);
    fs::create_directories(dir, ec);
    ::chmod(dir.c_str(), 0700);
    made = Chown(dir, uid, gid);
    const std::string log = dir + "/initdb.log";
    if (made.ok() && RunAs({bin + "/initdb", "-D", dir + "/data", "-U", "postgres", "--auth=trust",
                            "-E", "UTF8", "--locale=C", "-N"},
                           dir, log, uid, gid, 180) != 0) {
      made = Status::Internal("initdb failed: " + Tail(log));
      fs::remove_all(dir + "/data", ec);
    }
  }
  ::flock(lock, LOCK_UN);
  ::close(lock);
  TSR_RETURN_IF_ERROR(made);
  return dir + "/data";
}

}  // namespace

std::string PostgresServer::FindBinDir() {
  if (const char* bin = std::getenv("TESSERA_POSTGRES_BIN"); bin != nullptr && *bin != '\0') {
    return Executable(std::string(bin) + "/pg_ctl") ? bin : "";
  }
  std::string best;
  int best_major = 0;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    const std::string name = e.path().filename().string();
    const int major = std::atoi(name.c_str());
    const std::string bin = e.path().string() + "/bin";
    if (major > best_major && Executable(bin + "/initdb") && Executable(bin + "/pg_ctl")) {
      best = bin;
      best_major = major;
    }
  }
  return best;
}

PostgresServer::PostgresServer(std::string bin, std::string folder, Options options, uid_t uid,
                               gid_t gid)
    : bin_(std::move(bin)), folder_(std::move(folder)), options_(options), uid_(uid), gid_(gid) {}

StatusOr<std::unique_ptr<PostgresServer>> PostgresServer::Start(const Options& options) {
  const std::string bin = FindBinDir();
  if (bin.empty()) {
    return Status::FailedPrecondition(
        "PostgreSQL's server programs (initdb, pg_ctl) are not installed: no "
        "/usr/lib/postgresql/<version>/bin, and TESSERA_POSTGRES_BIN is not set (install "
        "postgresql-15: deploy/install-deps.sh)");
  }
  uid_t uid = 0;
  gid_t gid = 0;
  TSR_RETURN_IF_ERROR(ServerUser(&uid, &gid));
  TSR_ASSIGN_OR_RETURN(std::string cluster, TemplateCluster(bin, uid, gid));
  TSR_ASSIGN_OR_RETURN(std::string folder, MakeFolder(uid, gid));
  std::unique_ptr<PostgresServer> server(new PostgresServer(bin, folder, options, uid, gid));
  server->StartGuard();
  // cp -a keeps the owner and the 0700 modes the server insists on.
  if (RunAs({"/bin/cp", "-a", cluster, server->data()}, folder, folder + "/server.log", uid, gid,
            120) != 0) {
    return Status::Internal("copying the template cluster failed: " + Tail(folder + "/server.log"));
  }
  TSR_RETURN_IF_ERROR(server->WriteSettings(/*replica=*/false));
  TSR_RETURN_IF_ERROR(server->StartPostmaster());
  return server;
}

// A shell that waits for the end of the pipe we hold (our exit, however it happens) and then
// stops the server and removes its folder. After a clean stop there is nothing left to do.
void PostgresServer::StartGuard() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return;
  const std::string script =
      "cat >/dev/null; pid=$(head -n1 \"$1/data/postmaster.pid\" 2>/dev/null); "
      "if [ -n \"$pid\" ]; then kill -QUIT \"$pid\" 2>/dev/null; sleep 2; "
      "kill -KILL \"$pid\" 2>/dev/null; fi; rm -rf \"$1\"";
  const char* argv[] = {"/bin/sh",       "-c",   script.c_str(), "tessera-pg-guard",
                        folder_.c_str(), nullptr};
  const pid_t child = ::fork();
  if (child == 0) {
    ::dup2(fds[0], 0);  // dup2 clears close-on-exec on the copy
    ::setsid();         // not in the test's process group: a ^C of the test reaches it via EOF
    ::execv("/bin/sh", const_cast<char* const*>(argv));
    _exit(127);
  }
  ::close(fds[0]);
  if (child < 0) {
    ::close(fds[1]);
    return;
  }
  guard_pid_ = child;
  guard_fd_ = fds[1];
}

Status PostgresServer::RunTool(const std::vector<std::string>& args, int timeout_s) const {
  std::vector<std::string> argv = args;
  argv[0] = bin_ + "/" + argv[0];
  const std::string log = folder_ + "/server.log";
  const int rc = RunAs(argv, folder_, log, uid_, gid_, timeout_s);
  if (rc == 0) return Status::Ok();
  return Status::Internal(args[0] + " " +
                          (rc < 0 ? "ran too long" : "exited " + std::to_string(rc)) + ": " +
                          Tail(log));
}

Status PostgresServer::WriteSettings(bool replica) {
  // The port is chosen before it is written: the server and ConnInfo() must agree on it.
  if (options_.tcp && port_ == 5432) port_ = FreeLoopbackPort();
  if (options_.tcp && port_ <= 0) return Status::Internal("no free port on 127.0.0.1");
  std::ofstream conf(data() + "/postgresql.conf", std::ios::app);
  conf << "\n# tests/support/postgres_server.cpp" << (replica ? " (replica)" : "") << "\n"
       << "port = " << port_ << "\n"
       << "listen_addresses = '" << (options_.tcp ? "127.0.0.1" : "") << "'\n"
       << "unix_socket_directories = '" << folder_ << "'\n"
       << "fsync = on\nsynchronous_commit = on\nfull_page_writes = on\n"
       << "shared_buffers = 32MB\nmax_connections = 60\n"
       << "wal_level = replica\nmax_wal_senders = 4\nhot_standby = on\n"
       << "logging_collector = off\nlog_min_messages = warning\n";
  std::ofstream hba(data() + "/pg_hba.conf", std::ios::trunc);
  hba << "local all all trust\n"
      << "local replication all trust\n"
      << "host all all 127.0.0.1/32 scram-sha-256\n"
      << "host replication all 127.0.0.1/32 scram-sha-256\n";
  if (!conf || !hba) return Status::Internal("cannot write the settings in " + data());
  return Status::Ok();
}

Status PostgresServer::StartPostmaster() {
  Status started = Status::Ok();
  // Right after a kill -9 the old server's children may hold its shared memory a moment longer.
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  do {
    started = RunTool(
        {"pg_ctl", "start", "-w", "-t", "60", "-s", "-D", data(), "-l", folder_ + "/postgres.log"},
        90);
    if (started.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  } while (Clock::now() < deadline);
  if (!started.ok()) {
    return Status::Internal(started.message() +
                            "\npostgres.log: " + Tail(folder_ + "/postgres.log"));
  }
  std::ifstream pid_file(data() + "/postmaster.pid");
  pid_file >> pid_;
  if (pid_ <= 0) return Status::Internal("no PID in " + data() + "/postmaster.pid");
  return Status::Ok();
}

PostgresServer::~PostgresServer() {
  (void)Stop();
  std::error_code ec;
  fs::remove_all(folder_, ec);
  if (guard_fd_ >= 0) ::close(guard_fd_);
  if (guard_pid_ > 0) ::waitpid(guard_pid_, nullptr, 0);
}

bool PostgresServer::running() const { return pid_ > 0 && !ProcessGone(pid_); }

Status PostgresServer::Stop() {
  if (pid_ <= 0) return Status::Ok();
  const pid_t pid = pid_;
  pid_ = -1;
  if (ProcessGone(pid)) return Status::Ok();
  ::kill(pid, SIGINT);  // fast shutdown: clients are disconnected, the data is checkpointed
  if (WaitGone(pid, std::chrono::seconds(30))) return Status::Ok();
  (void)RunTool({"pg_ctl", "stop", "-m", "immediate", "-s", "-D", data()}, 30);
  if (WaitGone(pid, std::chrono::seconds(10))) return Status::Ok();
  ::kill(pid, SIGKILL);
  WaitGone(pid, std::chrono::seconds(10));
  return Status::Internal("PostgreSQL (pid " + std::to_string(pid) +
                          ") did not stop; it was killed");
}

void PostgresServer::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  WaitGone(pid_, std::chrono::seconds(10));
  pid_ = -1;
}

Status PostgresServer::Restart() {
  if (running()) return Status::FailedPrecondition("the server is running");
  return StartPostmaster();
}

std::string PostgresServer::ConnInfo(const std::string& dbname) const {
  return "host=" + folder_ + " port=" + std::to_string(port_) + " user=postgres dbname=" + dbname;
}

std::string PostgresServer::TcpConnInfo(const std::string& dbname) const {
  return "host=127.0.0.1 port=" + std::to_string(port_) + " dbname=" + dbname;
}

StatusOr<std::string> PostgresServer::Query(const std::string& sql,
                                            const std::string& dbname) const {
  std::unique_ptr<PGconn, ConnCloser> conn(PQconnectdb(ConnInfo(dbname).c_str()));
  if (PQstatus(conn.get()) != CONNECTION_OK) {
    return Status::Unavailable("connect to the test server: " +
                               std::string(PQerrorMessage(conn.get())));
  }
  std::unique_ptr<PGresult, ResultCloser> r(PQexec(conn.get(), sql.c_str()));
  const ExecStatusType status = PQresultStatus(r.get());
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    return Status::Internal(sql.substr(0, 60) + ": " + PQresultErrorMessage(r.get()));
  }
  if (status == PGRES_TUPLES_OK && PQntuples(r.get()) > 0)
    return std::string(PQgetvalue(r.get(), 0, 0));
  return std::string();
}

Status PostgresServer::Exec(const std::string& sql, const std::string& dbname) const {
  return Query(sql, dbname).status();
}

StatusOr<std::string> PostgresServer::CreateDatabase() {
  const std::string name = "t" + std::to_string(::getpid()) + "_" + std::to_string(++databases_);
  TSR_RETURN_IF_ERROR(Exec("CREATE DATABASE " + name));
  return name;
}

StatusOr<std::unique_ptr<PostgresServer>> PostgresServer::StartReplica() {
  TSR_ASSIGN_OR_RETURN(std::string folder, MakeFolder(uid_, gid_));
  std::unique_ptr<PostgresServer> replica(new PostgresServer(bin_, folder, options_, uid_, gid_));
  replica->StartGuard();
  // -R writes standby.signal and primary_conninfo (this server's socket); -X stream copies the
  // WAL made meanwhile; -N: the copy's own fsync is not what is tested.
  TSR_RETURN_IF_ERROR(
      replica->RunTool({"pg_basebackup", "-D", replica->data(), "-R", "-X", "stream", "-c", "fast",
                        "-N", "-h", folder_, "-p", std::to_string(port_), "-U", "postgres"},
                       120));
  TSR_RETURN_IF_ERROR(replica->WriteSettings(/*replica=*/true));
  TSR_RETURN_IF_ERROR(replica->StartPostmaster());
  return replica;
}

Status PostgresServer::Promote() {
  TSR_RETURN_IF_ERROR(RunTool({"pg_ctl", "promote", "-w", "-t", "60", "-s", "-D", data()}, 90));
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  for (;;) {
    StatusOr<std::string> recovering = Query("SELECT pg_is_in_recovery()");
    if (recovering.ok() && *recovering == "f") return Status::Ok();
    if (Clock::now() > deadline) {
      return Status::Internal("the promoted server still reads as a standby");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

PostgresServer* SharedPostgres(std::string* why) {
  // Started at the first call; its destructor stops the server when the binary exits.
  struct Shared {
    Shared() {
      PostgresServer::Options options;
      options.tcp = true;  // the Unix socket for most tests, 127.0.0.1 for password tests
      StatusOr<std::unique_ptr<PostgresServer>> started = PostgresServer::Start(options);
      if (started.ok()) {
        server = std::move(*started);
      } else {
        error = started.status().message();
      }
    }
    std::unique_ptr<PostgresServer> server;
    std::string error;
  };
  static Shared shared;
  if (!shared.server && why != nullptr) *why = shared.error;
  return shared.server.get();
}

}  // namespace tessera::testing
