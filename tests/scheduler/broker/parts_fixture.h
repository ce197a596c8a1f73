// The broker's parts without the broker: wired as Broker wires them, over a real store in a
// per-test folder, and driven by a pass context whose clock is moved by hand. A test calls a
// part, reads what it queued in the outbox and wrote to the store, Advance()s the clock and
// calls it again -- no socket, no thread, no sleeping.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "scheduler/broker/boundary.h"
#include "scheduler/broker/broker_counters.h"
#include "scheduler/broker/broker_options.h"
#include "scheduler/broker/bulk_transfers.h"
#include "scheduler/broker/checkpoints.h"
#include "scheduler/broker/dispatch.h"
#include "scheduler/broker/event_sink.h"
#include "scheduler/broker/feasibility.h"
#include "scheduler/broker/fleet.h"
#include "scheduler/broker/full_outputs.h"
#include "scheduler/broker/jobs.h"
#include "scheduler/broker/lease_table.h"
#include "scheduler/broker/leases.h"
#include "scheduler/broker/outbox.h"
#include "scheduler/broker/pass.h"
#include "scheduler/broker/read_only.h"
#include "scheduler/broker/result_acks.h"
#include "scheduler/broker/running_counts.h"
#include "scheduler/broker/steps.h"
#include "scheduler/broker/submitted_job.h"
#include "scheduler/broker/task_ends.h"
#include "scheduler/broker/task_queue.h"
#include "scheduler/broker/worker_registry.h"
#include "shared/base/clock.h"
#include "shared/jobs/job_file.h"
#include "shared/wire/protocol.h"
#include "tests/scheduler/store/store_fixture.h"

namespace tessera::broker {

// Every part, each after the parts it uses (as in Broker).
struct BrokerParts {
  BrokerParts(const BrokerOptions& options, BrokerCounters& counters)
      : workers(std::chrono::milliseconds(int64_t{options.heartbeat_ms} * options.liveness)),
        boundary(options, workers, counters),
        transfers(options.blobs, int64_t{1} << 30),
        feasibility(workers, table),
        acks(workers),
        checkpoints(table, options.blobs, boundary),
        queue(table),
        leases({table, workers, running, queue, checkpoints, acks, feasibility, boundary}),
        dispatch({options, table, workers, running, leases, queue}),
        full_outputs({options, table, leases, queue, feasibility}),
        steps({options, table, leases, queue, checkpoints}),
        jobs({options, table, queue, steps, full_outputs, feasibility}),
        task_ends({options, table, workers, leases, queue, checkpoints, acks, full_outputs,
                   feasibility, boundary}),
        fleet({options, workers, table, leases, dispatch, feasibility, transfers, boundary}),
        read_only({options, table, workers, running, acks, transfers, jobs, fleet, boundary}) {
    running.shares.projects = options.projects;
  }

  WorkerRegistry workers;
  LeaseTable table;
  RunningCounts running;
  Boundary boundary;
  BulkTransfers transfers;
  Feasibility feasibility;
  ResultAcks acks;
  Checkpoints checkpoints;
  TaskQueue queue;
  Leases leases;
  Dispatch dispatch;
  FullOutputs full_outputs;
  Steps steps;
  Jobs jobs;
  TaskEnds task_ends;
  Fleet fleet;
  ReadOnlyMode read_only;
};

class BrokerPartsTest : public store::StoreFixtureBase {
 protected:
  using Seconds = std::chrono::seconds;
  using Millis = std::chrono::milliseconds;

  BrokerPartsTest() : store::StoreFixtureBase("broker-parts") {}

  // Builds the parts from options_ (set it first) and begins the first pass.
  void Build() {
    events_ = std::make_unique<EventSink>(*store_, nullptr);
    pass_ = std::make_unique<Pass>(*store_, outbox_, *events_, counters_);
    pass_->later = [this](std::function<void(Pass&)> fn) { later_.push_back(std::move(fn)); };
    parts_ = std::make_unique<BrokerParts>(options_, counters_);
    pass_->Begin(clock_);
  }
  // Moves time on and begins a new pass at the new time.
  template <typename Duration>
  void Advance(Duration by) {
    clock_.Advance(by);
    pass_->Begin(clock_);
  }
  // Work the parts left for a later pass (the assembler's answers, a failed gathering).
  void RunLater() {
    std::vector<std::function<void(Pass&)>> work;
    work.swap(later_);
    for (auto& fn : work) fn(*pass_);
  }
  // The pass ended: the jobs it finished are settled, as the loop does after each step.
  void Settle() { parts_->steps.OnJobsFinished(*pass_); }

  // A message as it arrives from a worker.
  template <typename T>
  static protocol::Envelope Message(protocol::MessageType type, const T& body,
                                    zmq::message_t payload = zmq::message_t()) {
    std::vector<zmq::message_t> frames = protocol::Encode(type, body, std::move(payload));
    StatusOr<protocol::Envelope> env = protocol::Decode(frames, 0);
    EXPECT_TRUE(env.ok()) << env.status().ToString();
    return std::move(*env);
  }

  // Registers a worker on routing identity `identity` (named the same), with `slots` slots.
  WorkerConn& Register(const std::string& identity, int slots = 1,
                       std::vector<protocol::TaskRef> running = {}) {
    protocol::Register reg;
    reg.name = identity;
    reg.hostname = "host-" + identity;
    reg.cpu_cores = 8;
    reg.ram_mb = 16384;
    reg.slots = slots;
    reg.backends = {"cpu"};
    reg.running = std::move(running);
    parts_->fleet.OnRegister(*pass_, identity, Message(protocol::MessageType::kRegister, reg), "");
    WorkerConn* worker = parts_->workers.Find(identity);
    EXPECT_NE(worker, nullptr) << identity << " did not register";
    return *worker;
  }

  // Stores a noop job of `frames` one-frame tasks (noop: its tasks only report done) and loads
  // it, as a submission does.
  int64_t SubmitNoop(int frames, int task_timeout_s = 0, int retries = 3) {
    spec::JobSpec spec;
    spec.name = "noop";
    spec.renderer = spec::kRendererNoop;
    spec.frame_start = 1;
    spec.frame_end = frames;
    spec.max_retries = retries;
    spec.task_timeout = task_timeout_s;
    return StoreJob(spec);
  }
  // A one-frame noop job stored and loaded, then one dispatch: its task is leased when a
  // registered worker has room.
  struct OneTask {
    int64_t job;
    int64_t task_id;
  };
  OneTask DispatchOneNoopTask() {
    const int64_t job = SubmitNoop(1);
    const int64_t task_id = TaskIds(job).at(0);
    parts_->dispatch.Run(*pass_);
    return {job, task_id};
  }
  // Stores the job and hands it to the broker's parts, as a submission does.
  int64_t StoreJob(const spec::JobSpec& spec) {
    const SubmittedJob submitted = StoreSubmission(spec);
    parts_->jobs.Submitted(*pass_, submitted);
    return submitted.id;
  }
  // Stores the job; returns what the submission hands the broker (api/submission.cpp).
  SubmittedJob StoreSubmission(const spec::JobSpec& spec) {
    store::CreatedRows created;
    auto job = store_->CreateJob(
        spec, "name: " + spec.name + "\n",
        [&](int64_t id) -> StatusOr<std::string> { return dir_ + "/out/" + std::to_string(id); },
        nullptr, &created);
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    if (!job.ok()) return {};
    SubmittedJob submitted;
    submitted.id = job->id;
    submitted.jobs = {*job};
    submitted.scenes[job->id] = spec.scene_yaml;
    submitted.tasks = std::move(created.tasks);
    return submitted;
  }

  // The messages queued for `identity` since the last call, by type (and drops the rest).
  std::vector<protocol::Envelope> Sent(const std::string& identity) {
    std::vector<protocol::Envelope> sent;
    for (const Outbox::Message& m : outbox_.messages()) {
      if (m.first != identity) continue;
      std::vector<zmq::message_t> frames;
      for (const zmq::message_t& f : m.second) frames.emplace_back(f.data(), f.size());
      StatusOr<protocol::Envelope> env = protocol::Decode(frames, 0);
      if (env.ok()) sent.push_back(std::move(*env));
    }
    return sent;
  }
  std::vector<protocol::Assign> Assignments(const std::string& identity) {
    std::vector<protocol::Assign> assigns;
    for (protocol::Envelope& env : Sent(identity)) {
      if (env.type != protocol::MessageType::kAssign) continue;
      auto a = env.As<protocol::Assign>();
      if (a.ok()) assigns.push_back(*a);
    }
    return assigns;
  }
  int CountSent(const std::string& identity, protocol::MessageType type) {
    int n = 0;
    for (const protocol::Envelope& env : Sent(identity)) n += env.type == type;
    return n;
  }
  void ClearOutbox() { (void)outbox_.Discard(); }

  // The job's tasks held in memory, in frame order.
  std::vector<int64_t> TaskIds(int64_t job_id) {
    std::vector<std::pair<int, int64_t>> by_index;
    for (const auto& [id, task] : parts_->table.tasks()) {
      if (task.job_id == job_id) by_index.emplace_back(task.index, id);
    }
    std::sort(by_index.begin(), by_index.end());
    std::vector<int64_t> ids;
    for (const auto& [index, id] : by_index) ids.push_back(id);
    return ids;
  }
  store::TaskRecord Task(int64_t task_id) {
    StatusOr<store::TaskRecord> task = store_->GetTask(task_id);
    EXPECT_TRUE(task.ok()) << task.status().ToString();
    return task.ok() ? *task : store::TaskRecord{};
  }
  store::JobRecord Job(int64_t job_id) {
    StatusOr<store::JobRecord> job = store_->GetJob(job_id);
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    return job.ok() ? *job : store::JobRecord{};
  }

  ManualClock clock_;
  BrokerOptions options_;
  BrokerCounters counters_;
  Outbox outbox_;
  std::unique_ptr<EventSink> events_;
  std::unique_ptr<Pass> pass_;
  std::unique_ptr<BrokerParts> parts_;
  std::vector<std::function<void(Pass&)>> later_;
};

}  // namespace tessera::broker
