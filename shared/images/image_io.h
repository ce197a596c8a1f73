#pragma once
// Image files through OpenImageIO. Writes are atomic (temp file + rename) so a reader or a crash
// never sees half a frame.

#include <string>
#include <vector>

#include "shared/base/status.h"

namespace tessera::image {

struct ImageBuffer {
  int width = 0;
  int height = 0;
  int channels = 0;           // interleaved float channels per pixel
  std::vector<float> pixels;  // row-major, top row first, linear
  // Names for EXR channels, beauty (R, G, B[, A]) first; empty: R, G, B, A by position.
  std::vector<std::string> channel_names;
};

// Linear EXR; half float by default (float when `half` is false). Channels named R,G,B[,A].
Status WriteExr(const std::string& path, const ImageBuffer& image, bool half = true);

// 8-bit sRGB image of linear data (clamped to [0,1], alpha dropped), in the format the file's
// extension names: png, jpg, tif.
Status WriteSrgb8(const std::string& path, const ImageBuffer& image);
// A small sRGB PNG of the beauty channels for the dashboard: scaled down (never up) so its
// longer side is at most `max_side`; creates the folder.
Status WriteThumbnail(const std::string& path, const ImageBuffer& image, int max_side = 256);

// Writes one output frame as every format in `formats` (exr, png, jpg, tif) under `dir` (created)
// with the job's file name pattern; appends the paths written to *files.
Status WriteFrameFiles(const std::string& dir, const std::string& pattern, int frame,
                       const std::vector<std::string>& formats, bool exr_float,
                       const ImageBuffer& image, std::vector<std::string>* files);

// Reads any image OpenImageIO understands as float pixels. *integer_pixels (when given) tells
// whether the file stores integer pixels (8/16-bit: usually sRGB-encoded) rather than floats.
StatusOr<ImageBuffer> Read(const std::string& path, bool* integer_pixels = nullptr);

// Linear -> sRGB transfer function (IEC 61966-2-1).
float LinearToSrgb(float linear);
// sRGB -> linear, the inverse.
float SrgbToLinear(float encoded);

}  // namespace tessera::image
