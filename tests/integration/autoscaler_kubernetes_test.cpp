// The kubernetes provider against a fake kubectl: a shell script that records each call's argv,
// keeps the Deployment's replica count in a file (answering `get deployment -o jsonpath=...` with
// it, honouring `scale --current-replicas=N --replicas=M`), and fails on demand.

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <sstream>
#include <thread>

#include "scheduler/autoscaler/providers.h"
#include "tests/support/process.h"

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;
using Argv = std::vector<std::string>;

constexpr const char* kPod = "tessera-worker-7d9f8b6c4-x2k9q";

// A directory with the fake kubectl, its replica count and its log of calls.
class FakeKubectl {
 public:
  explicit FakeKubectl(int replicas) : dir_(MakeTempDir("tessera-as-k8s")) {
    WriteFile(dir_ + "/kubectl", R"(#!/bin/sh
dir=")" + dir_ + R"("
for a in "$@"; do printf '%s\n' "$a"; done >> "$dir/argv.log"
echo '<end>' >> "$dir/argv.log"
# Told to fail: print the file's lines, exit 3.
if [ -f "$dir/fail" ]; then cat "$dir/fail"; exit 3; fi
while [ $# -gt 0 ]; do
  case "$1" in
    --namespace|--context) shift 2 ;;
    *) break ;;
  esac
done
replicas=$(cat "$dir/replicas")
case "$1" in
  get)
    printf '%s' "$replicas"
    # Told to race: someone else adds a replica right after this read.
    if [ -f "$dir/race" ]; then rm "$dir/race"; echo $((replicas + 1)) > "$dir/replicas"; fi ;;
  scale)
    for a in "$@"; do
      case "$a" in
        --current-replicas=*) current=${a#--current-replicas=} ;;
        --replicas=*) wanted=${a#--replicas=} ;;
      esac
    done
    if [ "$current" != "$replicas" ]; then
      echo "error: Expected replicas to be $current, was $replicas"
      exit 1
    fi
    echo "$wanted" > "$dir/replicas"
    echo "deployment.apps/$2 scaled" ;;
  annotate)
    echo "pod/$3 annotated" ;;
  *)
    echo "error: unknown command \"$1\""
    exit 1 ;;
esac
)");
    ::chmod((dir_ + "/kubectl").c_str(), 0755);
    SetReplicas(std::to_string(replicas));
  }
  ~FakeKubectl() { fs::remove_all(dir_); }

  const std::string& dir() const { return dir_; }
  std::string path() const { return dir_ + "/kubectl"; }
  std::string Replicas() const { return ReadFile(dir_ + "/replicas"); }
  void SetReplicas(const std::string& text) { WriteFile(dir_ + "/replicas", text + "\n"); }
  // Every call from now on prints `output` and exits 3.
  void Fail(const std::string& output) { WriteFile(dir_ + "/fail", output); }
  // After the next read of the replica count, someone else adds a replica.
  void Race() { WriteFile(dir_ + "/race", ""); }

  // The calls so far, each its argv after the program; the log starts over.
  std::vector<Argv> TakeCalls() {
    std::vector<Argv> calls;
    if (!fs::exists(dir_ + "/argv.log")) return calls;
    std::istringstream in(ReadFile(dir_ + "/argv.log"));
    fs::remove(dir_ + "/argv.log");
    Argv call;
    for (std::string line; std::getline(in, line);) {
      if (line == "<end>") {
        calls.push_back(std::move(call));
        call.clear();
      } else {
        call.push_back(line);
      }
    }
    return calls;
  }

  autoscaler::ProviderConfig Config() const {
    autoscaler::ProviderConfig config;
    config.kind = "kubernetes";
    config.deployment = "tessera-worker";
    config.k8s_namespace = "tessera";
    config.kubectl = path();
    config.timeout_s = 10;
    return config;
  }

 private:
  std::string dir_;
};

std::unique_ptr<autoscaler::Provider> Make(const autoscaler::ProviderConfig& config) {
  auto provider = autoscaler::MakeProvider(config);
  EXPECT_TRUE(provider.ok()) << provider.status().ToString();
  return provider.ok() ? std::move(*provider) : nullptr;
}

const Argv kGetReplicas = {"--namespace",
                           "tessera",
                           "get",
                           "deployment",
                           "tessera-worker",
                           "-o",
                           "jsonpath={.spec.replicas}"};

Argv ScaleArgv(int from, int to) {
  return {"--namespace",
          "tessera",
          "scale",
          "deployment/tessera-worker",
          "--current-replicas=" + std::to_string(from),
          "--replicas=" + std::to_string(to)};
}

TEST(AutoscalerKubernetes, CreateAddsAReplicaAndTerminateRemovesExactlyThatPod) {
  FakeKubectl kubectl(2);
  auto provider = Make(kubectl.Config());
  ASSERT_TRUE(provider);
  EXPECT_EQ(provider->NamePrefix(), "tessera-worker-");
  EXPECT_TRUE(provider->TerminateDrains());

  autoscaler::NodeRequest request;
  request.group = "k8s-l4";
  request.worker_name = "k8s-l4-1";
  auto id = provider->Create(request);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(*id, "") << "pods name themselves";
  EXPECT_EQ(kubectl.Replicas(), "3\n");
  EXPECT_EQ(kubectl.TakeCalls(), (std::vector<Argv>{kGetReplicas, ScaleArgv(2, 3)}));

  // The pod is marked as the one to delete before the Deployment shrinks.
  ASSERT_TRUE(provider->Terminate(kPod).ok());
  EXPECT_EQ(kubectl.Replicas(), "2\n");
  const Argv annotate = {"--namespace", "tessera",
                         "annotate",    "pod",
                         kPod,          "controller.kubernetes.io/pod-deletion-cost=-1000000",
                         "--overwrite"};
  EXPECT_EQ(kubectl.TakeCalls(), (std::vector<Argv>{annotate, kGetReplicas, ScaleArgv(3, 2)}));

  // A pod that never registered has no id: one replica goes, and the ReplicaSet picks the pod.
  ASSERT_TRUE(provider->Terminate("").ok());
  EXPECT_EQ(kubectl.Replicas(), "1\n");
  EXPECT_EQ(kubectl.TakeCalls(), (std::vector<Argv>{kGetReplicas, ScaleArgv(2, 1)}));

  // Never below zero.
  kubectl.SetReplicas("0");
  ASSERT_TRUE(provider->Terminate(kPod).ok());
  EXPECT_EQ(kubectl.Replicas(), "0\n");
  EXPECT_EQ(kubectl.TakeCalls().size(), 2u) << "annotate and get, no scale";
}

TEST(AutoscalerKubernetes, EveryCallNamesTheNamespaceAndTheContext) {
  FakeKubectl kubectl(0);
  autoscaler::ProviderConfig config = kubectl.Config();
  config.k8s_namespace = "render";
  config.kube_context = "gke_studio_us-central1_render";
  // Found on PATH by name, like the real one.
  config.kubectl = "kubectl";
  const std::string old_path = std::getenv("PATH") ? std::getenv("PATH") : "";
  ::setenv("PATH", (kubectl.dir() + ":" + old_path).c_str(), 1);
  auto provider = Make(config);
  ASSERT_TRUE(provider);
  ASSERT_TRUE(provider->Create({}).ok());
  ASSERT_TRUE(provider->Terminate(kPod).ok());
  ::setenv("PATH", old_path.c_str(), 1);
  const std::vector<Argv> calls = kubectl.TakeCalls();
  ASSERT_EQ(calls.size(), 5u);
  for (const Argv& call : calls) {
    ASSERT_GE(call.size(), 5u);
    EXPECT_EQ(Argv(call.begin(), call.begin() + 4),
              (Argv{"--namespace", "render", "--context", "gke_studio_us-central1_render"}));
  }
  EXPECT_EQ(calls[1],
            (Argv{"--namespace", "render", "--context", "gke_studio_us-central1_render", "scale",
                  "deployment/tessera-worker", "--current-replicas=0", "--replicas=1"}));
  EXPECT_EQ(calls[2][4], "annotate");
  EXPECT_EQ(kubectl.Replicas(), "0\n");
}

TEST(AutoscalerKubernetes, HostilePodIdsAreRefusedWithoutRunningKubectl) {
  FakeKubectl kubectl(3);
  auto provider = Make(kubectl.Config());
  ASSERT_TRUE(provider);
  for (const std::string& id : std::vector<std::string>{
           "-x", "--namespace=kube-system", "a;b", "../x", "x/../y", "Tessera-Worker-1", "pod-",
           ".hidden", "a b", "a\nb", "$(touch pwned)", std::string(254, 'a')}) {
    SCOPED_TRACE(id);
    const Status s = provider->Terminate(id);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  }
  EXPECT_TRUE(kubectl.TakeCalls().empty());
  EXPECT_EQ(kubectl.Replicas(), "3\n");
  // The longest valid name is fine.
  EXPECT_TRUE(provider->Terminate(std::string(253, 'a')).ok());
  EXPECT_EQ(kubectl.Replicas(), "2\n");
}

TEST(AutoscalerKubernetes, FailuresNameKubectlItsExitAndItsLastLine) {
  FakeKubectl kubectl(2);
  auto provider = Make(kubectl.Config());
  ASSERT_TRUE(provider);

  kubectl.Fail(
      "Warning: the server is slow\nerror: You must be logged in to the server (Unauthorized)\n");
  auto created = provider->Create({});
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().code(), StatusCode::kUnavailable);
  const std::string message = created.status().message();
  EXPECT_NE(message.find(kubectl.path()), std::string::npos) << message;
  EXPECT_NE(message.find("exit 3"), std::string::npos) << message;
  EXPECT_NE(message.find("You must be logged in to the server (Unauthorized)"), std::string::npos)
      << message;
  EXPECT_EQ(message.find("slow"), std::string::npos) << message;
  EXPECT_EQ(kubectl.TakeCalls().size(), 1u) << "nothing runs after a failure";

  // A pod that is gone is NotFound, and the Deployment is left alone.
  kubectl.Fail("Error from server (NotFound): pods \"" + std::string(kPod) + "\" not found\n");
  const Status gone = provider->Terminate(kPod);
  EXPECT_EQ(gone.code(), StatusCode::kNotFound) << gone.ToString();
  EXPECT_EQ(kubectl.TakeCalls().size(), 1u);
  fs::remove(kubectl.dir() + "/fail");

  // The replica count must be a whole number.
  for (const std::string text : {"", "two", "-1", "3.5"}) {
    kubectl.SetReplicas(text);
    auto odd = provider->Create({});
    ASSERT_FALSE(odd.ok()) << text;
    EXPECT_EQ(odd.status().code(), StatusCode::kUnavailable);
    EXPECT_NE(odd.status().message().find("'" + text + "'"), std::string::npos)
        << odd.status().message();
  }
  EXPECT_EQ(kubectl.TakeCalls().size(), 4u) << "no scale after an odd count";

  // Someone else scaled in between: the precondition fails instead of overwriting their change.
  kubectl.SetReplicas("5");
  kubectl.Race();
  auto raced = provider->Create({});
  ASSERT_FALSE(raced.ok());
  EXPECT_NE(raced.status().message().find("Expected replicas to be 5, was 6"), std::string::npos)
      << raced.status().message();
  EXPECT_EQ(kubectl.Replicas(), "6\n");
  EXPECT_TRUE(provider->Create({}).ok());
  EXPECT_EQ(kubectl.Replicas(), "7\n");

  autoscaler::ProviderConfig missing = kubectl.Config();
  missing.kubectl = "tessera-no-such-kubectl";
  auto absent = Make(missing)->Create({});
  ASSERT_FALSE(absent.ok());
  EXPECT_NE(absent.status().message().find("not found"), std::string::npos);
}

TEST(AutoscalerKubernetes, ScalingIsSerialized) {
  FakeKubectl kubectl(2);
  auto provider = Make(kubectl.Config());
  ASSERT_TRUE(provider);
  // The fake refuses a scale whose --current-replicas is stale: unserialized read-then-write
  // would trip it.
  std::vector<std::thread> threads;
  std::atomic<int> failures = 0;
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&] {
      if (!provider->Create({}).ok()) ++failures;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(kubectl.Replicas(), "8\n");
}

TEST(AutoscalerKubernetes, ConfigNeedsAValidDeployment) {
  FakeKubectl kubectl(1);
  autoscaler::ProviderConfig config = kubectl.Config();
  config.deployment.clear();
  auto refused = autoscaler::MakeProvider(config);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("provider.deployment"), std::string::npos);

  // Names kubectl could take for options are refused before it runs.
  config.deployment = "--all";
  auto provider = Make(config);
  ASSERT_TRUE(provider);
  EXPECT_EQ(provider->Create({}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(provider->Terminate(kPod).code(), StatusCode::kInvalidArgument);
  config = kubectl.Config();
  config.k8s_namespace = "-n=kube-system";
  EXPECT_EQ(Make(config)->Create({}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(kubectl.TakeCalls().empty());
}

}  // namespace
}  // namespace tessera::testing
