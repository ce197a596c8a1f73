#include "worker/result_spool.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "shared/base/file_io.h"

namespace tessera::worker {

namespace fs = std::filesystem;

namespace {

constexpr const char* kFinalMarker = "final";

// A spool file mapped into memory; unmapped when the last frame that points into it is closed.
// (Acknowledged files are unlinked, never truncated, so a mapping stays valid while in use.)
struct Mapping {
  void* base = MAP_FAILED;
  size_t length = 0;
  ~Mapping() {
    if (base != MAP_FAILED) ::munmap(base, length);
  }
};

// Frames above this size point into the mapping instead of being copied.
constexpr uint64_t kMappedFrameBytes = 64 * 1024;

// Reads a spooled message without copying its payload: a re-sent result can be hundreds of MiB,
// and reading it into fresh memory on the I/O thread held heartbeats back for seconds (long
// enough for the scheduler to drop the worker, which then re-sent it again). The piece sender
// reads the mapping a piece at a time instead.
StatusOr<std::vector<zmq::message_t>> ReadMessage(const fs::path& path) {
  const Status bad = Status::Internal("bad spool file " + path.string());
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Internal("cannot open spool file " + path.string());
  struct stat st {};
  auto mapping = std::make_shared<Mapping>();
  if (::fstat(fd, &st) == 0 && st.st_size > 0) {
    mapping->length = static_cast<size_t>(st.st_size);
    mapping->base = ::mmap(nullptr, mapping->length, PROT_READ, MAP_PRIVATE, fd, 0);
  }
  ::close(fd);
  if (mapping->base == MAP_FAILED) return bad;
  const auto* data = static_cast<const char*>(mapping->base);
  const uint64_t length = mapping->length;
  uint64_t at = 0;
  auto read_int = [&](auto* value) {
    if (length - at < sizeof(*value)) return false;
    std::memcpy(value, data + at, sizeof(*value));
    at += sizeof(*value);
    return true;
  };
  uint32_t count = 0;
  if (!read_int(&count) || count == 0 || count > 8) return bad;
  std::vector<zmq::message_t> frames;
  for (uint32_t i = 0; i < count; ++i) {
    uint64_t size = 0;
    if (!read_int(&size)) return bad;
    if (size > length - at) return Status::Internal("truncated spool file " + path.string());
    if (size <= kMappedFrameBytes) {
      frames.emplace_back(data + at, size);
    } else {
      // The hint keeps the mapping alive until ZeroMQ (or the sender) closes the frame.
      auto* hold = new std::shared_ptr<Mapping>(mapping);
      frames.emplace_back(
          const_cast<char*>(data + at), size,
          [](void*, void* hint) { delete static_cast<std::shared_ptr<Mapping>*>(hint); }, hold);
    }
    at += size;
  }
  return frames;
}

}  // namespace

std::string ResultSpool::FolderOf(const protocol::TaskRef& ref) const {
  return dir_ + "/" + std::to_string(ref.task_id) + "-" + std::to_string(ref.attempt);
}

Status ResultSpool::Open() {
  // Rendered frames and logs wait here: the worker's user's alone (0700, files 0600).
  if (Status s = file_io::MakePrivateDirectory(dir_); !s.ok()) {
    return Status::Internal("cannot create the result spool: " + s.message());
  }
  std::error_code ec;
  for (const auto& folder : fs::directory_iterator(dir_, ec)) {
    protocol::TaskRef ref;
    if (std::sscanf(folder.path().filename().c_str(), "%ld-%d", &ref.task_id, &ref.attempt) != 2) {
      continue;
    }
    Entry entry;
    for (const auto& file : fs::directory_iterator(folder.path(), ec)) {
      const std::string name = file.path().filename().string();
      if (name == kFinalMarker) entry.final = true;
      if (file.path().extension() == ".msg") {
        entry.next_seq = std::max(entry.next_seq, std::atoi(name.c_str()) + 1);
      }
    }
    if (!entry.final) {
      // The render was cut short with the process: its partial results are of no use (the
      // scheduler requeues the attempt).
      fs::remove_all(folder.path(), ec);
      continue;
    }
    entries_[{ref.task_id, ref.attempt}] = entry;
  }
  if (!entries_.empty()) {
    spdlog::info("result spool {}: {} finished task(s) still to deliver", dir_, entries_.size());
  }
  return Status::Ok();
}

bool IsFinalResult(const std::vector<zmq::message_t>& frames) {
  if (frames.empty() || frames[0].size() != 4) return false;
  const auto type =
      static_cast<protocol::MessageType>(static_cast<const uint8_t*>(frames[0].data())[3]);
  return type == protocol::MessageType::kTaskDone || type == protocol::MessageType::kTaskFailed ||
         type == protocol::MessageType::kHandback;
}

Status ResultSpool::Add(const protocol::TaskRef& ref, const std::vector<zmq::message_t>& frames,
                        bool final) {
  int seq = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    seq = entries_[{ref.task_id, ref.attempt}].next_seq++;
  }
  const std::string folder = FolderOf(ref);
  TSR_RETURN_IF_ERROR(file_io::MakePrivateDirectory(folder));
  char name[32];
  std::snprintf(name, sizeof(name), "%06d.msg", seq);
  const std::string path = folder + "/" + name;
  // The encoded message: a u32 frame count, then each frame as a u64 size and its bytes.
  const uint32_t count = static_cast<uint32_t>(frames.size());
  std::vector<uint64_t> sizes;
  sizes.reserve(frames.size());
  std::vector<std::string_view> pieces = {
      std::string_view(reinterpret_cast<const char*>(&count), sizeof(count))};
  for (const zmq::message_t& f : frames) sizes.push_back(f.size());
  for (size_t i = 0; i < frames.size(); ++i) {
    pieces.emplace_back(reinterpret_cast<const char*>(&sizes[i]), sizeof(uint64_t));
    pieces.emplace_back(frames[i].data<char>(), frames[i].size());
  }
  TSR_RETURN_IF_ERROR(file_io::WriteAtomically(path, pieces, 0600));
  if (final) {
    const std::string marker = folder + "/" + kFinalMarker;
    const int fd = ::open(marker.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return Status::Internal("cannot write " + marker + ": " + std::strerror(errno));
    (void)!::write(fd, "\n", 1);
    ::close(fd);
    std::lock_guard<std::mutex> lock(mu_);
    entries_[{ref.task_id, ref.attempt}].final = true;
  }
  return Status::Ok();
}

bool ResultSpool::empty() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.empty();
}

void ResultSpool::Ack(const protocol::TaskRef& ref) {
  std::lock_guard<std::mutex> lock(mu_);
  if (entries_.erase({ref.task_id, ref.attempt}) == 0) return;
  std::error_code ec;
  fs::remove_all(FolderOf(ref), ec);
}

std::vector<protocol::TaskRef> ResultSpool::Delivering() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<protocol::TaskRef> refs;
  for (const auto& [key, entry] : entries_) {
    if (entry.final) refs.push_back({key.first, key.second});
  }
  return refs;
}

std::vector<std::vector<zmq::message_t>> ResultSpool::Replay() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::vector<zmq::message_t>> messages;
  for (const auto& [key, entry] : entries_) {
    const std::string folder = FolderOf({key.first, key.second});
    std::vector<fs::path> files;
    std::error_code ec;
    for (const auto& file : fs::directory_iterator(folder, ec)) {
      if (file.path().extension() == ".msg") files.push_back(file.path());
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& file : files) {
      StatusOr<std::vector<zmq::message_t>> frames = ReadMessage(file);
      if (!frames.ok()) {
        spdlog::error("{}", frames.status().message());
        continue;
      }
      messages.push_back(std::move(*frames));
    }
  }
  return messages;
}

}  // namespace tessera::worker
