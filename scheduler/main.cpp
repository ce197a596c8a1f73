// tessera-scheduler: the farm's central daemon (store + broker + assembler + HTTP API).

#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "scheduler/api/http_api.h"
#include "scheduler/autoscaler/autoscaler.h"
#include "scheduler/blobs/blob_store.h"
#include "scheduler/broker/broker.h"
#include "scheduler/events/event_bus.h"
#include "scheduler/events/farm_alerts.h"
#include "scheduler/scheduler_config.h"
#include "scheduler/security/api_auth.h"
#include "scheduler/store/store.h"
#include "scheduler/store/store_copy.h"
#include "shared/base/file_io.h"
#include "shared/base/layered_config.h"
#include "shared/base/logging.h"
#include "shared/wire/curve_keys.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using namespace tessera;

// Written once the farm is serving, so `tessera up`, scripts and tests can find the real ports.
Status WriteReadyFile(const std::string& data_dir, const std::string& api_url,
                      const std::string& broker_endpoint) {
  fs::path path = fs::path(data_dir) / "scheduler.json";
  fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp);
    out << nlohmann::json{{"api_url", api_url},
                          {"broker_endpoint", broker_endpoint},
                          {"pid", ::getpid()}}
               .dump(2)
        << "\n";
    if (!out) return Status::Internal("cannot write " + tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return Status::Internal("cannot write " + path.string() + ": " + ec.message());
  return Status::Ok();
}

// Every connected worker holds a socket: lift the soft open-file limit (often 1024) to the hard
// one so thousands of workers can connect.
void RaiseOpenFileLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  const rlim_t before = limit.rlim_cur;
  limit.rlim_cur = limit.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &limit) == 0) {
    spdlog::info("open-file limit raised from {} to {}", before, limit.rlim_cur);
  } else {
    spdlog::warn("open-file limit is {}: at most about that many workers can connect", before);
  }
}

std::string KeyFile(const scheduler::SchedulerConfig& cfg) {
  return cfg.key_file.empty() ? (fs::path(cfg.data_dir) / "scheduler.key").string() : cfg.key_file;
}

// What a worker costs: its autoscaler node group's price, else its instance type's from
// cost.instance_prices, else cost.default_price_per_hour.
broker::WorkerPrice PriceOf(const scheduler::SchedulerConfig& cfg,
                            const autoscaler::Autoscaler* scaler, const std::string& name,
                            const protocol::CloudInfo& cloud) {
  if (const autoscaler::NodeGroup* group = scaler ? scaler->GroupOf(name) : nullptr) {
    return {group->name, group->price_per_hour};
  }
  if (auto it = cfg.instance_prices.find(cloud.instance_type);
      !cloud.instance_type.empty() && it != cfg.instance_prices.end()) {
    return {"", it->second};
  }
  return {"", cfg.default_price_per_hour};
}

// Local node groups start the tessera-worker installed beside this program, logging under the
// data directory, unless the config says otherwise.
void FillLocalProviderDefaults(autoscaler::AutoscalerConfig& config, const std::string& data) {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  for (autoscaler::GroupConfig& g : config.groups) {
    if (g.provider.kind != "local") continue;
    if (g.provider.worker_binary.empty() && !ec) {
      g.provider.worker_binary = (self.parent_path() / "tessera-worker").string();
    }
    if (g.provider.log_dir.empty()) g.provider.log_dir = data + "/autoscaler/workers";
  }
}

int Fail(const Status& s) {
  std::fprintf(stderr, "tessera-scheduler: %s\n", s.message().c_str());
  return 2;
}

// The command line; what it gives wins over the config file and the environment.
struct Flags {
  std::string config_path, data_dir, store_url, api_listen, broker_listen, log_level, security,
      auth;
  bool print_public_key = false;
};

void AddFlags(CLI::App& app, Flags& f) {
  app.add_option("--config", f.config_path,
                 "YAML config file (see deploy/examples/scheduler.yaml)");
  app.add_option("--data", f.data_dir, "data directory (database, outputs) [./tessera-data]");
  app.add_option("--store", f.store_url,
                 "where the records live: sqlite:/path/tessera.db or a PostgreSQL URL "
                 "[sqlite:<data>/tessera.db]");
  app.add_option("--api", f.api_listen, "HTTP API listen address HOST:PORT [127.0.0.1:8470]");
  app.add_option("--broker", f.broker_listen,
                 "worker endpoint to bind, tcp://HOST:PORT [tcp://127.0.0.1:8471]");
  app.add_option("--log-level", f.log_level, "trace, debug, info, warn, error");
  app.add_option("--security", f.security,
                 "curve (workers enrol with join tokens) or insecure (loopback only) [curve]");
  app.add_option("--auth", f.auth,
                 "token (every API call needs a bearer token) or none (loopback only) [token]");
  app.add_flag("--print-public-key", f.print_public_key,
               "print the scheduler's CURVE public key (workers' scheduler.public_key), creating "
               "the key pair if needed, and exit");
  app.set_version_flag("--version", TESSERA_VERSION);
}

void ApplyFlags(const Flags& f, scheduler::SchedulerConfig& cfg) {
  if (!f.data_dir.empty()) cfg.data_dir = f.data_dir;
  if (!f.api_listen.empty()) cfg.api_listen = f.api_listen;
  if (!f.broker_listen.empty()) cfg.broker_listen = f.broker_listen;
  if (!f.log_level.empty()) cfg.log_level = f.log_level;
  if (!f.security.empty()) cfg.security = f.security;
  if (!f.auth.empty()) cfg.api_auth = f.auth;
}

// `tessera-scheduler store copy --from URL --to URL` (store/store_copy.h).
struct StoreCopyFlags {
  std::string from, to;
};

CLI::App* AddStoreCopyCommand(CLI::App& app, StoreCopyFlags& f) {
  CLI::App* store = app.add_subcommand("store", "the farm's records");
  CLI::App* copy = store->add_subcommand(
      "copy",
      "copy every record from one store to an empty one (the scheduler stopped), e.g. "
      "from SQLite to PostgreSQL, and check the counts");
  copy->add_option("--from", f.from, "the store to read: sqlite:/path/tessera.db or a URL")
      ->required();
  copy->add_option("--to", f.to, "the empty store to fill: a PostgreSQL URL or sqlite:/path")
      ->required();
  return copy;
}

int RunStoreCopy(const StoreCopyFlags& f) {
  const StatusOr<store::StoreUrl> from = store::ParseStoreUrl(f.from, "--from");
  if (!from.ok()) return Fail(from.status());
  const StatusOr<store::StoreUrl> to = store::ParseStoreUrl(f.to, "--to");
  if (!to.ok()) return Fail(to.status());
  std::printf("copying %s -> %s\n", from->Redacted().c_str(), to->Redacted().c_str());
  const StatusOr<std::vector<store::CopiedTable>> copied =
      store::CopyStore(*from, *to, tessera::Clock::Real());
  if (!copied.ok()) return Fail(copied.status());
  int64_t total = 0;
  for (const store::CopiedTable& t : *copied) {
    std::printf("  %-20s %10lld rows\n", t.table.c_str(), static_cast<long long>(t.rows));
    total += t.rows;
  }
  std::printf("copied %lld rows; the counts match on both sides\n", static_cast<long long>(total));
  return 0;
}

// --print-public-key: the exit status.
int PrintPublicKey(const scheduler::SchedulerConfig& cfg) {
  std::error_code ec;
  fs::create_directories(cfg.data_dir, ec);
  StatusOr<curve::KeyPair> keys = curve::LoadOrCreateKeyFile(KeyFile(cfg));
  if (!keys.ok()) return Fail(keys.status());
  std::printf("%s\n", curve::ToHex(keys->public_key).c_str());
  return 0;
}

// Signals are taken synchronously by the main thread (sigwait on the set returned); every other
// thread, started after this, has them blocked.
sigset_t BlockShutdownSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return signals;
}

// The data folder and the output root, absolute, created and cleared of what an interrupted
// run left behind.
struct Folders {
  std::string data;
  std::string output_root;
};

StatusOr<Folders> PrepareFolders(const scheduler::SchedulerConfig& cfg) {
  std::error_code ec;
  fs::create_directories(cfg.data_dir, ec);
  Folders folders;
  folders.data = fs::absolute(cfg.data_dir).lexically_normal().string();
  const std::string& data = folders.data;
  folders.output_root =
      cfg.output_root.empty() ? data + "/outputs" : fs::absolute(cfg.output_root).string();
  fs::create_directories(folders.output_root, ec);
  if (ec) return Status::Internal("cannot create output root " + folders.output_root);
  fs::remove(fs::path(data) / "scheduler.json", ec);
  // A scheduler killed mid-write (a frame, a part, a blob) left a temporary file: nothing of ours
  // writes yet, so whatever is left is garbage. Frames and parts are written again as needed.
  for (const std::string& root : {data, folders.output_root}) {
    if (root != data && root.starts_with(data + "/")) continue;  // already under the data folder
    for (const std::string& path : file_io::RemoveLeftoverTempFiles(root)) {
      spdlog::info("removed {}, left by a write that was interrupted", path);
    }
  }
  return folders;
}

// storage.min_free_mb in bytes: the room the data folder keeps.
uint64_t MinFreeBytes(const scheduler::SchedulerConfig& cfg) {
  return static_cast<uint64_t>(cfg.min_free_mb) << 20;
}

// The broker's options from the config and the parts it talks to; `scaler` names the node
// groups that price workers once the autoscaler exists.
broker::BrokerOptions BrokerOptionsFor(const scheduler::SchedulerConfig& cfg,
                                       blobs::BlobStore& blob_store, events::EventBus& event_bus,
                                       events::FarmAlerts& farm_alerts,
                                       const std::atomic<const autoscaler::Autoscaler*>& scaler) {
  broker::BrokerOptions bopts;
  bopts.blobs = &blob_store;
  bopts.bind_endpoint = cfg.broker_listen;
  bopts.heartbeat_ms = cfg.heartbeat_ms;
  bopts.liveness = cfg.liveness;
  bopts.assembler_threads = cfg.assembler_threads;
  bopts.limits = cfg.limits;
  bopts.projects = cfg.projects;
  bopts.backup_factor = cfg.backup_factor;
  bopts.backup_min_seconds = cfg.backup_min_seconds;
  // Read-only mode ends with a little room back (up to 16 MiB; the floor below which
  // submissions are refused is separate and usually larger).
  bopts.data_resume_bytes =
      std::clamp<uint64_t>(MinFreeBytes(cfg), uint64_t{1} << 20, uint64_t{16} << 20);
  bopts.events = &event_bus;    // the broker publishes, the API's event streams read
  bopts.alerts = &farm_alerts;  // raised by the broker, shown by the API
  bopts.price_of = [&cfg, &scaler](const std::string& name, const protocol::CloudInfo& cloud) {
    return PriceOf(cfg, scaler.load(), name, cloud);
  };
  return bopts;
}

// security: curve gives the broker the scheduler's key pair (made at the first start); insecure
// says loudly that workers connect unauthenticated.
Status UseCurveKeys(const scheduler::SchedulerConfig& cfg, broker::BrokerOptions* bopts) {
  if (cfg.security != "curve") {
    spdlog::warn("INSECURE mode: workers connect unencrypted and unauthenticated ({} only)",
                 cfg.broker_listen);
    return Status::Ok();
  }
  bool created = false;
  TSR_ASSIGN_OR_RETURN(curve::KeyPair keys, curve::LoadOrCreateKeyFile(KeyFile(cfg), &created));
  spdlog::info("{} CURVE key pair {}; workers need scheduler.public_key: {}",
               created ? "created" : "loaded", KeyFile(cfg), curve::ToHex(keys.public_key));
  bopts->curve = keys;
  return Status::Ok();
}

// API tokens: loaded, and the first admin token written at the first start.
Status SetUpApiAuth(security::ApiAuth& api_auth, const scheduler::SchedulerConfig& cfg,
                    const std::string& data) {
  TSR_RETURN_IF_ERROR(api_auth.Load());
  if (!api_auth.enabled()) {
    spdlog::warn("API without tokens (api.auth: none): every local caller is admin ({} only)",
                 cfg.api_listen);
    return Status::Ok();
  }
  const std::string token_file =
      cfg.admin_token_file.empty() ? data + "/admin.token" : cfg.admin_token_file;
  StatusOr<bool> created = api_auth.BootstrapAdmin(token_file);
  if (!created.ok()) return created.status().WithContext("api.admin_token_file");
  if (*created) {
    spdlog::info(
        "created the first admin API token in {} (mode 0600); give the CLI "
        "TESSERA_TOKEN=$(cat {}) and create others with `tessera token create`",
        token_file, token_file);
  }
  return Status::Ok();
}

// The API's options from the config (its listen address, TLS, limits and deadlines) and the
// parts it reads.
StatusOr<api::ApiOptions> ApiOptionsFor(const scheduler::SchedulerConfig& cfg,
                                        const Folders& folders) {
  api::ApiOptions aopts;
  TSR_RETURN_IF_ERROR(
      config::ParseHostPort(cfg.api_listen, "api.listen", &aopts.host, &aopts.port));
  aopts.output_root = folders.output_root;
  aopts.shared_roots = cfg.shared_roots;
  aopts.openjd = &cfg.openjd;
  aopts.threads = cfg.api_threads;
  aopts.tls_cert_file = cfg.tls_cert_file;
  aopts.tls_key_file = cfg.tls_key_file;
  aopts.tls_min_version = cfg.tls_min_version;
  aopts.server.max_connections = cfg.api_max_connections;
  aopts.server.max_connections_per_client = cfg.api_max_connections_per_client;
  aopts.server.max_event_streams = cfg.api_max_event_streams;
  aopts.server.max_header_bytes = static_cast<size_t>(cfg.api_max_header_bytes);
  aopts.server.max_header_count = static_cast<size_t>(cfg.api_max_header_count);
  aopts.server.header_timeout = std::chrono::seconds(cfg.api_header_timeout_s);
  aopts.server.body_timeout = std::chrono::seconds(cfg.api_body_timeout_s);
  aopts.server.write_timeout = std::chrono::seconds(cfg.api_write_timeout_s);
  aopts.history_interval_s = cfg.history_interval_s;
  aopts.data_dir = folders.data;
  aopts.min_free_bytes = MinFreeBytes(cfg);
  return aopts;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tessera-scheduler: the Tessera render farm scheduler"};
  Flags flags;
  AddFlags(app, flags);
  StoreCopyFlags copy;
  CLI::App* copy_command = AddStoreCopyCommand(app, copy);
  CLI11_PARSE(app, argc, argv);
  if (copy_command->parsed()) return RunStoreCopy(copy);

  StatusOr<scheduler::SchedulerConfig> loaded =
      scheduler::LoadSchedulerConfig(flags.config_path, environ);
  if (!loaded.ok()) return Fail(loaded.status());
  scheduler::SchedulerConfig cfg = *loaded;
  ApplyFlags(flags, cfg);
  if (Status s = scheduler::ValidateSchedulerConfig(cfg); !s.ok()) return Fail(s);
  if (flags.print_public_key) return PrintPublicKey(cfg);
  if (Status s = logging::Init("scheduler", cfg.log_level); !s.ok()) return Fail(s);
  RaiseOpenFileLimit();
  const sigset_t signals = BlockShutdownSignals();
  const StatusOr<Folders> folders = PrepareFolders(cfg);
  if (!folders.ok()) return Fail(folders.status());
  const std::string& data = folders->data;

  // Time is an input of the store, the broker and the autoscaler; the daemon gives them the real
  // clock.
  const tessera::Clock& clock = tessera::Clock::Real();
  store::StoreUrlSources sources;
  sources.flag = flags.store_url;
  sources.config_url = cfg.store_url;  // store.url, or $TESSERA_STORE_URL over it
  sources.password_file = cfg.store_password_file;
  sources.data_dir = data;
  const StatusOr<store::StoreUrl> store_url = store::ResolveStoreUrl(sources);
  if (!store_url.ok()) return Fail(store_url.status());
  auto store =
      store::Store::Open(*store_url, data, clock, cfg.synchronous == "full" ? "FULL" : "NORMAL");
  if (!store.ok()) return Fail(store.status());
  spdlog::info("store: {} (schema {})", (*store)->Describe(), (*store)->schema_version());

  blobs::BlobStore blob_store(data + "/blobs");
  if (Status s = blob_store.Open(); !s.ok()) return Fail(s);

  events::EventBus event_bus;
  events::FarmAlerts farm_alerts;
  // The autoscaler (made once the broker exists) names the node groups that price workers.
  std::atomic<const autoscaler::Autoscaler*> scaler_for_prices{nullptr};
  broker::BrokerOptions bopts =
      BrokerOptionsFor(cfg, blob_store, event_bus, farm_alerts, scaler_for_prices);
  if (Status s = UseCurveKeys(cfg, &bopts); !s.ok()) return Fail(s);
  broker::Broker broker(**store, bopts, clock);
  std::unique_ptr<autoscaler::Autoscaler> scaler;
  if (!cfg.autoscaler.groups.empty()) {
    FillLocalProviderDefaults(cfg.autoscaler, data);
    scaler = std::make_unique<autoscaler::Autoscaler>(
        **store, broker, cfg.autoscaler,
        autoscaler::AutoscalerOptions{.data_dir = data, .events = &event_bus}, clock);
    if (Status s = scaler->MakeProviders(); !s.ok()) return Fail(s);
    scaler_for_prices = scaler.get();
  }
  StatusOr<std::string> endpoint = broker.Start();
  if (!endpoint.ok()) return Fail(endpoint.status());
  if (scaler) {
    if (Status s = scaler->Start(*endpoint); !s.ok()) return Fail(s);
  }

  tessera::security::ApiAuth api_auth(**store, cfg.api_auth == "token");
  if (Status s = SetUpApiAuth(api_auth, cfg, data); !s.ok()) return Fail(s);

  StatusOr<api::ApiOptions> aopts = ApiOptionsFor(cfg, *folders);
  if (!aopts.ok()) return Fail(aopts.status());
  aopts->events = &event_bus;
  aopts->alerts = &farm_alerts;
  aopts->autoscaler = scaler.get();
  aopts->blobs = &blob_store;
  // Webhooks: their own threads, reading the store's events (a receiver never holds the broker).
  events::WebhookNotifier notifier(**store, cfg.notifications);
  notifier.Start();
  if (!cfg.notifications.empty()) {
    spdlog::info("webhooks: {} receiver(s)", cfg.notifications.size());
    aopts->webhooks = &notifier;
  }
  api::HttpApi http(**store, broker, api_auth, *aopts);
  StatusOr<int> port = http.Start();
  if (!port.ok()) return Fail(port.status());

  std::string api_url = (aopts->tls_cert_file.empty() ? "http://" : "https://") + aopts->host +
                        ":" + std::to_string(*port);
  if (Status s = WriteReadyFile(data, api_url, *endpoint); !s.ok()) return Fail(s);
  spdlog::info("ready: API {}  workers {}  data {}", api_url, *endpoint, data);

  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("received {}, shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
  http.Stop();
  notifier.Stop();
  scaler.reset();  // before the broker: a tick asks the broker, and local nodes drain through it
  broker.Stop();
  std::error_code ec;
  fs::remove(fs::path(data) / "scheduler.json", ec);
  spdlog::info("stopped");
  return 0;
}
