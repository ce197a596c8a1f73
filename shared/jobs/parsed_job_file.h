#pragma once
// A job file read once. `tessera submit`, `tessera check` and the scheduler's POST /api/v1/jobs
// each parse the text a person wrote exactly once: ReadJobFile's one yaml::Parse answers what the
// file is -- a Tessera job, a job with steps, or an Open Job Description template -- and
// CheckJobFile reads the checked spec from that same document. A job with steps is read step by
// step from it too, and an OpenJD template is handed to the OpenJD translator as the parsed
// document (shared/openjd/openjd.h), never as text to parse again.
//
// Two stages, so that a client can act on what the file names before it is checked (the CLI
// first learns from the scheduler a C++ plugin the job's renderer names):
//
//   const spec::JobFileDocument document = spec::ReadJobFile(text);  // the one parse
//   StatusOr<spec::ParsedJobFile> parsed = spec::CheckJobFile(document);
//
// ParseJobFile(text) does both. Each kind gives its own parser's errors, as before the document
// was shared: text that does not parse, or is not a map, is refused as a Tessera job file
// ("job: YAML syntax error at line 3, column 1: ...").

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <variant>

#include "shared/base/status.h"
#include "shared/jobs/job_file.h"
#include "shared/jobs/job_steps.h"

namespace tessera::spec {

// What a job file is, by its top-level keys.
enum class JobFileKind {
  kJob,                // a Tessera job (shared/jobs/job_file.h), or a text that did not parse
  kSteps,              // a Tessera job with `steps:` (shared/jobs/job_steps.h)
  kOpenJdJobTemplate,  // `specificationVersion: jobtemplate-...` (shared/openjd/openjd.h)
  kOpenJdEnvironment,  // `specificationVersion: environment-...` (`tessera check` reads these)
};

// A job file's text, parsed once.
struct JobFileDocument {
  JobFileKind kind = JobFileKind::kJob;
  YAML::Node root;  // the document; undefined when the text did not parse
  Status parsed;    // why it did not: the error CheckJobFile reports
  size_t text_bytes = 0;

  // The renderer the file names at its top ("" when none): what the CLI looks up on the
  // scheduler before the check, when it is not a renderer it knows.
  std::string TopRenderer() const;
};

// Parses `text` with a job file's bounds (kMaxJobYamlBytes, shared/base/yaml_util.h). Never
// fails: an error is CheckJobFile's to report. A text over kMaxJobYamlBytes is read only to tell
// an OpenJD template, which the OpenJD reader refuses with its own message.
JobFileDocument ReadJobFile(std::string_view text);
// A document already in memory (an OpenJD template's translation), told apart the same way.
JobFileDocument JobFileOf(const YAML::Node& root, size_t text_bytes);

// An Open Job Description document (a job or an environment template) as ReadJobFile parsed it.
struct OpenJdTemplate {
  YAML::Node root;
  size_t text_bytes = 0;  // the text's size: a template has a job file's bound too
};

// The checked value of a job file:
//   JobSpec        a job without steps, checked (ParseJobNode), one that runs alone
//                  (CheckRunsAlone);
//   PipelineSpec   a job with steps, every step checked (ParsePipelineNode);
//   OpenJdTemplate a job template, checked by the OpenJD translator when a job is made of it.
// An environment template is nothing to submit: here it is read as a Tessera job file and gets
// that error (`tessera check` checks it from the document with openjd::CheckTemplate).
using ParsedJobFile = std::variant<JobSpec, PipelineSpec, OpenJdTemplate>;

StatusOr<ParsedJobFile> CheckJobFile(const JobFileDocument& document);
StatusOr<ParsedJobFile> ParseJobFile(std::string_view text);

}  // namespace tessera::spec
