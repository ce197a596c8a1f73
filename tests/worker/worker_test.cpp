// Worker agent tests: hardware probe, config layering, and the real Agent (real renderer, real
// ZeroMQ over TCP loopback) against a scheduler played by the test.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>

#include "shared/wire/curve_keys.h"
#include "tests/support/scenes.h"
#include "tests/worker/fake_scheduler.h"
#include "worker/agent.h"
#include "worker/hardware_probe.h"
#include "worker/worker_config.h"

namespace tessera::worker {
namespace {

using protocol::MessageType;
using testing::FakeScheduler;
using ::testing::HasSubstr;
using testing::Received;
using namespace std::chrono_literals;

// ---- hardware probe ---------------------------------------------------------------------------

TEST(HardwareProbe, ReportsSaneValuesWithOrWithoutGpu) {
  HardwareInfo hw = ProbeHardware();
  EXPECT_FALSE(hw.hostname.empty());
  EXPECT_GE(hw.cpu_cores, 1);
  EXPECT_GT(hw.ram_mb, 0);
  ASSERT_FALSE(hw.backends.empty());
  EXPECT_EQ(hw.backends[0], "cpu");
  const bool offers_cuda = std::count(hw.backends.begin(), hw.backends.end(), "cuda") == 1;
  EXPECT_EQ(offers_cuda, !hw.gpus.empty());  // no driver here: zero GPUs, cpu only
  for (const protocol::GpuInfo& gpu : hw.gpus) {
    EXPECT_FALSE(gpu.name.empty());
    EXPECT_GT(gpu.memory_mb, 0);
  }
}

TEST(HardwareProbe, DescribesTheOsAndCpuModel) {
  const std::string os = OsDescription();
  EXPECT_THAT(os, HasSubstr("Linux")) << "kernel name from uname, distribution from os-release";
  EXPECT_THAT(os, ::testing::Not(HasSubstr("\""))) << "os-release quotes are stripped";
  const std::string cpu = CpuModel();
  EXPECT_FALSE(cpu.empty());
  EXPECT_EQ(cpu.find('\n'), std::string::npos);
  HardwareInfo hw = ProbeHardware();
  EXPECT_EQ(hw.os, os);
  EXPECT_EQ(hw.cpu_model, cpu);
  EXPECT_TRUE(hw.cloud.provider.empty()) << "ProbeHardware never talks to a metadata service";
}

// ---- config -----------------------------------------------------------------------------------

StatusOr<WorkerConfig> ParseText(const std::string& text) {
  return ParseWorkerConfig(YAML::Load(text), "host-a");
}

TEST(WorkerConfig, DefaultsWhenEmpty) {
  StatusOr<WorkerConfig> c = ParseText("{}");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->scheduler_address, "tcp://127.0.0.1:8471");
  EXPECT_EQ(c->name, "host-a");
  EXPECT_EQ(c->backend, "auto");
  EXPECT_EQ(c->threads, 0);
  EXPECT_EQ(c->slots, 0) << "auto: one per GPU";
  EXPECT_EQ(c->heartbeat_interval_ms, 1000);
  EXPECT_EQ(c->heartbeat_liveness, 5);
  EXPECT_EQ(c->log_level, "info");
}

TEST(WorkerConfig, ConfinementKeysAreCheckedAndOffByDefault) {
  StatusOr<WorkerConfig> c = ParseText("{}");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->command_programs.empty()) << "the command renderer is off by default";
  EXPECT_TRUE(c->run_as.empty());
  EXPECT_TRUE(c->input_roots.empty());
  c = ParseText(
      "worker:\n  command_programs: [ffmpeg, /opt/tools/render.sh]\n  run_as: render\n"
      "  input_roots: [/mnt/projects]\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->command_programs, (std::vector<std::string>{"ffmpeg", "/opt/tools/render.sh"}));
  EXPECT_EQ(c->run_as, "render");
  EXPECT_EQ(c->input_roots, (std::vector<std::string>{"/mnt/projects"}));
  // An environment override gives a list as comma-separated text.
  c = ParseText("worker:\n  command_programs: 'ffmpeg,/opt/x'\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->command_programs, (std::vector<std::string>{"ffmpeg", "/opt/x"}));
  for (const char* bad : {"bin/sh", "/opt/../bin/sh", "/opt/./x", "-c", "''"}) {
    c = ParseText(std::string("worker:\n  command_programs: [") + bad + "]\n");
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().message().rfind("worker.command_programs[0]: ", 0), 0u)
        << c.status().message();
  }
  c = ParseText("worker:\n  input_roots: [mnt/projects]\n");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message().rfind("worker.input_roots[0]: must be an absolute path", 0), 0u);
  c = ParseText("worker:\n  run_as: 'root; rm'\n");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "worker.run_as: 'root; rm' is not a user name");
}

TEST(WorkerConfig, ConfinementIsResolvedAgainstTheMachine) {
  StatusOr<WorkerConfig> c = ParseText("worker:\n  run_as: no-such-user-here\n");
  ASSERT_TRUE(c.ok());
  StatusOr<Confinement> k = ResolveConfinement(*c);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().message(),
            "worker.run_as: user 'no-such-user-here' does not exist on this machine");
  c = ParseText("worker:\n  input_roots: [/no/such/folder]\n");
  ASSERT_TRUE(c.ok());
  k = ResolveConfinement(*c);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().message(),
            "worker.input_roots[0]: '/no/such/folder' is not a folder on this machine");
  // Roots are kept canonical: what a scene's path is compared with after its own resolution.
  const std::string link = ::testing::TempDir() + "/roots-link-" + std::to_string(::getpid());
  std::filesystem::remove(link);
  std::filesystem::create_directory_symlink("/usr", link);
  c = ParseText("worker:\n  input_roots: [" + link + "]\n");
  ASSERT_TRUE(c.ok());
  k = ResolveConfinement(*c);
  std::filesystem::remove(link);
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_EQ(k->input_roots, (std::vector<std::string>{"/usr"}));
  // Another user while the worker is not root: refused at start.
  c = ParseText("worker:\n  run_as: nobody\n");
  ASSERT_TRUE(c.ok());
  k = ResolveConfinement(*c);
  if (::geteuid() == 0) {
    ASSERT_TRUE(k.ok()) << k.status().message();
    ASSERT_TRUE(k->run_as.has_value());
    EXPECT_EQ(k->run_as->user, "nobody");
  } else {
    ASSERT_FALSE(k.ok());
    EXPECT_NE(k.status().message().find("not root, so it cannot run renderers as nobody"),
              std::string::npos)
        << k.status().message();
  }
}

TEST(WorkerConfig, ExampleConfigParses) {
  ConfigFlags flags;
  flags.config_path = std::string(TSR_SOURCE_DIR) + "/deploy/examples/worker.yaml";
  char* env[] = {nullptr};
  StatusOr<WorkerConfig> c = LoadWorkerConfig(flags, env, "host-a");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->name, "host-a");
  EXPECT_EQ(c->slots, 0);
}

TEST(WorkerConfig, EnvironmentOverridesFileAndFlagsOverrideBoth) {
  std::string path = ::testing::TempDir() + "/worker_env.yaml";
  {
    FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("worker:\n  name: from-file\n  slots: 2\n  threads: 3\n", f);
    std::fclose(f);
  }
  std::string a = "TESSERA_SCHEDULER_ADDRESS=tcp://farm.example:9000";
  std::string b = "TESSERA_WORKER_SLOTS=4";
  std::string c = "TESSERA_WORKER_BACKEND=cpu";
  std::string d = "PATH=/usr/bin";
  // A scheduler on another machine: the link must be encrypted, so its key is required.
  const curve::KeyPair scheduler = curve::Generate();
  std::string e = "TESSERA_SCHEDULER_PUBLIC_KEY=" + curve::ToHex(scheduler.public_key);
  char* env[] = {a.data(), b.data(), c.data(), d.data(), e.data(), nullptr};
  ConfigFlags flags;
  flags.config_path = path;
  flags.backend = "auto";
  StatusOr<WorkerConfig> cfg = LoadWorkerConfig(flags, env, "host-a");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(cfg->scheduler_address, "tcp://farm.example:9000");
  EXPECT_EQ(cfg->name, "from-file");
  EXPECT_EQ(cfg->slots, 4);         // env beats file
  EXPECT_EQ(cfg->threads, 3);       // file beats default
  EXPECT_EQ(cfg->backend, "auto");  // flag beats env
  EXPECT_EQ(cfg->scheduler_public_key, scheduler.public_key) << "hex is read as the Z85 key";
}

TEST(WorkerConfig, CurveSettingsAreCheckedAndARemoteLinkMustBeEncrypted) {
  auto message = [](const std::string& text) { return ParseText(text).status().message(); };
  EXPECT_THAT(message("scheduler: {address: 'tcp://farm.example:8471'}"),
              HasSubstr("scheduler.public_key: required"));
  EXPECT_THAT(message("scheduler: {public_key: nope}"), HasSubstr("scheduler.public_key"));
  EXPECT_THAT(message("scheduler: {join_token: tsrj-abc}"), HasSubstr("scheduler.join_token"));
  const std::string key = curve::ToHex(curve::Generate().public_key);
  EXPECT_THAT(message("scheduler: {public_key: " + key + ", join_token: tsrj-zz}"),
              HasSubstr("scheduler.join_token"));
  StatusOr<WorkerConfig> ok =
      ParseText("scheduler: {address: 'tcp://farm.example:8471', public_key: " + key +
                ", join_token: " + curve::NewJoinToken() + "}\nworker: {data_dir: /var/lib/tw}\n");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->key_file, "/var/lib/tw/worker.key") << "the key pair lives in the data directory";
  StatusOr<WorkerConfig> local = ParseText("");
  ASSERT_TRUE(local.ok());
  EXPECT_TRUE(local->key_file.empty()) << "a temporary data directory keeps no key pair";
}

TEST(WorkerConfig, PoolsAndTagsReachTheRegistration) {
  StatusOr<WorkerConfig> c = ParseText("worker:\n  pools: [gpu, lookdev]\n  tags: [cuda12]\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->pools, (std::vector<std::string>{"gpu", "lookdev"}));
  EXPECT_EQ(ParseText("").value().pools, (std::vector<std::string>{"default"}));
  StatusOr<AgentOptions> o = MakeAgentOptions(*c, ProbeHardware());
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->tags, (std::vector<std::string>{"cuda12"}));
}

TEST(WorkerConfig, UnknownKeyIsAnErrorNamingIt) {
  StatusOr<WorkerConfig> c = ParseText("worker:\n  foo: 1\n");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("worker.foo"));
  StatusOr<WorkerConfig> d = ParseText("workers: {}\n");
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("workers"));
}

TEST(WorkerConfig, BadValuesNameTheField) {
  auto message = [](const std::string& text) { return ParseText(text).status().message(); };
  EXPECT_THAT(message("worker: {backend: gpu}"), HasSubstr("worker.backend"));
  EXPECT_THAT(message("worker: {slots: -1}"), HasSubstr("worker.slots"));
  EXPECT_THAT(message("worker: {slots: 65}"), HasSubstr("worker.slots"));
  EXPECT_THAT(message("worker: {threads: many}"), HasSubstr("worker.threads"));
  EXPECT_THAT(message("worker: {pools: []}"), HasSubstr("worker.pools"));
  EXPECT_THAT(message("worker: {pools: gpu}"), HasSubstr("worker.pools"));
  EXPECT_THAT(message("worker: {tags: [ok, '']}"), HasSubstr("worker.tags[1]"));
  EXPECT_THAT(message("scheduler: {address: localhost}"), HasSubstr("scheduler.address"));
  EXPECT_THAT(message("scheduler: {address: 'tcp://h:99999'}"), HasSubstr("scheduler.address"));
  EXPECT_THAT(message("heartbeat: {liveness: 0}"), HasSubstr("heartbeat.liveness"));
  EXPECT_THAT(message("log: {level: loud}"), HasSubstr("log.level"));
  EXPECT_THAT(message("worker: 5"), HasSubstr("worker"));
  EXPECT_THAT(message("worker: {data_dir: relative/dir}"), HasSubstr("worker.data_dir"));
}

TEST(WorkerConfig, PluginKeysHaveDefaults) {
  StatusOr<WorkerConfig> c = ParseText("{}");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_NE(c->data_dir.find("tessera-worker-host-a"), std::string::npos) << c->data_dir;
  EXPECT_EQ(c->plugin_path, "") << "empty: $PATH";
  c = ParseText("worker: {data_dir: /srv/tessera, plugin_path: '/opt/povray/bin:/usr/bin'}");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->data_dir, "/srv/tessera");
  EXPECT_EQ(c->plugin_path, "/opt/povray/bin:/usr/bin");
}

TEST(WorkerConfig, MissingExplicitFileIsAnError) {
  ConfigFlags flags;
  flags.config_path = "/nonexistent/worker.yaml";
  char* env[] = {nullptr};
  StatusOr<WorkerConfig> c = LoadWorkerConfig(flags, env, "h");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("/nonexistent/worker.yaml"));
}

TEST(WorkerConfig, CudaBackendNeedsAGpu) {
  WorkerConfig config;
  config.backend = "cuda";
  HardwareInfo no_gpu;
  no_gpu.backends = {"cpu"};
  StatusOr<AgentOptions> o = MakeAgentOptions(config, no_gpu);
  ASSERT_FALSE(o.ok());
  EXPECT_THAT(o.status().message(), HasSubstr("worker.backend"));
}

TEST(WorkerConfig, AutoSlotsAreOnePerGpuTheWorkerRendersOn) {
  HardwareInfo box;
  box.backends = {"cpu", "cuda"};
  for (int i = 0; i < 4; ++i) box.gpus.push_back({i, "NVIDIA H200", 143771, 9, 0});
  WorkerConfig config;  // slots: 0 (auto)
  StatusOr<AgentOptions> o = MakeAgentOptions(config, box);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->slots, 4);
  EXPECT_EQ(o->hardware.gpus.size(), 4u);
  config.backend = "cpu";  // GPUs it will not use are not offered to the scheduler
  o = MakeAgentOptions(config, box);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->slots, 1);
  EXPECT_TRUE(o->hardware.gpus.empty());
  config.slots = 2;  // explicit slots win
  EXPECT_EQ(MakeAgentOptions(config, box)->slots, 2);
  HardwareInfo cpu_only;
  cpu_only.backends = {"cpu"};
  EXPECT_EQ(MakeAgentOptions(WorkerConfig{}, cpu_only)->slots, 1);
}

TEST(WorkerConfig, CoresSlotsAreOnePerCoreAndRendersShareTheThreads) {
  StatusOr<WorkerConfig> c = ParseText("worker: {slots: cores}\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->slots_per_core);
  HardwareInfo box;
  box.backends = {"cpu"};
  box.cpu_cores = 12;
  EXPECT_EQ(MakeAgentOptions(*c, box)->slots, 12);
  box.cpu_cores = 256;
  EXPECT_EQ(MakeAgentOptions(*c, box)->slots, kMaxSlots);
  EXPECT_EQ(ParseText("worker: {slots: lots}\n").status().message(),
            "worker.slots: expected a number of tasks (0..64) or 'cores', got 'lots'");
  EXPECT_THAT(ParseText("worker: {slots: 65}\n").status().message(), HasSubstr("worker.slots"));
  EXPECT_THAT(ParseText("worker: {slots: [1]}\n").status().message(), HasSubstr("worker.slots"));
  // Threads per render: the task's cpu_cores, else worker.threads, else the slot's share.
  EXPECT_EQ(RenderThreadsFor(/*task_cpu_cores=*/4, /*worker_threads=*/0, /*slots=*/8, 16), 4);
  EXPECT_EQ(RenderThreadsFor(4, 2, 8, 16), 2) << "worker.threads caps a task's cores";
  EXPECT_EQ(RenderThreadsFor(0, 3, 8, 16), 3);
  EXPECT_EQ(RenderThreadsFor(0, 0, 8, 16), 2);
  EXPECT_EQ(RenderThreadsFor(0, 0, 8, 2), 1) << "never fewer than one";
  EXPECT_EQ(RenderThreadsFor(0, 0, 1, 16), 16);
}

TEST(WorkerConfig, GpuSharingIsCheckedNamingTheField) {
  auto message = [](const std::string& text) { return ParseText(text).status().message(); };
  StatusOr<WorkerConfig> c = ParseText("");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->gpu_sharing, "whole");
  c = ParseText("worker: {gpu_sharing: shared, slots_per_gpu: 4, memory_mb_per_slot: 6000}");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->slots_per_gpu, 4);
  EXPECT_EQ(c->memory_mb_per_slot, 6000);
  EXPECT_THAT(message("worker: {gpu_sharing: vgpu}"), HasSubstr("worker.gpu_sharing"));
  EXPECT_THAT(message("worker: {gpu_sharing: shared}"), HasSubstr("worker.slots_per_gpu"));
  EXPECT_THAT(message("worker: {gpu_sharing: shared, slots_per_gpu: 1}"),
              HasSubstr("worker.slots_per_gpu"));
  EXPECT_THAT(message("worker: {gpu_sharing: shared, slots_per_gpu: 33}"),
              HasSubstr("worker.slots_per_gpu"));
  EXPECT_THAT(message("worker: {slots_per_gpu: 4}"), HasSubstr("worker.slots_per_gpu"));
  EXPECT_THAT(message("worker: {memory_mb_per_slot: 4000}"),
              HasSubstr("worker.memory_mb_per_slot"));
  EXPECT_THAT(message("worker: {gpu_sharing: shared, slots_per_gpu: 4, memory_mb_per_slot: -1}"),
              HasSubstr("worker.memory_mb_per_slot"));
}

TEST(WorkerConfig, SharedGpusGiveSlotsPerGpuAndReachTheRegistration) {
  HardwareInfo box;
  box.backends = {"cpu", "cuda"};
  for (int i = 0; i < 4; ++i) box.gpus.push_back({i, "NVIDIA L4", 22563, 8, 9});
  StatusOr<WorkerConfig> c = ParseText("worker: {gpu_sharing: shared, slots_per_gpu: 4}");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  StatusOr<AgentOptions> o = MakeAgentOptions(*c, box);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->slots, 16) << "auto slots: one per GPU slot";
  EXPECT_EQ(o->slots_per_gpu, 4);
  c = ParseText("worker: {gpu_sharing: shared, slots_per_gpu: 32}");
  EXPECT_EQ(MakeAgentOptions(*c, box)->slots, kMaxSlots) << "never beyond the slot limit";
  // The slots of one GPU never promise more memory than it has.
  c = ParseText("worker: {gpu_sharing: shared, slots_per_gpu: 4, memory_mb_per_slot: 6000}");
  o = MakeAgentOptions(*c, box);
  ASSERT_FALSE(o.ok());
  EXPECT_THAT(o.status().message(), HasSubstr("worker.memory_mb_per_slot"));
  EXPECT_THAT(o.status().message(), HasSubstr("GPU 0 has 22563"));
  c = ParseText("worker: {gpu_sharing: shared, slots_per_gpu: 4, memory_mb_per_slot: 5000}");
  o = MakeAgentOptions(*c, box);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->memory_mb_per_slot, 5000);
  // Whole GPUs (the default) send no sharing.
  EXPECT_EQ(MakeAgentOptions(WorkerConfig{}, box)->slots_per_gpu, 0);
}

// ---- agent against a scheduler played by the test ---------------------------------------------

std::string Scene(int width, int height, int samples) {
  return tessera::testing::TinySceneYaml(width, height, samples);
}

class AgentTest : public ::testing::Test {
 protected:
  void StartAgent() {
    WorkerConfig config;
    config.scheduler_address = scheduler_.endpoint();
    config.name = "test-worker";
    config.backend = "cpu";
    config.threads = 1;  // the test machine is small and shared
    StatusOr<AgentOptions> options = MakeAgentOptions(config, ProbeHardware());
    ASSERT_TRUE(options.ok()) << options.status().ToString();
    options->reconnect_min = 20ms;
    agent_ = std::make_unique<Agent>(std::move(*options));
    thread_ = std::thread([this] { run_status_ = agent_->Run(); });
  }

  // Waits for kRegister and welcomes the worker; returns its routing identity.
  std::string Welcome(int heartbeat_ms = 50, int liveness = 100) {
    std::optional<Received> reg = scheduler_.WaitFor(MessageType::kRegister);
    EXPECT_TRUE(reg.has_value());
    if (!reg) return "";
    scheduler_.Send(reg->identity, MessageType::kWelcome,
                    protocol::Welcome{42, heartbeat_ms, liveness});
    return reg->identity;
  }

  void TearDown() override {
    if (!agent_) return;
    agent_->Stop();
    thread_.join();
  }

  // Messages about `ref` until kTaskDone/kTaskFailed (inclusive), or until the timeout.
  std::vector<protocol::Envelope> CollectTask(const protocol::TaskRef& ref,
                                              std::chrono::milliseconds timeout = 20s) {
    std::vector<protocol::Envelope> out;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      std::optional<Received> r = scheduler_.Next(100ms);
      if (!r || r->env.type == MessageType::kHeartbeat) continue;
      const nlohmann::json body = r->env.Json();
      if (body.value("task_id", int64_t{0}) != ref.task_id ||
          body.value("attempt", 0) != ref.attempt) {
        continue;
      }
      MessageType type = r->env.type;
      out.push_back(std::move(r->env));
      if (type == MessageType::kTaskDone || type == MessageType::kTaskFailed) break;
    }
    return out;
  }

  FakeScheduler scheduler_;
  std::unique_ptr<Agent> agent_;
  std::thread thread_;
  Status run_status_;
};

TEST_F(AgentTest, RegistersHeartbeatsAndRendersATask) {
  StartAgent();
  std::optional<Received> reg = scheduler_.WaitFor(MessageType::kRegister);
  ASSERT_TRUE(reg.has_value());
  StatusOr<protocol::Register> r = reg->env.As<protocol::Register>();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->name, "test-worker");
  EXPECT_FALSE(r->hostname.empty());
  EXPECT_FALSE(r->version.empty());
  EXPECT_GE(r->cpu_cores, 1);
  EXPECT_GT(r->ram_mb, 0);
  EXPECT_EQ(r->backends, std::vector<std::string>{"cpu"});
  EXPECT_EQ(r->slots, 1);
  scheduler_.Send(reg->identity, MessageType::kWelcome, protocol::Welcome{42, 50, 100});

  // Heartbeats flow at the welcome's pace, and garbage from the scheduler is shrugged off.
  ASSERT_TRUE(scheduler_.WaitFor(MessageType::kHeartbeat, 1s).has_value());
  std::vector<zmq::message_t> garbage;
  garbage.emplace_back(std::string("not a tessera message"));
  scheduler_.SendRaw(reg->identity, std::move(garbage));
  scheduler_.SendRaw(reg->identity,
                     protocol::Encode(MessageType::kAssign, nlohmann::json{{"task_id", "x"}}));
  ASSERT_TRUE(scheduler_.WaitFor(MessageType::kHeartbeat, 1s).has_value());
  EXPECT_EQ(agent_->worker_id(), 42);

  protocol::Assign assign{11, 2, 3, 1, 2, Scene(32, 24, 2)};
  scheduler_.Send(reg->identity, MessageType::kAssign, assign);
  std::vector<protocol::Envelope> msgs = CollectTask({11, 2});
  ASSERT_FALSE(msgs.empty());
  ASSERT_EQ(msgs.back().type, MessageType::kTaskDone) << msgs.back().Json().dump();
  std::vector<int> frames;
  for (const protocol::Envelope& env : msgs) {
    if (env.type != MessageType::kFrameResult) continue;
    StatusOr<protocol::FrameResult> fr = env.As<protocol::FrameResult>();
    ASSERT_TRUE(fr.ok());
    frames.push_back(fr->frame);
    EXPECT_EQ(fr->width, 32);
    EXPECT_EQ(fr->height, 24);
    EXPECT_EQ(fr->channels, 4);
    EXPECT_EQ(env.payload.size(), size_t{32} * 24 * 4 * sizeof(float));
    EXPECT_THAT(fr->backend, HasSubstr("cpu"));
  }
  EXPECT_EQ(frames, (std::vector<int>{1, 2}));
}

TEST_F(AgentTest, BadSceneFailsTheTaskWithTheParserMessage) {
  StartAgent();
  std::string id = Welcome();
  scheduler_.Send(id, MessageType::kAssign, protocol::Assign{5, 1, 1, 1, 1, Scene(0, 24, 2)});
  std::vector<protocol::Envelope> msgs = CollectTask({5, 1});
  ASSERT_FALSE(msgs.empty());
  ASSERT_EQ(msgs.back().type, MessageType::kTaskFailed);
  EXPECT_THAT(msgs.back().Json().value("message", ""), HasSubstr("width"));
  // The worker lives on and takes the next task.
  scheduler_.Send(id, MessageType::kAssign, protocol::Assign{6, 1, 1, 1, 1, Scene(8, 8, 1)});
  msgs = CollectTask({6, 1});
  ASSERT_FALSE(msgs.empty());
  EXPECT_EQ(msgs.back().type, MessageType::kTaskDone);
}

TEST_F(AgentTest, CancelStopsALongRenderAndBusyWorkerRefuses) {
  StartAgent();
  std::string id = Welcome();
  scheduler_.Send(id, MessageType::kAssign, protocol::Assign{7, 1, 1, 1, 3, Scene(64, 48, 65536)});
  ASSERT_TRUE(scheduler_.WaitFor(MessageType::kProgress, 2s).has_value());

  // One slot: a second task is refused so the scheduler can requeue it.
  scheduler_.Send(id, MessageType::kAssign, protocol::Assign{8, 1, 1, 1, 1, Scene(8, 8, 1)});
  std::vector<protocol::Envelope> refused = CollectTask({8, 1}, 2s);
  ASSERT_FALSE(refused.empty());
  EXPECT_EQ(refused.back().type, MessageType::kTaskFailed);
  EXPECT_EQ(refused.back().Json().value("message", ""), "worker busy");

  // A cancel for another attempt of the task changes nothing.
  scheduler_.Send(id, MessageType::kCancel, protocol::Cancel{7, 2});
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(agent_->running_tasks(), 1);

  const auto cancelled_at = std::chrono::steady_clock::now();
  scheduler_.Send(id, MessageType::kCancel, protocol::Cancel{7, 1});
  while (agent_->running_tasks() != 0 && std::chrono::steady_clock::now() - cancelled_at < 5s) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(agent_->running_tasks(), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - cancelled_at, 2s);

  // Nothing more for the cancelled attempt: no frame, no done, no failure.
  std::vector<protocol::Envelope> after = CollectTask({7, 1}, 500ms);
  for (const protocol::Envelope& env : after) {
    EXPECT_EQ(env.type, MessageType::kProgress) << protocol::MessageTypeName(env.type);
  }
}

TEST_F(AgentTest, UnknownWorkerMakesItRegisterAgain) {
  StartAgent();
  std::string id = Welcome();
  ASSERT_TRUE(scheduler_.WaitFor(MessageType::kHeartbeat, 1s).has_value());
  scheduler_.Send(id, MessageType::kUnknownWorker, nlohmann::json::object());
  std::optional<Received> again = scheduler_.WaitFor(MessageType::kRegister, 3s);
  ASSERT_TRUE(again.has_value());
  EXPECT_NE(again->identity, id);  // a fresh socket
  scheduler_.Send(again->identity, MessageType::kWelcome, protocol::Welcome{43, 50, 100});
  std::optional<Received> hb = scheduler_.WaitFor(MessageType::kHeartbeat, 1s);
  ASSERT_TRUE(hb.has_value());
  EXPECT_EQ(hb->identity, again->identity);
}

TEST_F(AgentTest, SilentSchedulerMakesItReconnectWithoutDroppingTheRender) {
  StartAgent();
  std::string id = Welcome(/*heartbeat_ms=*/50, /*liveness=*/4);  // never acked: 200 ms
  scheduler_.Send(id, MessageType::kAssign, protocol::Assign{9, 1, 1, 1, 1, Scene(64, 48, 65536)});
  std::optional<Received> again = scheduler_.WaitFor(MessageType::kRegister, 3s);
  ASSERT_TRUE(again.has_value());
  EXPECT_NE(again->identity, id);
  scheduler_.Send(again->identity, MessageType::kWelcome, protocol::Welcome{42, 50, 100});
  // The first heartbeat on the new link still lists the render: the reconnect did not drop it.
  std::optional<Received> hb = scheduler_.WaitFor(MessageType::kHeartbeat, 1s);
  ASSERT_TRUE(hb.has_value());
  StatusOr<protocol::Heartbeat> beat = hb->env.As<protocol::Heartbeat>();
  ASSERT_TRUE(beat.ok());
  EXPECT_EQ(beat->running, (std::vector<protocol::TaskRef>{{9, 1}}));
  EXPECT_EQ(agent_->running_tasks(), 1);
}

TEST_F(AgentTest, StopSaysGoodbye) {
  StartAgent();
  Welcome();
  agent_->Stop();
  EXPECT_TRUE(scheduler_.WaitFor(MessageType::kGoodbye, 2s).has_value());
  thread_.join();
  agent_.reset();
  EXPECT_TRUE(run_status_.ok()) << run_status_.ToString();
}

TEST_F(AgentTest, RejectEndsRunWithTheReason) {
  StartAgent();
  std::optional<Received> reg = scheduler_.WaitFor(MessageType::kRegister);
  ASSERT_TRUE(reg.has_value());
  scheduler_.Send(reg->identity, MessageType::kReject, protocol::Reject{"not on the allow-list"});
  thread_.join();
  agent_.reset();
  EXPECT_EQ(run_status_.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(run_status_.message(), HasSubstr("not on the allow-list"));
}

}  // namespace
}  // namespace tessera::worker
