#include "shared/images/image_io.h"

#include <OpenImageIO/imagebuf.h>
#include <OpenImageIO/imagebufalgo.h>
#include <OpenImageIO/imageio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "shared/base/disk_space.h"
#include "shared/images/image_oiio.h"
#include "shared/jobs/job_file.h"

namespace tessera::image {

namespace {

Status CheckShape(const ImageBuffer& image, const std::string& path) {
  if (image.width <= 0 || image.height <= 0 || image.channels <= 0 ||
      image.pixels.size() != static_cast<size_t>(image.width) * image.height * image.channels) {
    return Status::InvalidArgument(path + ": image buffer has inconsistent size");
  }
  return Status::Ok();
}

// The whole image in one call.
Status WriteWhole(const std::string& path, const OIIO::ImageSpec& spec, OIIO::TypeDesc type,
                  const void* data) {
  return image::WriteAtomically(
      path, spec, [&](OIIO::ImageOutput& out) { return out.write_image(type, data); });
}

// Temporary files a failed write could not remove (its filesystem turned read-only under it):
// tried again before each later write, which goes through once the filesystem takes writes again
// (the frame is written anew then). A restart removes any still left
// (file_io::RemoveLeftoverTempFiles).
class TempRemovals {
 public:
  void RemoveOrKeep(const std::string& tmp) {
    std::error_code ec;
    if (std::filesystem::remove(tmp, ec) || !ec) return;
    std::lock_guard lock(mu_);
    kept_.push_back(tmp);
  }
  void RetryKept() {
    std::lock_guard lock(mu_);
    std::erase_if(kept_, [](const std::string& tmp) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      return !ec;
    });
  }

 private:
  std::mutex mu_;
  std::vector<std::string> kept_;
};

TempRemovals& FailedWriteTemps() {
  static TempRemovals removals;
  return removals;
}

}  // namespace

Status WriteAtomically(const std::string& path, const OIIO::ImageSpec& spec,
                       const std::function<bool(OIIO::ImageOutput&)>& write) {
  static std::atomic<uint64_t> counter{0};
  const std::filesystem::path target(path);
  std::string tmp_name = ".";
  tmp_name += target.filename().string();
  tmp_name += ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(++counter);
  const std::string tmp = (target.parent_path() / tmp_name).string();
  FailedWriteTemps().RetryKept();
  // The writer is chosen by the final name's extension; it then writes to the temp name.
  auto out = OIIO::ImageOutput::create(path);
  if (!out) return Status::Internal(path + ": no OpenImageIO writer: " + OIIO::geterror());
  // OpenImageIO says "Failed to write pixel data" whatever the cause: a failure is told apart
  // as a full filesystem by the room left beside the file (at least the raw pixels' size).
  const uint64_t raw_bytes = static_cast<uint64_t>(spec.image_bytes(/*native=*/true));
  if (!out->open(tmp, spec)) {
    return disk_space::ClassifyWriteFailure(
        Status::Internal(path + ": open failed: " + out->geterror()), path, raw_bytes);
  }
  bool ok = write(*out);
  std::string err = ok ? "" : out->geterror();
  if (!out->close()) {
    ok = false;
    err += out->geterror();
  }
  std::error_code ec;
  // A small image is buffered whole and written at close, where a failure (a full disk) may go
  // unreported: an image file with no bytes is never one that was written.
  if (ok && std::filesystem::file_size(tmp, ec) == 0) {
    ok = false;
    err = "nothing was written" + (ec ? " (" + ec.message() + ")" : std::string());
  }
  if (!ok) {
    FailedWriteTemps().RemoveOrKeep(tmp);
    return disk_space::ClassifyWriteFailure(Status::Internal(path + ": write failed: " + err), path,
                                            raw_bytes);
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    FailedWriteTemps().RemoveOrKeep(tmp);
    if (disk_space::IsFullErrno(ec.value()))
      return disk_space::FullError("write", path, ec.value());
    return Status::Internal(path + ": rename failed: " + ec.message());
  }
  return Status::Ok();
}

StatusOr<OIIO::ImageSpec> ExrSpec(const std::string& path, int width, int height, int channels,
                                  const std::vector<std::string>& channel_names,
                                  OIIO::TypeDesc type, const char* compression) {
  OIIO::ImageSpec spec(width, height, channels, type);
  spec.attribute("compression", compression);
  if (!channel_names.empty()) {
    if (channel_names.size() != static_cast<size_t>(channels)) {
      return Status::InvalidArgument(path + ": " + std::to_string(channel_names.size()) +
                                     " channel names for " + std::to_string(channels) +
                                     " channels");
    }
    spec.channelnames = channel_names;
    spec.alpha_channel = -1;
    for (int c = 0; c < channels; ++c) {
      if (channel_names[c] == "A") spec.alpha_channel = c;
    }
  } else if (channels == 4) {
    spec.alpha_channel = 3;
  }
  return spec;
}

float LinearToSrgb(float x) {
  if (!(x > 0.0f)) return 0.0f;  // also maps NaN to 0
  if (x >= 1.0f) return 1.0f;
  return x <= 0.0031308f ? 12.92f * x : 1.055f * std::pow(x, 1.0f / 2.4f) - 0.055f;
}

Status WriteExr(const std::string& path, const ImageBuffer& image, bool half) {
  TSR_RETURN_IF_ERROR(CheckShape(image, path));
  TSR_ASSIGN_OR_RETURN(OIIO::ImageSpec spec,
                       ExrSpec(path, image.width, image.height, image.channels, image.channel_names,
                               half ? OIIO::TypeDesc::HALF : OIIO::TypeDesc::FLOAT, "zip"));
  return WriteWhole(path, spec, OIIO::TypeDesc::FLOAT, image.pixels.data());
}

Status WriteSrgb8(const std::string& path, const ImageBuffer& image) {
  TSR_RETURN_IF_ERROR(CheckShape(image, path));
  const int out_channels = std::min(image.channels, 3);
  std::vector<uint8_t> bytes(static_cast<size_t>(image.width) * image.height * out_channels);
  for (size_t p = 0, n = static_cast<size_t>(image.width) * image.height; p < n; ++p) {
    for (int c = 0; c < out_channels; ++c) {
      float v = LinearToSrgb(image.pixels[p * image.channels + c]);
      bytes[p * out_channels + c] = static_cast<uint8_t>(std::lround(v * 255.0f));
    }
  }
  OIIO::ImageSpec spec(image.width, image.height, out_channels, OIIO::TypeDesc::UINT8);
  return WriteWhole(path, spec, OIIO::TypeDesc::UINT8, bytes.data());
}

Status WriteThumbnail(const std::string& path, const ImageBuffer& image, int max_side) {
  TSR_RETURN_IF_ERROR(CheckShape(image, path));
  const double scale =
      std::min(1.0, static_cast<double>(max_side) / std::max(image.width, image.height));
  const int w = std::max(1, static_cast<int>(std::lround(image.width * scale)));
  const int h = std::max(1, static_cast<int>(std::lround(image.height * scale)));
  OIIO::ImageSpec spec(image.width, image.height, image.channels, OIIO::TypeDesc::FLOAT);
  // Read-only view of the frame's pixels; resize filters in linear light.
  OIIO::ImageBuf src(spec, const_cast<float*>(image.pixels.data()));
  OIIO::ImageBuf small = OIIO::ImageBufAlgo::resize(src, "", 0, OIIO::ROI(0, w, 0, h));
  if (small.has_error()) return Status::Internal(path + ": cannot scale: " + small.geterror());
  ImageBuffer thumb;
  thumb.width = w;
  thumb.height = h;
  thumb.channels = image.channels;
  thumb.pixels.resize(static_cast<size_t>(w) * h * image.channels);
  if (!small.get_pixels(OIIO::ROI(0, w, 0, h, 0, 1, 0, image.channels), OIIO::TypeDesc::FLOAT,
                        thumb.pixels.data())) {
    return Status::Internal(path + ": cannot read the scaled pixels: " + small.geterror());
  }
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  return WriteSrgb8(path, thumb);
}

float SrgbToLinear(float v) {
  if (!(v > 0.0f)) return 0.0f;
  if (v >= 1.0f) return 1.0f;
  return v <= 0.04045f ? v / 12.92f : std::pow((v + 0.055f) / 1.055f, 2.4f);
}

StatusOr<std::unique_ptr<OIIO::ImageInput>> OpenForReading(const std::string& path) {
  // OpenImageIO's format names for what is refused, and their extensions once it has them.
  static const std::set<std::string> refused = [] {
    OIIO::attribute("try_all_readers", 0);
    std::set<std::string> names = {"ffmpeg", "openvdb", "raw", "dicom", "heif"};
    for (const auto& [format, extensions] : OIIO::get_extension_map()) {
      if (names.count(format)) names.insert(extensions.begin(), extensions.end());
    }
    return names;
  }();
  // Without an extension OpenImageIO takes the file's name for a format name.
  const std::filesystem::path file(path);
  std::string key =
      file.has_extension() ? file.extension().string().substr(1) : file.filename().string();
  std::transform(key.begin(), key.end(), key.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (refused.count(key)) {
    return Status::InvalidArgument(path + ": ." + key +
                                   " files are not read (movie, volume, "
                                   "camera RAW, DICOM and HEIF formats); renderers' images "
                                   "are: EXR, PNG, TIFF, JPEG, HDR, TGA, BMP, DPX, ...");
  }
  std::unique_ptr<OIIO::ImageInput> in = OIIO::ImageInput::open(path);
  if (!in) return Status::NotFound(path + ": cannot open: " + OIIO::geterror());
  return in;
}

StatusOr<ImageBuffer> Read(const std::string& path, bool* integer_pixels) {
  TSR_ASSIGN_OR_RETURN(std::unique_ptr<OIIO::ImageInput> in, OpenForReading(path));
  const OIIO::ImageSpec& spec = in->spec();
  if (integer_pixels) {
    *integer_pixels = spec.format.basetype != OIIO::TypeDesc::FLOAT &&
                      spec.format.basetype != OIIO::TypeDesc::HALF &&
                      spec.format.basetype != OIIO::TypeDesc::DOUBLE;
  }
  ImageBuffer image;
  image.width = spec.width;
  image.height = spec.height;
  image.channels = spec.nchannels;
  image.channel_names = spec.channelnames;
  image.pixels.resize(static_cast<size_t>(spec.width) * spec.height * spec.nchannels);
  if (!in->read_image(0, 0, 0, spec.nchannels, OIIO::TypeDesc::FLOAT, image.pixels.data())) {
    return Status::Internal(path + ": read failed: " + in->geterror());
  }
  in->close();
  return image;
}

Status WriteFrameFiles(const std::string& dir, const std::string& pattern, int frame,
                       const std::vector<std::string>& formats, bool exr_float,
                       const ImageBuffer& image, std::vector<std::string>* files) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec && disk_space::IsFullErrno(ec.value())) {
    return disk_space::FullError("create", dir, ec.value());
  }
  if (ec) return Status::Internal("cannot create " + dir + ": " + ec.message());
  for (const std::string& format : formats) {
    const std::string path =
        (std::filesystem::path(dir) / spec::OutputFileName(pattern, frame, format)).string();
    TSR_RETURN_IF_ERROR(format == "exr" ? WriteExr(path, image, !exr_float)
                                        : WriteSrgb8(path, image));
    files->push_back(path);
  }
  return Status::Ok();
}

}  // namespace tessera::image
