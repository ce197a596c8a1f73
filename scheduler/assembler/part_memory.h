#pragma once
// The assembler's memory of split frames' parts (PartSpool's, scheduler/assembler/part_spool.h):
// per frame being assembled, its tile regions resolved from the parts so far, within a budget.

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "shared/images/rendered_image.h"

namespace tessera::assembler {

using RegionKey = std::pair<int, int>;  // (y0, x0): a tile region's top-left corner

// What the tiles of one frame must agree on to be pasted together (AssemblePixels' rules).
struct FrameShape {
  int frame = 0;
  int width = 0;  // the whole frame's (0 for a plugin renderer's tiles: they say it together)
  int height = 0;
  int channels = 0;
  std::vector<std::string> channel_names;
  bool exact = false;  // the path tracer's accumulation (else a plugin renderer's pixels)
  uint64_t scene_hash = 0;
  int sample_begin = 0;  // the samples the pixels are the mean of
  int sample_count = 0;
  bool operator==(const FrameShape&) const = default;
};

FrameShape ShapeOf(const accumulation::RenderedImage& p);

// A tile region of a frame being assembled, as the memory holds it.
struct CachedRegion {
  int x0 = 0;
  int y0 = 0;
  int width = 0;
  int height = 0;
  FrameShape shape;  // its samples: those `half` and `srgb` are the mean of
  std::map<int64_t, std::pair<int, int>> parts;  // task id -> its samples [begin, end)
  std::vector<int64_t> sums;  // sample parts: their exact sum, while more may arrive
  bool resolved = false;      // `half` and `srgb` are every part in `parts`, finished
  std::vector<uint16_t> half;
  std::vector<uint8_t> srgb;
  bool busy = false;  // a thread is adding a part to it, outside the lock
  size_t bytes() const { return sums.size() * 8 + half.size() * 2 + srgb.size(); }
};

// The resolved regions of frames being assembled, by parts directory. Memory beyond the budget
// goes, the frames touched longest ago first; what is not here is read from the parts' files.
// Threads: any. One mutex guards the map; the arithmetic on a region runs outside it while the
// region is marked busy (another part of the same region waits; Take waits; eviction skips it).
class PartMemory {
 public:
  explicit PartMemory(size_t budget) : budget_(budget) {}

  // A part that makes its region alone (a tile with all its samples, a plugin renderer's tile).
  void PutResolved(const std::string& dir, int64_t task, FrameShape shape, int x0, int y0,
                   int width, int height, const std::vector<float>& pixels);

  // A sample part, added to its region's exact sums. The region is resolved whenever its parts
  // cover samples [0, n) without a gap: then it may be complete (only the broker knows), and if
  // another part arrives it is resolved again.
  void AddSamples(const std::string& dir, int64_t task, accumulation::RenderedImage part);

  // The frame's regions, which leave the memory: the frame is being assembled.
  std::map<RegionKey, CachedRegion> Take(const std::string& dir);

 private:
  struct Frame {
    std::map<RegionKey, CachedRegion> regions;
    uint64_t touched = 0;
  };

  static bool Busy(const Frame& f);

  // The region (created empty if missing), once nobody else is adding to it.
  CachedRegion& Acquire(std::unique_lock<std::mutex>& lock, const std::string& dir, RegionKey key);

  // Over budget: other frames leave, those touched longest ago first; then, if `dir`'s region
  // still does not fit, it leaves too. Called with mu_ held.
  void Fit(const std::string& dir, RegionKey key);

  std::mutex mu_;
  std::condition_variable idle_;
  std::map<std::string, Frame> frames_;
  size_t budget_;
  size_t used_ = 0;
  uint64_t clock_ = 0;
};

}  // namespace tessera::assembler
