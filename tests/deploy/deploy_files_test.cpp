// The YAML files under deploy/ as an operator uses them: cloud-init templates that boot a worker
// and the Kubernetes manifests. Every file parses, each says what its deployment relies on, and
// the configs they carry use only documented keys. Checks needing a tool this machine lacks
// (cloud-init, kubectl, dpkg) skip with a message, and fail under CI=true
// (tests/support/require.h).
#include "tests/deploy/deploy_files.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include "tests/support/require.h"

namespace tessera::deploy_test {
namespace {

using ::testing::HasSubstr;

// Every placeholder a cloud-init template may use, with a sample value of the real shape.
const std::map<std::string, std::string> kPlaceholders = {
    {"TESSERA_SCHEDULER_ADDRESS", "tcp://10.0.0.5:8471"},
    {"TESSERA_SCHEDULER_PUBLIC_KEY", std::string(64, 'a')},
    {"TESSERA_JOIN_TOKEN", "tsrj-" + std::string(64, 'b')},
    {"TESSERA_POOLS", "[gpu, spot]"},
    {"TESSERA_TAGS", "[l4]"},
    {"TESSERA_WORKER_NAME", "spot-l4-17"},
    {"TESSERA_PACKAGE_URL",
     "https://downloads.example.com/tessera-worker-0.1.0-linux-x86_64.tar.gz"},
    {"TESSERA_CLOUD_PROVIDER", "aws"},
};
const char* const kWorkerConfigPath = "/etc/tessera/worker.yaml";

std::string Substitute(std::string text) {
  for (const auto& [name, value] : kPlaceholders) {
    const std::string token = "${" + name + "}";
    for (size_t at = text.find(token); at != std::string::npos; at = text.find(token, at)) {
      text.replace(at, token.size(), value);
      at += value.size();
    }
  }
  return text;
}

std::vector<fs::path> CloudInitTemplates() { return FilesIn(kDeploy / "cloud-init", ".yaml"); }

// A template with sample values in its placeholders, parsed; undefined (and a failure) when it
// is not one YAML document.
YAML::Node LoadTemplate(const fs::path& path) {
  std::vector<YAML::Node> docs = LoadAll(Substitute(ReadFile(path)), path.string());
  EXPECT_EQ(docs.size(), 1u) << path;
  return docs.size() == 1 ? docs[0] : YAML::Node(YAML::NodeType::Undefined);
}

// The runcmd items, a list item (a command split into words) joined with spaces.
std::vector<std::string> RunCommands(const YAML::Node& root) {
  std::vector<std::string> commands;
  for (const YAML::Node& item : At(root, {"runcmd"})) {
    std::string command;
    if (item.IsScalar()) command = item.Scalar();
    if (item.IsSequence()) {
      for (const YAML::Node& word : item) {
        if (!command.empty()) command += ' ';
        command += Scalar(word);
      }
    }
    commands.push_back(command);
  }
  return commands;
}

// Whether a command creates `user` as a system user (useradd --system ... USER).
bool CreatesSystemUser(const std::vector<std::string>& commands, const std::string& user) {
  const std::string tail = " " + user;
  for (const std::string& c : commands) {
    if (c.find("useradd --system") != std::string::npos && c.size() > tail.size() &&
        c.compare(c.size() - tail.size(), tail.size(), tail) == 0) {
      return true;
    }
  }
  return false;
}

YAML::Node WriteFilesEntry(const YAML::Node& root, const std::string& path) {
  for (const YAML::Node& entry : At(root, {"write_files"})) {
    if (Scalar(entry, {"path"}) == path) return entry;
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

// The one YAML document in `text`; undefined (and a failure) otherwise.
YAML::Node LoadOne(const std::string& text, const std::string& what) {
  std::vector<YAML::Node> docs = LoadAll(text, what);
  EXPECT_EQ(docs.size(), 1u) << what;
  return docs.size() == 1 ? docs[0] : YAML::Node(YAML::NodeType::Undefined);
}

// "section.key" for every key of a two-level config.
std::set<std::string> ConfigKeys(const YAML::Node& root) {
  std::set<std::string> keys;
  if (!root.IsDefined() || !root.IsMap()) return keys;
  for (const auto& section : root) {
    if (!section.second.IsMap()) continue;
    for (const auto& key : section.second) {
      keys.insert(section.first.Scalar() + "." + key.first.Scalar());
    }
  }
  return keys;
}

// The programs refuse unknown keys, and deploy/examples/ documents every key they accept: a
// deployed config may use only those.
void ExpectDocumentedKeys(const std::string& config_text, const std::string& example,
                          const std::string& what) {
  const std::set<std::string> documented =
      ConfigKeys(LoadOne(ReadFile(kDeploy / "examples" / example), example));
  for (const std::string& key : ConfigKeys(LoadOne(config_text, what))) {
    EXPECT_EQ(documented.count(key), 1u)
        << what << " uses " << key << ", which deploy/examples/" << example << " does not document";
  }
}

struct Manifests {
  std::vector<YAML::Node> objects;  // every document of every file but kustomization.yaml
  YAML::Node Find(const std::string& kind, const std::string& name) const {
    for (const YAML::Node& o : objects) {
      if (Scalar(o, {"kind"}) == kind && Scalar(o, {"metadata", "name"}) == name) return o;
    }
    return YAML::Node(YAML::NodeType::Undefined);
  }
};

Manifests LoadManifests() {
  Manifests m;
  for (const fs::path& path : FilesIn(kDeploy / "kubernetes", ".yaml")) {
    if (path.filename() == "kustomization.yaml") continue;
    for (const YAML::Node& doc : LoadAll(ReadFile(path), path.string())) {
      if (doc.IsDefined() && !doc.IsNull()) m.objects.push_back(doc);
    }
  }
  return m;
}

// ---- every file ----------------------------------------------------------------------------

TEST(DeployFiles, EveryYamlFileParsesInEveryDocument) {
  std::vector<fs::path> files = FilesIn(kDeploy, ".yaml");
  ASSERT_GE(files.size(), 3u);
  for (const fs::path& path : files) {
    std::vector<YAML::Node> docs = LoadAll(ReadFile(path), path.string());
    EXPECT_FALSE(docs.empty()) << path;
    for (const YAML::Node& doc : docs) EXPECT_TRUE(doc.IsMap()) << path;
  }
}

TEST(DeployFiles, ConfigsUseOnlyKeysTheExamplesDocument) {
  for (const fs::path& path : CloudInitTemplates()) {
    YAML::Node entry = WriteFilesEntry(LoadTemplate(path), kWorkerConfigPath);
    ASSERT_TRUE(entry.IsDefined()) << path;
    ExpectDocumentedKeys(Scalar(entry, {"content"}), "worker.yaml", path.string());
  }
  Manifests m = LoadManifests();
  ExpectDocumentedKeys(
      Scalar(m.Find("ConfigMap", "tessera-worker-config"), {"data", "worker.yaml"}), "worker.yaml",
      "ConfigMap tessera-worker-config");
  ExpectDocumentedKeys(
      Scalar(m.Find("ConfigMap", "tessera-scheduler-config"), {"data", "scheduler.yaml"}),
      "scheduler.yaml", "ConfigMap tessera-scheduler-config");
}

// The configs as the programs read them: each starts and is still running two seconds later
// (exit 2 would be a rejected configuration). Paths and listen addresses that would need root
// or fixed ports are overridden by flags; everything else is the deployed file.
TEST(DeployFiles, ProgramsStartWithTheDeployedConfigs) {
  TSR_REQUIRE_TOOL("timeout", "coreutils' timeout bounds each program's start");
  const std::string dir = MakeTempDir("configs");
  ASSERT_FALSE(dir.empty());
  struct Start {
    std::string what, environment, command;
  };
  std::vector<Start> starts;
  auto worker = [&](const std::string& name, const std::string& config) {
    std::ofstream(dir + "/" + name + ".yaml") << config;
    fs::create_directory(dir + "/" + name);
    return Quote(TSR_WORKER_BIN) + " --config " + Quote(dir + "/" + name + ".yaml") +
           " --data-dir " + Quote(dir + "/" + name) + " --log-level warn";
  };
  for (const fs::path& path : CloudInitTemplates()) {
    const YAML::Node entry = WriteFilesEntry(LoadTemplate(path), kWorkerConfigPath);
    starts.push_back(
        {path.filename().string(), "", worker(path.stem().string(), Scalar(entry, {"content"}))});
  }
  Manifests m = LoadManifests();
  // The Secret's values arrive as environment variables; no GPU here, so the CPU backend.
  starts.push_back(
      {"ConfigMap tessera-worker-config",
       "TESSERA_SCHEDULER_PUBLIC_KEY=" + kPlaceholders.at("TESSERA_SCHEDULER_PUBLIC_KEY") +
           " TESSERA_SCHEDULER_JOIN_TOKEN=" + kPlaceholders.at("TESSERA_JOIN_TOKEN"),
       worker("k8s-worker",
              Scalar(m.Find("ConfigMap", "tessera-worker-config"), {"data", "worker.yaml"})) +
           " --backend cpu"});
  std::ofstream(dir + "/k8s-scheduler.yaml")
      << Scalar(m.Find("ConfigMap", "tessera-scheduler-config"), {"data", "scheduler.yaml"});
  starts.push_back({"ConfigMap tessera-scheduler-config", "",
                    Quote(TSR_SCHEDULER_BIN) + " --config " + Quote(dir + "/k8s-scheduler.yaml") +
                        " --data " + Quote(dir + "/k8s-scheduler") +
                        " --api 127.0.0.1:0 --broker tcp://127.0.0.1:0 --log-level warn"});
  // All at once, so the test takes two seconds rather than ten.
  std::string script;
  for (size_t i = 0; i < starts.size(); ++i) {
    const std::string out = Quote(dir + "/start" + std::to_string(i));
    script += "(" + starts[i].environment + " timeout -k 5 2 " + starts[i].command + " >" + out +
              ".log 2>&1; echo $? >" + out + ".code) &\n";
  }
  std::ofstream(dir + "/start.sh") << script << "wait\n";
  RunCommand("sh " + Quote(dir + "/start.sh"));
  for (size_t i = 0; i < starts.size(); ++i) {
    const std::string out = dir + "/start" + std::to_string(i);
    EXPECT_EQ(ReadFile(out + ".code"), "124\n") << starts[i].what << " did not keep running:\n"
                                                << ReadFile(out + ".log");
  }
}

// ---- cloud-init templates ------------------------------------------------------------------

// The images cloud GPU nodes boot; any cloud (cloud.provider is a placeholder).
TEST(CloudInit, OneTemplatePerSystem) {
  std::set<std::string> names;
  for (const fs::path& path : CloudInitTemplates()) names.insert(path.filename().string());
  EXPECT_EQ(names, (std::set<std::string>{"amazon-linux-worker.yaml", "ubuntu-worker.yaml"}));
}

TEST(CloudInit, TemplatesUseEveryDocumentedPlaceholderAndNoOther) {
  const std::regex placeholder(R"(\$\{([^}]*)\})");
  for (const fs::path& path : CloudInitTemplates()) {
    SCOPED_TRACE(path.string());
    const std::string text = ReadFile(path);
    std::set<std::string> used;
    for (std::sregex_iterator it(text.begin(), text.end(), placeholder), end; it != end; ++it) {
      used.insert((*it)[1].str());
    }
    for (const std::string& name : used) {
      EXPECT_EQ(kPlaceholders.count(name), 1u) << "unknown placeholder ${" << name << "}";
    }
    for (const auto& [name, sample] : kPlaceholders) {
      EXPECT_EQ(used.count(name), 1u) << "${" << name << "} is not used";
      EXPECT_TRUE(std::regex_search(text, std::regex("\n#[^\n]*\\$\\{" + name + "\\}")))
          << "${" << name << "} is not documented in the header comment";
    }
    // Terraform's templatefile() would take "%{" for a directive.
    EXPECT_EQ(text.find("%{"), std::string::npos);
    EXPECT_EQ(Substitute(text).find("${"), std::string::npos);
  }
}

TEST(CloudInit, TemplatesInstallAndStartTheWorker) {
  const Unit unit = LoadUnit("tessera-worker.service");
  const std::string user = One(unit, "Service.User");
  const std::string dir = MakeTempDir("runcmd");
  ASSERT_FALSE(dir.empty());
  for (const fs::path& path : CloudInitTemplates()) {
    SCOPED_TRACE(path.string());
    EXPECT_EQ(ReadFile(path).rfind("#cloud-config\n", 0), 0u) << "must start with #cloud-config";
    const YAML::Node root = LoadTemplate(path);
    ASSERT_TRUE(root.IsDefined() && root.IsMap());

    const YAML::Node config_file = WriteFilesEntry(root, kWorkerConfigPath);
    ASSERT_TRUE(config_file.IsDefined()) << "no write_files entry for " << kWorkerConfigPath;
    // It holds the join token: readable by the service's group, by no one else.
    const int mode = std::stoi(Scalar(config_file, {"permissions"}), nullptr, 8);
    EXPECT_EQ(mode & 07, 0) << "world-readable";
    EXPECT_NE(mode & 040, 0) << "the service's group cannot read it";

    const std::vector<std::string> commands = RunCommands(root);
    EXPECT_TRUE(CreatesSystemUser(commands, user))
        << "the unit's user " << user << " is not created";
    std::string script = "#!/bin/sh\n";
    for (const std::string& c : commands) script += c + "\n";
    EXPECT_THAT(script, HasSubstr("chgrp " + One(unit, "Service.Group") + " " + kWorkerConfigPath));
    EXPECT_THAT(script, HasSubstr(kPlaceholders.at("TESSERA_PACKAGE_URL")));
    EXPECT_THAT(script, HasSubstr("-C /usr/local"));
    EXPECT_THAT(script, HasSubstr("systemctl enable --now tessera-worker"));
    // cloud-init runs the items as one sh script.
    const std::string script_file = dir + "/" + path.stem().string() + ".sh";
    std::ofstream(script_file) << script;
    CommandResult syntax = RunCommand("sh -n " + Quote(script_file));
    EXPECT_EQ(syntax.code, 0) << "runcmd is not valid sh:\n" << syntax.output;
  }
}

TEST(CloudInit, EmbeddedWorkerConfigNamesSchedulerTokenAndProvider) {
  const std::string state_dir = One(LoadUnit("tessera-worker.service"), "Service.StateDirectory");
  for (const fs::path& path : CloudInitTemplates()) {
    SCOPED_TRACE(path.string());
    const YAML::Node entry = WriteFilesEntry(LoadTemplate(path), kWorkerConfigPath);
    ASSERT_TRUE(entry.IsDefined());
    const YAML::Node c = LoadOne(Scalar(entry, {"content"}), "the embedded worker.yaml");
    EXPECT_EQ(Scalar(c, {"scheduler", "address"}), kPlaceholders.at("TESSERA_SCHEDULER_ADDRESS"));
    EXPECT_EQ(Scalar(c, {"scheduler", "public_key"}),
              kPlaceholders.at("TESSERA_SCHEDULER_PUBLIC_KEY"));
    EXPECT_EQ(Scalar(c, {"scheduler", "join_token"}), kPlaceholders.at("TESSERA_JOIN_TOKEN"));
    const YAML::Node pools = At(c, {"worker", "pools"});
    ASSERT_TRUE(pools.IsDefined() && pools.IsSequence()) << "TESSERA_POOLS must become a list";
    EXPECT_EQ(pools.size(), 2u);
    const YAML::Node tags = At(c, {"worker", "tags"});
    ASSERT_TRUE(tags.IsDefined() && tags.IsSequence()) << "TESSERA_TAGS must become a list";
    EXPECT_EQ(Scalar(c, {"worker", "name"}), kPlaceholders.at("TESSERA_WORKER_NAME"));
    // The unit's StateDirectory=, which systemd makes writable.
    EXPECT_EQ(Scalar(c, {"worker", "data_dir"}), "/var/lib/" + state_dir);
    EXPECT_EQ(Scalar(c, {"cloud", "provider"}), kPlaceholders.at("TESSERA_CLOUD_PROVIDER"));
  }
}

TEST(CloudInit, TemplatesPassCloudInitSchema) {
  TSR_REQUIRE_TOOL("cloud-init", "the templates' schema is not checked");
  const std::string dir = MakeTempDir("cloud-init");
  ASSERT_FALSE(dir.empty());
  for (const fs::path& path : CloudInitTemplates()) {
    const std::string file = dir + "/" + path.filename().string();
    std::ofstream(file) << Substitute(ReadFile(path));
    CommandResult r = RunCommand("cloud-init schema --config-file " + Quote(file));
    EXPECT_EQ(r.code, 0) << path << ":\n" << r.output;
  }
}

// The bundle carries every library the worker loads: a template installs none of the
// distribution's (they differ between Ubuntu and Amazon Linux, and between releases), only
// renderers and tools, and it downloads the bundle, never package.sh's Debian 12 archive.
TEST(CloudInit, TemplatesInstallTheBundleAndNoLibraries) {
  for (const fs::path& path : CloudInitTemplates()) {
    SCOPED_TRACE(path.string());
    for (const YAML::Node& p : At(LoadTemplate(path), {"packages"})) {
      EXPECT_NE(Scalar(p).rfind("lib", 0), 0u) << "installs the library package " << Scalar(p);
    }
    EXPECT_THAT(ReadFile(path), HasSubstr("tessera-worker-VERSION-linux-x86_64.tar.gz"));
  }
}

// ---- Kubernetes manifests ------------------------------------------------------------------

TEST(Kubernetes, EveryObjectHasApiVersionKindNameAndNamespace) {
  Manifests m = LoadManifests();
  ASSERT_FALSE(m.objects.empty());
  for (const YAML::Node& o : m.objects) {
    const std::string kind = Scalar(o, {"kind"});
    const std::string name = Scalar(o, {"metadata", "name"});
    EXPECT_FALSE(Scalar(o, {"apiVersion"}).empty()) << kind << " " << name;
    EXPECT_FALSE(kind.empty()) << name;
    EXPECT_FALSE(name.empty()) << kind;
    if (kind != "Namespace") {
      EXPECT_EQ(Scalar(o, {"metadata", "namespace"}), "tessera") << kind << " " << name;
    }
  }
  EXPECT_TRUE(m.Find("Namespace", "tessera").IsDefined());
}

TEST(Kubernetes, SchedulerKeepsItsStateOnAVolumeClaimAndListensForWorkers) {
  Manifests m = LoadManifests();
  const YAML::Node sts = m.Find("StatefulSet", "tessera-scheduler");
  ASSERT_TRUE(sts.IsDefined());
  EXPECT_EQ(At(sts, {"spec", "replicas"}).as<int>(0), 1);
  const YAML::Node claims = At(sts, {"spec", "volumeClaimTemplates"});
  ASSERT_TRUE(claims.IsDefined() && claims.IsSequence() && claims.size() >= 1);
  const std::string claim = Scalar(claims[0], {"metadata", "name"});
  std::string data_mount;
  for (const YAML::Node& container : At(sts, {"spec", "template", "spec", "containers"})) {
    for (const YAML::Node& mount : At(container, {"volumeMounts"})) {
      if (Scalar(mount, {"name"}) == claim) data_mount = Scalar(mount, {"mountPath"});
    }
  }
  EXPECT_EQ(data_mount, "/var/lib/tessera");

  const YAML::Node cfg =
      LoadOne(Scalar(m.Find("ConfigMap", "tessera-scheduler-config"), {"data", "scheduler.yaml"}),
              "ConfigMap tessera-scheduler-config");
  EXPECT_EQ(Scalar(cfg, {"storage", "data_dir"}), data_mount);
  EXPECT_EQ(Scalar(cfg, {"api", "listen"}), "0.0.0.0:8470");
  EXPECT_EQ(Scalar(cfg, {"broker", "listen"}), "tcp://0.0.0.0:8471");
  EXPECT_EQ(Scalar(cfg, {"broker", "security"}), "curve");

  std::set<int> ports;
  for (const YAML::Node& p : At(m.Find("Service", "tessera-scheduler"), {"spec", "ports"})) {
    ports.insert(At(p, {"port"}).as<int>(0));
  }
  EXPECT_EQ(ports, (std::set<int>{8470, 8471}));
}

TEST(Kubernetes, WorkersRequestAGpuAndGetTheirSecretsFromTheEnvironment) {
  Manifests m = LoadManifests();
  const YAML::Node cfg =
      LoadOne(Scalar(m.Find("ConfigMap", "tessera-worker-config"), {"data", "worker.yaml"}),
              "ConfigMap tessera-worker-config");
  // The scheduler's Service, by its cluster DNS name.
  EXPECT_EQ(Scalar(cfg, {"scheduler", "address"}), "tcp://tessera-scheduler.tessera.svc:8471");
  EXPECT_TRUE(m.Find("Service", "tessera-scheduler").IsDefined());
  EXPECT_TRUE(At(cfg, {"scheduler", "public_key"}).IsDefined());
  EXPECT_TRUE(At(cfg, {"scheduler", "join_token"}).IsDefined());
  EXPECT_TRUE(At(cfg, {"cloud", "provider"}).IsDefined());

  for (const std::string& kind : std::vector<std::string>{"Deployment", "DaemonSet"}) {
    SCOPED_TRACE(kind);
    const YAML::Node pod = At(m.Find(kind, "tessera-worker"), {"spec", "template", "spec"});
    ASSERT_TRUE(pod.IsDefined());
    EXPECT_GE(At(pod, {"terminationGracePeriodSeconds"}).as<int>(0), 600) << "too short to drain";
    EXPECT_TRUE(At(pod, {"nodeSelector"}).IsMap());
    EXPECT_TRUE(At(pod, {"tolerations"}).IsSequence());
    const YAML::Node containers = At(pod, {"containers"});
    ASSERT_TRUE(containers.IsSequence() && containers.size() == 1);
    EXPECT_GE(At(containers[0], {"resources", "limits", "nvidia.com/gpu"}).as<int>(0), 1);
    std::map<std::string, std::string> secret_keys;
    for (const YAML::Node& env : At(containers[0], {"env"})) {
      secret_keys[Scalar(env, {"name"})] = Scalar(env, {"valueFrom", "secretKeyRef", "key"});
    }
    EXPECT_FALSE(secret_keys["TESSERA_SCHEDULER_JOIN_TOKEN"].empty());
    EXPECT_FALSE(secret_keys["TESSERA_SCHEDULER_PUBLIC_KEY"].empty());
    bool mounts_config = false;
    for (const YAML::Node& volume : At(pod, {"volumes"})) {
      mounts_config |= Scalar(volume, {"configMap", "name"}) == "tessera-worker-config";
    }
    EXPECT_TRUE(mounts_config);
  }
}

TEST(Kubernetes, KustomizationListsExistingFiles) {
  const fs::path dir = kDeploy / "kubernetes";
  const YAML::Node k = LoadOne(ReadFile(dir / "kustomization.yaml"), "kustomization.yaml");
  const YAML::Node resources = At(k, {"resources"});
  ASSERT_TRUE(resources.IsDefined() && resources.IsSequence());
  for (const YAML::Node& r : resources) EXPECT_TRUE(fs::exists(dir / Scalar(r))) << Scalar(r);
}

TEST(Kubernetes, KustomizeBuilds) {
  TSR_REQUIRE_TOOL("kubectl", "the kustomize build is not run");
  const fs::path dir = kDeploy / "kubernetes";
  CommandResult r = RunCommand("kubectl kustomize " + Quote(dir.string()) + " >/dev/null");
  EXPECT_EQ(r.code, 0) << r.output;
}

}  // namespace
}  // namespace tessera::deploy_test
