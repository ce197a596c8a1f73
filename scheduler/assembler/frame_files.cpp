#include "scheduler/assembler/frame_files.h"

#include <OpenImageIO/imageio.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <thread>

#include "shared/base/disk_space.h"
#include "shared/images/image_oiio.h"
#include "shared/jobs/job_file.h"

namespace tessera::assembler {

namespace OIIO = OIIO_NAMESPACE;
namespace fs = std::filesystem;

namespace {

// ---- Encoding the outputs ----------------------------------------------------------------------

// Lossless either way. Encoding is most of the work after a split frame's last part, which is to
// stay under 1 % of a long frame's render time: ZIP one scanline per block at zlib level 3
// (OpenEXR's default is 16 scanlines at level 4) takes ~30 % less CPU and about half the time on
// two cores, for files ~6 % larger; the preview PNG at level 3 (libpng's default is 6) a third of
// the time for ~7 % more bytes (docs/performance.md). Whole frames are written the same way.
constexpr const char* kExrCompression = "zips:3";
constexpr int kPngCompressionLevel = 3;
// Rows per write: that many blocks for OpenEXR's threads to compress at once.
constexpr int kBandRows = 256;
// Frames this large write their 8-bit files beside the EXR, on a second thread.
constexpr int64_t kConcurrentPixels = int64_t{1} << 20;

// Calls span(tile, row in tile, x in frame, y in frame) for every tile row within [y0, y1).
template <typename F>
void ForEachSpan(const Canvas& c, int y0, int y1, F span) {
  for (const TileView& t : c.tiles) {
    for (int y = std::max(y0, t.y0); y < std::min(y1, t.y0 + t.height); ++y) {
      span(t, static_cast<size_t>(y - t.y0) * t.width, t.x0, y);
    }
  }
}

// Linear EXR, half floats unless `exr_float`, written a band of rows at a time from the tiles.
Status EncodeExr(const std::string& path, const Canvas& c, bool exr_float) {
  const OIIO::TypeDesc type = exr_float ? OIIO::TypeDesc::FLOAT : OIIO::TypeDesc::HALF;
  TSR_ASSIGN_OR_RETURN(
      OIIO::ImageSpec spec,
      image::ExrSpec(path, c.width, c.height, c.channels, c.channel_names, type, kExrCompression));
  const size_t value = type.size();
  const size_t row = static_cast<size_t>(c.width) * c.channels;
  std::vector<std::byte> band(row * std::min(kBandRows, c.height) * value);
  return image::WriteAtomically(path, spec, [&](OIIO::ImageOutput& out) {
    for (int y0 = 0; y0 < c.height; y0 += kBandRows) {
      const int y1 = std::min(c.height, y0 + kBandRows);
      ForEachSpan(c, y0, y1, [&](const TileView& t, size_t src, int x, int y) {
        const size_t n = static_cast<size_t>(t.width) * c.channels;
        std::byte* dst =
            band.data() + ((y - y0) * row + static_cast<size_t>(x) * c.channels) * value;
        if (exr_float) {
          std::memcpy(dst, t.pixels + src * c.channels, n * value);
        } else if (t.half) {
          std::memcpy(dst, t.half + src * c.channels, n * value);
        } else {
          ToHalf(t.pixels + src * c.channels, n, reinterpret_cast<uint16_t*>(dst));
        }
      });
      if (!out.write_scanlines(y0, y1, 0, type, band.data())) return false;
    }
    return true;
  });
}

// The frame's 8-bit sRGB bytes (beauty channels only), as shared/image_io's WriteSrgb8 makes them.
std::vector<uint8_t> PreviewBytes(const Canvas& c) {
  const int out = PreviewChannels(c.channels);
  std::vector<uint8_t> bytes(static_cast<size_t>(c.width) * c.height * out);
  ForEachSpan(c, 0, c.height, [&](const TileView& t, size_t src, int x, int y) {
    uint8_t* dst = &bytes[(static_cast<size_t>(y) * c.width + x) * out];
    if (t.srgb) {
      std::memcpy(dst, t.srgb + src * out, static_cast<size_t>(t.width) * out);
    } else {
      ToSrgb(t.pixels + src * c.channels, t.width, c.channels, dst);
    }
  });
  return bytes;
}

// The dashboard's thumbnail: the preview box-filtered in linear light to about twice the
// thumbnail's size, from a grid of samples in each box (every `step`-th pixel of every `step`-th
// row, nine or more per box) so it costs little at any frame size; image_io then scales it the
// rest of the way with a proper filter.
Status WriteThumbnail(const std::string& path, const Canvas& c, const std::vector<uint8_t>& bytes) {
  static const std::vector<float> kLinear = [] {
    std::vector<float> table(256);
    for (int i = 0; i < 256; ++i) table[i] = image::SrgbToLinear(i / 255.0f);
    return table;
  }();
  const int channels = PreviewChannels(c.channels);
  const int box = std::max(1, std::max(c.width, c.height) / (2 * kThumbnailSide));
  const int step = std::max(1, box / 3);
  image::ImageBuffer small;
  small.width = (c.width + box - 1) / box;
  small.height = (c.height + box - 1) / box;
  small.channels = channels;
  small.pixels.assign(static_cast<size_t>(small.width) * small.height * channels, 0.0f);
  // Each box's samples start at its corner: every box has one at least.
  auto samples_in = [&](int cell, int size) {
    return std::pair(cell * box, std::min(size, (cell + 1) * box));
  };
  for (int cy = 0; cy < small.height; ++cy) {
    for (int cx = 0; cx < small.width; ++cx) {
      float* dst = &small.pixels[(static_cast<size_t>(cy) * small.width + cx) * channels];
      int count = 0;
      const auto [y0, y1] = samples_in(cy, c.height);
      const auto [x0, x1] = samples_in(cx, c.width);
      for (int y = y0; y < y1; y += step) {
        const uint8_t* src = &bytes[(static_cast<size_t>(y) * c.width + x0) * channels];
        for (int x = x0; x < x1; x += step, src += step * channels, ++count) {
          for (int ch = 0; ch < channels; ++ch) dst[ch] += kLinear[src[ch]];
        }
      }
      for (int ch = 0; ch < channels; ++ch) dst[ch] /= static_cast<float>(count);
    }
  }
  return image::WriteThumbnail(path, small, kThumbnailSide);
}

// The frame's 8-bit files (PNG, JPEG, TIFF by extension) and its thumbnail.
Status WritePreviews(const std::vector<std::string>& paths, const std::string& thumbnail,
                     const Canvas& c, int64_t job_id, int frame) {
  const std::vector<uint8_t> bytes = PreviewBytes(c);
  OIIO::ImageSpec spec(c.width, c.height, PreviewChannels(c.channels), OIIO::TypeDesc::UINT8);
  spec.attribute("png:compressionLevel", kPngCompressionLevel);
  for (const std::string& path : paths) {
    TSR_RETURN_IF_ERROR(image::WriteAtomically(path, spec, [&](OIIO::ImageOutput& out) {
      return out.write_image(OIIO::TypeDesc::UINT8, bytes.data());
    }));
  }
  // Only for people to look at: a frame whose thumbnail cannot be written is still done.
  if (Status s = WriteThumbnail(thumbnail, c, bytes); !s.ok()) {
    spdlog::warn("job {} frame {}: no thumbnail: {}", job_id, frame, s.message());
  }
  return Status::Ok();
}

}  // namespace

Status WriteOutputs(const FrameOutput& output, int64_t job_id, int frame, const Canvas& c,
                    std::vector<std::string>* files, uint64_t* bytes) {
  std::error_code ec;
  fs::create_directories(output.dir, ec);
  if (ec && disk_space::IsFullErrno(ec.value())) {
    return disk_space::FullError("create", output.dir, ec.value());
  }
  if (ec) return Status::Internal("cannot create " + output.dir + ": " + ec.message());
  std::vector<std::string> paths, previews;
  bool exr = false;
  for (const std::string& format : output.formats) {
    paths.push_back(
        (fs::path(output.dir) / spec::OutputFileName(output.pattern, frame, format)).string());
    if (format == "exr") {
      exr = true;
    } else {
      previews.push_back(paths.back());
    }
  }
  const std::string thumbnail = ThumbnailPath(output.dir, frame);
  Status preview_status;
  auto write_previews = [&] {
    preview_status = WritePreviews(previews, thumbnail, c, job_id, frame);
  };
  std::thread beside;
  if (exr && int64_t{c.width} * c.height >= kConcurrentPixels) {
    beside = std::thread(write_previews);
  }
  Status exr_status;
  for (size_t i = 0; i < paths.size() && exr; ++i) {
    if (output.formats[i] == "exr") exr_status = EncodeExr(paths[i], c, output.exr_float);
  }
  if (beside.joinable()) {
    beside.join();
  } else if (exr_status.ok()) {
    // Not after a failed EXR: the frame is written again whole, and a preview written now would
    // be written twice (on a full disk it may fit in the room the failed EXR gave back).
    write_previews();
  }
  TSR_RETURN_IF_ERROR(exr_status);
  TSR_RETURN_IF_ERROR(preview_status);
  *files = std::move(paths);
  if (bytes != nullptr) {
    *bytes = 0;
    for (const std::string& file : *files) *bytes += fs::file_size(file, ec);
  }
  return Status::Ok();
}

}  // namespace tessera::assembler
