#pragma once
// The farm's own Open Job Description parts (scheduler config `openjd:`), added to every OpenJD
// job made here:
//   openjd:
//     environments:                 # environment templates, entered outermost first
//       - {file: /etc/tessera/openjd/conda.yaml}           # every OpenJD job
//       - {file: /etc/tessera/openjd/gpu.yaml, pools: [gpu]}  # jobs submitted to pool gpu
//     path_mapping:                 # rules for PATH parameters, as the specification writes them
//       - {source_path_format: WINDOWS, source_path: "P:\\", destination_path: /mnt/projects}
//     environment_timeout_s: 3600   # an onEnter without a timeout of its own ends by then
// Environment templates are read and checked when the scheduler starts (a bad one stops it,
// naming the file and the field); a job keeps the environments it was made with.

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "shared/base/status.h"
#include "shared/openjd/openjd.h"

namespace tessera::api {

struct OpenJdFarm {
  struct Environment {
    std::string file;                // where it was read from (for messages)
    std::string text;                // the environment template
    std::string name;                // its environment's name
    std::vector<std::string> pools;  // empty: every OpenJD job
  };
  std::vector<Environment> environments;
  std::vector<openjd::PathMappingRule> path_mapping;
  // Seconds an environment's onEnter may run when its template gives no timeout (0: none).
  int environment_timeout_s = 3600;

  // The environment templates a job submitted to `pools` enters, outermost first.
  std::vector<std::string> EnvironmentsFor(const std::vector<std::string>& pools) const;
};

// Reads the `openjd:` section (absent: nothing); errors name the field, and a template's file.
StatusOr<OpenJdFarm> ParseOpenJdFarm(const YAML::Node& node);

}  // namespace tessera::api
