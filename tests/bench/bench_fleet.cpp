// tessera-bench fleet: whether the real broker keeps a large fleet alive. N simulated workers,
// each its own DEALER socket over TCP loopback, register under unique names and heartbeat every
// heartbeat_ms (taken from the broker's Welcome; broker defaults: 1000 ms, liveness 5). Every
// worker keeps beating for the whole run, so any worker the broker declares dead is a false death:
// counted from the store (worker_lost events, workers left offline) and from kUnknownWorker
// replies. Secondary figure: heartbeat round trip, kHeartbeat sent to kHeartbeatAck received.
// Independent machines do not beat in step: each worker's first beat comes at a random phase of
// the interval after its Welcome, then every interval.
// Target: 5,000 workers, zero false deaths.

#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <queue>
#include <random>
#include <thread>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "scheduler/broker/broker.h"
#include "scheduler/store/sqlite/sqlite.h"
#include "scheduler/store/store.h"
#include "shared/wire/protocol.h"
#include "tests/bench/bench.h"
#include "tests/bench/sim_fleet.h"

namespace tessera::bench {
namespace {

using Clock = std::chrono::steady_clock;
using protocol::MessageType;

constexpr const char* kNamePrefix = "fleet-";

double Millis(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// What the simulated fleet saw, summed over its threads.
struct FleetCounters {
  std::atomic<int> welcomed{0};  // workers welcomed at least once
  std::atomic<int64_t> beats{0}, acks{0}, unknown{0}, rejects{0};
};

// kRamp: registering, then settling (the broker may still be working through the registration
// burst); kMeasure: the measured run; deaths count in every phase.
enum class Phase : int { kRamp, kMeasure, kDone };

// One thread's share of the fleet; the thread owns its workers' sockets (they connect here and
// register when Run starts). Waiting is O(ready sockets), not O(sockets): each socket's ZMQ_FD
// sits in one epoll set and heartbeats come off a timer heap, so thousands of simulated workers
// cost little CPU beside the broker on a small machine.
class Shard {
 public:
  Shard(zmq::context_t& ctx, const std::string& endpoint, int first, int count, uint64_t seed)
      : rng_(seed) {
    for (int i = 0; i < count; ++i) {
      workers_.emplace_back();
      workers_.back().link = std::make_unique<FakeWorker>(
          ctx, endpoint, FakeWorker::Registration(kNamePrefix + std::to_string(first + i)));
    }
  }
  ~Shard() {
    if (epoll_fd_ >= 0) ::close(epoll_fd_);
  }
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  void Run(FleetCounters& counters, const std::atomic<Phase>& phase,
           const std::atomic<bool>& stop) {
    counters_ = &counters;
    phase_ = &phase;
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    for (size_t i = 0; i < workers_.size(); ++i) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = i;
      const int fd = workers_[i].link->socket().get(zmq::sockopt::fd);
      if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
        std::fprintf(stderr, "epoll_ctl: %s\n", std::strerror(errno));
        return;
      }
      Register(i);
    }
    std::vector<epoll_event> ready(256);
    while (!stop.load()) {
      auto wake = Clock::now() + std::chrono::milliseconds(50);
      if (!beats_.empty()) wake = std::min(wake, beats_.top().first);
      auto wait = std::chrono::ceil<std::chrono::milliseconds>(wake - Clock::now());
      int n = ::epoll_wait(epoll_fd_, ready.data(), static_cast<int>(ready.size()),
                           static_cast<int>(std::max<int64_t>(0, wait.count())));
      for (int k = 0; k < n; ++k) Drain(ready[k].data.u64);
      const auto now = Clock::now();
      while (!beats_.empty() && beats_.top().first <= now) {
        auto [due, i] = beats_.top();
        beats_.pop();
        const FakeWorker& link = *workers_[i].link;
        if (!link.welcomed() || due != link.next_beat()) continue;  // superseded by a new Welcome
        Beat(i, now);
      }
    }
  }

  const std::vector<double>& rtt_ms(Phase phase) const {
    return phase == Phase::kMeasure ? rtt_ms_ : ramp_rtt_ms_;
  }
  // When each measured round trip ended, in step with rtt_ms(Phase::kMeasure).
  const std::vector<Clock::time_point>& rtt_at() const { return rtt_at_; }
  // Longest time between two heartbeats of one worker: if the simulation itself fell behind by
  // heartbeat_ms x liveness, a death would not be false.
  double max_gap_ms() const { return max_gap_ms_; }

 private:
  struct Worker {
    std::unique_ptr<FakeWorker> link;
    bool ever_welcomed = false;
    Clock::time_point last_beat;
    std::deque<Clock::time_point> in_flight;  // heartbeats not answered yet, oldest first
  };
  using Due = std::pair<Clock::time_point, size_t>;

  void Register(size_t i) {
    workers_[i].link->Register();
    Drain(i);
  }

  void Beat(size_t i, Clock::time_point now) {
    Worker& w = workers_[i];
    w.link->Beat(now);  // the next one an interval on (from now if this thread fell behind)
    ++counters_->beats;
    w.in_flight.push_back(now);
    if (w.last_beat != Clock::time_point()) {
      max_gap_ms_ = std::max(max_gap_ms_, Millis(now - w.last_beat));
    }
    w.last_beat = now;
    beats_.push({w.link->next_beat(), i});
    Drain(i);
  }

  // Reads everything the socket holds. ZMQ_FD is edge-like: any operation on the socket (a send
  // included) may consume its signal, so every operation is followed by a drain.
  void Drain(size_t i) {
    FakeWorker& link = *workers_[i].link;
    for (;;) {
      if (std::optional<protocol::Envelope> env = link.Receive()) {
        OnMessage(i, *env);
      } else if (!(link.socket().get(zmq::sockopt::events) & ZMQ_POLLIN)) {
        return;
      }
    }
  }

  void OnMessage(size_t i, const protocol::Envelope& env) {
    Worker& w = workers_[i];
    const auto now = Clock::now();
    switch (env.type) {
      case MessageType::kWelcome: {
        // The worker took its interval from it; its first beat comes at a random phase of it.
        const int interval_ms = static_cast<int>(w.link->heartbeat_interval().count());
        std::uniform_int_distribution<int> phase(0, interval_ms - 1);
        w.link->set_next_beat(now + std::chrono::milliseconds(phase(rng_)));
        beats_.push({w.link->next_beat(), i});
        if (!w.ever_welcomed) ++counters_->welcomed;
        w.ever_welcomed = true;
        break;
      }
      case MessageType::kHeartbeatAck:
        ++counters_->acks;
        if (w.in_flight.empty()) return;
        if (phase_->load() == Phase::kMeasure) {
          rtt_ms_.push_back(Millis(now - w.in_flight.front()));
          rtt_at_.push_back(now);
        } else if (phase_->load() == Phase::kRamp) {
          ramp_rtt_ms_.push_back(Millis(now - w.in_flight.front()));
        }
        w.in_flight.pop_front();
        break;
      case MessageType::kUnknownWorker:
        // The broker forgot this worker although it kept beating; like the real agent, register
        // again.
        ++counters_->unknown;
        if (!w.in_flight.empty()) w.in_flight.pop_front();
        Register(i);
        break;
      case MessageType::kReject:
        ++counters_->rejects;
        break;
      default:
        break;
    }
  }

  std::vector<Worker> workers_;
  std::priority_queue<Due, std::vector<Due>, std::greater<Due>> beats_;
  int epoll_fd_ = -1;
  FleetCounters* counters_ = nullptr;
  const std::atomic<Phase>* phase_ = nullptr;
  std::mt19937_64 rng_;
  std::vector<double> rtt_ms_, ramp_rtt_ms_;
  std::vector<Clock::time_point> rtt_at_;
  double max_gap_ms_ = 0;
};

// Every socket costs file descriptors: the simulated DEALER's connection and mailbox, and the
// broker's accepted connection.
void RaiseFileLimit(int workers) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) {
    throw CLI::RuntimeError(std::string("getrlimit: ") + std::strerror(errno), 1);
  }
  lim.rlim_cur = lim.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &lim) != 0) {
    throw CLI::RuntimeError(std::string("setrlimit: ") + std::strerror(errno), 1);
  }
  const rlim_t needed = 3 * static_cast<rlim_t>(workers) + 256;
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < needed) {
    throw CLI::RuntimeError("RLIMIT_NOFILE hard limit " + std::to_string(lim.rlim_cur) +
                                " is below the ~" + std::to_string(needed) + " descriptors " +
                                std::to_string(workers) + " workers need (raise ulimit -Hn)",
                            1);
  }
  std::printf("RLIMIT_NOFILE raised to %llu\n", static_cast<unsigned long long>(lim.rlim_cur));
}

// worker_lost events by reason. The Store has no event reader; read them like any SQLite client.
StatusOr<std::vector<std::pair<std::string, int64_t>>> LostEvents(const std::string& dir) {
  TSR_ASSIGN_OR_RETURN(auto db, store::Db::Open(dir + "/tessera.db", /*read_only=*/true));
  TSR_ASSIGN_OR_RETURN(store::Stmt s, db->Prepare("SELECT message, count(*) FROM events WHERE "
                                                  "kind = 'worker_lost' GROUP BY message"));
  std::vector<std::pair<std::string, int64_t>> out;
  for (;;) {
    TSR_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.emplace_back(s.Text(0), s.Int(1));
  }
  return out;
}

}  // namespace

void AddFleetCommand(CLI::App& app) {
  struct Options {
    int workers = 5000;
    int seconds = 60;
    int threads = 2;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd =
      app.add_subcommand("fleet", "false deaths among N heartbeating workers on one broker");
  cmd->add_option("--workers", opts->workers, "simulated workers")->check(CLI::Range(1, 20000));
  cmd->add_option("--seconds", opts->seconds, "measured time after every worker registered")
      ->check(CLI::Range(1, 3600));
  cmd->add_option("--threads", opts->threads, "simulation threads")->check(CLI::Range(1, 64));
  cmd->callback([opts] {
    RaiseFileLimit(opts->workers);
    TempDir temp("tessera-bench-fleet");
    const std::string& dir = temp.path();
    auto store = OpenStore(dir);
    const broker::BrokerOptions bopts = LoopbackBroker();  // default heartbeat_ms and liveness
    broker::Broker broker(*store, bopts, tessera::Clock::Real());
    const std::string endpoint = StartBroker(broker);

    zmq::context_t ctx;
    ctx.set(zmq::ctxopt::max_sockets, opts->workers + 64);
    const int threads = std::min(opts->threads, opts->workers);
    std::vector<std::unique_ptr<Shard>> shards;
    for (int t = 0; t < threads; ++t) {
      const int first = static_cast<int>(int64_t{opts->workers} * t / threads);
      const int last = static_cast<int>(int64_t{opts->workers} * (t + 1) / threads);
      shards.push_back(std::make_unique<Shard>(ctx, endpoint, first, last - first, 1000 + t));
    }
    FleetCounters counters;
    std::atomic<Phase> phase{Phase::kRamp};
    std::atomic<bool> stop{false};
    std::vector<std::thread> pool;
    auto start = Clock::now();
    for (auto& shard : shards) {
      pool.emplace_back([&, s = shard.get()] { s->Run(counters, phase, stop); });
    }
    const auto deadline = start + std::chrono::seconds(60);
    while (counters.welcomed.load() < opts->workers && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const double register_s = std::chrono::duration<double>(Clock::now() - start).count();
    std::printf("%d of %d workers registered in %.2f s\n", counters.welcomed.load(), opts->workers,
                register_s);
    // Round trips are timed from one liveness window after the registration burst; deaths count
    // from the start.
    const auto liveness = std::chrono::milliseconds(bopts.heartbeat_ms * bopts.liveness);
    std::this_thread::sleep_for(liveness);
    std::printf("settled for %lld ms; measuring\n", static_cast<long long>(liveness.count()));

    phase = Phase::kMeasure;
    start = Clock::now();
    for (int s = 0; s < opts->seconds; ++s) {
      std::this_thread::sleep_for(start + std::chrono::seconds(s + 1) - Clock::now());
      if ((s + 1) % 10 == 0 || s + 1 == opts->seconds) {
        std::printf("  %3d s: %lld heartbeats sent, %lld acked, %lld unknown-worker replies\n",
                    s + 1, static_cast<long long>(counters.beats.load()),
                    static_cast<long long>(counters.acks.load()),
                    static_cast<long long>(counters.unknown.load()));
        std::fflush(stdout);
      }
    }
    phase = Phase::kDone;
    // Read the store while every simulated worker is still beating.
    auto listed = store->ListWorkers();
    auto lost = LostEvents(dir);
    stop = true;
    for (auto& t : pool) t.join();
    std::vector<double> rtt, ramp_rtt;
    std::vector<double> worst_by_second(opts->seconds + 1, 0.0);  // slowest answer in each second
    double max_gap = 0;
    for (const auto& shard : shards) {
      const auto& r = shard->rtt_ms(Phase::kMeasure);
      const auto& ramp = shard->rtt_ms(Phase::kRamp);
      rtt.insert(rtt.end(), r.begin(), r.end());
      ramp_rtt.insert(ramp_rtt.end(), ramp.begin(), ramp.end());
      for (size_t k = 0; k < r.size(); ++k) {
        const auto second =
            std::chrono::duration_cast<std::chrono::seconds>(shard->rtt_at()[k] - start);
        double& worst = worst_by_second[std::clamp<size_t>(second.count(), 0, opts->seconds)];
        worst = std::max(worst, r[k]);
      }
      max_gap = std::max(max_gap, shard->max_gap_ms());
    }
    shards.clear();
    broker.Stop();
    if (!listed.ok()) throw CLI::RuntimeError(listed.status().ToString(), 1);
    if (!lost.ok()) throw CLI::RuntimeError(lost.status().ToString(), 1);

    int64_t offline = 0, lost_events = 0;
    for (const auto& w : *listed) {
      if (w.name.rfind(kNamePrefix, 0) == 0 && w.state == store::WorkerState::kOffline) ++offline;
    }
    for (const auto& [reason, count] : *lost) {
      std::printf("worker_lost: %lld x \"%s\"\n", static_cast<long long>(count), reason.c_str());
      lost_events += count;
    }
    const int64_t unknown = counters.unknown.load();
    // Each false death shows up as a worker_lost event; a worker that was dropped and has not
    // re-registered yet is also offline, and every one that beat after being dropped got an
    // unknown-worker reply. The largest of the three is the count.
    const int64_t false_deaths = std::max({lost_events, offline, unknown});
    std::printf("%lld heartbeats, %lld acks; longest gap between one worker's beats %.0f ms\n",
                static_cast<long long>(counters.beats.load()),
                static_cast<long long>(counters.acks.load()), max_gap);
    std::printf(
        "heartbeat round trip: p50 %.2f ms, p99 %.2f ms, max %.2f ms (during registration "
        "and settling: p99 %.2f ms, max %.2f ms)\n",
        Percentile(rtt, 50), Percentile(rtt, 99), Percentile(rtt, 100), Percentile(ramp_rtt, 99),
        Percentile(ramp_rtt, 100));
    // Stalls show as seconds whose slowest answer stands out; their spacing hints at the cause
    // (the broker's periodic work runs every heartbeat_ms, its store touch every 5 s).
    std::string slow;
    for (size_t k = 0; k < worst_by_second.size(); ++k) {
      if (worst_by_second[k] > 50)
        slow += " " + std::to_string(k) + "s:" + Fixed(worst_by_second[k]);
    }
    std::printf("seconds with a round trip over 50 ms (second:slowest ms):%s\n",
                slow.empty() ? " none" : slow.c_str());
    std::printf(
        "false deaths: %lld worker_lost events, %lld workers offline at the end, %lld "
        "unknown-worker replies, %lld rejects\n",
        static_cast<long long>(lost_events), static_cast<long long>(offline),
        static_cast<long long>(unknown), static_cast<long long>(counters.rejects.load()));
    PrintFigures({{"workers", std::to_string(opts->workers)},
                  {"registered", std::to_string(counters.welcomed.load())},
                  {"register_s", Fixed(register_s, 2)},
                  {"seconds", std::to_string(opts->seconds)},
                  {"false_deaths", std::to_string(false_deaths)},
                  {"target_false_deaths", "0"},
                  {"unknown_worker_replies", std::to_string(unknown)},
                  {"heartbeat_rtt_p50_ms", Fixed(Percentile(rtt, 50), 2)},
                  {"heartbeat_rtt_p99_ms", Fixed(Percentile(rtt, 99), 2)},
                  {"heartbeat_interval_ms", std::to_string(bopts.heartbeat_ms)},
                  {"ramp_rtt_max_ms", Fixed(Percentile(ramp_rtt, 100), 2)},
                  {"max_beat_gap_ms", Fixed(max_gap)},
                  {"liveness_ms", std::to_string(bopts.heartbeat_ms * bopts.liveness)}});
  });
}

}  // namespace tessera::bench
