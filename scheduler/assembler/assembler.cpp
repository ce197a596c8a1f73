#include "scheduler/assembler/assembler.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>
#include <type_traits>
#include <variant>

#include "scheduler/assembler/frame_files.h"
#include "scheduler/assembler/part_spool.h"
#include "scheduler/blobs/blob_store.h"
#include "shared/base/disk_space.h"
#include "shared/base/file_io.h"
#include "shared/images/accumulation.h"
#include "shared/images/image_oiio.h"
#include "shared/jobs/job_file.h"

namespace tessera::assembler {

namespace fs = std::filesystem;

Assembler::Assembler(int threads, std::function<void(Result)> on_done, const Clock& clock,
                     size_t cache_bytes)
    : on_done_(std::move(on_done)),
      clock_(clock),
      spool_(std::make_unique<PartSpool>(cache_bytes)) {
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

namespace {

// What a job's answer is about, for when its work throws instead of answering.
FrameWritten AnswerFor(const FrameJob& j) { return {j.job_id, j.task_id, j.attempt, j.frame}; }
PartStored AnswerFor(const PartJob& j) { return {j.job_id, j.task_id, j.attempt, j.frame}; }
FrameAssembled AnswerFor(const AssembleJob& j) {
  FrameAssembled w{j.job_id, j.task_id, j.attempt, j.frame};
  w.parts_dir = PartsDir(j.output.dir, j.frame);
  return w;
}
FileWritten AnswerFor(const FileJob& j) {
  return {j.job_id, j.task_id, j.attempt, j.name, Status::Ok()};
}

}  // namespace

void Assembler::Submit(FrameJob job) {
  auto answer = AnswerFor(job);
  Enqueue(std::move(answer), [job = std::move(job)] { return WriteFrame(job); });
}

void Assembler::SubmitPart(PartJob job) {
  auto answer = AnswerFor(job);
  Enqueue(std::move(answer), [this, job = std::move(job)] { return StorePart(job); });
}

namespace {

void CopyPixels(const zmq::message_t& payload, image::ImageBuffer& image) {
  image.pixels.resize(payload.size() / sizeof(float));
  std::memcpy(image.pixels.data(), payload.data(), image.pixels.size() * sizeof(float));
}

}  // namespace

// (The payload rides in a shared_ptr because std::function needs a copyable callable.)
void Assembler::Submit(FrameJob job, zmq::message_t payload) {
  auto answer = AnswerFor(job);
  Enqueue(std::move(answer), [job = std::move(job), bytes = std::make_shared<zmq::message_t>(
                                                        std::move(payload))]() mutable {
    CopyPixels(*bytes, job.image);
    bytes.reset();
    return WriteFrame(job);
  });
}

void Assembler::SubmitFile(FileJob job, zmq::message_t payload) {
  FileWritten answer = AnswerFor(job);
  Enqueue(std::move(answer), [job = std::move(job), bytes = std::make_shared<zmq::message_t>(
                                                        std::move(payload))]() mutable {
    return WriteFile(job, *bytes);
  });
}

void Assembler::GatherInputs(InputsJob job) {
  InputsGathered answer;
  answer.job_id = job.job_id;
  Enqueue(std::move(answer), [job = std::move(job)] { return StoreInputs(job); });
}

InputsGathered Assembler::StoreInputs(const InputsJob& job) {
  InputsGathered done;
  done.job_id = job.job_id;
  done.inputs = job.base;
  static constexpr std::string_view kPngSignature("\x89PNG\r\n\x1a\n", 8);
  // The folders' files, listed here (never on the broker's thread): plain files only.
  std::vector<std::tuple<std::string, std::string, bool>> files;  // name, path, must be a PNG
  for (const auto& [name, path] : job.files) files.emplace_back(name, path, true);
  for (const auto& [folder, prefix] : job.folders) {
    std::error_code ec;
    if (!std::filesystem::is_directory(std::filesystem::symlink_status(folder, ec))) continue;
    for (std::filesystem::recursive_directory_iterator it(folder, ec), end; it != end;
         it.increment(ec)) {
      if (ec) break;
      if (!it->is_regular_file(ec) || it->is_symlink(ec)) continue;
      files.emplace_back(prefix + "/" + it->path().lexically_relative(folder).generic_string(),
                         it->path().string(), false);
    }
  }
  if (files.size() > static_cast<size_t>(spec::kMaxAssets)) {
    done.status =
        Status::ResourceExhausted("more than " + std::to_string(spec::kMaxAssets) + " input files");
    done.inputs.clear();
    return done;
  }
  for (const auto& [name, path, png] : files) {
    if (Status valid = spec::ValidateAssetPath(name, path); !valid.ok()) {
      done.status = valid;
      done.inputs.clear();
      return done;
    }
    // One file in memory at a time; a file stored before is found by its hash. The file may
    // have been placed by a worker (shared storage): never through a link, a frame only a plain
    // PNG, so nothing else the scheduler can read ever travels to a worker as an input.
    StatusOr<std::string> bytes = file_io::ReadPlainFile(path, kMaxInputFrameBytes);
    if (bytes.ok() && png &&
        std::string_view(*bytes).substr(0, kPngSignature.size()) != kPngSignature) {
      bytes = Status::InvalidArgument(path + " is not a PNG file");
    }
    StatusOr<std::string> hash = bytes.ok() ? job.blobs->Put(*bytes) : bytes.status();
    if (!hash.ok()) {
      done.status = hash.status();
      done.inputs.clear();
      return done;
    }
    job.blobs->Touch(*hash);  // in use now: blob GC leaves it until the job names it
    done.bytes += bytes->size();
    done.inputs[name] = *hash;
  }
  return done;
}

FileWritten Assembler::WriteFile(const FileJob& job, const zmq::message_t& bytes) {
  FileWritten done = AnswerFor(job);
  const std::filesystem::path path = std::filesystem::path(job.dir) / job.name;
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  done.status = file_io::WriteAtomically(
      path.string(), {std::string_view(static_cast<const char*>(bytes.data()), bytes.size())},
      0644);
  done.bytes = bytes.size();
  return done;
}

void Assembler::SubmitPart(PartJob job, zmq::message_t payload) {
  auto answer = AnswerFor(job);
  Enqueue(std::move(answer),
          [this, job = std::move(job),
           bytes = std::make_shared<zmq::message_t>(std::move(payload))]() mutable {
            if (job.pixels.channels > 0) {
              CopyPixels(*bytes, job.pixels);
            } else {
              job.accumulation.assign(static_cast<const char*>(bytes->data()), bytes->size());
            }
            bytes.reset();
            return StorePart(job);
          });
}

void Assembler::Assemble(AssembleJob job) {
  auto answer = AnswerFor(job);
  Enqueue(std::move(answer), [this, job = std::move(job)] { return AssembleFrame(job); });
}

void Assembler::Enqueue(Result answer, std::function<Result()> work) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back({std::move(answer), std::move(work)});
  }
  cv_.notify_one();
}

Result Assembler::RunGuarded(Queued& job) {
  // No exception leaves an assembler thread: it becomes the frame's (or part's) failure, which
  // the broker retries like a failed write, so no task waits forever on a frame.
  std::string error;
  try {
    return job.work();
  } catch (const std::exception& e) {
    error = e.what();
  } catch (...) {
    error = "an unknown exception";
  }
  errors_caught_.fetch_add(1, std::memory_order_relaxed);
  Result failed = std::move(job.answer);
  std::visit(
      [&](auto& answer) {
        using Answer = std::decay_t<decltype(answer)>;
        int frame = 0;
        int64_t task_id = 0;
        if constexpr (!std::is_same_v<Answer, InputsGathered>) task_id = answer.task_id;
        if constexpr (requires { answer.frame; }) frame = answer.frame;
        answer.status = Status::Internal("frame " + std::to_string(frame) + ": " + error);
        failed_log_.Log(spdlog::level::err, "exception", "assembler: job {} task {}: {}",
                        answer.job_id, task_id, answer.status.message());
      },
      failed);
  return failed;
}

void Assembler::Run() {
  for (;;) {
    Queued job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      job = std::move(queue_.front());
      queue_.pop_front();
      ++working_;
    }
    const Clock::SteadyTime start = clock_.Steady();
    Result written = RunGuarded(job);
    busy_ns_.fetch_add(
        std::chrono::duration_cast<std::chrono::nanoseconds>(clock_.Steady() - start).count(),
        std::memory_order_relaxed);
    // Counted: every kind of work done but a part stored.
    const bool done = std::visit([](const auto& answer) { return answer.status.ok(); }, written);
    if (done && !std::holds_alternative<PartStored>(written)) {
      frames_assembled_.fetch_add(1, std::memory_order_relaxed);
    }
    try {
      on_done_(std::move(written));
    } catch (const std::exception& e) {
      errors_caught_.fetch_add(1, std::memory_order_relaxed);
      failed_log_.Log(spdlog::level::err, "handoff", "assembler: cannot hand a frame back: {}",
                      e.what());
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      --working_;
    }
    idle_cv_.notify_all();
  }
}

void Assembler::WaitIdle() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [this] { return queue_.empty() && working_ == 0; });
}

Assembler::Counters Assembler::counters() const {
  return {frames_assembled_.load(std::memory_order_relaxed),
          static_cast<double>(busy_ns_.load(std::memory_order_relaxed)) / 1e9,
          errors_caught_.load(std::memory_order_relaxed)};
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

std::string PartsDir(const std::string& output_dir, int frame) {
  return (fs::path(output_dir) / ".parts" / std::to_string(frame)).string();
}

std::string ThumbnailPath(const std::string& output_dir, int frame) {
  return (fs::path(output_dir) / ".thumbnails" / (std::to_string(frame) + ".png")).string();
}

namespace {

// Applies output validation to `done` (a FrameWritten or a PartStored); true when the pixels are
// refused.
template <typename Done>
bool RefusePixels(const std::vector<float>& pixels, int channels, bool accept, int frame,
                  Done* done) {
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

// A frame's parts folder (<output dir>/.parts/<frame>): the farm's own files, mode 0700 like
// everything it keeps (the frames beside it are the job owner's, with the usual modes).
Status MakePartsDir(const std::string& parts_dir) {
  const fs::path dir(parts_dir);
  TSR_RETURN_IF_ERROR(file_io::MakePrivateDirectory(dir.parent_path().string()));
  return file_io::MakePrivateDirectory(parts_dir);
}

// A plugin renderer's tile: float pixels, kept as a float EXR named after its place.
PartStored StorePixelTile(const PartJob& job, PartStored done, PartSpool& spool) {
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
  done.status = MakePartsDir(job.parts_dir);
  if (!done.status.ok()) return done;
  std::string path;
  done.status =
      spool.KeepPixelTile(job.parts_dir, job.task_id, job.frame, a.x0, a.y0, job.pixels, &path);
  if (!done.status.ok()) return done;
  done.files.push_back(path);
  return done;
}

}  // namespace

FrameWritten Assembler::WriteFrame(const FrameJob& job) {
  FrameWritten done = AnswerFor(job);
  const image::ImageBuffer& image = job.image;
  if (RefusePixels(image.pixels, image.channels, job.accept_bad_pixels, job.frame, &done)) {
    return done;
  }
  if (image.width <= 0 || image.height <= 0 || image.channels <= 0 ||
      image.pixels.size() != static_cast<size_t>(image.width) * image.height * image.channels) {
    done.status = Status::InvalidArgument("frame " + std::to_string(job.frame) +
                                          ": image buffer has inconsistent size");
    return done;
  }
  Canvas canvas{image.width,
                image.height,
                image.channels,
                image.channel_names,
                {TileView{0, 0, image.width, image.height, image.pixels.data()}}};
  done.status = WriteOutputs(job.output, job.job_id, job.frame, canvas, &done.files, &done.bytes);
  return done;
}

PartStored Assembler::StorePart(const PartJob& job) {
  PartStored done = AnswerFor(job);
  if (job.accumulation.empty()) return StorePixelTile(job, std::move(done), *spool_);
  // The worker's bytes are checked before they are kept: a corrupt or mismatched part is the
  // task's failure now, not the frame's at assembly time.
  StatusOr<accumulation::RenderedImage> part = accumulation::ParseAccumulation(job.accumulation);
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
  done.status = MakePartsDir(job.parts_dir);
  if (!done.status.ok()) return done;
  // A tile with all its samples is final already: kept as its finished pixels, half the bytes
  // of the sums. A sample part is kept exact (the worker's bytes, just checked: a checkpoint), to
  // be merged with its region's other parts.
  const bool all_samples = a.sample_begin == 0 && a.sample_end < 0;
  std::string path;
  done.status = all_samples ? spool_->KeepTile(job.parts_dir, job.task_id, *part, &path)
                            : spool_->KeepSamples(job.parts_dir, job.task_id, job.accumulation,
                                                  std::move(*part), &path);
  if (!done.status.ok()) return done;
  done.files.push_back(path);
  return done;
}

FrameAssembled Assembler::AssembleFrame(const AssembleJob& job) {
  FrameAssembled done = AnswerFor(job);
  const std::string& dir = done.parts_dir;
  FrameParts parts;
  done.status = spool_->Take(dir, job.parts, job.frame, /*need_floats=*/job.output.exr_float,
                             "frame " + std::to_string(job.frame), &parts);
  if (!done.status.ok()) return done;
  const Canvas canvas{parts.width, parts.height, parts.channels, parts.channel_names, parts.tiles};
  done.status = WriteOutputs(job.output, job.job_id, job.frame, canvas, &done.files, &done.bytes);
  return done;
}

}  // namespace tessera::assembler
