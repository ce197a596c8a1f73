#pragma once
// Where the assembler keeps a split frame's parts until the frame is assembled: their files in
// the frame's parts directory (<task id>.tile, <task id>.acc, <task id>_<x0>_<y0>.exr: they
// survive a restart), and in memory, within a budget, the tile regions they resolve to, so the
// frame's last part does not read every earlier one back. Also the pixel conversions the frame
// encoders share with it (half floats, preview bytes).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "shared/base/status.h"
#include "shared/images/image_io.h"
#include "shared/images/rendered_image.h"

namespace tessera::assembler {

class PartMemory;

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
int PreviewChannels(int channels);
// Float to half as OpenImageIO converts when it writes a half EXR from floats.
void ToHalf(const float* in, size_t n, uint16_t* out);
// `count` pixels of `channels` floats to preview bytes, exactly as image::WriteSrgb8 makes them.
void ToSrgb(const float* pixels, size_t count, int channels, uint8_t* out);
// The names OpenImageIO gives channels nobody named (what an EXR written without names holds).
std::vector<std::string> DefaultChannelNames(int channels);

// A frame's parts taken for assembly: tiles of one frame, scene, channels and samples that cover
// it exactly once. The views point into the buffers it holds, so it is moved, never copied.
struct FrameParts {
  FrameParts() = default;
  FrameParts(FrameParts&&) = default;
  FrameParts& operator=(FrameParts&&) = default;
  FrameParts(const FrameParts&) = delete;
  FrameParts& operator=(const FrameParts&) = delete;

  int width = 0;
  int height = 0;
  int channels = 0;
  std::vector<std::string> channel_names;  // empty: OIIO's defaults (R, G, B, A, ...)
  std::vector<TileView> tiles;
  std::vector<std::vector<float>> pixels;
  std::vector<std::vector<uint16_t>> half;
  std::vector<std::vector<uint8_t>> srgb;
};

// Threads: any (parts of one frame may arrive on several threads at once: the memory has its own
// lock).
class PartSpool {
 public:
  // Memory for resolved regions; beyond it the frames touched longest ago leave it and are
  // assembled from their files instead.
  explicit PartSpool(size_t memory_budget);
  ~PartSpool();
  PartSpool(const PartSpool&) = delete;
  PartSpool& operator=(const PartSpool&) = delete;

  // Each Keep* writes the part's file into `dir` (which must exist; the file is written aside,
  // then renamed, mode 0600) and sets *path to it; then the part joins its region in memory.
  // A tile with all its samples, kept as its finished pixels (half the bytes of its sums).
  Status KeepTile(const std::string& dir, int64_t task, const accumulation::RenderedImage& tile,
                  std::string* path);
  // A sample part: `bytes` (its serialized accumulation, checked) kept exact, to be merged with
  // its region's other parts.
  Status KeepSamples(const std::string& dir, int64_t task, const std::string& bytes,
                     accumulation::RenderedImage part, std::string* path);
  // A plugin renderer's tile of `frame` at (x0, y0): float pixels, kept as a float EXR.
  Status KeepPixelTile(const std::string& dir, int64_t task, int frame, int x0, int y0,
                       const image::ImageBuffer& tile, std::string* path);

  // The frame's parts (`expected` of them, all in `dir`), which leave the memory whatever the
  // outcome. A region comes from memory when it resolved exactly the parts stored for it (and
  // `need_floats` is false: the memory keeps half floats), else from its files. Errors name
  // `what` ("frame 7").
  Status Take(const std::string& dir, int expected, int frame, bool need_floats,
              const std::string& what, FrameParts* parts);

 private:
  std::unique_ptr<PartMemory> memory_;  // scheduler/assembler/part_memory.h
};

}  // namespace tessera::assembler
