#include "scheduler/policy/policy.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <tuple>

#include "shared/jobs/tags.h"
#include "shared/plugins/plugin_catalog.h"

namespace tessera::policy {
namespace {

// The path tracer is compiled into every worker; other renderers run where a worker offers them.
bool OnEveryWorker(const std::string& renderer) {
  const std::shared_ptr<const plugin::PluginSpec> spec = plugin::FindRenderer(renderer);
  return spec != nullptr && spec->on_every_worker;
}

}  // namespace

std::string WhyNever(const JobNeeds& job, const WorkerOffer& worker) {
  if (job.blocklist.count(worker.id)) return "blocklisted for this job";
  if (!job.renderer.empty() && job.renderer != spec::kRendererNoop &&
      !worker.plugins.count(job.renderer) && !OnEveryWorker(job.renderer)) {
    // A renderer whose program the job names runs only programs the worker's allow-list lists:
    // not offered means the list is empty there, whatever is installed.
    const std::shared_ptr<const plugin::PluginSpec> spec = plugin::FindRenderer(job.renderer);
    const bool job_names_program =
        job.renderer == spec::kRendererOpenJd || (spec && !spec->executable_setting.empty());
    return "does not offer the renderer '" + job.renderer + "' " +
           (job_names_program ? "(its worker.command_programs, the programs a job may run, lists "
                                "none)"
                              : "(its program is not installed there)");
  }
  if (!job.pools.empty() && std::none_of(job.pools.begin(), job.pools.end(), [&](const auto& p) {
        return worker.pools.count(p) > 0;
      })) {
    return "not in any of the pools " + nlohmann::json(job.pools).dump();
  }
  for (const std::string& tag : job.tags) {
    if (!spec::TagMet(tag, worker.tags)) return "lacks " + spec::TagWanted(tag);
  }
  const spec::ResourceSpec& need = job.resources;
  if (worker.cpu_cores < need.cpu_cores) {
    return "has " + std::to_string(worker.cpu_cores) + " CPU cores, a task needs " +
           std::to_string(need.cpu_cores);
  }
  if (worker.ram_mb < need.ram_mb) {
    return "has " + std::to_string(worker.ram_mb) + " MB of RAM, a task needs " +
           std::to_string(need.ram_mb);
  }
  return WhyNeverGpus(need, worker);
}

std::string WhyNoFreeCpu(const spec::ResourceSpec& need, const WorkerOffer& worker,
                         const CpuUse& use) {
  if (need.cpu_cores > 0 && use.cores + need.cpu_cores > worker.cpu_cores) {
    return worker.name + " has " + std::to_string(std::max(0, worker.cpu_cores - use.cores)) +
           " of " + std::to_string(worker.cpu_cores) + " CPU cores free, the task needs " +
           std::to_string(need.cpu_cores);
  }
  if (need.ram_mb > 0 && use.ram_mb + need.ram_mb > worker.ram_mb) {
    return worker.name + " has " +
           std::to_string(std::max<int64_t>(0, worker.ram_mb - use.ram_mb)) + " of " +
           std::to_string(worker.ram_mb) + " MB of RAM free, the task needs " +
           std::to_string(need.ram_mb);
  }
  return "";
}

bool LimitsAllow(const std::vector<std::string>& names, const std::map<std::string, int>& max,
                 const std::map<std::string, int>& in_use) {
  // A name listed n times is n units of it (an OpenJD amount of a licence).
  std::map<std::string, int> wanted;
  for (const std::string& name : names) ++wanted[name];
  for (const auto& [name, count] : wanted) {
    auto limit = max.find(name);
    auto used = in_use.find(name);
    if (limit == max.end() || (used == in_use.end() ? 0 : used->second) + count > limit->second) {
      return false;
    }
  }
  return true;
}

bool ProjectAllows(const std::string& project, const FarmShares& shares) {
  auto config = shares.projects.find(project);
  if (config == shares.projects.end() || config->second.max_running <= 0) return true;
  auto running = shares.project_running.find(project);
  return running == shares.project_running.end() || running->second < config->second.max_running;
}

std::optional<size_t> PickFairShare(const std::vector<Candidate>& candidates,
                                    const FarmShares& shares) {
  auto running_of = [](const auto& map, const auto& key) {
    auto it = map.find(key);
    return it == map.end() ? 0 : it->second;
  };
  // Lower is more deserving: the project's running tasks per unit of weight, the user's running
  // tasks in that project, the job's running tasks, its leases so far, its age.
  auto key = [&](const Candidate& c) {
    auto config = shares.projects.find(c.project);
    const double weight = config == shares.projects.end() ? 1.0 : config->second.weight;
    return std::make_tuple(running_of(shares.project_running, c.project) / weight,
                           running_of(shares.user_running, std::make_pair(c.project, c.user)),
                           c.running, c.dispatched, c.job_id);
  };
  std::optional<size_t> best;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (!ProjectAllows(candidates[i].project, shares)) continue;
    if (!best || key(candidates[i]) < key(candidates[*best])) best = i;
  }
  return best;
}

}  // namespace tessera::policy
