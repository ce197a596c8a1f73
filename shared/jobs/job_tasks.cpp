// How a job divides into tasks: frame ranges into chunks, frames into tiles and sample parts
// (each pixel and each sample in exactly one part), the largest result a part sends back, and the
// names of the files a frame is written to. The job spec itself is read and checked in
// job_file.cpp.
#include <algorithm>
#include <cstdio>

#include "shared/jobs/job_file.h"
#include "shared/plugins/plugin_catalog.h"

namespace tessera::spec {

Status SplitPluginFrames(JobSpec* job) {
  TSR_ASSIGN_OR_RETURN(auto settings, ResolvedSettings(*job));
  auto number = [&](const char* key) {
    auto it = settings.find(key);
    int value = 0;
    if (it != settings.end()) std::sscanf(it->second.c_str(), "%d", &value);
    return value;
  };
  const int width = number("width"), height = number("height");
  if (!job->splits_frames()) {
    job->parts.clear();
    // A frame size the job gives is checked against what a worker can send back.
    return width > 0 && height > 0 ? SplitFrames(job, width, height, 1) : Status::Ok();
  }
  if (width <= 0 || height <= 0) {
    return Status::InvalidArgument("tiles: the " + job->renderer +
                                   " renderer needs settings.width and settings.height to be "
                                   "split into tiles");
  }
  return SplitFrames(job, width, height, 1);
}

std::vector<FrameChunk> ExpandFrames(const JobSpec& job) {
  std::vector<FrameChunk> chunks;
  if (job.frame_start > job.frame_end || job.chunk_size < 1) return chunks;
  chunks.reserve(static_cast<size_t>((job.frame_count() + job.chunk_size - 1) / job.chunk_size));
  int index = 0;
  for (int64_t f = job.frame_start; f <= job.frame_end; f += job.chunk_size) {
    int64_t last = std::min<int64_t>(f + job.chunk_size - 1, job.frame_end);
    chunks.push_back({index++, static_cast<int>(f), static_cast<int>(last)});
  }
  return chunks;
}

int64_t TaskCount(const JobSpec& job) {
  if (job.frame_start > job.frame_end || job.chunk_size < 1) return 0;
  const int64_t chunks = (job.frame_count() + job.chunk_size - 1) / job.chunk_size;
  return chunks * static_cast<int64_t>(std::max<size_t>(1, job.parts.size()));
}

int64_t LargestResultBytes(const JobSpec& job, int width, int height, int channels) {
  // Integer division splits evenly: the largest tile is the rounded-up share of each side.
  const int64_t w = (int64_t{width} + job.tiles_x - 1) / std::max(1, job.tiles_x);
  const int64_t h = (int64_t{height} + job.tiles_y - 1) / std::max(1, job.tiles_y);
  // Parts of a split frame from a renderer with exact accumulations travel as 32.32 fixed
  // point (8 bytes a channel) with a small header; everything else as 32-bit floats.
  const std::shared_ptr<const plugin::PluginSpec> renderer = plugin::FindRenderer(job.renderer);
  const bool exact = job.splits_frames() && renderer != nullptr && renderer->exact_parts;
  return w * h * std::max(1, channels) * (exact ? 8 : 4) + (exact ? 4096 : 0);
}

Status SplitFrames(JobSpec* job, int width, int height, int samples, int channels) {
  job->parts.clear();
  if (width > kMaxImageSide || height > kMaxImageSide) {
    return Status::InvalidArgument(
        "width, height: " + std::to_string(width) + "x" + std::to_string(height) +
        " is larger than the farm takes back (each side at most " + std::to_string(kMaxImageSide) +
        ", the scheduler's max_image_side)");
  }
  // Workers that write to shared storage send no pixels for whole frames.
  const bool sends_pixels = job->splits_frames() || job->output.shared_dir.empty();
  if (job->produces_frames() && sends_pixels) {
    const int64_t bytes = LargestResultBytes(*job, width, height, channels);
    if (bytes > protocol::kMaxResultBytes) {
      const std::string what = job->splits_frames() ? "one tile of a " : "a ";
      return Status::InvalidArgument(
          "tiles: " + what + std::to_string(width) + "x" + std::to_string(height) + " frame with " +
          std::to_string(channels) + " channels is " + std::to_string(bytes) +
          " bytes, more than the result limit of " + std::to_string(protocol::kMaxResultBytes) +
          " bytes a worker can send back; split the frame into (more) tiles");
    }
  }
  if (!job->splits_frames()) return Status::Ok();
  if (job->tiles_x > width || job->tiles_y > height) {
    return Status::InvalidArgument("tiles: " + std::to_string(job->tiles_x) + "x" +
                                   std::to_string(job->tiles_y) + " tiles do not fit a " +
                                   std::to_string(width) + "x" + std::to_string(height) + " frame");
  }
  if (job->sample_parts > samples) {
    return Status::InvalidArgument("sample_parts: " + std::to_string(job->sample_parts) +
                                   " parts of " + std::to_string(samples) +
                                   " samples per pixel would leave parts empty");
  }
  // Even splits by integer division: every pixel and every sample belongs to exactly one part.
  for (int p = 0; p < job->sample_parts; ++p) {
    for (int ty = 0; ty < job->tiles_y; ++ty) {
      for (int tx = 0; tx < job->tiles_x; ++tx) {
        protocol::FramePart part;
        if (job->tiles_x * job->tiles_y > 1) {
          part.x0 = static_cast<int>(int64_t{width} * tx / job->tiles_x);
          part.x1 = static_cast<int>(int64_t{width} * (tx + 1) / job->tiles_x);
          part.y0 = static_cast<int>(int64_t{height} * ty / job->tiles_y);
          part.y1 = static_cast<int>(int64_t{height} * (ty + 1) / job->tiles_y);
        }
        if (job->sample_parts > 1) {
          part.sample_begin = static_cast<int>(int64_t{samples} * p / job->sample_parts);
          part.sample_end = static_cast<int>(int64_t{samples} * (p + 1) / job->sample_parts);
        }
        job->parts.push_back(part);
      }
    }
  }
  return Status::Ok();
}

std::string EffectivePattern(const JobSpec& job) {
  return job.output.pattern.empty() ? job.name + ".####" : job.output.pattern;
}

std::string OutputFileName(const std::string& pattern, int frame, const std::string& extension) {
  size_t first = pattern.find('#');
  std::string name = pattern;
  if (first != std::string::npos) {
    size_t width = pattern.find_first_not_of('#', first);
    width = (width == std::string::npos ? pattern.size() : width) - first;
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%0*d", static_cast<int>(width), frame);
    name = pattern.substr(0, first) + buf + pattern.substr(first + width);
  }
  return name + "." + extension;
}

}  // namespace tessera::spec
