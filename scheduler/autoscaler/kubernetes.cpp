// The kubernetes provider: nodes are pods of the worker Deployment, added and removed by scaling
// it with kubectl. Pods take names of Kubernetes' choosing (<deployment>-<hash>-<suffix>), and a
// pod's worker registers under its pod name (deploy/kubernetes/worker-deployment.yaml sets
// TESSERA_WORKER_NAME from metadata.name), so the autoscaler matches new pods by NamePrefix() and
// a pod's name is its id.
//
// Every kubectl call is an argv array with --namespace (and --context when one is set). Scaling
// uses --current-replicas, so a change made by someone else between reading the replica count
// and writing it fails the call instead of being overwritten.

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/autoscaler/providers.h"

namespace tessera::autoscaler {

namespace {

// Makes a pod the one its ReplicaSet removes first when the Deployment is scaled down.
constexpr const char* kDeletionCost = "controller.kubernetes.io/pod-deletion-cost=-1000000";

// A DNS-1123 subdomain, what Kubernetes requires of pod (and Deployment) names: at most 253
// lowercase letters, digits, '-' and '.', starting and ending with a letter or digit. Such a
// name can never be taken for a kubectl option or a path.
bool IsDns1123Name(const std::string& name) {
  if (name.empty() || name.size() > 253) return false;
  const auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(name.front()) || !alnum(name.back())) return false;
  return std::all_of(name.begin(), name.end(),
                     [&](char c) { return alnum(c) || c == '-' || c == '.'; });
}

class KubernetesProvider : public Provider {
 public:
  explicit KubernetesProvider(ProviderConfig config) : config_(std::move(config)) {
    if (!IsDns1123Name(config_.deployment)) {
      config_error_ = Status::InvalidArgument("provider.deployment: '" + config_.deployment +
                                              "' is not a Kubernetes object name");
    } else if (!IsDns1123Name(config_.k8s_namespace)) {
      config_error_ = Status::InvalidArgument("provider.namespace: '" + config_.k8s_namespace +
                                              "' is not a Kubernetes namespace name");
    }
  }

  // One more replica; the new pod names itself, so the id is empty.
  StatusOr<std::string> Create(const NodeRequest& /*request*/) override {
    TSR_RETURN_IF_ERROR(config_error_);
    std::lock_guard lock(mu_);
    TSR_ASSIGN_OR_RETURN(const long replicas, Replicas());
    TSR_RETURN_IF_ERROR(Scale(replicas, replicas + 1));
    return std::string();
  }

  // Marks pod `id` as the cheapest to delete, then removes one replica: the ReplicaSet deletes
  // that pod, which gets SIGTERM and drains. An empty id (a pod whose worker never registered)
  // removes one replica unmarked: the ReplicaSet deletes unscheduled, pending and not-ready pods
  // first, which is where such a pod is.
  Status Terminate(const std::string& id) override {
    TSR_RETURN_IF_ERROR(config_error_);
    if (!id.empty() && !IsDns1123Name(id)) {
      return Status::InvalidArgument("'" + id + "' is not a Kubernetes pod name");
    }
    std::lock_guard lock(mu_);
    if (!id.empty()) {
      std::vector<std::string> output;
      Status marked = Kubectl({"annotate", "pod", id, kDeletionCost, "--overwrite"}, &output);
      // A pod that is gone (deleted by hand, its node reclaimed) is not scaled away a second time:
      // its ReplicaSet has already replaced it.
      if (!marked.ok() && marked.message().find("(NotFound)") != std::string::npos) {
        return Status::NotFound("pod " + id + " does not exist: " + marked.message());
      }
      TSR_RETURN_IF_ERROR(marked);
    }
    TSR_ASSIGN_OR_RETURN(const long replicas, Replicas());
    if (replicas == 0) return Status::Ok();
    return Scale(replicas, replicas - 1);
  }

  std::string NamePrefix() const override { return config_.deployment + "-"; }
  // The pod gets SIGTERM and terminationGracePeriodSeconds: the worker finishes its task.
  bool TerminateDrains() const override { return true; }

 private:
  // The Deployment's desired replica count (mu_ held).
  StatusOr<long> Replicas() {
    std::vector<std::string> output;
    TSR_RETURN_IF_ERROR(Kubectl(
        {"get", "deployment", config_.deployment, "-o", "jsonpath={.spec.replicas}"}, &output));
    std::string out = output.empty() ? "" : output.back();
    while (!out.empty() && std::isspace(static_cast<unsigned char>(out.back()))) out.pop_back();
    if (out.empty() || out.size() > 9 ||
        !std::all_of(out.begin(), out.end(), [](unsigned char c) { return std::isdigit(c); })) {
      return Status::Unavailable(config_.kubectl + " printed '" + out +
                                 "' as the replica count of deployment/" + config_.deployment);
    }
    return std::stol(out);
  }

  // Scales the Deployment from `from` to `to` replicas; fails when it no longer has `from`.
  Status Scale(long from, long to) {
    std::vector<std::string> ignored;
    return Kubectl(
        {"scale", "deployment/" + config_.deployment, "--current-replicas=" + std::to_string(from),
         "--replicas=" + std::to_string(to)},
        &ignored);
  }

  // Runs kubectl with `args` after the namespace and context flags; *output gets the non-empty
  // lines it printed. A failure names kubectl, its exit and its last line.
  Status Kubectl(const std::vector<std::string>& args, std::vector<std::string>* output) {
    std::vector<std::string> argv = {config_.kubectl, "--namespace", config_.k8s_namespace};
    if (!config_.kube_context.empty()) argv.insert(argv.end(), {"--context", config_.kube_context});
    argv.insert(argv.end(), args.begin(), args.end());
    output->clear();
    TSR_ASSIGN_OR_RETURN(*output, RunTool(argv, config_.timeout_s, args.front()));
    return Status::Ok();
  }

  const ProviderConfig config_;
  Status config_error_;
  std::mutex mu_;  // one scaling at a time: each reads the replica count, then writes it
};

}  // namespace

std::unique_ptr<Provider> MakeKubernetesProvider(const ProviderConfig& config) {
  return std::make_unique<KubernetesProvider>(config);
}

}  // namespace tessera::autoscaler
