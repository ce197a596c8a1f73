// tessera: the command-line client of a Tessera farm (HTTP API v1), plus `tessera up` to run a
// whole farm locally. Exit codes are documented in commands.h.

#include <CLI/CLI.hpp>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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

// Everything the command line gives, as the values the commands take.
struct Args {
  ClientOptions options;
  std::string job_file;
  tessera::cli::SubmitOptions submit;
  std::vector<std::string> check_files;
  int64_t job_id = 0;
  tessera::cli::JobQuery job_query;
  bool show_tasks = false;
  bool watch = false;
  std::string fetch_dir;
  int cost_days = 30;
  int decisions = 15;
  double timeout = 0;
  bool quiet = false;
  int64_t task_id = 0;
  int attempt = 0;
  std::string frames;  // rerender
  int priority = 0;    // priority
  std::string note, ttl;
  int uses = 0;
  int64_t token_id = 0;
  std::string token_user, token_role, join_worker;
  std::string worker_name;
  tessera::cli::UpOptions up;
  std::string shell;
};

// A job operation: one subcommand each, all answered by RunJobAction.
struct JobAction {
  const char* name;
  const char* help;
  CLI::App* cmd = nullptr;
};

// The subcommands, to tell which one was given.
struct Commands {
  CLI::App *submit, *check, *jobs, *status, *workers, *outputs, *fetch, *costs, *autoscaler_status,
      *plugins, *wait, *logs, *why;
  std::vector<JobAction> actions;  // actions[4]: rerender, actions[5]: priority
  CLI::App *token_create, *token_list, *token_revoke, *join_create, *join_list, *join_revoke,
      *whoami;
  std::vector<std::pair<const char*, CLI::App*>> worker_actions;
  CLI::App *up, *completion;
};

// submit and check: job files, OpenJD templates and bundles.
void AddJobFileCommands(CLI::App& app, Args& a, Commands& c) {
  c.submit = AddClientCommand(app, "submit", "Validate a job file and submit it", &a.options, true);
  c.submit
      ->add_option("FILE", a.job_file,
                   "Job YAML file, an Open Job Description template, or a job bundle's folder")
      ->required();
  c.submit->add_option("-p,--parameter", a.submit.parameters,
                       "An OpenJD template's parameter value, Name=Value, or file://PATH of a "
                       "YAML/JSON map (repeatable)");
  c.submit->add_flag("--dry-run", a.submit.dry_run,
                     "Check the job here and on the scheduler, print what it would create, store "
                     "nothing");
  c.submit->add_option("--env", a.submit.environments,
                       "An OpenJD environment template the job enters, inside the farm's "
                       "(repeatable, outermost first)");
  c.submit->add_option("--path-mapping-rules", a.submit.path_mapping_rules,
                       "A file of OpenJD path mapping rules for the job's PATH parameters");
  c.submit
      ->add_option("--priority", a.submit.priority,
                   "An OpenJD job's priority, 0..100 (a job file says its own)")
      ->check(CLI::Range(0, 100));
  c.submit
      ->add_option("--max-retries", a.submit.max_retries,
                   "An OpenJD job's retries per task, 0..100")
      ->check(CLI::Range(0, 100));
  c.submit->add_option("--project", a.submit.project, "An OpenJD job's project");
  c.submit->add_option("--pool", a.submit.pools,
                       "An OpenJD job runs only in this pool (repeatable)");

  c.check = app.add_subcommand(
      "check",
      "Check job files, OpenJD job and environment templates, or job bundles here (no scheduler)");
  c.check->add_option("FILE", a.check_files, "Files or job bundle folders")->required();
}

// Commands that read the farm: jobs, status, workers, outputs, costs, the autoscaler, plugins,
// logs; fetch and wait.
void AddReadCommands(CLI::App& app, Args& a, Commands& c) {
  ClientOptions* options = &a.options;
  c.jobs = AddClientCommand(app, "jobs", "List jobs, newest first", options, true);
  c.jobs->add_option("--user", a.job_query.user, "Only jobs this user submitted");
  c.jobs->add_option("--project", a.job_query.project, "Only jobs of this project");
  c.jobs->add_option("--state", a.job_query.state, "Only jobs in this state")
      ->check(CLI::IsMember({"queued", "running", "paused", "done", "failed", "canceled"}));
  c.jobs->add_option("--limit", a.job_query.limit, "At most this many jobs (default 100)")
      ->check(CLI::Range(1, 10000));

  c.status =
      AddClientCommand(app, "status", "Show one job, or the farm without JOB", options, true);
  c.status->add_option("JOB", a.job_id, "Job id")->check(kJobId);
  c.status->add_flag("--tasks", a.show_tasks, "Also list the job's tasks");
  c.status->add_flag("--watch,-w", a.watch, "Redraw whenever the job changes, until it ends");

  c.workers = AddClientCommand(app, "workers", "List workers", options, true);
  c.outputs = AddClientCommand(app, "outputs",
                               "List a job's output files (frames, and files its tasks returned)",
                               options, true);
  c.outputs->add_option("JOB", a.job_id, "Job id")->required()->check(kJobId);
  c.fetch = AddClientCommand(app, "fetch", "Download a job's frame files into DIR", options, false);
  c.fetch->add_option("JOB", a.job_id, "Job id")->required()->check(kJobId);
  c.fetch->add_option("DIR", a.fetch_dir, "Folder to write them to (created if missing)")
      ->required();
  c.costs = AddClientCommand(app, "costs", "What the farm cost per day (UTC)", options, true);
  c.costs->add_option("--days", a.cost_days, "The last this many days (default 30)")
      ->check(CLI::Range(1, 366));
  CLI::App* autoscaler = app.add_subcommand("autoscaler", "The autoscaler");
  autoscaler->require_subcommand(1);
  c.autoscaler_status =
      AddClientCommand(*autoscaler, "status",
                       "Node groups, deadline forecasts and the latest decisions", options, true);
  c.autoscaler_status
      ->add_option("--decisions", a.decisions, "Show this many decisions (default 15)")
      ->check(CLI::Range(0, 200));
  c.plugins = AddClientCommand(
      app, "plugins", "List the renderer plugins each connected worker offers", options, true);

  c.wait =
      AddClientCommand(app, "wait", "Wait for a job to finish (exit 0 when done)", options, false);
  c.wait->add_option("JOB", a.job_id, "Job id")->required()->check(kJobId);
  c.wait->add_option("--timeout", a.timeout, "Give up after this many seconds (default: never)")
      ->check(CLI::NonNegativeNumber);
  c.wait->add_flag("--quiet,-q", a.quiet, "No progress output");

  c.logs = AddClientCommand(app, "logs", "Show what a task's attempts logged", options, true);
  c.logs->add_option("TASK", a.task_id, "Task id (see: tessera status JOB --tasks)")
      ->required()
      ->check(kJobId);
  c.logs->add_option("--attempt", a.attempt, "Only this attempt")->check(CLI::Range(1, 1000000));
  c.why = AddClientCommand(app, "why", "Explain why a task is (not) running", options, true);
  c.why->add_option("TASK", a.task_id, "Task id (see: tessera status JOB --tasks)")
      ->required()
      ->check(kJobId);
}

// cancel, pause, resume, retry, rerender, priority, delete: one job each.
void AddJobActions(CLI::App& app, Args& a, Commands& c) {
  c.actions = {
      {"cancel", "Cancel a job (running tasks are told to stop)"},
      {"pause", "Hold a job's queued tasks (running ones finish)"},
      {"resume", "Release a paused job"},
      {"retry", "Requeue a job's failed tasks with a fresh retry budget"},
      {"rerender", "Render finished frames of a job again"},
      {"priority", "Change a job's priority (0..100, higher first)"},
      {"delete", "Delete a finished job and its records (output files stay)"},
  };
  for (JobAction& action : c.actions) {
    action.cmd = AddClientCommand(app, action.name, action.help, &a.options, true);
    action.cmd->add_option("JOB", a.job_id, "Job id")->required()->check(kJobId);
  }
  c.actions[4]
      .cmd->add_option("FRAMES", a.frames, "Frames to render again: A-B or one frame")
      ->required();
  c.actions[5]
      .cmd->add_option("PRIORITY", a.priority, "New priority")
      ->required()
      ->check(CLI::Range(0, 100));
}

// Credentials: API tokens, worker join tokens (admin), and who the CLI's token is.
void AddCredentialCommands(CLI::App& app, Args& a, Commands& c) {
  ClientOptions* options = &a.options;
  CLI::App* token = app.add_subcommand("token", "Create, list and revoke API tokens (admin)");
  token->require_subcommand(1);
  c.token_create =
      AddClientCommand(*token, "create", "Create an API token for a user and role", options, true);
  c.token_create
      ->add_option("--user", a.token_user, "Who it speaks for (jobs it submits are theirs)")
      ->required();
  c.token_create
      ->add_option("--role", a.token_role,
                   "viewer (read), submitter (own jobs), operator (all jobs, workers), admin "
                   "(tokens, enrolment)")
      ->required()
      ->check(CLI::IsMember({"viewer", "submitter", "operator", "admin"}));
  c.token_create->add_option("--note", a.note, "What it is for (shown in `tessera token list`)");
  c.token_create->add_option("--ttl", a.ttl, "Lifetime: 30m, 24h, 90d, or 0 for never [0]");
  c.token_list = AddClientCommand(*token, "list", "List API tokens", options, true);
  c.token_revoke = AddClientCommand(*token, "revoke", "Revoke an API token", options, true);
  c.token_revoke->add_option("ID", a.token_id, "Token id (see: tessera token list)")
      ->required()
      ->check(kJobId);

  CLI::App* join = app.add_subcommand(
      "join-token", "Create, list and revoke the join tokens new workers enrol with (admin)");
  join->require_subcommand(1);
  c.join_create = AddClientCommand(*join, "create", "Create a join token a new worker enrols with",
                                   options, true);
  c.join_create->add_option("--note", a.note,
                            "What it is for (shown in `tessera join-token list`)");
  c.join_create->add_option("--ttl", a.ttl, "Lifetime: 30m, 24h, 7d, or 0 for never [24h]");
  c.join_create->add_option("--worker", a.join_worker,
                            "Only for this worker name: may replace the key it is enrolled with "
                            "(moving the name to a new machine)");
  c.join_create->add_option("--uses", a.uses, "Workers it may enrol (0: unlimited)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  c.join_list = AddClientCommand(*join, "list", "List join tokens", options, true);
  c.join_revoke = AddClientCommand(*join, "revoke", "Revoke a join token", options, true);
  c.join_revoke->add_option("ID", a.token_id, "Token id (see: tessera join-token list)")
      ->required()
      ->check(kJobId);
  c.whoami = AddClientCommand(app, "whoami", "Show who the configured API token is", options, true);
}

// Operations on one worker by name (operator).
void AddWorkerCommands(CLI::App& app, Args& a, Commands& c) {
  CLI::App* worker = app.add_subcommand("worker", "Operate on one worker by name");
  worker->require_subcommand(1);
  for (const auto& [name, help] : std::vector<std::pair<const char*, const char*>>{
           {"drain", "Finish its running tasks, take no new ones, then leave"},
           {"revoke", "Disconnect it and refuse its key from now on"},
           {"readmit", "Let a revoked worker enrol again with a join token"},
           {"disable", "Give it no new tasks (it stays connected) until enabled"},
           {"enable", "Give a disabled worker tasks again"}}) {
    CLI::App* cmd = AddClientCommand(*worker, name, help, &a.options, true);
    cmd->add_option("NAME", a.worker_name, "Worker name (see: tessera workers)")->required();
    c.worker_actions.emplace_back(name, cmd);
  }
}

// Commands that need no scheduler: up (a local farm) and completion.
void AddLocalCommands(CLI::App& app, Args& a, Commands& c) {
  c.up = app.add_subcommand("up", "Run a scheduler and local workers until Ctrl-C");
  c.up->add_option("--workers", a.up.workers, "Number of local workers")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  c.up->add_option("--data", a.up.data_dir, "Data directory (database, outputs, logs)")
      ->capture_default_str();
  c.up->add_option("--port", a.up.port, "HTTP API port on 127.0.0.1")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  c.up->add_option("--broker-port", a.up.broker_port,
                   "Workers' port on 127.0.0.1 (default: any free one; the farm prints it)")
      ->check(CLI::Range(0, 65535));
  c.up->add_option("--threads", a.up.threads,
                   "Render threads per worker (default: cores / workers, at least 1)")
      ->check(CLI::Range(1, 4096));

  c.completion = app.add_subcommand(
      "completion", "Print a shell completion script: source <(tessera completion bash)");
  c.completion->add_option("SHELL", a.shell, "bash or zsh")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh"}));
}

// Arguments that become names, notes and filters travel as JSON text: refused here, naming the
// option and the byte, when they are not UTF-8.
bool TextArgumentsAreUtf8(const Args& a) {
  for (const auto& [value, option] :
       {std::pair{&a.job_query.user, "--user"}, std::pair{&a.job_query.project, "--project"},
        std::pair{&a.job_query.state, "--state"}, std::pair{&a.token_user, "--user"},
        std::pair{&a.token_role, "--role"}, std::pair{&a.note, "--note"},
        std::pair{&a.worker_name, "NAME"}, std::pair{&a.frames, "FRAMES"}}) {
    if (tessera::Status s = tessera::utf8::Check(*value, option); !s.ok()) {
      std::cerr << "error: " << s.message() << "\n";
      return false;
    }
  }
  return true;
}

// A token's lifetime, "90s", "30m", "24h", "7d", or 0 for never; `fallback` when not given.
std::optional<int64_t> LifetimeSeconds(const std::string& text, int64_t fallback) {
  if (text.empty()) return fallback;
  std::optional<int64_t> seconds = ParseDuration(text);
  if (!seconds) {
    std::cerr << "error: --ttl: expected a duration like 30m, 24h or 7d (0: never), got '" << text
              << "'\n";
  }
  return seconds;
}

// Runs the client command the line gave (a connection is resolved).
int RunClientCommand(const Args& a, const Commands& c) {
  namespace cli = tessera::cli;
  const ClientOptions& o = a.options;
  if (c.submit->parsed()) return cli::RunSubmit(o, a.job_file, a.submit);
  if (c.check->parsed()) return cli::RunCheck(a.check_files);
  if (c.jobs->parsed()) return cli::RunJobs(o, a.job_query);
  if (c.status->parsed() && a.job_id == 0) return cli::RunFarmStatus(o);
  if (c.status->parsed()) return cli::RunStatus(o, a.job_id, a.show_tasks, a.watch);
  if (c.costs->parsed()) return cli::RunCosts(o, a.cost_days);
  if (c.outputs->parsed()) return cli::RunOutputs(o, a.job_id);
  if (c.fetch->parsed()) return cli::RunFetch(o, a.job_id, a.fetch_dir);
  if (c.autoscaler_status->parsed()) return cli::RunAutoscalerStatus(o, a.decisions);
  if (c.logs->parsed()) return cli::RunLogs(o, a.task_id, a.attempt);
  if (c.workers->parsed()) return cli::RunWorkers(o);
  if (c.plugins->parsed()) return cli::RunPlugins(o);
  if (c.wait->parsed()) return cli::RunWait(o, a.job_id, a.timeout, a.quiet);
  if (c.why->parsed()) return cli::RunWhy(o, a.task_id);
  for (const JobAction& action : c.actions) {
    if (!action.cmd->parsed()) continue;
    nlohmann::json body = nlohmann::json::object();
    if (action.cmd == c.actions[4].cmd) body["frames"] = a.frames;
    if (action.cmd == c.actions[5].cmd) body["priority"] = a.priority;
    return cli::RunJobAction(o, a.job_id, action.name, body);
  }
  if (c.token_create->parsed()) {
    std::optional<int64_t> seconds = LifetimeSeconds(a.ttl, 0);
    if (!seconds) return cli::kExitUsage;
    return cli::RunApiTokenCreate(o, a.token_user, a.token_role, a.note, *seconds);
  }
  if (c.token_list->parsed()) return cli::RunApiTokenList(o);
  if (c.token_revoke->parsed()) return cli::RunApiTokenRevoke(o, a.token_id);
  if (c.join_create->parsed()) {
    std::optional<int64_t> seconds = LifetimeSeconds(a.ttl, 24 * 3600);
    if (!seconds) return cli::kExitUsage;
    return cli::RunJoinTokenCreate(o, a.note, *seconds, a.uses, a.join_worker);
  }
  if (c.join_list->parsed()) return cli::RunJoinTokenList(o);
  if (c.join_revoke->parsed()) return cli::RunJoinTokenRevoke(o, a.token_id);
  if (c.whoami->parsed()) return cli::RunWhoami(o);
  for (const auto& [name, cmd] : c.worker_actions) {
    if (cmd->parsed()) return cli::RunWorkerAction(o, a.worker_name, name);
  }
  return cli::kExitUsage;
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

  Args a;
  // The flags every client command takes may come before the command too, as in git or kubectl
  // (`tessera --server URL submit job.yaml`); after it, they win.
  app.add_option("--server", a.options.connection.server, "Scheduler API URL (for any command)");
  app.add_option("--token", a.options.connection.token, "API token (for any command)");
  app.add_option("--ca-file", a.options.connection.ca_file,
                 "PEM certificates to trust for an https:// server (for any command)");
  app.add_flag("--json", a.options.json, "Print the API's JSON (commands that read)");
  Commands c;
  AddJobFileCommands(app, a, c);
  AddReadCommands(app, a, c);
  AddJobActions(app, a, c);
  AddCredentialCommands(app, a, c);
  AddWorkerCommands(app, a, c);
  AddLocalCommands(app, a, c);
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
  if (!TextArgumentsAreUtf8(a)) return tessera::cli::kExitUsage;
  if (c.up->parsed()) return tessera::cli::RunUp(a.up);
  if (c.completion->parsed()) {
    std::cout << (a.shell == "zsh" ? tessera::cli::ZshCompletion(app)
                                   : tessera::cli::BashCompletion(app));
    return tessera::cli::kExitOk;
  }
  tessera::StatusOr<tessera::cli::Connection> connection =
      tessera::cli::ResolveConnection(a.options.connection);
  if (!connection.ok()) {
    std::cerr << "error: " << connection.status().message() << "\n";
    return tessera::cli::kExitUsage;
  }
  a.options.connection = *connection;
  return RunClientCommand(a, c);
}

}  // namespace
