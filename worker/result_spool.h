#pragma once
// The worker's result spool: every message that reports a task's outcome -- frame results,
// done, failed, hand-back -- is written here before it is sent, and deleted only when the
// scheduler acknowledges the attempt (kResultAck). After every (re)connect the agent re-sends
// what is still spooled, so neither a scheduler restart nor a network cut nor a worker restart
// (with a persistent data_dir) loses a finished render; the scheduler's fencing applies each
// result at most once.
//
// Layout: DIR/<task_id>-<attempt>/<seq>.msg, one file per message (the encoded ZeroMQ frames:
// a u32 count, then per frame a u64 size and the bytes), written aside and renamed.
// Thread-safe: render threads write their own results (a large frame's fsync must not hold up
// the agent's I/O thread and its heartbeats); the I/O thread acknowledges and replays.

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "shared/base/status.h"
#include "shared/wire/protocol.h"

namespace tessera::worker {

class ResultSpool {
 public:
  explicit ResultSpool(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }

  // Creates the folder and finds what an earlier run left (attempts still unacknowledged).
  Status Open();
  // Writes one message about `ref`; `final` marks its last (done, failed, hand-back).
  Status Add(const protocol::TaskRef& ref, const std::vector<zmq::message_t>& frames, bool final);
  // The scheduler has the attempt's outcome: its messages go.
  void Ack(const protocol::TaskRef& ref);
  // Attempts whose final message is spooled (they are "delivering": no slot, results pending).
  std::vector<protocol::TaskRef> Delivering() const;
  bool empty() const;
  // Every spooled message, attempt by attempt in order, read back for re-sending. A file that
  // cannot be read is logged and skipped (the scheduler then requeues that attempt).
  std::vector<std::vector<zmq::message_t>> Replay() const;

 private:
  struct Entry {
    int next_seq = 0;
    bool final = false;
  };
  std::string FolderOf(const protocol::TaskRef& ref) const;

  std::string dir_;
  mutable std::mutex mu_;
  std::map<std::pair<int64_t, int>, Entry> entries_;  // by (task_id, attempt); guarded by mu_
};

// Whether an encoded message is an attempt's last (done, failed, hand-back).
bool IsFinalResult(const std::vector<zmq::message_t>& frames);

}  // namespace tessera::worker
