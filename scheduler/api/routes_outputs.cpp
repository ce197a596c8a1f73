#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <tuple>

#include "scheduler/api/http_api.h"
#include "scheduler/api/reply.h"
#include "scheduler/api/views.h"
#include "scheduler/assembler/assembler.h"
#include "shared/base/file_io.h"
#include "shared/jobs/job_file.h"

namespace tessera::api {

namespace fs = std::filesystem;
using nlohmann::json;
using security::Caller;
using security::Role;

namespace {

constexpr int kFramesPerPage = 5000;

// A page of a job's frames: ?first=F (default: the job's first) and ?count=N (at most
// kFramesPerPage), clipped to the job's range, [first, last], with the flags of those frames.
struct FramePage {
  store::JobRecord job;
  int first = 0;
  int last = 0;
  std::map<int, std::string> flags;
};

StatusOr<FramePage> ReadFramePage(store::Store& store, const http::Request& req, int64_t id) {
  FramePage page;
  TSR_ASSIGN_OR_RETURN(page.job, store.GetJob(id));
  page.first = page.job.frame_start;
  int count = kFramesPerPage;
  for (auto [name, value, min, max] :
       {std::tuple{"first", &page.first, spec::kMinFrame, spec::kMaxFrame},
        std::tuple{"count", &count, 1, kFramesPerPage}}) {
    if (!req.HasParam(name)) continue;
    TSR_ASSIGN_OR_RETURN(int64_t v, ParseInt(req.Param(name), name, min, max));
    *value = static_cast<int>(v);
  }
  page.first = std::max(page.first, page.job.frame_start);
  page.last = static_cast<int>(
      std::min<int64_t>(page.job.frame_end, static_cast<int64_t>(page.first) + count - 1));
  TSR_ASSIGN_OR_RETURN(page.flags, store.FrameFlags(id, page.first, page.last));
  return page;
}

// The files a job's tasks returned (a command's `outputs: files`) under its output folder: every
// regular file by its path relative to the folder, none under a hidden folder (the frames'
// parts, thumbnails) or hidden itself, no frame file (listed as frames), at most
// kFilesPerListing. Listed with the first page of frames.
constexpr size_t kFilesPerListing = 10000;

json ReturnedFiles(const store::JobRecord& job, bool* truncated) {
  json files = json::array();
  std::error_code ec;
  const fs::path root(job.output_dir);
  for (fs::recursive_directory_iterator it(root, fs::directory_options::none, ec), end;
       !ec && it != end; it.increment(ec)) {
    const std::string leaf = it->path().filename().string();
    if (leaf.empty() || leaf[0] == '.') {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    if (!fs::is_regular_file(it->symlink_status(ec))) continue;
    const std::string name = it->path().lexically_relative(root).string();
    if (spec::ValidateAssetPath(name, "name").ok() == false) continue;
    if (files.size() == kFilesPerListing) {
      *truncated = true;
      break;
    }
    files.push_back({{"name", name}, {"size", it->file_size(ec)}});
  }
  std::sort(files.begin(), files.end(),
            [](const json& a, const json& b) { return a["name"] < b["name"]; });
  return files;
}

// Whether `name` (a path relative to the job's output folder, from a URL) is one the output
// routes may serve: a relative path of plain parts (spec::ValidateAssetPath), none hidden, with
// no link on the way -- nothing outside the output folder, nor its parts or thumbnails, can be
// read through it.
bool ServableOutput(const fs::path& root, const std::string& name) {
  if (!spec::ValidateAssetPath(name, "name").ok()) return false;
  fs::path path = root;
  std::error_code ec;
  for (const fs::path& part : fs::path(name)) {
    if (part.string()[0] == '.') return false;
    path /= part;
    const fs::file_status status = fs::symlink_status(path, ec);
    if (ec || fs::is_symlink(status)) return false;
  }
  return fs::is_regular_file(fs::symlink_status(path, ec)) && !ec;
}

// A job with steps has no frames of its own: each step is listed with its id (its frames are
// under GET /api/v1/jobs/{step id}/outputs), and the files the steps returned (an encode step's
// movie) come with the first page, named by their path in the job's folder (where a step without
// an `output` of its own writes), so the job's own routes serve and fetch them.
void AddStepOutputs(const store::JobRecord& job, const std::vector<store::JobRecord>& steps,
                    bool first_page, json* reply) {
  json& listed = (*reply)["steps"] = json::array();
  for (const store::JobRecord& step : steps) {
    listed.push_back({{"step", step.step}, {"job_id", step.id}, {"output_dir", step.output_dir}});
    const fs::path folder = fs::path(step.output_dir).lexically_relative(job.output_dir);
    if (!first_page || !step.returns_files() || folder.empty() || *folder.begin() == "..") {
      continue;
    }
    bool truncated = false;
    for (json& f : ReturnedFiles(step, &truncated)) {
      f["name"] = (folder / f["name"].get<std::string>()).string();
      f["step"] = step.step;
      (*reply)["files"].push_back(std::move(f));
    }
    if (truncated) (*reply)["files"].push_back({{"truncated", true}, {"step", step.step}});
  }
}

}  // namespace

void HttpApi::OutputRoutes() {
  Handle("GET", R"(/api/v1/jobs/([^/]+)/frames)", Role::kViewer,
         WithId([this](Req req, Res res, const Caller&, int64_t id) {
           StatusOr<FramePage> page = ReadFramePage(store_, req, id);
           if (!page.ok()) return ReplyError(res, page.status());
           const store::JobRecord* job = &page->job;
           const int first = page->first, last = page->last;
           // Only the tasks of these frames: task i holds frame chunk i / parts_per_frame (the
           // store numbers tasks chunk by chunk, part by part), so the page is an index range
           // and a job of a million tasks costs no more than a small one.
           store::Store::TaskFilter filter;
           const int64_t parts = std::max(1, job->parts_per_frame);
           const int64_t chunk = std::max(1, job->chunk_size);
           const int64_t first_chunk = (first - job->frame_start) / chunk;
           const int64_t last_chunk = (last - job->frame_start) / chunk;
           filter.after_index = static_cast<int>(first_chunk * parts - 1);
           filter.limit = static_cast<int>((last_chunk - first_chunk + 1) * parts);
           auto tasks = store_.ListTasks(id, filter);
           if (!tasks.ok()) return ReplyError(res, tasks.status());
           Reply(res, 200, FramesView(*job, *tasks, page->flags, first, last - first + 1));
         }));
  // A job's frame files, for `tessera outputs` and `tessera fetch` (farms without shared
  // storage get their images back through the API).
  Handle("GET", R"(/api/v1/jobs/([^/]+)/outputs)", Role::kViewer,
         WithId([this](Req req, Res res, const Caller&, int64_t id) {
           StatusOr<FramePage> page = ReadFramePage(store_, req, id);
           if (!page.ok()) return ReplyError(res, page.status());
           const store::JobRecord* job = &page->job;
           const int first = page->first, last = page->last;
           const std::map<int, std::string>* flags = &page->flags;
           json files = json::array();
           for (int frame = first; frame <= last; ++frame) {
             for (const std::string& format : job->output_formats) {
               const std::string name = spec::OutputFileName(job->output_pattern, frame, format);
               std::error_code ec;
               const auto status = fs::symlink_status(fs::path(job->output_dir) / name, ec);
               if (ec || !fs::is_regular_file(status)) continue;
               files.push_back({{"frame", frame},
                                {"name", name},
                                {"format", format},
                                {"size", fs::file_size(fs::path(job->output_dir) / name, ec)}});
               if (flags->count(frame)) files.back()["flag"] = flags->at(frame);
             }
           }
           // Files the tasks returned come with the first page.
           if (job->returns_files() && first == job->frame_start) {
             bool truncated = false;
             for (json& f : ReturnedFiles(*job, &truncated)) files.push_back(std::move(f));
             if (truncated) files.push_back({{"truncated", true}});
           }
           json reply = {{"job_id", id}, {"files", std::move(files)}};
           if (job->has_steps()) {
             StatusOr<std::vector<store::JobRecord>> steps = store_.PipelineSteps(id);
             if (!steps.ok()) return ReplyError(res, steps.status());
             AddStepOutputs(*job, *steps, first == job->frame_start, &reply);
           }
           if (last < job->frame_end) reply["next_first"] = last + 1;
           Reply(res, 200, reply);
         }));
  Handle("GET", R"(/api/v1/jobs/([^/]+)/outputs/(.+))", Role::kViewer,
         WithId([this](Req req, Res res, const Caller&, int64_t id) {
           auto job = store_.GetJob(id);
           if (!job.ok()) return ReplyError(res, job.status());
           const std::string name = req.matches[2];
           // Only a file the job wrote, by its path in the output folder: never a hidden file, a
           // folder or a link, so nothing outside the job's output directory can be read.
           const fs::path path = fs::path(job->output_dir) / name;
           if (!ServableOutput(job->output_dir, name)) {
             return ReplyError(res, Status::NotFound("job " + std::to_string(id) +
                                                     " has no output file '" + name + "'"));
           }
           const std::string ext = path.extension().string();
           // Images by their type; any other file a task returned is a download, never content
           // the browser would render on the dashboard's origin (a returned .html or .svg).
           const bool image = ext == ".exr" || ext == ".png" || ext == ".jpg" || ext == ".tif";
           const char* type = ext == ".exr"   ? "image/x-exr"
                              : ext == ".png" ? "image/png"
                              : ext == ".jpg" ? "image/jpeg"
                              : ext == ".tif" ? "image/tiff"
                              : ext == ".mp4" ? "video/mp4"
                                              : "application/octet-stream";
           if (!image && ext != ".mp4") {
             res.SetHeader("Content-Disposition", "attachment");
           }
           // Streamed from disk by the server: a 4K float EXR never sits in memory whole.
           res.content_type = type;
           res.file_path = path.string();
         }));
  Handle("GET", R"(/api/v1/jobs/([^/]+)/frames/(-?[0-9]+)/thumbnail)", Role::kViewer,
         WithId([this](Req req, Res res, const Caller&, int64_t id) {
           auto job = store_.GetJob(id);
           if (!job.ok()) return ReplyError(res, job.status());
           StatusOr<int64_t> frame =
               ParseInt(req.matches[2], "frame", job->frame_start, job->frame_end);
           if (!frame.ok()) return ReplyError(res, frame.status());
           StatusOr<std::string> png = file_io::ReadAll(
               assembler::ThumbnailPath(job->output_dir, static_cast<int>(*frame)));
           if (!png.ok()) {
             return ReplyError(
                 res, Status::NotFound("frame " + std::to_string(*frame) + " of job " +
                                       std::to_string(id) + " has no thumbnail (not written yet)"));
           }
           res.SetHeader("Cache-Control", "private, max-age=5");
           res.SetContent(std::move(*png), "image/png");
         }));
}

}  // namespace tessera::api
