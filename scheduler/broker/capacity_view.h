#pragma once
// What the autoscaler needs of the farm, at one moment: the work the broker would dispatch now
// (per job) and what each connected worker is doing. Broker::Capacity() answers it; a header of
// its own so that the autoscaler reads it without the broker.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "shared/jobs/job_file.h"

namespace tessera::broker {

struct CapacityView {
  struct JobDemand {
    int64_t job_id = 0;
    std::string name;
    int priority = 50;
    int64_t waiting = 0;  // dispatchable now (not paused, dependencies met, under project caps)
    int64_t running = 0;
    std::vector<std::string> pools, tags;
    spec::ResourceSpec resources;
    double seconds_per_task = 0;  // measured mean of its done tasks; 0: none yet
    bool interruptible = true;
    std::optional<int64_t> deadline_ms;
  };
  struct WorkerActivity {
    std::string name;
    bool busy = false;
    bool draining = false;                   // or disabled: takes no new work
    double idle_seconds = 0;                 // when not busy: since its last task ended
    std::optional<double> busy_for_seconds;  // when busy: until its tasks should end, if known
  };
  std::vector<JobDemand> jobs;  // in dispatch order
  std::vector<WorkerActivity> workers;
};

}  // namespace tessera::broker
