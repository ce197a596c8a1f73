#pragma once
// The client subcommands of `tessera`. Each returns the process exit code:
//   0  success
//   1  the operation failed: an API error (unknown job, wrong state...), a job that ended
//      failed or canceled under `wait`, a `wait` timeout, a local farm that could not start
//   2  invalid input: bad arguments, a job or scene file rejected by local validation, or the
//      server's 400 for the same kind of mistake (nothing was submitted)
//   3  the scheduler could not be reached
//   4  the scheduler refused the credentials: no token, an unknown, revoked or expired one
//      (HTTP 401), or a role that does not allow the command (HTTP 403)
// Errors go to stderr as one line starting with "error: ".

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/cli/api_client.h"
#include "shared/base/status.h"

namespace tessera::cli {

enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,
  kExitUsage = 2,
  kExitUnreachable = 3,
  kExitAuth = 4,
};

struct ClientOptions {
  Connection connection;  // server, token, CA (see api_client.h for where each comes from)
  bool json = false;      // print the API's JSON instead of text
};

// Makes one API call through a client for `options`. Returns the reply when the command should
// print it as text; otherwise nullopt with *rc set: after printing the error, or, under --json,
// the reply itself.
std::optional<json> Call(const ClientOptions& options,
                         const std::function<StatusOr<json>(ApiClient&)>& call, int* rc);

// How `tessera submit` sends a file. With dry_run: checked locally and by the scheduler (POST
// /api/v1/jobs?dry_run=true), assets hashed but not uploaded; prints what would be created, and
// nothing is stored. The rest is for Open Job Description templates and job bundles only (a
// Tessera job file says these things itself).
struct SubmitOptions {
  bool dry_run = false;
  std::vector<std::string> parameters;    // -p Name=Value, or -p file://PATH (a YAML/JSON map)
  std::vector<std::string> environments;  // --env FILE: environment templates, outermost first
  std::string path_mapping_rules;         // --path-mapping-rules FILE
  std::optional<int> priority, max_retries;
  std::string project;
  std::vector<std::string> pools;
  bool ForTemplatesOnly() const {
    return !parameters.empty() || !environments.empty() || !path_mapping_rules.empty() ||
           priority || max_retries || !project.empty() || !pools.empty();
  }
};
// `job_file`: a Tessera job file, an OpenJD job template, or a job bundle's folder.
int RunSubmit(const ClientOptions& options, const std::string& job_file,
              const SubmitOptions& submit);
// check.cpp: checks files here, without a scheduler: Tessera job files (and their scenes),
// OpenJD job templates and environment templates (as `openjd check` does). Prints one line per
// file; 0 when all are valid, 2 otherwise.
int RunCheck(const std::vector<std::string>& files);
// Jobs newest first; empty filters (and limit 0) leave the server's defaults.
struct JobQuery {
  std::string state, user, project;
  int limit = 0;
};
int RunJobs(const ClientOptions& options, const JobQuery& query);
// watch: redraw on every change until the job ends.
int RunStatus(const ClientOptions& options, int64_t job_id, bool show_tasks, bool watch);
// A task's logs, every attempt (or only `attempt` when > 0): GET /api/v1/tasks/{id}/log.
int RunLogs(const ClientOptions& options, int64_t task_id, int attempt);
int RunWorkers(const ClientOptions& options);
// outputs.cpp: a job's frame files (GET /api/v1/jobs/{id}/outputs), and downloading them into
// `dir` (files already there whole are kept, so an interrupted fetch resumes).
int RunOutputs(const ClientOptions& options, int64_t job_id);
int RunFetch(const ClientOptions& options, int64_t job_id, const std::string& dir);
// capacity.cpp: the farm at a glance (GET /api/v1/summary), its cost per UTC day over the last
// `days` (GET /api/v1/costs), and the autoscaler with its latest `decisions` decisions.
int RunFarmStatus(const ClientOptions& options);
int RunCosts(const ClientOptions& options, int days);
int RunAutoscalerStatus(const ClientOptions& options, int decisions);
// The renderer plugins each connected worker offers (GET /api/v1/plugins).
int RunPlugins(const ClientOptions& options);
// Job operations: action is cancel, pause, resume, retry, rerender (body {"frames": "A-B"}),
// priority (body {"priority": N}) or delete. Prints the job's new state (or the API's JSON).
int RunJobAction(const ClientOptions& options, int64_t job_id, const std::string& action,
                 const nlohmann::json& body);
// Why a task is or is not running (GET /api/v1/tasks/{id}/why).
int RunWhy(const ClientOptions& options, int64_t task_id);
// Worker join tokens (/api/v1/join-tokens, tokens.cpp): create prints the token once, with the
// scheduler's public key and the worker settings that use them; ttl_seconds 0 never expires,
// uses 0 is unlimited.
// `worker`: a token only for that worker name (the one kind that may move an enrolled name to
// a new key); empty: any name without a valid key.
int RunJoinTokenCreate(const ClientOptions& options, const std::string& note, int64_t ttl_seconds,
                       int uses, const std::string& worker = "");
int RunJoinTokenList(const ClientOptions& options);
int RunJoinTokenRevoke(const ClientOptions& options, int64_t token_id);
// API bearer tokens (/api/v1/tokens, tokens.cpp): create prints the token once.
int RunApiTokenCreate(const ClientOptions& options, const std::string& user,
                      const std::string& role, const std::string& note, int64_t ttl_seconds);
int RunApiTokenList(const ClientOptions& options);
int RunApiTokenRevoke(const ClientOptions& options, int64_t token_id);
// Who the configured token speaks for (GET /api/v1/whoami).
int RunWhoami(const ClientOptions& options);
// Operations on a worker by name: drain, revoke or readmit.
int RunWorkerAction(const ClientOptions& options, const std::string& name,
                    const std::string& action);
// timeout_seconds <= 0 waits forever.
int RunWait(const ClientOptions& options, int64_t job_id, double timeout_seconds, bool quiet);

// Prints `status` as "error: ..." (or the one-line "cannot reach" message) and returns its exit
// code.
int ReportError(const std::string& server_url, const Status& status);

}  // namespace tessera::cli
