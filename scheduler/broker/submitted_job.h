#pragma once
// A job as its submission stored it: everything the broker needs to hold it, handed over by the
// API (api/submission.h) right after the store committed it, so that the broker holds the new
// job without reading back what was just written. The rows are the store's own answer to the
// write (store::CreatedRows); the scenes come from the checked spec, as they were stored.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "scheduler/store/records.h"

namespace tessera::broker {

struct SubmittedJob {
  int64_t id = 0;  // the job submitted (a job with steps: the job, not one of its steps)
  // The jobs that hold its tasks: the job itself, or a job with steps' steps in the order stored.
  std::vector<store::JobRecord> jobs;
  std::map<int64_t, std::string> scenes;  // each of those jobs' scene file, by job id
  std::vector<store::TaskRecord> tasks;   // their tasks, queued, in job and index order
};

}  // namespace tessera::broker
