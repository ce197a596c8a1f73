// `tessera check FILE...`: checks files here, without a scheduler, with the parsers the
// scheduler uses: Tessera job files, OpenJD job templates (also a job bundle's folder) and
// OpenJD environment templates -- what `openjd check` does for templates. A template is checked
// on its own: what depends on a parameter's value is checked when a job is made of it.

#include <filesystem>
#include <iostream>
#include <variant>

#include "scheduler/cli/submit.h"
#include "shared/jobs/parsed_job_file.h"
#include "shared/openjd/openjd.h"

namespace tessera::cli {

namespace fs = std::filesystem;

namespace {

// What the file is, or an error naming the field.
StatusOr<std::string> CheckOne(const std::string& path) {
  fs::path file = path;
  std::error_code ec;
  if (fs::is_directory(file, ec)) {
    for (const char* name : {"template.yaml", "template.json"}) {
      if (fs::exists(file / name, ec)) file /= name;
    }
    if (file == fs::path(path)) {
      return Status::InvalidArgument("not a job bundle (no template.yaml or template.json)");
    }
  }
  TSR_ASSIGN_OR_RETURN(std::string text, ReadTextFile(file));
  try {
    // The file's one parse: what it is, and the document it is checked from.
    const spec::JobFileDocument document = spec::ReadJobFile(text);
    const spec::OpenJdTemplate as_template{document.root, text.size()};
    switch (document.kind) {
      case spec::JobFileKind::kOpenJdJobTemplate:
        TSR_RETURN_IF_ERROR(openjd::CheckTemplate(as_template));
        return std::string("an Open Job Description job template");
      case spec::JobFileKind::kOpenJdEnvironment:
        TSR_RETURN_IF_ERROR(openjd::CheckTemplate(as_template));
        return std::string("an Open Job Description environment template");
      case spec::JobFileKind::kSteps:
      case spec::JobFileKind::kJob:
        break;
    }
    TSR_ASSIGN_OR_RETURN(spec::ParsedJobFile parsed, spec::CheckJobFile(document));
    return std::string(std::holds_alternative<spec::PipelineSpec>(parsed)
                           ? "a Tessera job file with steps"
                           : "a Tessera job file");
  } catch (const std::exception& e) {
    return Status::Internal(std::string("unexpected parser failure: ") + e.what());
  }
}

}  // namespace

int RunCheck(const std::vector<std::string>& files) {
  int rc = kExitOk;
  for (const std::string& file : files) {
    StatusOr<std::string> what = CheckOne(file);
    if (what.ok()) {
      std::cout << file << ": valid, " << *what << "\n";
    } else {
      rc = LocalError(file, what.status().message());
    }
  }
  return rc;
}

}  // namespace tessera::cli
