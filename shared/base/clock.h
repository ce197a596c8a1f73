#pragma once
// Time as an input: the scheduler's long-lived parts (the broker, the store, the assembler, the
// autoscaler) are given a Clock at construction and read time only through it, so a test moves
// time by hand (ManualClock) instead of sleeping until a timeout passes.
//
// Two readings: steady time for durations, deadlines and timers (never goes back), and wall time
// as Unix milliseconds for what is stored and shown (wall_time.h formats it).

#include <atomic>
#include <chrono>
#include <cstdint>

namespace tessera {

class Clock {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;

  virtual ~Clock() = default;
  virtual SteadyTime Steady() const = 0;
  // Unix milliseconds.
  virtual int64_t WallMs() const = 0;

  // The process's real clock (steady_clock and system_clock); lives for the whole program.
  static const Clock& Real();
};

// A clock that moves only when told to (tests, simulations): starts at `wall_ms` and a steady
// time of its own, and both advance together. Safe to read from any thread while another
// advances it.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t wall_ms = 1'790'000'000'000)  // 2026-09-21
      : wall_ms_(wall_ms) {}

  SteadyTime Steady() const override {
    return SteadyTime(std::chrono::nanoseconds(steady_ns_.load(std::memory_order_acquire)));
  }
  int64_t WallMs() const override {
    return wall_ms_.load(std::memory_order_acquire) +
           (steady_ns_.load(std::memory_order_acquire) - kSteadyStartNs) / 1'000'000;
  }

  template <typename Rep, typename Period>
  void Advance(std::chrono::duration<Rep, Period> by) {
    steady_ns_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(by).count(),
                         std::memory_order_acq_rel);
  }
  // Moves wall time alone (a clock step: NTP, a VM resumed), steady time staying where it is.
  void StepWallMs(int64_t by_ms) { wall_ms_.fetch_add(by_ms, std::memory_order_acq_rel); }

 private:
  // Steady time starts well after its epoch, so that `Steady() - some duration` stays positive.
  static constexpr int64_t kSteadyStartNs = int64_t{1'000'000} * 1'000'000'000;
  std::atomic<int64_t> steady_ns_{kSteadyStartNs};
  std::atomic<int64_t> wall_ms_;
};

}  // namespace tessera
