#pragma once
// Checkpoints: each task's resume point -- the path tracer's accumulation of a frame part-way
// (or another C++ plugin's own format), which a later attempt resumes from, bit-identical to a
// render never interrupted. They come with a hand-back (the worker must leave; TaskEnds) and
// every checkpoint_interval_s while a task renders (kCheckpoint), so a worker that dies without
// notice loses at most an interval. A task keeps one, its newest, as a blob; it is deleted when
// the task leaves memory (done, failed, canceled) or a charged failure starts it over.
//
// Threads: broker thread only.

#include <cstdint>
#include <string>
#include <zmq.hpp>

#include "scheduler/broker/boundary.h"
#include "scheduler/broker/lease_table.h"
#include "scheduler/broker/pass.h"
#include "scheduler/broker/worker_registry.h"
#include "shared/wire/protocol.h"

namespace tessera::blobs {
class BlobStore;
}

namespace tessera::broker {

class Checkpoints {
 public:
  // `blobs` may be null: no checkpoint is kept.
  Checkpoints(LeaseTable& table, blobs::BlobStore* blobs, Boundary& boundary)
      : table_(table), blobs_(blobs), boundary_(boundary) {}

  // A running attempt's periodic checkpoint: kept as the task's resume point when it names the
  // current attempt on that worker and is ahead of the one kept.
  void OnCheckpoint(Pass& pass, const std::string& identity, const WorkerConn& worker,
                    protocol::Envelope& env);
  // Checks a checkpoint of `frame` against the task and keeps it as a blob, in place of the
  // task's previous one: "" when kept, else why not (the previous one is then left as it was).
  std::string Keep(LiveTask& task, int attempt, int frame, int samples,
                   const zmq::message_t& payload);
  // Forgets the task's resume point (and deletes its checkpoint blob).
  void Clear(LiveTask& task);
  // Whether a task whose attempt ended uncharged without a hand-back (its worker lost) resumes
  // from its periodic checkpoint rather than starting over.
  static bool Resumes(const LiveTask& task, bool count_failure);

 private:
  LeaseTable& table_;
  blobs::BlobStore* blobs_;
  Boundary& boundary_;
};

}  // namespace tessera::broker
