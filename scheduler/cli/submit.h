#pragma once
// The pieces of `tessera submit` its two files share: submit.cpp sends Tessera job files,
// submit_openjd.cpp Open Job Description templates and job bundles.

#include <filesystem>
#include <string>

#include "scheduler/cli/api_client.h"
#include "scheduler/cli/commands.h"
#include "shared/base/status.h"
#include "shared/jobs/parsed_job_file.h"

namespace tessera::cli {

StatusOr<std::string> ReadTextFile(const std::filesystem::path& path);
// Prints "error: [where: ]message" and returns kExitUsage (the input was refused here).
int LocalError(const std::string& message);
int LocalError(const std::string& where, const std::string& message);
// Uploads one file as a content-addressed blob unless the scheduler has it (resuming an
// unfinished upload); returns its SHA-256.
StatusOr<std::string> UploadAsset(ApiClient& client, const std::filesystem::path& file);
// Whose job it is: the token's user, else the login name ("" when neither is known).
std::string DefaultUser(const ClientOptions& options, ApiClient& client);
// POST /api/v1/jobs?dry_run=true and prints what the job would create.
int PrintDryRun(ApiClient& client, const json& body, bool as_json);
// POSTs a checked submission (with one idempotency key, retried while the answer may have been
// lost); prints the job's id.
int PostJob(const ClientOptions& options, ApiClient& client, const json& body);
// A job file as read: its text (sent to the scheduler as it is) and its one parse.
struct JobFileText {
  std::string text;
  spec::JobFileDocument document;
};
// An OpenJD job template, or a job bundle's folder (submit_openjd.cpp). `file`: the template
// `path` names, already read and parsed (else it is read here, or the bundle's template.yaml).
int SubmitTemplate(const ClientOptions& options, const std::string& path,
                   const SubmitOptions& submit, const JobFileText* file = nullptr);

}  // namespace tessera::cli
