#include "scheduler/api/openjd_farm.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "shared/base/yaml_util.h"
#include "shared/jobs/parsed_job_file.h"
#include "shared/openjd/openjd.h"

namespace tessera::api {

namespace {

constexpr size_t kMaxFarmEnvironments = 20;

}  // namespace

std::vector<std::string> OpenJdFarm::EnvironmentsFor(const std::vector<std::string>& pools) const {
  std::vector<std::string> texts;
  for (const Environment& env : environments) {
    const bool applies = env.pools.empty() ||
                         std::any_of(env.pools.begin(), env.pools.end(), [&](const std::string& p) {
                           return std::count(pools.begin(), pools.end(), p) > 0;
                         });
    if (applies) texts.push_back(env.text);
  }
  return texts;
}

StatusOr<OpenJdFarm> ParseOpenJdFarm(const YAML::Node& node) {
  OpenJdFarm farm;
  yaml::MapReader r(node, "openjd");
  const YAML::Node environments = r.Child("environments");
  const YAML::Node rules = r.Child("path_mapping");
  r.Optional("environment_timeout_s", &farm.environment_timeout_s);
  TSR_RETURN_IF_ERROR(r.Finish());
  if (farm.environment_timeout_s < 0 || farm.environment_timeout_s > 7 * 24 * 3600) {
    return Status::InvalidArgument("openjd.environment_timeout_s: must be 0..604800 seconds");
  }
  if (environments.IsDefined() && !environments.IsNull()) {
    if (!environments.IsSequence()) {
      return Status::InvalidArgument("openjd.environments: expected a list of {file, pools}");
    }
    TSR_RETURN_IF_ERROR(
        yaml::CheckListSize(environments, "openjd.environments", kMaxFarmEnvironments));
    for (size_t i = 0; i < environments.size(); ++i) {
      const std::string field = "openjd.environments[" + std::to_string(i) + "]";
      OpenJdFarm::Environment env;
      yaml::MapReader e(environments[i], field);
      e.Required("file", &env.file).OptionalList("pools", &env.pools, 64);
      TSR_RETURN_IF_ERROR(e.Finish());
      std::ifstream in(env.file, std::ios::binary);
      if (!in) return Status::InvalidArgument(field + ".file: cannot read '" + env.file + "'");
      std::ostringstream text;
      text << in.rdbuf();
      env.text = text.str();
      // One parse: what the file is, checked, and the environment's name.
      const spec::JobFileDocument document = spec::ReadJobFile(env.text);
      if (document.kind != spec::JobFileKind::kOpenJdEnvironment) {
        return Status::InvalidArgument(field + ".file: " + env.file +
                                       " is not an OpenJD environment template "
                                       "(specificationVersion: environment-2023-09)");
      }
      if (Status s = openjd::CheckTemplate(spec::OpenJdTemplate{document.root, env.text.size()});
          !s.ok()) {
        return Status::InvalidArgument(field + ".file: " + env.file + ": " + s.message());
      }
      // Checked above: a map with a named environment.
      env.name = document.root["environment"]["name"].as<std::string>();
      farm.environments.push_back(std::move(env));
    }
  }
  if (rules.IsDefined() && !rules.IsNull()) {
    YAML::Emitter out;
    out << YAML::Flow << YAML::DoubleQuoted << rules;
    TSR_ASSIGN_OR_RETURN(farm.path_mapping,
                         openjd::ParsePathMappingRules(out.c_str(), "openjd.path_mapping"));
  }
  return farm;
}

}  // namespace tessera::api
