// The process's real clock (clock.h).

#include "shared/base/clock.h"

namespace tessera {

namespace {

class RealClock final : public Clock {
 public:
  SteadyTime Steady() const override { return std::chrono::steady_clock::now(); }
  int64_t WallMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

}  // namespace

const Clock& Clock::Real() {
  static const RealClock clock;
  return clock;
}

}  // namespace tessera
