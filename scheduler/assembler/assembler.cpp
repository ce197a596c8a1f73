#include "scheduler/assembler/assembler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "plugins/pathtracer/accumulation.h"
#include "shared/job_spec.h"

namespace tessera::assembler {

Assembler::Assembler(int threads, std::function<void(FrameWritten)> on_written)
    : on_written_(std::move(on_written)) {
  for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { Run(); });
}

Assembler::~Assembler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void Assembler::Submit(FrameJob job) {
  Enqueue([job = std::move(job)] { return WriteFrame(job); });
}

void Assembler::SubmitPart(PartJob job) {
  Enqueue([job = std::move(job)] { return StorePart(job); });
}

void Assembler::Assemble(AssembleJob job) {
  Enqueue([job = std::move(job)] { return AssembleFrame(job); });
}

void Assembler::Enqueue(std::function<FrameWritten()> work) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(work));
  }
  cv_.notify_one();
}

void Assembler::Run() {
  for (;;) {
    std::function<FrameWritten()> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    const auto start = std::chrono::steady_clock::now();
    FrameWritten written = job();
    busy_ns_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::steady_clock::now() - start)
                           .count(),
                       std::memory_order_relaxed);
    if (written.status.ok() && written.kind != FrameWritten::Kind::kPart) {
      frames_assembled_.fetch_add(1, std::memory_order_relaxed);
    }
    on_written_(std::move(written));
  }
}

Assembler::Counters Assembler::counters() const {
  return {frames_assembled_.load(std::memory_order_relaxed),
          static_cast<double>(busy_ns_.load(std::memory_order_relaxed)) / 1e9};
}

std::string PixelProblem(const std::vector<float>& pixels, int channels) {
  if (channels <= 0) return "";
  size_t non_finite = 0;
  bool lit = false;
  for (size_t i = 0; i < pixels.size(); ++i) {
    const float v = pixels[i];
    if (!std::isfinite(v)) {
      ++non_finite;
    } else if (v != 0.0f && static_cast<int>(i % channels) < std::min(channels, 3)) {
      lit = true;
    }
  }
  if (non_finite > 0) return std::to_string(non_finite) + " NaN or infinite values";
  if (!lit && !pixels.empty()) return "the image is entirely black";
  return "";
}

namespace {
// Applies output validation to `done`; true when the pixels are refused.
bool RefusePixels(const std::vector<float>& pixels, int channels, bool accept, int frame,
                  FrameWritten* done) {
  const std::string problem = PixelProblem(pixels, channels);
  if (problem.empty()) return false;
  if (accept) {
    done->flag = problem;
    return false;
  }
  done->bad_pixels = true;
  done->status = Status::FailedPrecondition("frame " + std::to_string(frame) + ": " + problem);
  return true;
}
}  // namespace

FrameWritten Assembler::WriteFrame(const FrameJob& job) {
  FrameWritten done{job.job_id, job.task_id, job.attempt, job.frame, Status::Ok(), {}};
  if (RefusePixels(job.image.pixels, job.image.channels, job.accept_bad_pixels, job.frame, &done)) {
    return done;
  }
  std::error_code ec;
  std::filesystem::create_directories(job.output.dir, ec);
  if (ec) {
    done.status = Status::Internal("cannot create " + job.output.dir + ": " + ec.message());
    return done;
  }
  for (const std::string& format : job.output.formats) {
    std::string path = (std::filesystem::path(job.output.dir) /
                        spec::OutputFileName(job.output.pattern, job.frame, format))
                           .string();
    Status s = format == "exr" ? image::WriteExr(path, job.image, !job.output.exr_float)
                               : image::WriteSrgb8(path, job.image);
    if (!s.ok()) {
      done.status = s;
      return done;
    }
    done.files.push_back(path);
  }
  // Only for people to look at: a frame whose thumbnail cannot be written is still done.
  const std::string thumb = ThumbnailPath(job.output.dir, job.frame);
  if (Status s = image::WriteThumbnail(thumb, job.image, kThumbnailSide); !s.ok()) {
    spdlog::warn("job {} frame {}: no thumbnail: {}", job.job_id, job.frame, s.message());
  }
  return done;
}

std::string PartsDir(const std::string& output_dir, int frame) {
  return (std::filesystem::path(output_dir) / ".parts" / std::to_string(frame)).string();
}

std::string ThumbnailPath(const std::string& output_dir, int frame) {
  return (std::filesystem::path(output_dir) / ".thumbnails" / (std::to_string(frame) + ".png"))
      .string();
}

namespace {

// A plugin renderer's tile: float pixels, kept as a float EXR named after its place.
FrameWritten StorePixelTile(const PartJob& job, FrameWritten done) {
  const protocol::FramePart& a = job.assigned;
  if (job.pixels.width != a.x1 - a.x0 || job.pixels.height != a.y1 - a.y0) {
    done.status = Status::InvalidArgument("part of frame " + std::to_string(job.frame) +
                                          " is not the tile the task was assigned");
    return done;
  }
  if (RefusePixels(job.pixels.pixels, job.pixels.channels, job.accept_bad_pixels, job.frame,
                   &done)) {
    return done;
  }
  std::error_code ec;
  std::filesystem::create_directories(job.parts_dir, ec);
  if (ec) {
    done.status = Status::Internal("cannot create " + job.parts_dir + ": " + ec.message());
    return done;
  }
  const std::string path = (std::filesystem::path(job.parts_dir) /
                            (std::to_string(job.task_id) + "_" + std::to_string(a.x0) + "_" +
                             std::to_string(a.y0) + ".exr"))
                               .string();
  done.status = image::WriteExr(path, job.pixels, /*half=*/false);
  if (done.status.ok()) done.files.push_back(path);
  return done;
}

// Pastes float tiles ("<task>_<x0>_<y0>.exr") into one frame; they must cover it exactly once.
StatusOr<image::ImageBuffer> PastePixelTiles(const std::vector<std::filesystem::path>& files) {
  struct Tile {
    int x0 = 0, y0 = 0;
    image::ImageBuffer image;
  };
  std::vector<Tile> tiles;
  int width = 0, height = 0;
  for (const auto& file : files) {
    Tile t;
    if (std::sscanf(file.stem().string().c_str(), "%*d_%d_%d", &t.x0, &t.y0) != 2) {
      return Status::InvalidArgument(file.string() + ": not a tile's name");
    }
    TSR_ASSIGN_OR_RETURN(t.image, image::Read(file.string()));
    width = std::max(width, t.x0 + t.image.width);
    height = std::max(height, t.y0 + t.image.height);
    if (!tiles.empty() && (t.image.channels != tiles[0].image.channels)) {
      return Status::InvalidArgument(file.string() + ": other channels than the frame's");
    }
    tiles.push_back(std::move(t));
  }
  if (tiles.empty()) return Status::InvalidArgument("no tiles to assemble");
  image::ImageBuffer frame;
  frame.width = width;
  frame.height = height;
  frame.channels = tiles[0].image.channels;
  frame.channel_names = tiles[0].image.channel_names;
  frame.pixels.resize(static_cast<size_t>(width) * height * frame.channels);
  std::vector<uint8_t> covered(static_cast<size_t>(width) * height, 0);
  for (const Tile& t : tiles) {
    const size_t row = static_cast<size_t>(t.image.width) * frame.channels;
    for (int y = 0; y < t.image.height; ++y) {
      uint8_t* cover = &covered[static_cast<size_t>(t.y0 + y) * width + t.x0];
      if (std::find(cover, cover + t.image.width, 1) != cover + t.image.width) {
        return Status::InvalidArgument("tiles overlap");
      }
      std::fill_n(cover, t.image.width, 1);
      std::copy_n(
          t.image.pixels.begin() + static_cast<size_t>(y) * row, row,
          frame.pixels.begin() + (static_cast<size_t>(t.y0 + y) * width + t.x0) * frame.channels);
    }
  }
  if (std::find(covered.begin(), covered.end(), 0) != covered.end()) {
    return Status::InvalidArgument("the tiles do not cover the whole frame");
  }
  return frame;
}

// The path tracer's parts: the sample parts of each tile merge into one accumulation, and the
// tiles' finished pixels fill the frame.
StatusOr<image::ImageBuffer> MergeAndPaste(std::vector<pathtracer::RenderedImage> parts) {
  std::map<std::pair<int, int>, std::vector<pathtracer::RenderedImage>> by_tile;
  for (auto& p : parts) by_tile[{p.y0, p.x0}].push_back(std::move(p));
  std::vector<pathtracer::RenderedImage> tiles;
  for (auto& [corner, samples] : by_tile) {
    TSR_ASSIGN_OR_RETURN(pathtracer::RenderedImage merged, pathtracer::MergeSampleParts(samples));
    tiles.push_back(std::move(merged));
  }
  return pathtracer::AssemblePixels(tiles);
}

}  // namespace

FrameWritten Assembler::StorePart(const PartJob& job) {
  FrameWritten done{
      job.job_id, job.task_id, job.attempt, job.frame, Status::Ok(), {}, FrameWritten::Kind::kPart};
  if (job.accumulation.empty()) return StorePixelTile(job, std::move(done));
  // The worker's bytes are checked before they are kept: a corrupt or mismatched part is the
  // task's failure now, not the frame's at assembly time.
  StatusOr<pathtracer::RenderedImage> part = pathtracer::ParseAccumulation(job.accumulation);
  if (!part.ok()) {
    done.status = part.status().WithContext("part of frame " + std::to_string(job.frame));
    return done;
  }
  const protocol::FramePart& a = job.assigned;
  const bool region_ok = a.whole_region()
                             ? part->x0 == 0 && part->y0 == 0 && part->width == part->frame_width &&
                                   part->height == part->frame_height
                             : part->x0 == a.x0 && part->y0 == a.y0 && part->width == a.x1 - a.x0 &&
                                   part->height == a.y1 - a.y0;
  const bool samples_ok = part->sample_begin == a.sample_begin &&
                          (a.sample_end < 0 || part->sample_count == a.sample_end - a.sample_begin);
  if (part->frame != job.frame || !region_ok || !samples_ok) {
    done.status = Status::InvalidArgument("part of frame " + std::to_string(job.frame) +
                                          " is not the part the task was assigned");
    return done;
  }
  if (RefusePixels(part->pixels, part->channels, job.accept_bad_pixels, job.frame, &done)) {
    return done;
  }
  std::error_code ec;
  std::filesystem::create_directories(job.parts_dir, ec);
  if (ec) {
    done.status = Status::Internal("cannot create " + job.parts_dir + ": " + ec.message());
    return done;
  }
  const std::string path =
      (std::filesystem::path(job.parts_dir) / (std::to_string(job.task_id) + ".acc")).string();
  done.status = pathtracer::SaveCheckpoint(*part, path);
  if (done.status.ok()) done.files.push_back(path);
  return done;
}

FrameWritten Assembler::AssembleFrame(const AssembleJob& job) {
  FrameWritten done{job.job_id,
                    job.task_id,
                    job.attempt,
                    job.frame,
                    Status::Ok(),
                    {},
                    FrameWritten::Kind::kAssembled};
  const std::string dir = PartsDir(job.output.dir, job.frame);
  done.parts_dir = dir;
  std::vector<pathtracer::RenderedImage> parts;
  std::vector<std::filesystem::path> pixel_tiles;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".exr") pixel_tiles.push_back(entry.path());
    if (entry.path().extension() != ".acc") continue;
    StatusOr<pathtracer::RenderedImage> part = pathtracer::LoadCheckpoint(entry.path().string());
    if (!part.ok()) {
      done.status = part.status();
      return done;
    }
    parts.push_back(std::move(*part));
  }
  const size_t found = parts.size() + pixel_tiles.size();
  if (ec || static_cast<int>(found) != job.parts || (!parts.empty() && !pixel_tiles.empty())) {
    done.status =
        Status::Internal("frame " + std::to_string(job.frame) + ": found " + std::to_string(found) +
                         " of " + std::to_string(job.parts) + " parts in " + dir);
    return done;
  }
  StatusOr<image::ImageBuffer> frame =
      pixel_tiles.empty() ? MergeAndPaste(std::move(parts)) : PastePixelTiles(pixel_tiles);
  if (!frame.ok()) {
    done.status = frame.status().WithContext("frame " + std::to_string(job.frame));
    return done;
  }
  FrameJob out;
  out.job_id = job.job_id;
  out.frame = job.frame;
  out.output = job.output;
  out.image = std::move(*frame);
  out.accept_bad_pixels = true;  // each part was checked when it arrived
  FrameWritten written = WriteFrame(out);
  done.status = written.status;
  done.files = written.files;
  return done;
}

}  // namespace tessera::assembler
