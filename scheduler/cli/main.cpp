// tessera: the command-line client of a Tessera farm (HTTP API v1), plus `tessera up` to run a
// whole farm locally. Exit codes are documented in commands.h.

#include <CLI/CLI.hpp>
#include <iostream>
#include <optional>

#include "scheduler/cli/api_client.h"
#include "scheduler/cli/commands.h"
#include "scheduler/cli/completion.h"
#include "scheduler/cli/local_farm.h"
#include "shared/base/utf8.h"

namespace {

using tessera::cli::ClientOptions;

// Job ids are positive integers; CLI11's stock range message prints a 300-digit bound.
const CLI::Validator kJobId(
    [](std::string& text) -> std::string {
      bool digits = !text.empty() && text.size() <= 18 &&
                    text.find_first_not_of("0123456789") == std::string::npos;
      if (!digits || std::stoll(text) < 1) {
        return "must be an id (a positive integer), got '" + text + "'";
      }
      return std::string();
    },
    "ID");

CLI::App* AddClientCommand(CLI::App& app, const char* name, const char* help,
                           ClientOptions* options, bool with_json) {
  CLI::App* sub = app.add_subcommand(name, help);
  sub->add_option("--server", options->connection.server,
                  "Scheduler API URL (default: $TESSERA_SERVER, the config file, else " +
                      std::string(tessera::cli::kDefaultServer) + ")");
  sub->add_option("--token", options->connection.token,
                  "API token (default: $TESSERA_TOKEN, $TESSERA_TOKEN_FILE, the config file)");
  sub->add_option("--ca-file", options->connection.ca_file,
                  "PEM certificates to trust for an https:// server (default: $TESSERA_CA_FILE, "
                  "the config file, else the system's)");
  if (with_json) sub->add_flag("--json", options->json, "Print the API's JSON");
  return sub;
}

// "90s", "30m", "24h", "7d" or a plain number of seconds; "0" means never.
std::optional<int64_t> ParseDuration(const std::string& text) {
  if (text.empty() || text.size() > 12) return std::nullopt;
  int64_t unit = 1;
  std::string digits = text;
  switch (text.back()) {
    case 's':
      digits.pop_back();
      break;
    case 'm':
      unit = 60;
      digits.pop_back();
      break;
    case 'h':
      unit = 3600;
      digits.pop_back();
      break;
    case 'd':
      unit = 86400;
      digits.pop_back();
      break;
    default:
      break;
  }
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  return std::stoll(digits) * unit;
}

int Main(int argc, char** argv);

}  // namespace

// No exception ends the CLI with an abort: a library that throws (a JSON dump of text that is not
// UTF-8, an allocation) is reported like any other error.
int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "error: " << tessera::utf8::Sanitize(e.what()) << "\n";
    return tessera::cli::kExitFailure;
  }
}

namespace {

int Main(int argc, char** argv) {
  CLI::App app{"tessera: submit and watch render jobs on a Tessera farm"};
  app.set_version_flag("--version", std::string("tessera ") + TESSERA_VERSION);
  app.require_subcommand(1);

  ClientOptions options;
  // The flags every client command takes may come before the command too, as in git or kubectl
  // (`tessera --server URL submit job.yaml`); after it, they win.
  app.add_option("--server", options.connection.server, "Scheduler API URL (for any command)");
  app.add_option("--token", options.connection.token, "API token (for any command)");
  app.add_option("--ca-file", options.connection.ca_file,
                 "PEM certificates to trust for an https:// server (for any command)");
  app.add_flag("--json", options.json, "Print the API's JSON (commands that read)");
  std::string job_file;
  int64_t job_id = 0;
  tessera::cli::JobQuery job_query;
  bool show_tasks = false;
  double timeout = 0;
  bool quiet = false;
  tessera::cli::UpOptions up;

  CLI::App* submit =
      AddClientCommand(app, "submit", "Validate a job file and submit it", &options, true);
  submit
      ->add_option("FILE", job_file,
                   "Job YAML file, an Open Job Description template, or a job bundle's folder")
      ->required();
  tessera::cli::SubmitOptions submit_options;
  submit->add_option("-p,--parameter", submit_options.parameters,
                     "An OpenJD template's parameter value, Name=Value, or file://PATH of a "
                     "YAML/JSON map (repeatable)");
  submit->add_flag("--dry-run", submit_options.dry_run,
                   "Check the job here and on the scheduler, print what it would create, store "
                   "nothing");
  submit->add_option("--env", submit_options.environments,
                     "An OpenJD environment template the job enters, inside the farm's "
                     "(repeatable, outermost first)");
  submit->add_option("--path-mapping-rules", submit_options.path_mapping_rules,
                     "A file of OpenJD path mapping rules for the job's PATH parameters");
  submit
      ->add_option("--priority", submit_options.priority,
                   "An OpenJD job's priority, 0..100 (a job file says its own)")
      ->check(CLI::Range(0, 100));
  submit
      ->add_option("--max-retries", submit_options.max_retries,
                   "An OpenJD job's retries per task, 0..100")
      ->check(CLI::Range(0, 100));
  submit->add_option("--project", submit_options.project, "An OpenJD job's project");
  submit->add_option("--pool", submit_options.pools,
                     "An OpenJD job runs only in this pool (repeatable)");

  std::vector<std::string> check_files;
  CLI::App* check = app.add_subcommand(
      "check",
      "Check job files, OpenJD job and environment templates, or job bundles here (no scheduler)");
  check->add_option("FILE", check_files, "Files or job bundle folders")->required();

  CLI::App* jobs = AddClientCommand(app, "jobs", "List jobs, newest first", &options, true);
  jobs->add_option("--user", job_query.user, "Only jobs this user submitted");
  jobs->add_option("--project", job_query.project, "Only jobs of this project");
  jobs->add_option("--state", job_query.state, "Only jobs in this state")
      ->check(CLI::IsMember({"queued", "running", "paused", "done", "failed", "canceled"}));
  jobs->add_option("--limit", job_query.limit, "At most this many jobs (default 100)")
      ->check(CLI::Range(1, 10000));

  CLI::App* status =
      AddClientCommand(app, "status", "Show one job, or the farm without JOB", &options, true);
  status->add_option("JOB", job_id, "Job id")->check(kJobId);
  status->add_flag("--tasks", show_tasks, "Also list the job's tasks");
  bool watch = false;
  status->add_flag("--watch,-w", watch, "Redraw whenever the job changes, until it ends");

  CLI::App* workers = AddClientCommand(app, "workers", "List workers", &options, true);
  CLI::App* outputs = AddClientCommand(
      app, "outputs", "List a job's output files (frames, and files its tasks returned)", &options,
      true);
  outputs->add_option("JOB", job_id, "Job id")->required()->check(kJobId);
  std::string fetch_dir;
  CLI::App* fetch =
      AddClientCommand(app, "fetch", "Download a job's frame files into DIR", &options, false);
  fetch->add_option("JOB", job_id, "Job id")->required()->check(kJobId);
  fetch->add_option("DIR", fetch_dir, "Folder to write them to (created if missing)")->required();
  int cost_days = 30;
  CLI::App* costs =
      AddClientCommand(app, "costs", "What the farm cost per day (UTC)", &options, true);
  costs->add_option("--days", cost_days, "The last this many days (default 30)")
      ->check(CLI::Range(1, 366));
  CLI::App* autoscaler = app.add_subcommand("autoscaler", "The autoscaler");
  autoscaler->require_subcommand(1);
  int decisions = 15;
  CLI::App* autoscaler_status =
      AddClientCommand(*autoscaler, "status",
                       "Node groups, deadline forecasts and the latest decisions", &options, true);
  autoscaler_status->add_option("--decisions", decisions, "Show this many decisions (default 15)")
      ->check(CLI::Range(0, 200));
  CLI::App* plugins = AddClientCommand(
      app, "plugins", "List the renderer plugins each connected worker offers", &options, true);

  CLI::App* wait =
      AddClientCommand(app, "wait", "Wait for a job to finish (exit 0 when done)", &options, false);
  wait->add_option("JOB", job_id, "Job id")->required()->check(kJobId);
  wait->add_option("--timeout", timeout, "Give up after this many seconds (default: never)")
      ->check(CLI::NonNegativeNumber);
  wait->add_flag("--quiet,-q", quiet, "No progress output");

  int64_t task_id = 0;
  int attempt = 0;
  CLI::App* logs =
      AddClientCommand(app, "logs", "Show what a task's attempts logged", &options, true);
  logs->add_option("TASK", task_id, "Task id (see: tessera status JOB --tasks)")
      ->required()
      ->check(kJobId);
  logs->add_option("--attempt", attempt, "Only this attempt")->check(CLI::Range(1, 1000000));
  CLI::App* why =
      AddClientCommand(app, "why", "Explain why a task is (not) running", &options, true);
  why->add_option("TASK", task_id, "Task id (see: tessera status JOB --tasks)")
      ->required()
      ->check(kJobId);

  // Job operations: one subcommand each, all answered by RunJobAction.
  struct JobAction {
    const char* name;
    const char* help;
    CLI::App* cmd = nullptr;
  };
  std::vector<JobAction> actions = {
      {"cancel", "Cancel a job (running tasks are told to stop)"},
      {"pause", "Hold a job's queued tasks (running ones finish)"},
      {"resume", "Release a paused job"},
      {"retry", "Requeue a job's failed tasks with a fresh retry budget"},
      {"rerender", "Render finished frames of a job again"},
      {"priority", "Change a job's priority (0..100, higher first)"},
      {"delete", "Delete a finished job and its records (output files stay)"},
  };
  std::string frames;
  int priority = 0;
  for (JobAction& a : actions) {
    a.cmd = AddClientCommand(app, a.name, a.help, &options, true);
    a.cmd->add_option("JOB", job_id, "Job id")->required()->check(kJobId);
  }
  actions[4]
      .cmd->add_option("FRAMES", frames, "Frames to render again: A-B or one frame")
      ->required();
  actions[5]
      .cmd->add_option("PRIORITY", priority, "New priority")
      ->required()
      ->check(CLI::Range(0, 100));

  // Credentials: API tokens, worker join tokens (admin), and who the CLI's token is.
  std::string note;
  std::string ttl;
  int uses = 0;
  int64_t token_id = 0;
  std::string token_user, token_role;
  CLI::App* token = app.add_subcommand("token", "Create, list and revoke API tokens (admin)");
  token->require_subcommand(1);
  CLI::App* token_create =
      AddClientCommand(*token, "create", "Create an API token for a user and role", &options, true);
  token_create->add_option("--user", token_user, "Who it speaks for (jobs it submits are theirs)")
      ->required();
  token_create
      ->add_option("--role", token_role,
                   "viewer (read), submitter (own jobs), operator (all jobs, workers), admin "
                   "(tokens, enrolment)")
      ->required()
      ->check(CLI::IsMember({"viewer", "submitter", "operator", "admin"}));
  token_create->add_option("--note", note, "What it is for (shown in `tessera token list`)");
  token_create->add_option("--ttl", ttl, "Lifetime: 30m, 24h, 90d, or 0 for never [0]");
  CLI::App* token_list = AddClientCommand(*token, "list", "List API tokens", &options, true);
  CLI::App* token_revoke =
      AddClientCommand(*token, "revoke", "Revoke an API token", &options, true);
  token_revoke->add_option("ID", token_id, "Token id (see: tessera token list)")
      ->required()
      ->check(kJobId);

  CLI::App* join = app.add_subcommand(
      "join-token", "Create, list and revoke the join tokens new workers enrol with (admin)");
  join->require_subcommand(1);
  CLI::App* join_create = AddClientCommand(
      *join, "create", "Create a join token a new worker enrols with", &options, true);
  join_create->add_option("--note", note, "What it is for (shown in `tessera join-token list`)");
  join_create->add_option("--ttl", ttl, "Lifetime: 30m, 24h, 7d, or 0 for never [24h]");
  std::string join_worker;
  join_create->add_option("--worker", join_worker,
                          "Only for this worker name: may replace the key it is enrolled with "
                          "(moving the name to a new machine)");
  join_create->add_option("--uses", uses, "Workers it may enrol (0: unlimited)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  CLI::App* join_list = AddClientCommand(*join, "list", "List join tokens", &options, true);
  CLI::App* join_revoke = AddClientCommand(*join, "revoke", "Revoke a join token", &options, true);
  join_revoke->add_option("ID", token_id, "Token id (see: tessera join-token list)")
      ->required()
      ->check(kJobId);
  CLI::App* whoami =
      AddClientCommand(app, "whoami", "Show who the configured API token is", &options, true);

  // Operations on one worker (operator).
  CLI::App* worker = app.add_subcommand("worker", "Operate on one worker by name");
  worker->require_subcommand(1);
  std::string worker_name;
  std::vector<std::pair<const char*, CLI::App*>> worker_actions;
  for (const auto& [name, help] : std::vector<std::pair<const char*, const char*>>{
           {"drain", "Finish its running tasks, take no new ones, then leave"},
           {"revoke", "Disconnect it and refuse its key from now on"},
           {"readmit", "Let a revoked worker enrol again with a join token"},
           {"disable", "Give it no new tasks (it stays connected) until enabled"},
           {"enable", "Give a disabled worker tasks again"}}) {
    CLI::App* cmd = AddClientCommand(*worker, name, help, &options, true);
    cmd->add_option("NAME", worker_name, "Worker name (see: tessera workers)")->required();
    worker_actions.emplace_back(name, cmd);
  }

  CLI::App* up_cmd = app.add_subcommand("up", "Run a scheduler and local workers until Ctrl-C");
  up_cmd->add_option("--workers", up.workers, "Number of local workers")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  up_cmd->add_option("--data", up.data_dir, "Data directory (database, outputs, logs)")
      ->capture_default_str();
  up_cmd->add_option("--port", up.port, "HTTP API port on 127.0.0.1")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  up_cmd
      ->add_option("--broker-port", up.broker_port,
                   "Workers' port on 127.0.0.1 (default: any free one; the farm prints it)")
      ->check(CLI::Range(0, 65535));
  up_cmd
      ->add_option("--threads", up.threads,
                   "Render threads per worker (default: cores / workers, at least 1)")
      ->check(CLI::Range(1, 4096));

  std::string shell;
  CLI::App* completion = app.add_subcommand(
      "completion", "Print a shell completion script: source <(tessera completion bash)");
  completion->add_option("SHELL", shell, "bash or zsh")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh"}));

  app.footer(
      "Exit codes: 0 success; 1 the operation failed (an API error, a job that failed or was "
      "canceled under `wait`, a timeout); 2 invalid input (arguments, a job file, the server's "
      "400); 3 the scheduler could not be reached; 4 the scheduler refused the credentials (no, "
      "unknown, revoked or expired token: 401) or the token's role (403).\n"
      "Server and token: --server/--token/--ca-file, else TESSERA_SERVER, TESSERA_TOKEN or "
      "TESSERA_TOKEN_FILE, TESSERA_CA_FILE, else ~/.config/tessera/config.yaml (server, token, "
      "token_file, ca_file; $TESSERA_CONFIG names another file).");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : tessera::cli::kExitUsage;
  }

  // Arguments that become names, notes and filters travel as JSON text: refused here, naming the
  // option and the byte, when they are not UTF-8.
  for (const auto& [value, option] :
       {std::pair{&job_query.user, "--user"}, std::pair{&job_query.project, "--project"},
        std::pair{&job_query.state, "--state"}, std::pair{&token_user, "--user"},
        std::pair{&token_role, "--role"}, std::pair{&note, "--note"},
        std::pair{&worker_name, "NAME"}, std::pair{&frames, "FRAMES"}}) {
    if (tessera::Status s = tessera::utf8::Check(*value, option); !s.ok()) {
      std::cerr << "error: " << s.message() << "\n";
      return tessera::cli::kExitUsage;
    }
  }
  if (up_cmd->parsed()) return tessera::cli::RunUp(up);
  if (completion->parsed()) {
    std::cout << (shell == "zsh" ? tessera::cli::ZshCompletion(app)
                                 : tessera::cli::BashCompletion(app));
    return tessera::cli::kExitOk;
  }
  tessera::StatusOr<tessera::cli::Connection> connection =
      tessera::cli::ResolveConnection(options.connection);
  if (!connection.ok()) {
    std::cerr << "error: " << connection.status().message() << "\n";
    return tessera::cli::kExitUsage;
  }
  options.connection = *connection;
  // Durations: "90s", "30m", "24h", "7d", or 0 for never.
  auto seconds_or_usage = [](const std::string& text, int64_t fallback) -> std::optional<int64_t> {
    if (text.empty()) return fallback;
    std::optional<int64_t> seconds = ParseDuration(text);
    if (!seconds) {
      std::cerr << "error: --ttl: expected a duration like 30m, 24h or 7d (0: never), got '" << text
                << "'\n";
    }
    return seconds;
  };

  if (submit->parsed()) return tessera::cli::RunSubmit(options, job_file, submit_options);
  if (check->parsed()) return tessera::cli::RunCheck(check_files);
  if (jobs->parsed()) return tessera::cli::RunJobs(options, job_query);
  if (status->parsed() && job_id == 0) return tessera::cli::RunFarmStatus(options);
  if (status->parsed()) return tessera::cli::RunStatus(options, job_id, show_tasks, watch);
  if (costs->parsed()) return tessera::cli::RunCosts(options, cost_days);
  if (outputs->parsed()) return tessera::cli::RunOutputs(options, job_id);
  if (fetch->parsed()) return tessera::cli::RunFetch(options, job_id, fetch_dir);
  if (autoscaler_status->parsed()) return tessera::cli::RunAutoscalerStatus(options, decisions);
  if (logs->parsed()) return tessera::cli::RunLogs(options, task_id, attempt);
  if (workers->parsed()) return tessera::cli::RunWorkers(options);
  if (plugins->parsed()) return tessera::cli::RunPlugins(options);
  if (wait->parsed()) return tessera::cli::RunWait(options, job_id, timeout, quiet);
  if (why->parsed()) return tessera::cli::RunWhy(options, task_id);
  for (const JobAction& a : actions) {
    if (!a.cmd->parsed()) continue;
    nlohmann::json body = nlohmann::json::object();
    if (a.cmd == actions[4].cmd) body["frames"] = frames;
    if (a.cmd == actions[5].cmd) body["priority"] = priority;
    return tessera::cli::RunJobAction(options, job_id, a.name, body);
  }
  if (token_create->parsed()) {
    std::optional<int64_t> seconds = seconds_or_usage(ttl, 0);
    if (!seconds) return tessera::cli::kExitUsage;
    return tessera::cli::RunApiTokenCreate(options, token_user, token_role, note, *seconds);
  }
  if (token_list->parsed()) return tessera::cli::RunApiTokenList(options);
  if (token_revoke->parsed()) return tessera::cli::RunApiTokenRevoke(options, token_id);
  if (join_create->parsed()) {
    std::optional<int64_t> seconds = seconds_or_usage(ttl, 24 * 3600);
    if (!seconds) return tessera::cli::kExitUsage;
    return tessera::cli::RunJoinTokenCreate(options, note, *seconds, uses, join_worker);
  }
  if (join_list->parsed()) return tessera::cli::RunJoinTokenList(options);
  if (join_revoke->parsed()) return tessera::cli::RunJoinTokenRevoke(options, token_id);
  if (whoami->parsed()) return tessera::cli::RunWhoami(options);
  for (const auto& [name, cmd] : worker_actions) {
    if (cmd->parsed()) return tessera::cli::RunWorkerAction(options, worker_name, name);
  }
  return tessera::cli::kExitUsage;
}

}  // namespace
