#pragma once
// The broker's counters for /metrics: relaxed atomics the broker thread bumps, so reading them
// from any thread never waits on (or slows) the poll loop.

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "scheduler/assembler/assembler.h"

namespace tessera::broker {

class BrokerCounters {
 public:
  // Totals since the scheduler started, as read at one moment.
  struct Values {
    uint64_t tasks_dispatched = 0;       // assignments sent, backup copies of stragglers included
    uint64_t tasks_completed = 0;        // tasks recorded done
    double render_seconds = 0;           // lease start to done, of the copies that completed them
    uint64_t queue_depth = 0;            // a gauge: tasks in the dispatch queue after the last pass
    uint64_t blob_bytes_served = 0;      // asset bytes sent to workers
    uint64_t checkpoints_kept = 0;       // periodic checkpoints kept as tasks' resume points
    uint64_t result_bytes_buffered = 0;  // a gauge: results sent in pieces being reassembled
    // Worker messages dropped at the boundary: malformed (not a Tessera message, a bad body) or
    // refused (a field that is not valid UTF-8, a list beyond its limit).
    uint64_t messages_dropped = 0;
    // Peers refused at the CURVE handshake: plaintext, the wrong server key, an unknown key.
    uint64_t handshakes_refused = 0;
    // Registrations and enrolments refused for the name they asked for (another live
    // connection holds it; it is enrolled with another key).
    uint64_t names_refused = 0;
    // Exceptions caught at the entry points of the broker's and the assembler's threads: what
    // was being done was dropped (a message, a pass's step, a frame: its task is retried).
    uint64_t errors_caught = 0;
    // Failed attempts by the class the worker reported (render, crash, scene_error, ...).
    std::map<std::string, uint64_t> failures_by_class;
    assembler::Assembler::Counters assembler;
  };

  std::atomic<uint64_t> tasks_dispatched{0};
  std::atomic<uint64_t> queue_depth{0};
  std::atomic<uint64_t> blob_bytes_served{0};
  std::atomic<uint64_t> checkpoints_kept{0};
  std::atomic<uint64_t> result_bytes_buffered{0};
  std::atomic<uint64_t> messages_dropped{0};
  std::atomic<uint64_t> handshakes_refused{0};
  std::atomic<uint64_t> names_refused{0};
  std::atomic<uint64_t> errors_caught{0};

  // A task recorded done, whose completing copy ran `seconds`.
  void CountDone(double seconds) {
    tasks_completed_.fetch_add(1, std::memory_order_relaxed);
    render_ns_.fetch_add(static_cast<uint64_t>(seconds * 1e9), std::memory_order_relaxed);
  }
  // A failed attempt of this class.
  void CountFailure(const std::string& failure_class) {
    std::lock_guard<std::mutex> lock(failures_mu_);
    ++failures_by_class_[failure_class];
  }
  // Everything but the assembler's.
  Values Read() const;

 private:
  std::atomic<uint64_t> tasks_completed_{0};
  std::atomic<uint64_t> render_ns_{0};
  mutable std::mutex failures_mu_;
  std::map<std::string, uint64_t> failures_by_class_;  // guarded by failures_mu_
};

inline BrokerCounters::Values BrokerCounters::Read() const {
  Values v;
  v.tasks_dispatched = tasks_dispatched.load(std::memory_order_relaxed);
  v.tasks_completed = tasks_completed_.load(std::memory_order_relaxed);
  v.render_seconds = static_cast<double>(render_ns_.load(std::memory_order_relaxed)) / 1e9;
  v.queue_depth = queue_depth.load(std::memory_order_relaxed);
  v.blob_bytes_served = blob_bytes_served.load(std::memory_order_relaxed);
  v.checkpoints_kept = checkpoints_kept.load(std::memory_order_relaxed);
  v.result_bytes_buffered = result_bytes_buffered.load(std::memory_order_relaxed);
  v.messages_dropped = messages_dropped.load(std::memory_order_relaxed);
  v.handshakes_refused = handshakes_refused.load(std::memory_order_relaxed);
  v.names_refused = names_refused.load(std::memory_order_relaxed);
  v.errors_caught = errors_caught.load(std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(failures_mu_);
  v.failures_by_class = failures_by_class_;
  return v;
}

}  // namespace tessera::broker
