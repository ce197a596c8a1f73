#include "scheduler/assembler/part_memory.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "scheduler/assembler/part_spool.h"
#include "shared/images/accumulation.h"

namespace tessera::assembler {

FrameShape ShapeOf(const accumulation::RenderedImage& p) {
  return {p.frame,        p.frame_width, p.frame_height, p.channels,    p.channel_names,
          /*exact=*/true, p.scene_hash,  p.sample_begin, p.sample_count};
}

void PartMemory::PutResolved(const std::string& dir, int64_t task, FrameShape shape, int x0, int y0,
                             int width, int height, const std::vector<float>& pixels) {
  const size_t count = static_cast<size_t>(width) * height;
  CachedRegion r{x0, y0, width, height, std::move(shape)};
  r.parts[task] = {r.shape.sample_begin, r.shape.sample_begin + r.shape.sample_count};
  r.resolved = true;
  r.half.resize(count * r.shape.channels);
  ToHalf(pixels.data(), r.half.size(), r.half.data());
  r.srgb.resize(count * PreviewChannels(r.shape.channels));
  ToSrgb(pixels.data(), count, r.shape.channels, r.srgb.data());
  std::unique_lock<std::mutex> lock(mu_);
  CachedRegion& slot = Acquire(lock, dir, {y0, x0});
  used_ -= slot.bytes();
  slot = std::move(r);
  used_ += slot.bytes();
  Fit(dir, {y0, x0});
}

void PartMemory::AddSamples(const std::string& dir, int64_t task,
                            accumulation::RenderedImage part) {
  const RegionKey key{part.y0, part.x0};
  FrameShape shape = ShapeOf(part);
  std::unique_lock<std::mutex> lock(mu_);
  CachedRegion* slot = &Acquire(lock, dir, key);
  shape.sample_begin = slot->shape.sample_begin;
  shape.sample_count = slot->shape.sample_count;
  const int end = part.sample_begin + part.sample_count;
  bool fits =
      slot->parts.empty() || (slot->width == part.width && slot->height == part.height &&
                              slot->shape == shape && slot->sums.size() == part.sums.size());
  for (const auto& [other, range] : slot->parts) {
    fits = fits && other != task && (end <= range.first || range.second <= part.sample_begin);
  }
  if (!fits) {  // stored twice, or not like its region's other parts: the files decide
    used_ -= slot->bytes();
    frames_[dir].regions.erase(key);
    idle_.notify_all();
    return;
  }
  if (slot->parts.empty()) *slot = CachedRegion{part.x0, part.y0, part.width, part.height, shape};
  const size_t before = slot->bytes();
  slot->busy = true;
  std::vector<int64_t> sums = std::move(slot->sums);
  auto parts = slot->parts;
  lock.unlock();

  if (sums.empty()) {
    sums = std::move(part.sums);
  } else {
    for (size_t i = 0; i < sums.size(); ++i) sums[i] += part.sums[i];
  }
  parts[task] = {part.sample_begin, end};
  std::vector<std::pair<int, int>> ranges;
  for (const auto& p : parts) ranges.push_back(p.second);
  std::sort(ranges.begin(), ranges.end());
  int covered = 0;
  for (const auto& r : ranges) covered = r.first == covered ? r.second : -1;
  std::vector<uint16_t> half;
  std::vector<uint8_t> srgb;
  if (covered > 0) {
    accumulation::RenderedImage resolve;
    resolve.sums = std::move(sums);
    resolve.sample_count = covered;
    accumulation::FinishPixels(&resolve);
    const size_t count = static_cast<size_t>(part.width) * part.height;
    half.resize(resolve.pixels.size());
    ToHalf(resolve.pixels.data(), half.size(), half.data());
    srgb.resize(count * PreviewChannels(part.channels));
    ToSrgb(resolve.pixels.data(), count, part.channels, srgb.data());
    sums = std::move(resolve.sums);
  }

  lock.lock();
  slot = &frames_[dir].regions[key];  // still there: busy regions are neither taken nor evicted
  slot->sums = std::move(sums);
  slot->parts = std::move(parts);
  slot->resolved = covered > 0;
  slot->shape.sample_begin = 0;
  slot->shape.sample_count = std::max(covered, 0);
  slot->half = std::move(half);
  slot->srgb = std::move(srgb);
  slot->busy = false;
  used_ = used_ - before + slot->bytes();
  Fit(dir, key);
  idle_.notify_all();
}

std::map<RegionKey, CachedRegion> PartMemory::Take(const std::string& dir) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    auto it = frames_.find(dir);
    if (it == frames_.end()) return {};
    if (!Busy(it->second)) {
      std::map<RegionKey, CachedRegion> regions = std::move(it->second.regions);
      for (const auto& [key, r] : regions) used_ -= r.bytes();
      frames_.erase(it);
      return regions;
    }
    idle_.wait(lock);
  }
}

bool PartMemory::Busy(const Frame& f) {
  return std::any_of(f.regions.begin(), f.regions.end(),
                     [](const auto& r) { return r.second.busy; });
}

CachedRegion& PartMemory::Acquire(std::unique_lock<std::mutex>& lock, const std::string& dir,
                                  RegionKey key) {
  for (;;) {
    Frame& frame = frames_[dir];
    frame.touched = ++clock_;
    CachedRegion& r = frame.regions[key];
    if (!r.busy) return r;
    idle_.wait(lock);
  }
}

void PartMemory::Fit(const std::string& dir, RegionKey key) {
  while (used_ > budget_) {
    auto victim = frames_.end();
    for (auto it = frames_.begin(); it != frames_.end(); ++it) {
      if (it->first == dir || Busy(it->second)) continue;
      if (victim == frames_.end() || it->second.touched < victim->second.touched) victim = it;
    }
    if (victim == frames_.end()) break;
    spdlog::info("assembler memory full ({} MB): the parts in {} will be read back from disk",
                 budget_ >> 20, victim->first);
    for (const auto& [k, r] : victim->second.regions) used_ -= r.bytes();
    frames_.erase(victim);
  }
  auto& regions = frames_[dir].regions;
  auto it = regions.find(key);
  if (used_ > budget_ && it != regions.end() && !it->second.busy) {
    used_ -= it->second.bytes();
    regions.erase(it);
  }
}

}  // namespace tessera::assembler
