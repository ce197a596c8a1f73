#pragma once
// The scheduler config's `autoscaler:` section: node groups (what their machines are, who starts
// them, what they cost) and the policy's settings. Every key, with its default, is documented in
// deploy/examples/scheduler.yaml.

#include <yaml-cpp/yaml.h>

#include <map>
#include <string>
#include <vector>

#include "scheduler/autoscaler/decider.h"
#include "scheduler/autoscaler/providers.h"
#include "shared/base/status.h"

namespace tessera::autoscaler {

// One node group as configured: what its nodes are, who starts them, and the template values
// its provider's commands use.
struct GroupConfig {
  NodeGroup group;
  ProviderConfig provider;
  std::map<std::string, std::string> vars;
  // A cloud-init file (deploy/cloud-init/) rendered for each node into {user_data}: its
  // ${TESSERA_...} placeholders get the scheduler's address and key, a one-use join token, the
  // node's name, pools and tags, vars.package_url and vars.cloud_provider (default none).
  std::string cloud_init;
};

// The scheduler config's `autoscaler:` section.
struct AutoscalerConfig {
  std::vector<GroupConfig> groups;  // none: no autoscaler
  Settings settings;
  int interval_s = 15;  // between ticks
  // The worker endpoint new nodes connect to; empty: the broker's own endpoint (local nodes).
  std::string scheduler_address;
};

// Reads the section (an undefined or null node: no groups, the autoscaler is off). Errors name
// the field: "autoscaler.groups[1].market: expected spot, on-demand or reserved".
StatusOr<AutoscalerConfig> ParseAutoscalerConfig(const YAML::Node& node);

}  // namespace tessera::autoscaler
