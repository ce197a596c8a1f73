// A job's frame files through the API: `tessera outputs JOB` lists them, `tessera fetch JOB DIR`
// downloads them (farms without shared storage get their images back this way).

#include <filesystem>
#include <iostream>

#include "scheduler/cli/commands.h"
#include "scheduler/cli/format.h"
#include "shared/jobs/job_file.h"

namespace tessera::cli {

namespace {

namespace fs = std::filesystem;

// Every output file of the job, page by page.
StatusOr<std::vector<json>> ListOutputs(ApiClient& client, int64_t job_id) {
  std::vector<json> files;
  std::string next;
  do {
    TSR_ASSIGN_OR_RETURN(json page,
                         client.Get("/api/v1/jobs/" + std::to_string(job_id) + "/outputs" +
                                    (next.empty() ? "" : "?first=" + next)));
    for (const json& f : Member(page, "files")) files.push_back(f);
    next = Member(page, "next_first").is_number() ? std::to_string(Int(page, "next_first")) : "";
  } while (!next.empty());
  return files;
}

}  // namespace

int RunOutputs(const ClientOptions& options, int64_t job_id) {
  ApiClient client(options.connection);
  StatusOr<std::vector<json>> files = ListOutputs(client, job_id);
  if (!files.ok()) return ReportError(client.server_url(), files.status());
  if (options.json) {
    std::cout << json{{"job_id", job_id}, {"files", *files}}.dump(2) << "\n";
    return kExitOk;
  }
  if (files->empty()) {
    std::cout << "Job " << job_id << " has no output files yet.\n";
    return kExitOk;
  }
  Table table({"FRAME", "FILE", "SIZE", "FLAG"});
  uint64_t total = 0;
  for (const json& f : *files) {
    if (f.contains("truncated")) {
      table.AddRow({"", "(more files: the listing stops here)", "", ""});
      continue;
    }
    table.AddRow({Str(f, "frame"), Str(f, "name"), FormatBytes(Int(f, "size")), Str(f, "flag")});
    total += Int(f, "size");
  }
  table.Print(std::cout);
  std::cout << files->size() << " files, " << FormatBytes(total) << "\n";
  return kExitOk;
}

int RunFetch(const ClientOptions& options, int64_t job_id, const std::string& dir) {
  ApiClient client(options.connection);
  StatusOr<std::vector<json>> files = ListOutputs(client, job_id);
  if (!files.ok()) return ReportError(client.server_url(), files.status());
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    std::cerr << "error: DIR: cannot create " << dir << ": " << ec.message() << "\n";
    return kExitUsage;
  }
  int fetched = 0, kept = 0, failed = 0;
  uint64_t bytes = 0;
  for (const json& f : *files) {
    if (f.contains("truncated")) continue;
    const std::string name = Str(f, "name");
    // A name from the server becomes a path here: only plain relative paths, so no listing can
    // make the fetch write outside DIR.
    if (Status valid = spec::ValidateAssetPath(name, "name"); !valid.ok()) {
      std::cerr << "error: " << valid.message() << " (skipped)\n";
      ++failed;
      continue;
    }
    const fs::path target = fs::path(dir) / name;
    fs::create_directories(target.parent_path(), ec);
    // Already here whole (an earlier fetch): kept, so a fetch can be resumed.
    if (fs::is_regular_file(target, ec) &&
        fs::file_size(target, ec) == static_cast<uintmax_t>(Int(f, "size"))) {
      ++kept;
      continue;
    }
    StatusOr<uint64_t> got = client.Download(
        "/api/v1/jobs/" + std::to_string(job_id) + "/outputs/" + name, target.string());
    if (!got.ok()) {
      std::cerr << "error: " << name << ": " << got.status().message() << "\n";
      if (got.status().code() == StatusCode::kUnavailable) {
        return ReportError(client.server_url(), got.status());
      }
      ++failed;
      continue;
    }
    ++fetched;
    bytes += *got;
  }
  std::cout << "job " << job_id << ": fetched " << fetched << " files (" << FormatBytes(bytes)
            << ") into " << dir;
  if (kept) std::cout << ", " << kept << " already there";
  if (failed) std::cout << ", " << failed << " failed";
  std::cout << "\n";
  return failed ? kExitFailure : kExitOk;
}

}  // namespace tessera::cli
