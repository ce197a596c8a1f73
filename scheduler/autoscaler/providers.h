#pragma once
// Where the autoscaler's machines come from. A provider starts a node whose worker registers
// under a name the autoscaler chose (that is how registrations are matched to requests), and
// stops nodes. Every program runs as an argv array, never through a shell: values (a node name,
// an instance type) are substituted into whole arguments and never interpreted.
//
//   local    worker processes on this machine (`tessera up`, tests); stopping one sends SIGTERM,
//            which drains it: it finishes its task, then exits
//   command  argv templates for a cloud's command-line tool (deploy/autoscaler/ has ready ones
//            for AWS, Alibaba Cloud and Tencent Cloud): `create` prints the new instance's id as
//            its last line of output; `terminate` gets it as {id}
//   kubernetes  scales the worker Deployment with kubectl (scheduler/autoscaler/kubernetes.cpp):
//            pods take names of Kubernetes' choosing, so its nodes are matched by NamePrefix()

#include <sys/types.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "shared/base/status.h"

namespace tessera::autoscaler {

// One node group's provider, from the scheduler config.
struct ProviderConfig {
  std::string kind = "local";  // local | command
  // local: the worker program and arguments added after --name/--data-dir/--scheduler/
  // --public-key/--join-token/--pool/--tag.
  std::string worker_binary;
  std::vector<std::string> worker_args;
  std::string log_dir;  // each local worker's output (<log_dir>/<name>.log) and data directory
  // command: argv templates; {name}, {group}, {id} and every key of NodeRequest::vars.
  std::vector<std::string> create;
  std::vector<std::string> terminate;
  int timeout_s = 120;  // a create or terminate command that runs longer is killed and failed
  // kubernetes: the worker Deployment to scale, its namespace, kubectl's context (empty: the
  // current one) and the kubectl program.
  std::string deployment;
  std::string k8s_namespace = "default";
  std::string kube_context;
  std::string kubectl = "kubectl";
};

// A node to start: its worker's name, its group, and the values templates may use (the
// scheduler's address and public key, a rendered cloud-init file, the instance type...).
struct NodeRequest {
  std::string group;
  std::string worker_name;
  std::vector<std::string> pools, tags;
  std::map<std::string, std::string> vars;
};

class Provider {
 public:
  virtual ~Provider() = default;
  // Starts a node; returns the provider's id for it. An empty id means the provider names the
  // node itself: its worker registers under a name starting with NamePrefix(), and that name
  // becomes the id.
  virtual StatusOr<std::string> Create(const NodeRequest& request) = 0;
  // Stops a node (a worker the autoscaler drained first, or a request that never registered).
  virtual Status Terminate(const std::string& id) = 0;
  // Non-empty for providers that name their nodes (see Create).
  virtual std::string NamePrefix() const { return ""; }
  // Whether Terminate drains the worker (it gets SIGTERM: finishes its task, then exits), so a
  // node can be terminated at once; otherwise (a cloud instance is switched off) the autoscaler
  // drains the worker through the scheduler first and terminates the node once it has left.
  virtual bool TerminateDrains() const = 0;
};

// A provider for `config`; kInvalidArgument naming the field when it is incomplete.
StatusOr<std::unique_ptr<Provider>> MakeProvider(const ProviderConfig& config);
// The kubernetes provider (kubernetes.cpp); MakeProvider checks the config first.
std::unique_ptr<Provider> MakeKubernetesProvider(const ProviderConfig& config);

// Runs a provider's command-line tool (argv[0], found in $PATH unless absolute) for at most
// timeout_s and returns its non-empty output lines. Errors are kUnavailable naming the program
// (and `what`, e.g. a kubectl subcommand), how it ended and its last line of output.
StatusOr<std::vector<std::string>> RunTool(std::vector<std::string> argv, int timeout_s,
                                           const std::string& what = "");

// `text` with every {key} of `vars` replaced by its value; "{{" and "}}" are literal braces.
// An unknown key is an error naming it, so a typo in a template is caught when the config is
// read, not at 3 a.m.
StatusOr<std::string> Substitute(const std::string& text,
                                 const std::map<std::string, std::string>& vars);

}  // namespace tessera::autoscaler
