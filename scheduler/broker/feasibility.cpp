#include "scheduler/broker/feasibility.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "scheduler/broker/event_sink.h"
#include "scheduler/store/store.h"

namespace tessera::broker {

void Feasibility::Update(Pass& pass, int64_t job_id, JobInfo& job) {
  if (job.outputs_held) return;  // its notice says why it is held until it resumes
  std::optional<std::string> notice;
  if (!workers_.empty() && std::none_of(workers_.begin(), workers_.end(), [&](const auto& w) {
        return policy::CouldEverRun(job.needs, w.second.offer);
      })) {
    const auto& [identity, first] = *workers_.begin();
    notice = "no connected worker can run this job (" + std::to_string(workers_.size()) +
             " connected; e.g. " + first.offer.name + ": " +
             policy::WhyNever(job.needs, first.offer) + ")";
  }
  if (notice == job.notice) return;
  job.notice = notice;
  (void)pass.store.SetJobNotice(job_id, notice);
  if (notice) {
    spdlog::warn("job {}: {}", job_id, *notice);
    pass.events.Record(job_id, std::nullopt, std::nullopt, "job_infeasible", *notice);
  } else {
    spdlog::info("job {}: a connected worker can run it again", job_id);
  }
}

void Feasibility::UpdateAll(Pass& pass) {
  for (auto& [id, job] : table_.jobs()) Update(pass, id, job);
}

}  // namespace tessera::broker
