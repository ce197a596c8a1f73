#include "scheduler/assembler/assembler.h"

#include <filesystem>

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
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
}

void Assembler::Run() {
  for (;;) {
    FrameJob job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    on_written_(WriteFrame(job));
  }
}

FrameWritten Assembler::WriteFrame(const FrameJob& job) {
  FrameWritten done{job.job_id, job.task_id, job.attempt, job.frame, Status::Ok(), {}};
  std::error_code ec;
  std::filesystem::create_directories(job.output_dir, ec);
  if (ec) {
    done.status = Status::Internal("cannot create " + job.output_dir + ": " + ec.message());
    return done;
  }
  for (const std::string& format : job.formats) {
    std::string path = (std::filesystem::path(job.output_dir) /
                        spec::OutputFileName(job.pattern, job.frame, format))
                           .string();
    Status s = format == "exr" ? image::WriteExr(path, job.image)
                               : image::WritePngPreview(path, job.image);
    if (!s.ok()) {
      done.status = s;
      return done;
    }
    done.files.push_back(path);
  }
  return done;
}

}  // namespace tessera::assembler
