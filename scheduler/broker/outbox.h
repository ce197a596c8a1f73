#pragma once
// Outbox: what a pass of the broker's poll loop tells the outside world, held until the pass's
// store writes commit -- messages to workers (assignments, cancels, acknowledgements), work for
// after the commit (live events, removing files), and the answers to other threads' requests.
// A worker therefore never holds a lease, nor drops a spooled result, that the store does not
// have. A pass that rolls back discards it all, and its requests are answered with why.
//
// Without a socket attached (a part under test) messages stay queued for the test to read.
//
// Threads: broker thread only.

#include <functional>
#include <string>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "shared/base/status.h"

namespace tessera::broker {

class Outbox {
 public:
  using Message = std::pair<std::string, std::vector<zmq::message_t>>;  // (identity, frames)

  // The ROUTER messages leave through, once it is bound.
  void Attach(zmq::socket_t* router) { router_ = router; }

  // A message for the worker with routing identity `identity`, sent after the commit.
  void Send(const std::string& identity, std::vector<zmq::message_t> frames) {
    messages_.emplace_back(identity, std::move(frames));
  }
  // Runs after the commit (before the answers).
  void AfterCommit(std::function<void()> fn) { after_commit_.push_back(std::move(fn)); }
  // An answer to another thread's request: told Ok after the commit, or why it failed.
  void Answer(std::function<void(const Status&)> answer) { answers_.push_back(std::move(answer)); }

  // The pass committed: every message is sent (a peer that has gone is left to liveness, a lost
  // assignment to heartbeat reconciliation), and what waited for the commit is handed back to be
  // run in order.
  struct Committed {
    std::vector<std::function<void()>> after_commit;
    std::vector<std::function<void(const Status&)>> answers;
  };
  Committed Release();
  // The pass rolled back: nothing leaves; the answers are handed back to be told why.
  std::vector<std::function<void(const Status&)>> Discard();

  // Whether the peer with this routing identity has gone (its connection closed), probed at once
  // with a harmless heartbeat acknowledgement; false without a socket.
  bool PeerGone(const std::string& identity);

  // What is queued (tests read it).
  const std::vector<Message>& messages() const { return messages_; }

 private:
  zmq::socket_t* router_ = nullptr;
  std::vector<Message> messages_;
  std::vector<std::function<void()>> after_commit_;
  std::vector<std::function<void(const Status&)>> answers_;
};

}  // namespace tessera::broker
