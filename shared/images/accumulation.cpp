#include "shared/images/accumulation.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace tessera::accumulation {
namespace {

constexpr char kMagic[8] = {'T', 'S', 'R', 'A', 'C', 'C', '0', '1'};

std::string Describe(const RenderedImage& p) {
  return "frame " + std::to_string(p.frame) + " region (" + std::to_string(p.x0) + ", " +
         std::to_string(p.y0) + ") " + std::to_string(p.width) + "x" + std::to_string(p.height) +
         " samples [" + std::to_string(p.sample_begin) + ", " +
         std::to_string(p.sample_begin + p.sample_count) + ")";
}

Status CheckShape(const RenderedImage& p) {
  const size_t n = static_cast<size_t>(p.width) * p.height * p.channels;
  if (p.width <= 0 || p.height <= 0 || p.channels <= 0 || p.sums.size() != n ||
      p.channel_names.size() != static_cast<size_t>(p.channels) || p.sample_count < 0) {
    return Status::InvalidArgument(Describe(p) + ": malformed accumulation");
  }
  return Status::Ok();
}

Status CheckSameFrame(const RenderedImage& a, const RenderedImage& b) {
  if (a.frame != b.frame || a.frame_width != b.frame_width || a.frame_height != b.frame_height ||
      a.channel_names != b.channel_names || a.scene_hash != b.scene_hash) {
    return Status::InvalidArgument(
        Describe(b) + " is not of the same frame, scene and channels as " + Describe(a));
  }
  return Status::Ok();
}

template <typename T>
void Put(std::string* out, const T& v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof v);
}

template <typename T>
bool Get(std::string_view in, size_t* pos, T* v) {
  if (in.size() - *pos < sizeof(T) || *pos > in.size()) return false;
  std::memcpy(v, in.data() + *pos, sizeof(T));
  *pos += sizeof(T);
  return true;
}

}  // namespace

void FinishPixels(RenderedImage* image) {
  image->pixels.resize(image->sums.size());
  const double scale = image->sample_count > 0 ? 1.0 / (kFixedScale * image->sample_count) : 0.0;
  for (size_t i = 0; i < image->sums.size(); ++i) {
    image->pixels[i] = static_cast<float>(static_cast<double>(image->sums[i]) * scale);
  }
}

std::vector<float> RawSums(const RenderedImage& image) {
  std::vector<float> out(image.sums.size());
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<float>(static_cast<double>(image.sums[i]) / kFixedScale);
  }
  return out;
}

StatusOr<RenderedImage> MergeSampleParts(const std::vector<RenderedImage>& parts) {
  if (parts.empty()) return Status::InvalidArgument("no sample parts to merge");
  std::vector<const RenderedImage*> sorted;
  for (const auto& p : parts) {
    TSR_RETURN_IF_ERROR(CheckShape(p));
    TSR_RETURN_IF_ERROR(CheckSameFrame(parts[0], p));
    if (p.x0 != parts[0].x0 || p.y0 != parts[0].y0 || p.width != parts[0].width ||
        p.height != parts[0].height) {
      return Status::InvalidArgument(Describe(p) + " covers another region than " +
                                     Describe(parts[0]));
    }
    sorted.push_back(&p);
  }
  std::sort(sorted.begin(), sorted.end(), [](const RenderedImage* a, const RenderedImage* b) {
    return a->sample_begin < b->sample_begin;
  });
  for (size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i - 1]->sample_begin + sorted[i - 1]->sample_count > sorted[i]->sample_begin) {
      return Status::InvalidArgument(Describe(*sorted[i]) + " overlaps " +
                                     Describe(*sorted[i - 1]));
    }
  }
  RenderedImage out = *sorted[0];
  out.rays_traced = 0;
  out.sample_count = 0;
  std::fill(out.sums.begin(), out.sums.end(), 0);
  for (const RenderedImage* p : sorted) {
    for (size_t i = 0; i < out.sums.size(); ++i) out.sums[i] += p->sums[i];
    out.sample_count += p->sample_count;
    out.rays_traced += p->rays_traced;
  }
  FinishPixels(&out);
  return out;
}

RenderedImage EmptyFrameFor(const RenderedImage& part) {
  RenderedImage out;
  out.frame = part.frame;
  out.frame_width = part.frame_width;
  out.frame_height = part.frame_height;
  out.width = part.frame_width;
  out.height = part.frame_height;
  out.channels = part.channels;
  out.channel_names = part.channel_names;
  out.backend = part.backend;
  out.sample_begin = part.sample_begin;
  out.sample_count = part.sample_count;
  out.scene_hash = part.scene_hash;
  const size_t n = static_cast<size_t>(out.width) * out.height * out.channels;
  out.sums.assign(n, 0);
  out.pixels.assign(n, 0.0f);
  return out;
}

Status PasteTile(const RenderedImage& tile, RenderedImage* frame) {
  TSR_RETURN_IF_ERROR(CheckShape(tile));
  TSR_RETURN_IF_ERROR(CheckSameFrame(*frame, tile));
  if (tile.sample_begin != frame->sample_begin || tile.sample_count != frame->sample_count) {
    return Status::InvalidArgument(Describe(tile) + " has other samples than " + Describe(*frame));
  }
  if (tile.x0 < 0 || tile.y0 < 0 || tile.x0 + tile.width > frame->width ||
      tile.y0 + tile.height > frame->height) {
    return Status::InvalidArgument(Describe(tile) + " lies outside the frame");
  }
  const size_t row = static_cast<size_t>(tile.width) * tile.channels;
  for (int y = 0; y < tile.height; ++y) {
    const size_t src = static_cast<size_t>(y) * row;
    const size_t dst =
        (static_cast<size_t>(tile.y0 + y) * frame->width + tile.x0) * frame->channels;
    std::copy_n(tile.sums.begin() + src, row, frame->sums.begin() + dst);
    if (tile.pixels.size() == tile.sums.size()) {
      std::copy_n(tile.pixels.begin() + src, row, frame->pixels.begin() + dst);
    }
  }
  frame->rays_traced += tile.rays_traced;
  return Status::Ok();
}

StatusOr<RenderedImage> AssembleTiles(const std::vector<RenderedImage>& tiles) {
  if (tiles.empty()) return Status::InvalidArgument("no tiles to assemble");
  RenderedImage frame = EmptyFrameFor(tiles[0]);
  std::vector<uint8_t> covered(static_cast<size_t>(frame.width) * frame.height, 0);
  for (const auto& t : tiles) {
    TSR_RETURN_IF_ERROR(PasteTile(t, &frame));
    for (int y = t.y0; y < t.y0 + t.height; ++y) {
      for (int x = t.x0; x < t.x0 + t.width; ++x) {
        if (covered[static_cast<size_t>(y) * frame.width + x]++) {
          return Status::InvalidArgument(Describe(t) + " overlaps another tile");
        }
      }
    }
  }
  if (std::find(covered.begin(), covered.end(), 0) != covered.end()) {
    return Status::InvalidArgument("the tiles do not cover the whole frame");
  }
  FinishPixels(&frame);
  return frame;
}

StatusOr<image::ImageBuffer> AssemblePixels(const std::vector<RenderedImage>& tiles) {
  if (tiles.empty()) return Status::InvalidArgument("no tiles to assemble");
  const RenderedImage& first = tiles[0];
  image::ImageBuffer frame;
  frame.width = first.frame_width;
  frame.height = first.frame_height;
  frame.channels = first.channels;
  frame.channel_names = first.channel_names;
  frame.pixels.resize(static_cast<size_t>(frame.width) * frame.height * frame.channels);
  std::vector<uint8_t> covered(static_cast<size_t>(frame.width) * frame.height, 0);
  for (const RenderedImage& t : tiles) {
    TSR_RETURN_IF_ERROR(CheckShape(t));
    TSR_RETURN_IF_ERROR(CheckSameFrame(first, t));
    if (t.sample_begin != first.sample_begin || t.sample_count != first.sample_count) {
      return Status::InvalidArgument(Describe(t) + " has other samples than " + Describe(first));
    }
    if (t.pixels.size() != t.sums.size()) {
      return Status::InvalidArgument(Describe(t) + " has no finished pixels");
    }
    if (t.x0 < 0 || t.y0 < 0 || t.x0 + t.width > frame.width || t.y0 + t.height > frame.height) {
      return Status::InvalidArgument(Describe(t) + " lies outside the frame");
    }
    const size_t row = static_cast<size_t>(t.width) * t.channels;
    for (int y = 0; y < t.height; ++y) {
      uint8_t* cover = &covered[static_cast<size_t>(t.y0 + y) * frame.width + t.x0];
      if (std::find(cover, cover + t.width, 1) != cover + t.width) {
        return Status::InvalidArgument(Describe(t) + " overlaps another tile");
      }
      std::fill_n(cover, t.width, 1);
      std::copy_n(t.pixels.begin() + static_cast<size_t>(y) * row, row,
                  frame.pixels.begin() +
                      (static_cast<size_t>(t.y0 + y) * frame.width + t.x0) * frame.channels);
    }
  }
  if (std::find(covered.begin(), covered.end(), 0) != covered.end()) {
    return Status::InvalidArgument("the tiles do not cover the whole frame");
  }
  return frame;
}

StatusOr<std::string> SerializeAccumulation(const RenderedImage& image) {
  TSR_RETURN_IF_ERROR(CheckShape(image));
  std::string data(kMagic, sizeof kMagic);
  const int32_t header[10] = {
      image.frame, image.frame_width, image.frame_height, image.x0,           image.y0,
      image.width, image.height,      image.channels,     image.sample_begin, image.sample_count};
  Put(&data, header);
  Put(&data, image.scene_hash);
  Put(&data, image.rays_traced);
  for (const auto& name : image.channel_names) {
    Put(&data, static_cast<uint32_t>(name.size()));
    data += name;
  }
  data.append(reinterpret_cast<const char*>(image.sums.data()),
              image.sums.size() * sizeof(int64_t));
  return data;
}

StatusOr<RenderedImage> ParseAccumulation(std::string_view data) {
  const Status corrupt = Status::InvalidArgument("not an accumulation, or truncated");
  if (data.size() < sizeof kMagic || std::memcmp(data.data(), kMagic, sizeof kMagic) != 0) {
    return corrupt;
  }
  size_t pos = sizeof kMagic;
  int32_t h[10];
  RenderedImage image;
  if (!Get(data, &pos, &h) || !Get(data, &pos, &image.scene_hash) ||
      !Get(data, &pos, &image.rays_traced)) {
    return corrupt;
  }
  image.frame = h[0];
  image.frame_width = h[1];
  image.frame_height = h[2];
  image.x0 = h[3];
  image.y0 = h[4];
  image.width = h[5];
  image.height = h[6];
  image.channels = h[7];
  image.sample_begin = h[8];
  image.sample_count = h[9];
  if (image.width <= 0 || image.height <= 0 || image.channels <= 0 ||
      image.channels > kMaxChannels || image.width > 16384 || image.height > 16384 ||
      image.frame_width < image.width || image.frame_height < image.height || image.x0 < 0 ||
      image.y0 < 0 || image.x0 > image.frame_width - image.width ||
      image.y0 > image.frame_height - image.height || image.sample_begin < 0 ||
      image.sample_count < 0) {
    return corrupt;
  }
  for (int c = 0; c < image.channels; ++c) {
    uint32_t len;
    if (!Get(data, &pos, &len) || len > 64 || data.size() - pos < len) return corrupt;
    image.channel_names.emplace_back(data.substr(pos, len));
    pos += len;
  }
  const size_t n = static_cast<size_t>(image.width) * image.height * image.channels;
  if (data.size() - pos != n * sizeof(int64_t)) return corrupt;
  image.sums.resize(n);
  std::memcpy(image.sums.data(), data.data() + pos, n * sizeof(int64_t));
  image.backend = "checkpoint";
  FinishPixels(&image);
  return image;
}

Status SaveCheckpoint(const RenderedImage& image, const std::string& path) {
  TSR_ASSIGN_OR_RETURN(std::string data, SerializeAccumulation(image));
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    out.flush();
    if (!out) return Status::Internal("checkpoint '" + tmp + "': write failed");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Status::Internal("checkpoint '" + path + "': " + ec.message());
  return Status::Ok();
}

StatusOr<RenderedImage> LoadCheckpoint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("checkpoint '" + path + "': cannot open");
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  StatusOr<RenderedImage> image = ParseAccumulation(data);
  if (!image.ok()) return image.status().WithContext("checkpoint '" + path + "'");
  return image;
}

}  // namespace tessera::accumulation
