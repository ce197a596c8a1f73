// The worker agent (agent.h). Its parts:
//  - agent.cpp: the options from the config, Run() and its I/O loop, drain and leave, shutdown;
//  - agent_link.cpp: the link to the scheduler: connecting and registering, heartbeats,
//    progress, the scheduler's messages, CURVE keys and enrolment;
//  - agent_tasks.cpp: the render slots: assignments, cancels, the runners' outbox;
//  - agent_transfer.cpp: asset blobs fetched into the cache, result messages sent in order;
//  - agent_disk.cpp: a full disk noticed and reported.
#include "worker/agent.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <iterator>
#include <thread>
#include <zmq_addon.hpp>

#include "worker/agent_internal.h"

namespace tessera::worker {
namespace {

using protocol::MessageType;

// The I/O loop wakes at least this often: it samples render progress, notices Stop() and runs
// timers.
constexpr std::chrono::milliseconds kTick{100};
// How long kGoodbye may take to leave once Stop() was asked for.
constexpr int kGoodbyeLingerMs = 500;
// Leave(): how long the path tracer may take to reach a checkpoint before renders are stopped.
constexpr std::chrono::seconds kLeaveTimeout{20};
// Drain / leave: how long the agent waits for the scheduler to acknowledge its last results.
constexpr std::chrono::seconds kDeliverTimeout{30};

// A folder of the agent's (the result spool, the asset cache): as configured, else under the
// data directory, else a temporary one.
std::string AgentDir(const std::string& configured, const AgentOptions& o, const char* name) {
  if (!configured.empty()) return configured;
  if (!o.render.data_dir.empty()) return o.render.data_dir + "/" + name;
  static std::atomic<int> count{0};
  std::error_code ec;
  return (std::filesystem::temp_directory_path(ec) /
          ("tessera-" + std::string(name) + "-" + std::to_string(::getpid()) + "-" +
           std::to_string(++count)))
      .string();
}

}  // namespace

namespace agent_internal {

std::string RefName(const protocol::TaskRef& ref) {
  return "task " + std::to_string(ref.task_id) + " attempt " + std::to_string(ref.attempt);
}

StatusOr<protocol::Envelope> DecodeCopy(const std::vector<zmq::message_t>& frames) {
  std::vector<zmq::message_t> copy;
  for (const zmq::message_t& f : frames) copy.emplace_back(f.data(), f.size());
  return protocol::Decode(copy);
}

}  // namespace agent_internal

StatusOr<AgentOptions> MakeAgentOptions(const WorkerConfig& config, const HardwareInfo& hardware) {
  AgentOptions o;
  o.scheduler_address = config.scheduler_address;
  o.name = config.name;
  o.slots = config.slots;
  o.pools = config.pools;
  o.tags = config.tags;
  o.heartbeat_ms = config.heartbeat_interval_ms;
  o.liveness = config.heartbeat_liveness;
  o.gpu_telemetry_ms = config.gpu_telemetry_interval_ms;
  o.nvml_library = config.nvml_library;
  o.hardware = hardware;
  o.render.cpu_threads = config.threads;
  o.render.data_dir = config.data_dir;
  o.render.plugin_path = config.plugin_path;
  o.render.path_map = config.path_map;
  o.scheduler_public_key = config.scheduler_public_key;
  o.join_token = config.join_token;
  o.key_file = config.key_file;
  if (!config.data_dir.empty()) {  // else temporary folders (AgentDir)
    o.spool_dir = config.data_dir + "/spool";
    o.cache_dir = config.data_dir + "/cache";
  }
  o.cache_bytes = int64_t{config.cache_mb} << 20;
  const bool has_cuda = std::find(hardware.backends.begin(), hardware.backends.end(), "cuda") !=
                        hardware.backends.end();
  if (config.backend == "cpu") {
    o.render.device = "cpu";
    o.backends = {"cpu"};
  } else if (config.backend == "cuda") {
    if (!has_cuda) {
      return Status::FailedPrecondition(
          "worker.backend: 'cuda' was asked for but this machine has no usable CUDA device");
    }
    o.render.device = "cuda";
    o.backends = {"cuda"};
  } else {
    o.render.device = "auto";
    o.backends = hardware.backends;
  }
  // GPUs this worker will not render on are not offered: the scheduler pins tasks to the GPUs
  // a worker registers.
  if (o.render.device == "cpu") o.hardware.gpus.clear();
  if (config.simulate_gpus > 0) {
    // Scheduling sees real-looking GPUs; the renders behind them run on the CPU.
    o.render.device = "cpu";
    o.backends = {"cpu"};
    o.hardware.gpus.clear();
    for (int i = 0; i < config.simulate_gpus; ++i) {
      protocol::GpuInfo gpu;
      gpu.index = i;
      gpu.name = "Simulated GPU " + std::to_string(i);
      gpu.memory_mb = 24576;
      gpu.compute_major = 8;
      gpu.compute_minor = 9;
      o.hardware.gpus.push_back(gpu);
    }
  }
  if (config.gpu_sharing == "shared") {
    o.slots_per_gpu = config.slots_per_gpu;
    o.memory_mb_per_slot = config.memory_mb_per_slot;
    // The slots of one GPU together never promise more memory than it has.
    const int64_t per_gpu = o.memory_mb_per_slot * o.slots_per_gpu;
    for (const protocol::GpuInfo& gpu : o.hardware.gpus) {
      if (per_gpu > gpu.memory_mb) {
        return Status::InvalidArgument(
            "worker.memory_mb_per_slot: " + std::to_string(o.slots_per_gpu) + " slots of " +
            std::to_string(o.memory_mb_per_slot) + " MB need " + std::to_string(per_gpu) +
            " MB, GPU " + std::to_string(gpu.index) + " has " + std::to_string(gpu.memory_mb));
      }
    }
  }
  // Auto slots: one task per GPU (per GPU slot when shared), each pinned to its GPU; one task
  // using every core without.
  if (config.slots_per_core) {
    // One task per core: short CPU tasks (commands, light renders) packed on a big node.
    o.slots = std::clamp(o.hardware.cpu_cores, 1, kMaxSlots);
  } else if (o.slots == 0) {
    const int per_gpu = std::max(1, o.slots_per_gpu);
    o.slots = std::clamp(static_cast<int>(o.hardware.gpus.size()) * per_gpu, 1, kMaxSlots);
  }
  o.render.slots = o.slots;
  return o;
}

Agent::Agent(AgentOptions options)
    : options_(std::move(options)),
      heartbeat_ms_(options_.heartbeat_ms),
      liveness_(options_.liveness),
      backoff_(options_.reconnect_min),
      spool_(AgentDir(options_.spool_dir, options_, "spool")),
      cache_(AgentDir(options_.cache_dir, options_, "cache"), options_.cache_bytes) {}

void Agent::Leave(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(leave_mu_);
    if (leave_reason_.empty()) leave_reason_ = reason;
  }
  leave_requested_.store(true);
}

Agent::~Agent() {
  // Run() normally leaves nothing behind; this covers a Run() that threw.
  for (Slot& slot : slots_) slot.runner->Cancel();
  slots_.clear();
}

Status Agent::Run() {
  TSR_RETURN_IF_ERROR(spool_.Open());
  TSR_RETURN_IF_ERROR(cache_.Open());
  TSR_RETURN_IF_ERROR(LoadKeys());
  gpu_monitor_ =
      StartGpuMonitor(options_.nvml_library, std::chrono::milliseconds(options_.gpu_telemetry_ms),
                      options_.hardware.gpus);
  outbox_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::pull);
  outbox_->set(zmq::sockopt::linger, 0);
  outbox_->bind(outbox_endpoint_);
  Connect(Clock::now());

  while (!stop_requested_.load() && reject_status_.ok()) {
    // Each message is handled under its own guard (DrainScheduler, DrainOutbox); this one keeps
    // any other exception of a pass from ending the agent: renders and results carry on.
    bool leave = false;
    Guarded("a pass of the I/O loop", [&] { leave = Pass(); });
    if (leave) break;  // drained, or left
  }

  Shutdown(/*say_goodbye=*/reject_status_.ok());
  return reject_status_;
}

bool Agent::Pass() {
  if (OnLifecycle(Clock::now())) return true;
  OnTimers(Clock::now());
  std::vector<zmq::pollitem_t> items = {{outbox_->handle(), 0, ZMQ_POLLIN, 0}};
  const size_t dealer_item = items.size();
  if (dealer_) items.push_back({dealer_->handle(), 0, ZMQ_POLLIN, 0});
  const size_t monitor_item = items.size();
  if (monitor_) items.push_back({monitor_->handle(), 0, ZMQ_POLLIN, 0});
  try {
    zmq::poll(items, kTick);
  } catch (const zmq::error_t& e) {
    if (e.num() == EINTR) return false;
    throw;
  }
  if (items[0].revents & ZMQ_POLLIN) DrainOutbox();
  if (items.size() > dealer_item && dealer_ && (items[dealer_item].revents & ZMQ_POLLIN)) {
    DrainScheduler(Clock::now());
  }
  if (items.size() > monitor_item && monitor_ && (items[monitor_item].revents & ZMQ_POLLIN)) {
    DrainMonitor(Clock::now());
  }
  return false;
}

template <typename F>
void Agent::Guarded(const char* what, F&& fn) {
  try {
    fn();
    return;
  } catch (const std::exception& e) {
    noisy_.Log(spdlog::level::err, std::string("caught:") + what,
               "exception while handling {}: {}; it was dropped and the worker goes on", what,
               e.what());
  } catch (...) {
    noisy_.Log(spdlog::level::err, std::string("caught:") + what,
               "unknown exception while handling {}; it was dropped and the worker goes on", what);
  }
  if (stop_requested_.load()) return;
  // A pass that throws at once again must not spin: the next one waits a tick.
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

void Agent::DrainScheduler(Clock::time_point now) {
  // Only whole multipart messages are read; at most a burst per wake-up keeps timers fair.
  for (int i = 0; i < 1000 && dealer_; ++i) {
    std::vector<zmq::message_t> frames;
    if (!zmq::recv_multipart(*dealer_, std::back_inserter(frames), zmq::recv_flags::dontwait)) {
      return;
    }
    heard_at_ = now;  // any traffic proves the scheduler is alive
    Guarded("a message from the scheduler", [&] { HandleMessage(frames, now); });
  }
}

void Agent::DrainOutbox() {
  for (int i = 0; i < 1000; ++i) {
    std::vector<zmq::message_t> frames;
    if (!zmq::recv_multipart(*outbox_, std::back_inserter(frames), zmq::recv_flags::dontwait)) {
      return;
    }
    HandleOutbox(frames);  // (our own runners' messages: a failure here is a bug, not input)
  }
}

void Agent::Shutdown(bool say_goodbye) {
  for (Slot& slot : slots_) {
    slot.cancelled = true;
    slot.runner->Cancel();
  }
  if (say_goodbye && dealer_ && state_ == LinkState::kReady) {
    std::vector<zmq::message_t> frames =
        protocol::Encode(MessageType::kGoodbye, nlohmann::json::object());
    if (TrySend(frames)) spdlog::info("said goodbye to the scheduler");
    dealer_->set(zmq::sockopt::linger, kGoodbyeLingerMs);
  }
  // Runners block on their outbox sends, so keep draining until each has sent its last message.
  auto waiting_since = Clock::now();
  while (!slots_.empty()) {
    std::vector<zmq::pollitem_t> items = {{outbox_->handle(), 0, ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, kTick);
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
    }
    if (items[0].revents & ZMQ_POLLIN) DrainOutbox();
    if (Clock::now() - waiting_since > std::chrono::seconds(2)) {
      spdlog::warn("waiting for {} render(s) to stop", slots_.size());
      waiting_since = Clock::now();
    }
  }
  for (auto& [hash, f] : fetches_) {
    if (f.fd >= 0) ::close(f.fd);
  }
  fetches_.clear();
  CloseDealer();
  outbox_.reset();
  state_ = LinkState::kDisconnected;
}

// ---- drain and leave -------------------------------------------------------------------------

bool Agent::OnLifecycle(Clock::time_point now) {
  if (drain_requested_.load() && !draining_) {
    draining_ = true;
    spdlog::info("draining: finishing {} running task(s), taking no new ones", slots_.size());
    if (state_ == LinkState::kReady) SendHeartbeat(now);  // the scheduler stops assigning now
  }
  if (leave_requested_.load() && !leaving_) {
    std::string reason;
    {
      std::lock_guard<std::mutex> lock(leave_mu_);
      reason = leave_reason_;
    }
    leaving_ = draining_ = true;
    leave_deadline_ = now + kLeaveTimeout;
    spdlog::warn("leaving ({}): handing back {} running task(s)", reason, slots_.size());
    for (Slot& slot : slots_) {
      if (!slot.cancelled) slot.runner->RequestHandback(reason);
    }
    if (state_ == LinkState::kReady) SendHeartbeat(now);
  }
  if (leaving_ && now >= leave_deadline_) {
    for (Slot& slot : slots_) slot.runner->Cancel();  // no checkpoint in time: hand back as is
  }
  if (!draining_) return false;
  if (!slots_.empty()) {
    idle_since_ = {};
    return false;
  }
  if (idle_since_ == Clock::time_point{}) idle_since_ = now;
  if (spool_.empty()) {
    spdlog::info("{}: every result delivered", leaving_ ? "left" : "drained");
    return true;
  }
  if (now - idle_since_ > kDeliverTimeout) {
    spdlog::warn("leaving with {} unacknowledged result(s) in the spool",
                 spool_.Delivering().size());
    return true;
  }
  return false;
}

bool Agent::AllowNoisyLog(Clock::time_point now) {
  uint64_t suppressed = 0;
  if (!noisy_.Allow("link", now, &suppressed)) return false;
  if (suppressed > 0) spdlog::info("({} similar messages suppressed)", suppressed);
  return true;
}

}  // namespace tessera::worker
