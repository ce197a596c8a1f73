#include "shared/jobs/parsed_job_file.h"

#include "shared/base/yaml_util.h"

namespace tessera::spec {

namespace {

// yaml::Parse's refusal of a job file over its bound, word for word.
Status JobFileTooLarge(size_t bytes) {
  return Status::InvalidArgument("job: " + std::to_string(bytes) +
                                 " bytes, more than the limit of " +
                                 std::to_string(kMaxJobYamlBytes));
}

bool StartsWith(const std::string& text, const char* prefix) { return text.rfind(prefix, 0) == 0; }

}  // namespace

std::string JobFileDocument::TopRenderer() const {
  if (!root.IsMap()) return "";
  const YAML::Node renderer = root["renderer"];
  return renderer.IsDefined() && renderer.IsScalar() ? renderer.Scalar() : "";
}

JobFileDocument JobFileOf(const YAML::Node& root, size_t text_bytes) {
  JobFileDocument document;
  document.root = root;
  document.text_bytes = text_bytes;
  if (!root.IsMap()) return document;
  const YAML::Node version = root["specificationVersion"];
  if (version.IsDefined() && version.IsScalar() && StartsWith(version.Scalar(), "jobtemplate-")) {
    document.kind = JobFileKind::kOpenJdJobTemplate;
  } else if (version.IsDefined() && version.IsScalar() &&
             StartsWith(version.Scalar(), "environment-")) {
    document.kind = JobFileKind::kOpenJdEnvironment;
  } else if (root["steps"].IsDefined()) {
    document.kind = JobFileKind::kSteps;
  }
  return document;
}

JobFileDocument ReadJobFile(std::string_view text) {
  yaml::Limits limits;
  // Over a job file's bound, the text is read to the bound of any document only to tell an
  // OpenJD template, which is refused with the template reader's own message.
  const bool too_large = text.size() > kMaxJobYamlBytes;
  if (!too_large) limits.max_document_bytes = kMaxJobYamlBytes;
  StatusOr<YAML::Node> root = yaml::Parse(text, "job", limits);
  JobFileDocument document;
  if (root.ok()) document = JobFileOf(*root, text.size());
  document.text_bytes = text.size();
  const bool openjd = document.kind == JobFileKind::kOpenJdJobTemplate ||
                      document.kind == JobFileKind::kOpenJdEnvironment;
  if (too_large && !openjd) {
    document = JobFileDocument();
    document.text_bytes = text.size();
    document.parsed = JobFileTooLarge(text.size());
  } else if (!root.ok()) {
    document.parsed = root.status();
  }
  return document;
}

StatusOr<ParsedJobFile> CheckJobFile(const JobFileDocument& document) {
  if (document.kind == JobFileKind::kOpenJdJobTemplate) {
    return ParsedJobFile(OpenJdTemplate{document.root, document.text_bytes});
  }
  // A Tessera job file (an environment template too: it is nothing to submit).
  TSR_RETURN_IF_ERROR(document.parsed);
  if (document.text_bytes > kMaxJobYamlBytes) return JobFileTooLarge(document.text_bytes);
  if (document.root.IsMap() && document.root["steps"].IsDefined()) {
    TSR_ASSIGN_OR_RETURN(PipelineSpec pipeline, ParsePipelineNode(document.root));
    return ParsedJobFile(std::move(pipeline));
  }
  TSR_ASSIGN_OR_RETURN(JobSpec job, ParseJobNode(document.root));
  TSR_RETURN_IF_ERROR(CheckRunsAlone(job));
  return ParsedJobFile(std::move(job));
}

StatusOr<ParsedJobFile> ParseJobFile(std::string_view text) {
  return CheckJobFile(ReadJobFile(text));
}

}  // namespace tessera::spec
