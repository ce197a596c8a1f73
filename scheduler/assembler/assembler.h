#pragma once
// The assembler turns frame results into output files (linear EXR + sRGB PNG preview) on its own
// thread pool, so the broker's poll loop never waits on image encoding or disk I/O.
//
// Split frames: each part (a tile and/or sample range, as the path tracer's exact accumulation;
// or a plugin renderer's tile as float pixels) is checked against what its task was assigned and
// kept in the frame's parts directory (<output dir>/.parts/<frame>/), written aside and renamed:
// a path tracer tile with all its samples as its finished float pixels (<task id>.tile), a
// sample part as its exact accumulation (<task id>.acc), a plugin tile as a float EXR
// (<task id>_<x0>_<y0>.exr). As the parts arrive -- while the frame's other parts still render --
// each tile region is also resolved in memory to what the outputs are made of (its pixels as the
// half floats a half EXR stores, and the 8-bit sRGB preview's bytes) once its sample parts cover
// [0, n): the merge is exact integer sums, so a region resolves on its own. When the broker has
// every part of a frame, Assemble() only pastes those and encodes the files -- bit-identical to
// the frame rendered whole -- and the broker removes the parts once the frame's last part is
// recorded done. The memory is a cache of the files, never the only copy: a region it lacks (a
// restart, the memory budget, a part stored twice, a float EXR) is merged from its files, so a
// restart at any point loses nothing, and assembling twice writes the same frame.
//
// Threads: Submit(), SubmitPart(), Assemble(), StorePart(), AssembleFrame() and counters() may be
// called from any thread; `on_done` runs on an assembler thread.
//
// Time is an input (shared/base/clock.h): the busy time it meters is read from the clock it is
// given, the broker's.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <variant>
#include <vector>
#include <zmq.hpp>

#include "shared/base/clock.h"
#include "shared/base/logging.h"
#include "shared/base/status.h"
#include "shared/images/image_io.h"
#include "shared/wire/protocol.h"

namespace tessera::blobs {
class BlobStore;
}

namespace tessera::assembler {

// Output validation: what is wrong with a frame's (or part's) pixels, or "" when nothing is:
// NaN or infinite values anywhere, or a beauty (first three channels) that is entirely black.
std::string PixelProblem(const std::vector<float>& pixels, int channels);

// Where and how a job's frames are written.
struct FrameOutput {
  std::string dir;
  std::string pattern;               // "name.####"
  std::vector<std::string> formats;  // "exr", "png", "jpg", "tif"
  bool exr_float = false;            // EXR channels as 32-bit float (else half)
};

struct FrameJob {
  int64_t job_id = 0;
  int64_t task_id = 0;
  int attempt = 0;
  int frame = 0;
  FrameOutput output;
  image::ImageBuffer image;
  // Pixels PixelProblem() objects to: refused (FrameWritten::bad_pixels), or -- once a task was
  // already sent back for them -- written anyway, with FrameWritten::flag saying why.
  bool accept_bad_pixels = false;
};

// One part of a split frame, as a worker sent it.
struct PartJob {
  int64_t job_id = 0;
  int64_t task_id = 0;
  int attempt = 0;
  int frame = 0;
  std::string parts_dir;           // PartsDir(output_dir, frame)
  protocol::FramePart assigned;    // what the task was told to render
  std::string accumulation;        // accumulation::SerializeAccumulation bytes, or
  image::ImageBuffer pixels;       // a plugin renderer's tile (when accumulation is empty)
  bool accept_bad_pixels = false;  // as FrameJob's
};

// A file a task returned (a command's `outputs: files`): written to dir/name (name checked by the
// broker: relative, no '..'), aside and renamed, folders made as needed.
struct FileJob {
  int64_t job_id = 0;
  int64_t task_id = 0;
  int attempt = 0;
  std::string dir;
  std::string name;
};

// Other steps' files, taken as a step's input, stored in the blob store for workers to fetch
// like any job asset: the written frames of a step (plugin.yaml input_frames, e.g. an encode) --
// each a plain PNG file -- and the files earlier steps of an OpenJD job bundle returned (every
// plain file under the folders). Nothing is read through a link, no file is larger than
// kMaxInputFrameBytes, and at most spec::kMaxAssets files are taken.
inline constexpr int64_t kMaxInputFrameBytes = int64_t{1} << 30;
struct InputsJob {
  int64_t job_id = 0;
  std::vector<std::pair<std::string, std::string>> files;  // asset name, path of the frame file
  // Folder (absolute) -> the asset name its files get under it ("openjd/data/0/out").
  std::vector<std::pair<std::string, std::string>> folders;
  // Assets the result starts from (a bundle's attached files); taken files win over them.
  std::map<std::string, std::string> base;
  blobs::BlobStore* blobs = nullptr;
};

// Every part of one frame is stored: merge them and write the frame.
struct AssembleJob {
  int64_t job_id = 0;
  int64_t task_id = 0;  // the frame's last part, recorded done once the frame is written (0: none)
  int attempt = 0;
  int frame = 0;
  FrameOutput output;
  int parts = 0;  // how many parts make the frame
};

// What the assembler answers: one result type per kind of work, handed to the broker's callback
// as a Result. Each says what the work was about and whether it was done (status: ok, or why
// not; a write that failed for want of space has StatusCode::kStorageFull).

// Submit: a whole frame written as the job's output files.
struct FrameWritten {
  int64_t job_id = 0;
  int64_t task_id = 0;
  int attempt = 0;
  int frame = 0;
  Status status;
  std::vector<std::string> files;
  bool bad_pixels = false;  // status says the pixels were refused (PixelProblem)
  std::string flag;         // written despite PixelProblem: the problem
  uint64_t bytes = 0;       // the bytes its files take (the space the next frame will want)
};

// SubmitPart: one part of a split frame kept in the frame's parts folder.
struct PartStored {
  int64_t job_id = 0;
  int64_t task_id = 0;
  int attempt = 0;
  int frame = 0;
  Status status;
  std::vector<std::string> files;  // the part's file
  bool bad_pixels = false;         // as FrameWritten's
  std::string flag;
};

// Assemble: a split frame merged from its parts and written as the job's output files.
struct FrameAssembled {
  int64_t job_id = 0;
  int64_t task_id = 0;  // AssembleJob::task_id
  int attempt = 0;
  int frame = 0;
  Status status;
  std::vector<std::string> files;
  std::string parts_dir;  // where the frame's parts are
  uint64_t bytes = 0;     // as FrameWritten's
};

// SubmitFile: a file a task returned, written into the job's output folder.
struct FileWritten {
  int64_t job_id = 0;
  int64_t task_id = 0;
  int attempt = 0;
  std::string name;
  Status status;
  uint64_t bytes = 0;
};

// GatherInputs: other steps' files stored in the blob store as a step's inputs.
struct InputsGathered {
  int64_t job_id = 0;
  Status status;                              // every file stored, or the first that could not be
  std::map<std::string, std::string> inputs;  // asset name -> blob SHA-256
  uint64_t bytes = 0;
};

using Result = std::variant<FrameWritten, PartStored, FrameAssembled, FileWritten, InputsGathered>;

// Where a split frame's parts wait for each other.
std::string PartsDir(const std::string& output_dir, int frame);
// The dashboard's thumbnail of a written frame (kThumbnailSide px on its longer side).
std::string ThumbnailPath(const std::string& output_dir, int frame);
inline constexpr int kThumbnailSide = 256;

class PartSpool;

class Assembler {
 public:
  // Memory for the resolved tiles of the frames being assembled: a 4K frame with 11 channels
  // takes about 210 MB (another 730 MB of exact sums while its tiles are split into sample
  // parts). Beyond it the frames touched longest ago are assembled from their files instead.
  static constexpr size_t kDefaultCacheBytes = size_t{1} << 30;

  // `clock` meters its threads' busy time; it must outlive the assembler.
  Assembler(int threads, std::function<void(Result)> on_done, const Clock& clock,
            size_t cache_bytes = kDefaultCacheBytes);
  ~Assembler();  // finishes queued frames, then joins
  Assembler(const Assembler&) = delete;
  Assembler& operator=(const Assembler&) = delete;

  void Submit(FrameJob job);
  void SubmitPart(PartJob job);
  // As above, with the pixels (or the accumulation) still the worker's bytes: they are copied
  // into the job on an assembler thread. A frame may be hundreds of MiB, and touching that much
  // fresh memory on the broker thread took seconds on a VM, long enough to miss heartbeats.
  void Submit(FrameJob job, zmq::message_t payload);
  void SubmitPart(PartJob job, zmq::message_t payload);
  void Assemble(AssembleJob job);
  void SubmitFile(FileJob job, zmq::message_t payload);
  void GatherInputs(InputsJob job);
  // Returns once every job submitted so far is written and handed back (the broker, before it
  // turns read-only: nothing of a rolled-back pass is written after that).
  void WaitIdle();

  // What this assembler has done since it started (for /metrics).
  struct Counters {
    uint64_t frames_assembled = 0;  // output frames written: whole, or merged from their parts
    double busy_seconds = 0;        // time its threads spent writing frames and storing parts
    uint64_t errors_caught = 0;     // exceptions caught on its threads (each failed its frame)
  };
  Counters counters() const;

  // The same work, synchronously on the calling thread (also used by tests and benchmarks).
  static FrameWritten WriteFrame(const FrameJob& job);
  static FileWritten WriteFile(const FileJob& job, const zmq::message_t& bytes);
  static InputsGathered StoreInputs(const InputsJob& job);
  PartStored StorePart(const PartJob& job);
  FrameAssembled AssembleFrame(const AssembleJob& job);

 private:
  struct Queued {
    Result answer;  // what the work is about: answered with an error if it throws
    std::function<Result()> work;
  };
  void Enqueue(Result answer, std::function<Result()> work);
  Result RunGuarded(Queued& job);
  void Run();

  std::function<void(Result)> on_done_;
  const Clock& clock_;
  std::unique_ptr<PartSpool> spool_;  // split frames' parts until their frame is assembled
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;  // a job finished (WaitIdle)
  std::deque<Queued> queue_;
  int working_ = 0;  // jobs taken off queue_ and not yet handed back; guarded by mu_
  bool stopping_ = false;
  std::vector<std::thread> threads_;
  std::atomic<uint64_t> frames_assembled_{0};
  std::atomic<uint64_t> busy_ns_{0};
  std::atomic<uint64_t> errors_caught_{0};
  logging::RateLimitedLog failed_log_;
};

}  // namespace tessera::assembler
