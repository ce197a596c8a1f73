#pragma once
// Accepting a job: the POST /api/v1/jobs body checked against everything the scheduler knows
// (its spec, its scene, its assets, the farm's limits, the jobs it depends on, the folders it
// would write to) and stored in one transaction. Nothing is stored unless every check passes,
// and each refusal names the field.

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "scheduler/api/openjd_farm.h"
#include "scheduler/broker/submitted_job.h"
#include "scheduler/security/api_auth.h"
#include "scheduler/store/store.h"
#include "shared/base/status.h"
#include "shared/jobs/job_file.h"
#include "shared/jobs/job_steps.h"

namespace tessera::blobs {
class BlobStore;
}

namespace tessera::api {

struct SubmitContext {
  store::Store& store;
  const std::map<std::string, int>& limits;  // the farm's named limits
  blobs::BlobStore* blobs = nullptr;         // none: jobs with assets are refused
  std::string output_root;                   // every job's output folder lies inside it
  std::vector<std::string> shared_roots;     // where output.shared_dir may point
  bool auth_enabled = true;
  const OpenJdFarm* openjd = nullptr;  // the farm's environment templates and path mapping rules
};

// The body: {"job_yaml", "scene_yaml", "user", "assets", "step_scenes"} (and an OpenJD
// template's parameters, environments, folders, rules and job_options); a job file with
// `steps:` (shared/jobs/job_steps.h) takes each step's scene text from step_scenes (step name ->
// text), and its steps share the assets map (each keeps the files it names). The job file is
// parsed once (shared/jobs/parsed_job_file.h), its scene once.

// A submission checked as `caller` sends it, everything but its output folder (which needs the
// job's id): the job as it would be stored, its spec read from the one parse of its file.
struct CheckedJob {
  // A job, or a job with steps (an OpenJD template is one, translated), completed with its
  // scene, assets and user, and checked against the farm: what the broker runs.
  std::variant<tessera::spec::JobSpec, tessera::spec::PipelineSpec> spec;
  std::string job_yaml;  // the job file as stored (a template's translation)

  const tessera::spec::JobSpec* job() const { return std::get_if<tessera::spec::JobSpec>(&spec); }
  const tessera::spec::PipelineSpec* pipeline() const {
    return std::get_if<tessera::spec::PipelineSpec>(&spec);
  }
};
// With `dry_run`, assets are not required to be uploaded yet.
StatusOr<CheckedJob> CheckSubmission(const SubmitContext& ctx, const std::string& body,
                                     const security::Caller& caller, bool dry_run = false);
// What a checked job would create (POST /api/v1/jobs?dry_run=true): {"name", "renderer", "user",
// "frames": {"start", "end", "count"}, "chunk_size", "parts_per_frame", "tasks", "depends_on",
// "frame_depends_on", "assets", "output"}.
// A job with steps: {"name", "renderer": "steps", "user", "tasks", "output", "steps": [the view
// above of each step, named after it, with "step_depends_on": [{"step", "per_frame"}]]}.
nlohmann::json DryRunView(const spec::JobSpec& job);
nlohmann::json DryRunView(const CheckedJob& checked);

// Checks `body` as `caller` sends it and stores the job with its tasks.
// With `request` (its Idempotency-Key), the key is stored with the job, in its transaction.
// `submitted`, when given, receives the checked job that was stored; `for_broker` what the
// broker needs to hold the job (the rows stored, the scenes from the checked spec), so that it
// reads nothing back.
StatusOr<store::JobRecord> SubmitJob(const SubmitContext& ctx, const std::string& body,
                                     const security::Caller& caller,
                                     const store::IdempotentRequest* request = nullptr,
                                     CheckedJob* submitted = nullptr,
                                     broker::SubmittedJob* for_broker = nullptr);

// The folder a job writes to, resolved (links too) and checked to lie inside its root.
StatusOr<std::string> OutputDirFor(const std::string& output_root, const std::string& relative,
                                   const std::string& name, int64_t job_id);
StatusOr<std::string> SharedDirFor(const std::vector<std::string>& shared_roots,
                                   const std::string& dir);

}  // namespace tessera::api
