#include "scheduler/assembler/assembler.h"

#include <OpenImageIO/imageio.h>
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

#include "scheduler/assembler/part_spool.h"
#include "scheduler/blobs/blob_store.h"
#include "shared/base/disk_space.h"
#include "shared/base/file_io.h"
#include "shared/images/accumulation.h"
#include "shared/images/image_oiio.h"
#include "shared/jobs/job_file.h"

namespace tessera::assembler {

namespace OIIO = OIIO_NAMESPACE;
namespace fs = std::filesystem;

Assembler::Assembler(int threads, std::function<void(Result)> on_done, size_t cache_bytes)
    : on_done_(std::move(on_done)), spool_(std::make_unique<PartSpool>(cache_bytes)) {
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
    const auto start = std::chrono::steady_clock::now();
    Result written = RunGuarded(job);
    busy_ns_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::steady_clock::now() - start)
                           .count(),
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

// ---- Encoding the outputs ----------------------------------------------------------------------

// Lossless either way. Encoding is most of the work after a split frame's last part, which is to
// stay under 1 % of a long frame's render time: ZIP one scanline per block at zlib level 3
// (OpenEXR's default is 16 scanlines at level 4) takes ~30 % less CPU and about half the time on
// two cores, for files ~6 % larger; the preview PNG at level 3 (libpng's default is 6) a third of
// the time for ~7 % more bytes (docs/performance.md). Whole frames are written the same way.
constexpr const char* kExrCompression = "zips:3";
constexpr int kPngCompressionLevel = 3;
// Rows per write: that many blocks for OpenEXR's threads to compress at once.
constexpr int kBandRows = 256;
// Frames this large write their 8-bit files beside the EXR, on a second thread.
constexpr int64_t kConcurrentPixels = int64_t{1} << 20;

// A frame as tiles of finished pixels that cover it exactly once.
struct Canvas {
  int width = 0;
  int height = 0;
  int channels = 0;
  std::vector<std::string> channel_names;  // empty: OIIO's defaults (R, G, B, A, ...)
  std::vector<TileView> tiles;
};

// Calls span(tile, row in tile, x in frame, y in frame) for every tile row within [y0, y1).
template <typename F>
void ForEachSpan(const Canvas& c, int y0, int y1, F span) {
  for (const TileView& t : c.tiles) {
    for (int y = std::max(y0, t.y0); y < std::min(y1, t.y0 + t.height); ++y) {
      span(t, static_cast<size_t>(y - t.y0) * t.width, t.x0, y);
    }
  }
}

// Linear EXR, half floats unless `exr_float`, written a band of rows at a time from the tiles.
Status EncodeExr(const std::string& path, const Canvas& c, bool exr_float) {
  const OIIO::TypeDesc type = exr_float ? OIIO::TypeDesc::FLOAT : OIIO::TypeDesc::HALF;
  TSR_ASSIGN_OR_RETURN(
      OIIO::ImageSpec spec,
      image::ExrSpec(path, c.width, c.height, c.channels, c.channel_names, type, kExrCompression));
  const size_t value = type.size();
  const size_t row = static_cast<size_t>(c.width) * c.channels;
  std::vector<std::byte> band(row * std::min(kBandRows, c.height) * value);
  return image::WriteAtomically(path, spec, [&](OIIO::ImageOutput& out) {
    for (int y0 = 0; y0 < c.height; y0 += kBandRows) {
      const int y1 = std::min(c.height, y0 + kBandRows);
      ForEachSpan(c, y0, y1, [&](const TileView& t, size_t src, int x, int y) {
        const size_t n = static_cast<size_t>(t.width) * c.channels;
        std::byte* dst =
            band.data() + ((y - y0) * row + static_cast<size_t>(x) * c.channels) * value;
        if (exr_float) {
          std::memcpy(dst, t.pixels + src * c.channels, n * value);
        } else if (t.half) {
          std::memcpy(dst, t.half + src * c.channels, n * value);
        } else {
          ToHalf(t.pixels + src * c.channels, n, reinterpret_cast<uint16_t*>(dst));
        }
      });
      if (!out.write_scanlines(y0, y1, 0, type, band.data())) return false;
    }
    return true;
  });
}

// The frame's 8-bit sRGB bytes (beauty channels only), as shared/image_io's WriteSrgb8 makes them.
std::vector<uint8_t> PreviewBytes(const Canvas& c) {
  const int out = PreviewChannels(c.channels);
  std::vector<uint8_t> bytes(static_cast<size_t>(c.width) * c.height * out);
  ForEachSpan(c, 0, c.height, [&](const TileView& t, size_t src, int x, int y) {
    uint8_t* dst = &bytes[(static_cast<size_t>(y) * c.width + x) * out];
    if (t.srgb) {
      std::memcpy(dst, t.srgb + src * out, static_cast<size_t>(t.width) * out);
    } else {
      ToSrgb(t.pixels + src * c.channels, t.width, c.channels, dst);
    }
  });
  return bytes;
}

// The dashboard's thumbnail: the preview box-filtered in linear light to about twice the
// thumbnail's size, from a grid of samples in each box (every `step`-th pixel of every `step`-th
// row, nine or more per box) so it costs little at any frame size; image_io then scales it the
// rest of the way with a proper filter.
Status WriteThumbnail(const std::string& path, const Canvas& c, const std::vector<uint8_t>& bytes) {
  static const std::vector<float> kLinear = [] {
    std::vector<float> table(256);
    for (int i = 0; i < 256; ++i) table[i] = image::SrgbToLinear(i / 255.0f);
    return table;
  }();
  const int channels = PreviewChannels(c.channels);
  const int box = std::max(1, std::max(c.width, c.height) / (2 * kThumbnailSide));
  const int step = std::max(1, box / 3);
  image::ImageBuffer small;
  small.width = (c.width + box - 1) / box;
  small.height = (c.height + box - 1) / box;
  small.channels = channels;
  small.pixels.assign(static_cast<size_t>(small.width) * small.height * channels, 0.0f);
  // Each box's samples start at its corner: every box has one at least.
  auto samples_in = [&](int cell, int size) {
    return std::pair(cell * box, std::min(size, (cell + 1) * box));
  };
  for (int cy = 0; cy < small.height; ++cy) {
    for (int cx = 0; cx < small.width; ++cx) {
      float* dst = &small.pixels[(static_cast<size_t>(cy) * small.width + cx) * channels];
      int count = 0;
      const auto [y0, y1] = samples_in(cy, c.height);
      const auto [x0, x1] = samples_in(cx, c.width);
      for (int y = y0; y < y1; y += step) {
        const uint8_t* src = &bytes[(static_cast<size_t>(y) * c.width + x0) * channels];
        for (int x = x0; x < x1; x += step, src += step * channels, ++count) {
          for (int ch = 0; ch < channels; ++ch) dst[ch] += kLinear[src[ch]];
        }
      }
      for (int ch = 0; ch < channels; ++ch) dst[ch] /= static_cast<float>(count);
    }
  }
  return image::WriteThumbnail(path, small, kThumbnailSide);
}

// The frame's 8-bit files (PNG, JPEG, TIFF by extension) and its thumbnail.
Status WritePreviews(const std::vector<std::string>& paths, const std::string& thumbnail,
                     const Canvas& c, int64_t job_id, int frame) {
  const std::vector<uint8_t> bytes = PreviewBytes(c);
  OIIO::ImageSpec spec(c.width, c.height, PreviewChannels(c.channels), OIIO::TypeDesc::UINT8);
  spec.attribute("png:compressionLevel", kPngCompressionLevel);
  for (const std::string& path : paths) {
    TSR_RETURN_IF_ERROR(image::WriteAtomically(path, spec, [&](OIIO::ImageOutput& out) {
      return out.write_image(OIIO::TypeDesc::UINT8, bytes.data());
    }));
  }
  // Only for people to look at: a frame whose thumbnail cannot be written is still done.
  if (Status s = WriteThumbnail(thumbnail, c, bytes); !s.ok()) {
    spdlog::warn("job {} frame {}: no thumbnail: {}", job_id, frame, s.message());
  }
  return Status::Ok();
}

// Writes the frame in every format the job asks for; `files` gets their paths in that order.
Status WriteOutputs(const FrameOutput& output, int64_t job_id, int frame, const Canvas& c,
                    std::vector<std::string>* files, uint64_t* bytes) {
  std::error_code ec;
  fs::create_directories(output.dir, ec);
  if (ec && disk_space::IsFullErrno(ec.value())) {
    return disk_space::FullError("create", output.dir, ec.value());
  }
  if (ec) return Status::Internal("cannot create " + output.dir + ": " + ec.message());
  std::vector<std::string> paths, previews;
  bool exr = false;
  for (const std::string& format : output.formats) {
    paths.push_back(
        (fs::path(output.dir) / spec::OutputFileName(output.pattern, frame, format)).string());
    if (format == "exr") {
      exr = true;
    } else {
      previews.push_back(paths.back());
    }
  }
  const std::string thumbnail = ThumbnailPath(output.dir, frame);
  Status preview_status;
  auto write_previews = [&] {
    preview_status = WritePreviews(previews, thumbnail, c, job_id, frame);
  };
  std::thread beside;
  if (exr && int64_t{c.width} * c.height >= kConcurrentPixels) {
    beside = std::thread(write_previews);
  }
  Status exr_status;
  for (size_t i = 0; i < paths.size() && exr; ++i) {
    if (output.formats[i] == "exr") exr_status = EncodeExr(paths[i], c, output.exr_float);
  }
  if (beside.joinable()) {
    beside.join();
  } else if (exr_status.ok()) {
    // Not after a failed EXR: the frame is written again whole, and a preview written now would
    // be written twice (on a full disk it may fit in the room the failed EXR gave back).
    write_previews();
  }
  TSR_RETURN_IF_ERROR(exr_status);
  TSR_RETURN_IF_ERROR(preview_status);
  *files = std::move(paths);
  if (bytes != nullptr) {
    *bytes = 0;
    for (const std::string& file : *files) *bytes += fs::file_size(file, ec);
  }
  return Status::Ok();
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
