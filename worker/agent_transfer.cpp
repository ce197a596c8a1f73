// The worker agent's transfers (agent.h; the parts are listed in agent.cpp): an assignment's
// asset blobs fetched from the scheduler into the cache, a window of pieces at a time, and
// result messages sent in order, a large one in acknowledged pieces.
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "shared/base/disk_space.h"
#include "worker/agent.h"
#include "worker/agent_internal.h"

namespace tessera::worker {
namespace {

using agent_internal::RefName;
using protocol::MessageType;

// A write into the asset cache (its .part file at `part`) that failed with `err`.
Status CacheWriteError(const std::string& part, int err) {
  return disk_space::IsFullErrno(err)
             ? disk_space::FullError("write the asset cache", part, err)
             : Status::Internal("cannot write the asset cache: " + std::string(std::strerror(err)));
}

}  // namespace

std::map<std::string, std::string> Agent::BlobsOf(const protocol::Assign& assign) {
  std::map<std::string, std::string> blobs = assign.assets;
  if (!assign.resume_checkpoint.empty()) blobs[kCheckpointBlob] = assign.resume_checkpoint;
  return blobs;
}

void Agent::StartAssets(Slot& slot) {
  const std::map<std::string, std::string> blobs = BlobsOf(slot.runner->assign());
  for (const auto& [path, hash] : blobs) {
    cache_.Hold(hash);
    if (cache_.Lookup(hash)) continue;
    slot.awaiting.insert(hash);
    fetches_.try_emplace(hash);
  }
  if (blobs.empty()) return;
  if (slot.awaiting.empty()) return GiveAssets(slot);
  spdlog::info("{}: fetching {} of its {} asset(s) from the scheduler", RefName(slot.runner->ref()),
               slot.awaiting.size(), blobs.size());
  PumpFetches();
}

void Agent::GiveAssets(Slot& slot) {
  std::map<std::string, std::string> files;
  for (const auto& [path, hash] : BlobsOf(slot.runner->assign())) {
    std::optional<std::string> file = cache_.Lookup(hash);
    if (!file) {
      // Damaged on disk since it arrived: fetch it again.
      slot.awaiting.insert(hash);
      fetches_.try_emplace(hash);
      continue;
    }
    files[path] = *file;
  }
  if (slot.awaiting.empty()) {
    slot.runner->ProvideAssets(Status::Ok(), std::move(files));
  } else {
    PumpFetches();
  }
}

void Agent::PumpFetches() {
  if (state_ != LinkState::kReady) return;
  for (auto& [hash, f] : fetches_) {
    if (f.fd < 0) {
      f.fd =
          ::open(cache_.PartPathOf(hash).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (f.fd < 0) {
        const int err = errno;
        EndFetch(hash, CacheWriteError(cache_.PartPathOf(hash), err));
        return PumpFetches();  // fetches_ changed under the loop
      }
    }
    // The first piece tells the size; then a window of pieces is kept in flight.
    const int64_t limit = f.total < 0 ? protocol::kPieceBytes : f.total;
    while (f.requested < limit &&
           f.requested - f.received < protocol::kPieceWindow * protocol::kPieceBytes) {
      const int64_t length = std::min(protocol::kPieceBytes, limit - f.requested);
      std::vector<zmq::message_t> frames = protocol::Encode(
          MessageType::kBlobRequest, protocol::BlobRequest{hash, f.requested, length});
      if (!TrySend(frames)) return;
      f.requested += length;
    }
  }
}

void Agent::OnBlobData(protocol::Envelope& env) {
  StatusOr<protocol::BlobData> data = env.As<protocol::BlobData>();
  if (!data.ok()) return;
  auto it = fetches_.find(data->hash);
  if (it == fetches_.end()) return;
  BlobFetch& f = it->second;
  if (!data->error.empty()) {
    return EndFetch(data->hash,
                    Status::Unavailable("the scheduler cannot serve it: " + data->error));
  }
  if (data->offset != f.received || f.fd < 0) return;  // from before a reconnect
  f.total = data->total;
  const char* bytes = env.payload.data<char>();
  size_t left = env.payload.size();
  int64_t at = data->offset;
  while (left > 0) {
    ssize_t n = ::pwrite(f.fd, bytes, left, at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      return EndFetch(data->hash, CacheWriteError(cache_.PartPathOf(data->hash), err));
    }
    bytes += n;
    left -= static_cast<size_t>(n);
    at += n;
  }
  f.received += static_cast<int64_t>(env.payload.size());
  if (f.received < f.total) return PumpFetches();
  ::close(f.fd);
  f.fd = -1;
  Status kept = cache_.Commit(data->hash);
  if (!kept.ok() && f.attempts < 2) {
    spdlog::warn("asset {}; fetching it again", kept.message());
    f = BlobFetch{};
    f.attempts = 2;
    return PumpFetches();
  }
  EndFetch(data->hash, kept);
  PumpFetches();
}

void Agent::EndFetch(const std::string& hash, const Status& status) {
  auto it = fetches_.find(hash);
  if (it != fetches_.end()) {
    if (it->second.fd >= 0) ::close(it->second.fd);
    fetches_.erase(it);
  }
  for (Slot& slot : slots_) {
    if (!slot.awaiting.erase(hash)) continue;
    if (!status.ok()) {
      std::string path = hash;
      for (const auto& [p, h] : BlobsOf(slot.runner->assign())) {
        if (h == hash) path = p == kCheckpointBlob ? "checkpoint" : p;
      }
      slot.awaiting.clear();
      slot.runner->ProvideAssets(Status(status.code(), "asset " + path + ": " + status.message()),
                                 {});
    } else if (slot.awaiting.empty()) {
      GiveAssets(slot);
    }
  }
}

void Agent::SendResult(std::vector<zmq::message_t> frames) {
  if (state_ != LinkState::kReady) return;  // the spool re-sends it after the next kWelcome
  pending_.push_back(std::move(frames));
  FlushPending();
}

bool Agent::TrySend(std::vector<zmq::message_t>& frames) {
  if (!dealer_) return false;
  try {
    for (size_t i = 0; i < frames.size(); ++i) {
      zmq::send_flags flags = zmq::send_flags::dontwait;
      if (i + 1 < frames.size()) flags = flags | zmq::send_flags::sndmore;
      // Only the first part can fail with EAGAIN; a started multipart message always completes.
      if (!dealer_->send(frames[i], flags)) return false;
    }
  } catch (const zmq::error_t& e) {
    spdlog::warn("send to the scheduler failed: {}", e.what());
    return false;
  }
  return true;
}

void Agent::FlushPending() {
  // In order: a large message goes in pieces (at most a window unacknowledged), and what follows
  // it waits until the scheduler has acknowledged its last piece.
  while (state_ == LinkState::kReady) {
    if (result_pieces_.active()) {
      result_pieces_.Pump([this](std::vector<zmq::message_t>& f) { return TrySend(f); },
                          Clock::now());
      return;  // the next kPieceAck (or timer tick) goes on
    }
    if (pending_.empty()) return;
    if (protocol::PieceSender::NeedsPieces(pending_.front())) {
      result_pieces_.Start(std::move(pending_.front()));
      pending_.pop_front();
      continue;
    }
    if (!TrySend(pending_.front())) return;
    pending_.pop_front();
  }
}

}  // namespace tessera::worker
