#pragma once
// The assembler turns frame results into output files (linear EXR + sRGB PNG preview) on its own
// thread pool, so the broker's poll loop never waits on image encoding or disk I/O.
//
// Threads: Submit() may be called from any thread; `on_written` runs on an assembler thread.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "shared/image_io.h"
#include "shared/status.h"

namespace tessera::assembler {

struct FrameJob {
  int64_t job_id = 0;
  int64_t task_id = 0;
  int attempt = 0;
  int frame = 0;
  std::string output_dir;
  std::string pattern;               // "name.####"
  std::vector<std::string> formats;  // "exr", "png"
  image::ImageBuffer image;
};

struct FrameWritten {
  int64_t job_id = 0;
  int64_t task_id = 0;
  int attempt = 0;
  int frame = 0;
  Status status;  // ok, or why the frame could not be written
  std::vector<std::string> files;
};

class Assembler {
 public:
  Assembler(int threads, std::function<void(FrameWritten)> on_written);
  ~Assembler();  // finishes queued frames, then joins
  Assembler(const Assembler&) = delete;
  Assembler& operator=(const Assembler&) = delete;

  void Submit(FrameJob job);

  // Writes one frame synchronously (also used by tests).
  static FrameWritten WriteFrame(const FrameJob& job);

 private:
  void Run();

  std::function<void(FrameWritten)> on_written_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<FrameJob> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace tessera::assembler
