#include "scheduler/assembler/part_spool.h"

#include <OpenImageIO/imageio.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/assembler/part_memory.h"
#include "shared/base/disk_space.h"
#include "shared/base/status.h"
#include "shared/images/accumulation.h"
#include "shared/images/image_io.h"
#include "shared/wire/protocol.h"

namespace tessera::assembler {

namespace {
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

}  // namespace

int PreviewChannels(int channels) { return std::min(channels, 3); }

void ToHalf(const float* in, size_t n, uint16_t* out) {
  OIIO_NAMESPACE::convert_pixel_values(OIIO_NAMESPACE::TypeDesc::FLOAT, in,
                                       OIIO_NAMESPACE::TypeDesc::HALF, out, static_cast<int>(n));
}

void ToSrgb(const float* pixels, size_t count, int channels, uint8_t* out) {
  static const SrgbBytes kBytes;
  const int keep = PreviewChannels(channels);
  for (size_t p = 0; p < count; ++p) {
    for (int c = 0; c < keep; ++c) *out++ = kBytes(pixels[c]);
    pixels += channels;
  }
}

std::vector<std::string> DefaultChannelNames(int channels) {
  return OIIO_NAMESPACE::ImageSpec(1, 1, channels, OIIO_NAMESPACE::TypeDesc::FLOAT).channelnames;
}

namespace {

// The tiles must be of one frame, scene, channels and samples, and cover it exactly once.
Status CheckCoverage(const std::vector<const FrameShape*>& shapes,
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

constexpr char kTileMagic[8] = {'T', 'S', 'R', 'T', 'I', 'L', 'E', '1'};

StatusOr<std::string> ReadFile(const std::string& path) {
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
Status WriteFileAtomically(const std::string& path, const std::string& head, const void* body,
                           size_t body_bytes) {
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

Status SaveTile(const accumulation::RenderedImage& t, const std::string& path) {
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
StatusOr<accumulation::RenderedImage> LoadTile(const std::string& path) {
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
StatusOr<accumulation::RenderedImage> ReadAccumulation(const std::string& path) {
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

StatusOr<std::map<int64_t, PartFile>> ListParts(const std::string& dir) {
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

StatusOr<LoadedRegion> LoadPixelTile(const std::filesystem::path& path, int frame) {
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
StatusOr<std::vector<LoadedRegion>> LoadRegions(const std::map<int64_t, PartFile>& files,
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

}  // namespace

PartSpool::PartSpool(size_t memory_budget) : memory_(std::make_unique<PartMemory>(memory_budget)) {}
PartSpool::~PartSpool() = default;

Status PartSpool::KeepTile(const std::string& dir, int64_t task,
                           const accumulation::RenderedImage& tile, std::string* path) {
  *path = (std::filesystem::path(dir) / (std::to_string(task) + ".tile")).string();
  TSR_RETURN_IF_ERROR(SaveTile(tile, *path));
  memory_->PutResolved(dir, task, ShapeOf(tile), tile.x0, tile.y0, tile.width, tile.height,
                       tile.pixels);
  return Status::Ok();
}

Status PartSpool::KeepSamples(const std::string& dir, int64_t task, const std::string& bytes,
                              accumulation::RenderedImage part, std::string* path) {
  *path = (std::filesystem::path(dir) / (std::to_string(task) + ".acc")).string();
  TSR_RETURN_IF_ERROR(WriteFileAtomically(*path, bytes, nullptr, 0));
  memory_->AddSamples(dir, task, std::move(part));
  return Status::Ok();
}

Status PartSpool::KeepPixelTile(const std::string& dir, int64_t task, int frame, int x0, int y0,
                                const image::ImageBuffer& tile, std::string* path) {
  *path = (std::filesystem::path(dir) /
           (std::to_string(task) + "_" + std::to_string(x0) + "_" + std::to_string(y0) + ".exr"))
              .string();
  image::ImageBuffer named = tile;
  if (named.channel_names.empty()) named.channel_names = DefaultChannelNames(named.channels);
  TSR_RETURN_IF_ERROR(image::WriteExr(*path, named, /*half=*/false));
  (void)!::chmod(path->c_str(), 0600);  // (the folder is private already)
  memory_->PutResolved(dir, task, {frame, 0, 0, named.channels, named.channel_names}, x0, y0,
                       named.width, named.height, named.pixels);
  return Status::Ok();
}

Status PartSpool::Take(const std::string& dir, int expected, int frame, bool need_floats,
                       const std::string& what, FrameParts* parts) {
  // Whatever happens next, this frame's regions leave the memory now.
  std::map<RegionKey, CachedRegion> cached = memory_->Take(dir);
  StatusOr<std::map<int64_t, PartFile>> files = ListParts(dir);
  if (!files.ok()) return files.status().WithContext(what);
  const bool pixel_tiles = std::any_of(files->begin(), files->end(), [](const auto& f) {
    return f.second.kind == PartFile::Kind::kPixels;
  });
  if (static_cast<int>(files->size()) != expected ||
      (pixel_tiles && std::any_of(files->begin(), files->end(), [](const auto& f) {
         return f.second.kind != PartFile::Kind::kPixels;
       }))) {
    return Status::Internal(what + ": found " + std::to_string(files->size()) + " of " +
                            std::to_string(expected) + " parts in " + dir);
  }
  // A region comes from memory when it resolved exactly the parts stored for it; the rest (a
  // restart, the memory budget, a float EXR, whose memory copy is half floats) from the files.
  std::set<int64_t> from_files;
  for (const auto& [task, file] : *files) from_files.insert(task);
  std::map<RegionKey, CachedRegion*> from_memory;
  for (auto& [key, region] : cached) {
    const bool usable = !need_floats && region.resolved &&
                        std::all_of(region.parts.begin(), region.parts.end(),
                                    [&](const auto& p) { return from_files.count(p.first); });
    if (!usable) continue;
    from_memory[key] = &region;
    for (const auto& p : region.parts) from_files.erase(p.first);
  }
  StatusOr<std::vector<LoadedRegion>> loaded = LoadRegions(*files, from_files, frame);
  // A file of a region the memory has without it: that region comes from its files too.
  bool again = false;
  for (size_t i = 0; loaded.ok() && i < loaded->size(); ++i) {
    auto hit = from_memory.find({(*loaded)[i].y0, (*loaded)[i].x0});
    if (hit == from_memory.end()) continue;
    for (const auto& p : hit->second->parts) from_files.insert(p.first);
    from_memory.erase(hit);
    again = true;
  }
  if (again && loaded.ok()) loaded = LoadRegions(*files, from_files, frame);
  if (!loaded.ok()) return loaded.status().WithContext(what);
  // The regions must be of one frame and cover it exactly once (AssemblePixels' rules).
  FrameParts out;
  std::vector<FrameShape> shapes;
  for (const auto& [key, r] : from_memory) {
    out.tiles.push_back({r->x0, r->y0, r->width, r->height});
    out.half.push_back(std::move(r->half));
    out.srgb.push_back(std::move(r->srgb));
    shapes.push_back(std::move(r->shape));
  }
  for (LoadedRegion& r : *loaded) {
    out.tiles.push_back({r.x0, r.y0, r.width, r.height});
    out.pixels.push_back(std::move(r.pixels));
    shapes.push_back(std::move(r.shape));
  }
  // The buffers are in place now: the views point into them.
  for (size_t i = 0; i < out.half.size(); ++i) {
    out.tiles[i].half = out.half[i].data();
    out.tiles[i].srgb = out.srgb[i].data();
  }
  for (size_t i = 0; i < out.pixels.size(); ++i) {
    out.tiles[out.half.size() + i].pixels = out.pixels[i].data();
  }
  std::vector<const FrameShape*> shape_of;
  for (const FrameShape& shape : shapes) shape_of.push_back(&shape);
  if (Status s = CheckCoverage(shape_of, out.tiles); !s.ok()) return s.WithContext(what);
  out.channels = shapes[0].channels;
  out.channel_names = shapes[0].channel_names;
  for (const TileView& t : out.tiles) {
    out.width = std::max(out.width, t.x0 + t.width);
    out.height = std::max(out.height, t.y0 + t.height);
  }
  *parts = std::move(out);
  return Status::Ok();
}
}  // namespace tessera::assembler
