// The worker agent and a full disk (agent.h; the parts are listed in agent.cpp): results
// watched for their size and for storage_full failures, its folders checked for room, and the
// scheduler told (in the heartbeat) while one is full.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "shared/base/disk_space.h"
#include "worker/agent.h"
#include "worker/agent_internal.h"

namespace tessera::worker {
namespace {

using protocol::MessageType;

}  // namespace

void Agent::NoteResult(const std::vector<zmq::message_t>& frames) {
  if (frames.empty() || frames[0].size() != 4) return;
  const auto type = static_cast<MessageType>(static_cast<const uint8_t*>(frames[0].data())[3]);
  if (type == MessageType::kFrameResult || type == MessageType::kFileResult) {
    uint64_t bytes = 0;
    for (const zmq::message_t& f : frames) bytes += f.size();
    largest_result_ = std::max(largest_result_, bytes);
    return;
  }
  if (type != MessageType::kTaskFailed) return;
  StatusOr<protocol::Envelope> env = agent_internal::DecodeCopy(frames);
  if (!env.ok()) return;
  StatusOr<protocol::TaskFailed> failed = env->As<protocol::TaskFailed>();
  if (!failed.ok() || failed->failure_class != protocol::kFailureStorageFull) return;
  // Before the failure leaves: the heartbeat that says so reaches the scheduler first, so the
  // task it requeues is not offered to this worker again.
  CheckDisk(Clock::now());
}

std::string Agent::FullFolder() const {
  // Room enough: max(64 MiB, twice the largest result so far), at most half the filesystem.
  const uint64_t wanted = std::max<uint64_t>(uint64_t{64} << 20, 2 * largest_result_);
  for (const std::string& dir : {spool_.dir(), cache_.dir(), options_.render.data_dir}) {
    if (dir.empty()) continue;
    StatusOr<disk_space::Room> room = disk_space::RoomFor(dir);
    if (!room.ok()) continue;
    const uint64_t enough =
        room->total_bytes > 0 ? std::min(wanted, room->total_bytes / 2) : wanted;
    if (room->read_only) return "read-only filesystem: " + dir;
    if (room->free_bytes < enough) {
      return "no space left on device: " + dir + " (" + disk_space::Describe(*room) + ")";
    }
  }
  return "";
}

void Agent::CheckDisk(Clock::time_point now) {
  next_disk_check_ = now + kDiskCheckInterval;
  const std::string full = FullFolder();
  if (full == disk_full_) return;
  if (full.empty()) {
    spdlog::info("disk space is back ({} was full): taking tasks again", disk_full_);
  } else if (disk_full_.empty()) {
    spdlog::warn("{}: no new tasks until there is room (checked every {} s)", full,
                 kDiskCheckInterval.count() / 1000);
  }
  disk_full_ = full;
  if (state_ == LinkState::kReady) SendHeartbeat(now);  // the scheduler knows at once
}

}  // namespace tessera::worker
