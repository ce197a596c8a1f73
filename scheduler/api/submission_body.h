#pragma once
// The body of POST /api/v1/jobs, read and each field checked for type before anything else
// looks at it: the job file (parsed once: a Tessera job, a job with steps, or an Open Job
// Description template translated), its scene, assets and steps' scenes, and a template's inputs
// (parameter values, environments, folders, path mapping rules, job options, attachments).

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "scheduler/api/openjd_farm.h"
#include "shared/base/status.h"
#include "shared/jobs/parsed_job_file.h"
#include "shared/openjd/openjd.h"

namespace tessera::api {

// The POST /api/v1/jobs body, its fields checked for type.
struct SubmissionBody {
  std::string job_yaml;  // the job file as stored: as sent, or a template's translation
  // The job file's one parse: what it is, and the document its spec is read from (for a
  // template, its translation as a document).
  spec::JobFileDocument document;
  std::optional<std::string> scene_yaml, user;
  nlohmann::json assets, step_scenes;
  // An OpenJD template's parameter values (name -> text), as `tessera submit -p` gives them,
  // and the rest of what makes a job of it (environment templates, folders, rules, settings).
  openjd::JobInputs openjd;
  bool has_openjd_inputs = false;
};

// Reads a submission's body; an error names the field and the problem.
StatusOr<SubmissionBody> ParseSubmissionBody(const std::string& body, const OpenJdFarm* farm);

}  // namespace tessera::api
