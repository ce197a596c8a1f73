#pragma once
// How the assembler keeps a split frame's parts (assembler.cpp includes it; nothing else should):
// their files in the frame's parts directory, and in memory, within a budget, the tile regions
// they resolve to. Header-only while it has one user, so the scheduler's build keeps listing one
// source for the assembler.

#include <OpenImageIO/imageio.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "shared/accumulation.h"
#include "shared/disk_space.h"
#include "shared/image_io.h"
#include "shared/protocol.h"
#include "shared/status.h"

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

inline FrameShape ShapeOf(const accumulation::RenderedImage& p) {
  return {p.frame,        p.frame_width, p.frame_height, p.channels,    p.channel_names,
          /*exact=*/true, p.scene_hash,  p.sample_begin, p.sample_count};
}

// A tile of finished pixels as the encoders read it: `pixels` (floats) or `half` (the same as
// half floats: the memory's form); `srgb`, the 8-bit preview's bytes (null: made from `pixels`).
struct TileView {
  int x0 = 0;
  int y0 = 0;
  int width = 0;
  int height = 0;
  const float* pixels = nullptr;
  const uint16_t* half = nullptr;
  const uint8_t* srgb = nullptr;
};

// The 8-bit preview keeps the beauty channels (gray, or RGB).
inline int PreviewChannels(int channels) { return std::min(channels, 3); }

// Float to half as OpenImageIO converts when it writes a half EXR from floats.
inline void ToHalf(const float* in, size_t n, uint16_t* out) {
  OIIO_NAMESPACE::convert_pixel_values(OIIO_NAMESPACE::TypeDesc::FLOAT, in,
                                       OIIO_NAMESPACE::TypeDesc::HALF, out, static_cast<int>(n));
}

// A linear float to its preview byte exactly as image::WriteSrgb8 makes it (lround(LinearToSrgb(v)
// * 255)), from a table rather than a pow per value (a few times faster). The byte never falls as
// the float's bits grow (checked for every float in [0, 1]), and grows by less than one over 2^16
// consecutive floats, so each run of 2^16 holds the byte at its start and the float, if any,
// where it steps up by one.
class SrgbBytes {
 public:
  SrgbBytes() {
    const uint32_t one = Bits(1.0f);
    runs_.resize((one >> kShift) + 1);
    for (uint32_t i = 0; i < runs_.size(); ++i) {
      uint32_t lo = i << kShift, hi = std::min(((i + 1) << kShift) - 1, one);
      const int first = Reference(lo), last = Reference(hi);
      TSR_CHECK(last - first <= 1);
      runs_[i] = {std::numeric_limits<float>::infinity(), static_cast<uint8_t>(first)};
      if (last == first) continue;
      while (hi - lo > 1) {  // the first float of the run whose byte is `last`
        const uint32_t mid = lo + (hi - lo) / 2;
        (Reference(mid) == last ? hi : lo) = mid;
      }
      runs_[i].step = Float(hi);
    }
  }
  uint8_t operator()(float v) const {
    if (!(v > 0.0f)) return 0;  // also NaN
    if (v >= 1.0f) return 255;
    const Run& run = runs_[Bits(v) >> kShift];
    return static_cast<uint8_t>(run.byte + (v >= run.step));
  }

 private:
  static constexpr int kShift = 16;
  struct Run {
    float step;    // from here on the byte is one more
    uint8_t byte;  // at the run's start
  };
  static uint32_t Bits(float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    return bits;
  }
  static float Float(uint32_t bits) {
    float v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  }
  static int Reference(uint32_t bits) {
    return static_cast<int>(std::lround(image::LinearToSrgb(Float(bits)) * 255.0f));
  }
  std::vector<Run> runs_;
};

// `count` pixels of `channels` floats to preview bytes, as image::WriteSrgb8 makes them.
inline void ToSrgb(const float* pixels, size_t count, int channels, uint8_t* out) {
  static const SrgbBytes kBytes;
  const int keep = PreviewChannels(channels);
  for (size_t p = 0; p < count; ++p) {
    for (int c = 0; c < keep; ++c) *out++ = kBytes(pixels[c]);
    pixels += channels;
  }
}

// The names OpenImageIO gives channels nobody named (what an EXR written without names holds).
inline std::vector<std::string> DefaultChannelNames(int channels) {
  return OIIO_NAMESPACE::ImageSpec(1, 1, channels, OIIO_NAMESPACE::TypeDesc::FLOAT).channelnames;
}

// The tiles must be of one frame, scene, channels and samples, and cover it exactly once.
inline Status CheckCoverage(const std::vector<const FrameShape*>& shapes,
                            const std::vector<TileView>& tiles) {
  if (tiles.empty()) return Status::InvalidArgument("no parts to assemble");
  const FrameShape& shape = *shapes[0];
  int64_t width = shape.width, height = shape.height, area = 0;
  for (size_t i = 0; i < tiles.size(); ++i) {
    if (!(*shapes[i] == shape)) {
      return Status::InvalidArgument(
          "the parts are not all of the same frame, scene, channels and samples");
    }
    if (!shape.exact) {  // a plugin renderer's tiles span the frame
      width = std::max<int64_t>(width, tiles[i].x0 + tiles[i].width);
      height = std::max<int64_t>(height, tiles[i].y0 + tiles[i].height);
    }
  }
  for (size_t i = 0; i < tiles.size(); ++i) {
    const TileView& a = tiles[i];
    if (a.x0 < 0 || a.y0 < 0 || a.width <= 0 || a.height <= 0 || a.x0 + a.width > width ||
        a.y0 + a.height > height) {
      return Status::InvalidArgument("a tile lies outside the frame");
    }
    area += int64_t{a.width} * a.height;
    for (size_t j = 0; j < i; ++j) {
      const TileView& b = tiles[j];
      if (a.x0 < b.x0 + b.width && b.x0 < a.x0 + a.width && a.y0 < b.y0 + b.height &&
          b.y0 < a.y0 + a.height) {
        return Status::InvalidArgument("tiles overlap");
      }
    }
  }
  if (area != width * height)
    return Status::InvalidArgument("the tiles do not cover the whole frame");
  return Status::Ok();
}

// ---- Part files ---------------------------------------------------------------------------------
// <task id>.tile: a path tracer tile with all its samples as its finished pixels: the magic, the
// accumulation's header (int32 frame, frame size, x0, y0, size, channels, sample range; uint64
// scene hash; channel names as uint32 length + bytes), then width x height x channels floats.

inline constexpr char kTileMagic[8] = {'T', 'S', 'R', 'T', 'I', 'L', 'E', '1'};

inline StatusOr<std::string> ReadFile(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return Status::NotFound(path + ": cannot open");
  std::string data;
  char buf[1 << 16];
  if (std::fseek(f.get(), 0, SEEK_END) == 0) {
    const long size = std::ftell(f.get());
    if (size > 0) data.reserve(static_cast<size_t>(size));
    std::rewind(f.get());
  }
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f.get())) > 0;) data.append(buf, n);
  if (std::ferror(f.get())) return Status::Internal(path + ": read failed");
  return data;
}

// Writes aside, then renames: the part is there whole or not at all.
inline Status WriteFileAtomically(const std::string& path, const std::string& head,
                                  const void* body, size_t body_bytes) {
  const std::string tmp = path + ".tmp";
  {
    // Mode 0600, like every file the farm keeps for itself.
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    std::unique_ptr<FILE, int (*)(FILE*)> f(fd < 0 ? nullptr : ::fdopen(fd, "wb"), &std::fclose);
    if (fd >= 0 && !f) ::close(fd);
    if (!f || std::fwrite(head.data(), 1, head.size(), f.get()) != head.size() ||
        (body_bytes > 0 && std::fwrite(body, 1, body_bytes, f.get()) != body_bytes) ||
        std::fflush(f.get()) != 0) {
      const int err = errno;
      f.reset();
      ::unlink(tmp.c_str());  // a part half written takes room a full disk needs back
      if (disk_space::IsFullErrno(err)) return disk_space::FullError("write", path, err);
      return disk_space::ClassifyWriteFailure(Status::Internal(tmp + ": write failed"), path,
                                              head.size() + body_bytes);
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return Status::Internal(path + ": rename failed: " + std::strerror(errno));
  }
  return Status::Ok();
}

inline Status SaveTile(const accumulation::RenderedImage& t, const std::string& path) {
  std::string head(kTileMagic, sizeof kTileMagic);
  const int32_t h[10] = {t.frame, t.frame_width, t.frame_height, t.x0,           t.y0,
                         t.width, t.height,      t.channels,     t.sample_begin, t.sample_count};
  head.append(reinterpret_cast<const char*>(h), sizeof h);
  head.append(reinterpret_cast<const char*>(&t.scene_hash), sizeof t.scene_hash);
  for (const std::string& name : t.channel_names) {
    const uint32_t n = static_cast<uint32_t>(name.size());
    head.append(reinterpret_cast<const char*>(&n), sizeof n);
    head += name;
  }
  return WriteFileAtomically(path, head, t.pixels.data(), t.pixels.size() * sizeof(float));
}

// A .tile back: `pixels` set, `sums` empty.
inline StatusOr<accumulation::RenderedImage> LoadTile(const std::string& path) {
  TSR_ASSIGN_OR_RETURN(std::string data, ReadFile(path));
  const Status corrupt = Status::InvalidArgument(path + ": not a tile, or truncated");
  int32_t h[10];
  accumulation::RenderedImage t;
  size_t pos = sizeof kTileMagic + sizeof h + sizeof t.scene_hash;
  if (data.size() < pos || std::memcmp(data.data(), kTileMagic, sizeof kTileMagic) != 0) {
    return corrupt;
  }
  std::memcpy(h, data.data() + sizeof kTileMagic, sizeof h);
  std::memcpy(&t.scene_hash, data.data() + sizeof kTileMagic + sizeof h, sizeof t.scene_hash);
  int* fields[10] = {&t.frame, &t.frame_width, &t.frame_height, &t.x0,           &t.y0,
                     &t.width, &t.height,      &t.channels,     &t.sample_begin, &t.sample_count};
  for (int i = 0; i < 10; ++i) *fields[i] = h[i];
  if (t.width <= 0 || t.height <= 0 || t.channels <= 0 || t.channels > protocol::kMaxChannels ||
      t.x0 < 0 || t.y0 < 0 || t.x0 > t.frame_width - t.width || t.y0 > t.frame_height - t.height) {
    return corrupt;
  }
  for (int c = 0; c < t.channels; ++c) {
    uint32_t n = 0;
    if (data.size() - pos < sizeof n) return corrupt;
    std::memcpy(&n, data.data() + pos, sizeof n);
    pos += sizeof n;
    if (n > 64 || data.size() - pos < n) return corrupt;
    t.channel_names.push_back(data.substr(pos, n));
    pos += n;
  }
  const size_t values = static_cast<size_t>(t.width) * t.height * t.channels;
  if (data.size() - pos != values * sizeof(float)) return corrupt;
  t.pixels.resize(values);
  std::memcpy(t.pixels.data(), data.data() + pos, values * sizeof(float));
  t.backend = "tile";
  return t;
}

// A .acc back (accumulation::LoadCheckpoint's result, read in large blocks).
inline StatusOr<accumulation::RenderedImage> ReadAccumulation(const std::string& path) {
  TSR_ASSIGN_OR_RETURN(std::string data, ReadFile(path));
  StatusOr<accumulation::RenderedImage> part = accumulation::ParseAccumulation(data);
  if (!part.ok()) return part.status().WithContext(path);
  return part;
}

// What a part's file name says: <task id>.acc, <task id>.tile, <task id>_<x0>_<y0>.exr.
struct PartFile {
  std::filesystem::path path;
  enum class Kind { kAccumulation, kTile, kPixels } kind = Kind::kTile;
};

inline StatusOr<std::map<int64_t, PartFile>> ListParts(const std::string& dir) {
  std::map<int64_t, PartFile> parts;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string ext = entry.path().extension().string();
    PartFile file{entry.path()};
    if (ext == ".acc") {
      file.kind = PartFile::Kind::kAccumulation;
    } else if (ext == ".exr") {
      file.kind = PartFile::Kind::kPixels;
    } else if (ext != ".tile") {
      continue;  // not a part: one being written aside
    }
    const std::string stem = entry.path().stem().string();
    int64_t task = 0;
    auto [end, err] = std::from_chars(stem.data(), stem.data() + stem.size(), task);
    if (err != std::errc() || (end != stem.data() + stem.size() && *end != '_')) {
      return Status::InvalidArgument(entry.path().string() + ": not a part's name");
    }
    parts[task] = std::move(file);
  }
  if (ec) return Status::Internal("cannot list " + dir + ": " + ec.message());
  return parts;
}

// A region of the frame merged from its files.
struct LoadedRegion {
  FrameShape shape;
  int x0 = 0, y0 = 0, width = 0, height = 0;
  std::vector<float> pixels;
};

inline StatusOr<LoadedRegion> LoadPixelTile(const std::filesystem::path& path, int frame) {
  LoadedRegion r;
  if (std::sscanf(path.stem().string().c_str(), "%*d_%d_%d", &r.x0, &r.y0) != 2) {
    return Status::InvalidArgument(path.string() + ": not a tile's name");
  }
  TSR_ASSIGN_OR_RETURN(image::ImageBuffer image, image::Read(path.string()));
  r.shape = {frame, 0, 0, image.channels, image.channel_names};
  r.width = image.width;
  r.height = image.height;
  r.pixels = std::move(image.pixels);
  return r;
}

// The regions the parts `tasks` make, from their files: a region's sample parts merged exactly,
// as MergeSampleParts does.
inline StatusOr<std::vector<LoadedRegion>> LoadRegions(const std::map<int64_t, PartFile>& files,
                                                       const std::set<int64_t>& tasks, int frame) {
  std::map<RegionKey, std::vector<accumulation::RenderedImage>> samples;
  std::vector<LoadedRegion> regions;
  for (int64_t task : tasks) {
    const PartFile& file = files.at(task);
    if (file.kind == PartFile::Kind::kPixels) {
      TSR_ASSIGN_OR_RETURN(LoadedRegion r, LoadPixelTile(file.path, frame));
      regions.push_back(std::move(r));
      continue;
    }
    StatusOr<accumulation::RenderedImage> part = file.kind == PartFile::Kind::kTile
                                                     ? LoadTile(file.path.string())
                                                     : ReadAccumulation(file.path.string());
    if (!part.ok()) return part.status();
    samples[{part->y0, part->x0}].push_back(std::move(*part));
  }
  for (auto& [key, parts] : samples) {
    accumulation::RenderedImage merged;
    if (parts.size() == 1 && parts[0].sums.empty()) {
      merged = std::move(parts[0]);  // a .tile: finished already
    } else {
      for (const auto& p : parts) {
        if (p.sums.empty()) {
          return Status::InvalidArgument("a finished tile shares its region with other parts");
        }
      }
      TSR_ASSIGN_OR_RETURN(merged, accumulation::MergeSampleParts(parts));
    }
    LoadedRegion r;
    r.shape = ShapeOf(merged);
    r.x0 = merged.x0;
    r.y0 = merged.y0;
    r.width = merged.width;
    r.height = merged.height;
    r.pixels = std::move(merged.pixels);
    regions.push_back(std::move(r));
  }
  return regions;
}

// ---- The memory ---------------------------------------------------------------------------------

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
class FrameCache {
 public:
  explicit FrameCache(size_t budget) : budget_(budget) {}

  // A part that makes its region alone (a tile with all its samples, a plugin renderer's tile).
  void PutResolved(const std::string& dir, int64_t task, FrameShape shape, int x0, int y0,
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

  // A sample part, added to its region's exact sums. The region is resolved whenever its parts
  // cover samples [0, n) without a gap: then it may be complete (only the broker knows), and if
  // another part arrives it is resolved again.
  void AddSamples(const std::string& dir, int64_t task, accumulation::RenderedImage part) {
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

  // The frame's regions, which leave the memory: the frame is being assembled.
  std::map<RegionKey, CachedRegion> Take(const std::string& dir) {
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

 private:
  struct Frame {
    std::map<RegionKey, CachedRegion> regions;
    uint64_t touched = 0;
  };

  static bool Busy(const Frame& f) {
    return std::any_of(f.regions.begin(), f.regions.end(),
                       [](const auto& r) { return r.second.busy; });
  }

  // The region (created empty if missing), once nobody else is adding to it.
  CachedRegion& Acquire(std::unique_lock<std::mutex>& lock, const std::string& dir, RegionKey key) {
    for (;;) {
      Frame& frame = frames_[dir];
      frame.touched = ++clock_;
      CachedRegion& r = frame.regions[key];
      if (!r.busy) return r;
      idle_.wait(lock);
    }
  }

  // Over budget: other frames leave, those touched longest ago first; then, if `dir`'s region
  // still does not fit, it leaves too. Called with mu_ held.
  void Fit(const std::string& dir, RegionKey key) {
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

  std::mutex mu_;
  std::condition_variable idle_;
  std::map<std::string, Frame> frames_;
  size_t budget_;
  size_t used_ = 0;
  uint64_t clock_ = 0;
};

}  // namespace tessera::assembler
