#pragma once
// The pass context: what one pass of the broker's poll loop hands every part it calls. The pass
// reads the clock once, as it begins (Begin: the one place in the broker that reads it), and
// every part takes its time from here -- timers, deadlines, leases' ages, alerts' and GPU
// readings' times -- so each part is tested with a clock moved by hand: Begin() from a
// ManualClock, call the part, Advance(), Begin() again, call it again.
//
// What a part does to the outside world goes through the pass and takes effect only once the
// pass's store writes commit (one write group per pass): messages to workers and answers to other
// threads (the outbox), live events and stored notices (the event sink). Frames go to the
// assembler, whose answers come back as work for a later pass.
//
// Threads: broker thread only.

#include <cstdint>
#include <functional>
#include <vector>

#include "shared/base/clock.h"

namespace tessera::assembler {
class Assembler;
}
namespace tessera::store {
class Store;
}

namespace tessera::broker {

class BrokerCounters;
class EventSink;
class Outbox;

struct Pass {
  Pass(store::Store& store, Outbox& outbox, EventSink& events, BrokerCounters& counters)
      : store(store), outbox(outbox), events(events), counters(counters) {}

  // The pass begins: its time is read, once.
  void Begin(const Clock& clock) {
    now = clock.Steady();
    wall_ms = clock.WallMs();
  }

  Clock::SteadyTime now{};  // steady time: durations, deadlines, timers
  int64_t wall_ms = 0;      // wall time (Unix ms): what is stored and shown
  store::Store& store;      // written inside the pass's write group
  Outbox& outbox;
  EventSink& events;
  BrokerCounters& counters;
  // Where frames, parts and files are written (null before the broker starts, and for parts
  // under test that write none).
  assembler::Assembler* assembler = nullptr;
  // Runs `fn` on the broker thread in a later pass, with that pass (Broker::Post; tests run it
  // by hand).
  std::function<void(std::function<void(Pass&)>)> later;
  // Jobs whose last unfinished task left memory in this pass: the loop hands them to
  // Steps::OnJobsFinished (the lease side, which sees them go, comes before the steps).
  std::vector<int64_t> finished_jobs;
};

}  // namespace tessera::broker
