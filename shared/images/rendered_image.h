#pragma once
// A rendered frame or part of one as the farm carries it: the finished pixels, and the exact
// accumulation they came from with where the part sits in the frame and in the sample sequence.
// Renderers that return exact accumulations produce it (the path tracer's RenderFrame); the
// scheduler merges, pastes and checks parts and checkpoints with it (shared/images/accumulation.h)
// without depending on any renderer.

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::accumulation {

// Sums are 32.32 fixed point: a sample's value v is summed as round(v * kFixedScale), each value
// clamped to +-32767 first so 65536 samples cannot overflow an int64 (the path tracer's kernel
// writes exactly this, see plugins/pathtracer/kernel.h).
inline constexpr double kFixedScale = 4294967296.0;
// Channels one image may carry: R, G, B, A, albedo R, G, B, normal X, Y, Z, and depth.
inline constexpr int kMaxChannels = 11;

struct RenderedImage {
  int width = 0;  // of the region rendered (the whole frame by default)
  int height = 0;
  int channels = 4;  // linear float, row-major, top row first; RGBA unless the scene asks AOVs
  std::vector<float> pixels;  // the mean of the samples: sums / sample_count
  // One name per channel: "R", "G", "B", "A", then "albedo.R", "albedo.G", "albedo.B",
  // "N.X", "N.Y", "N.Z", "Z" for the AOVs the scene asks for (see spec::SceneSpec::aovs).
  std::vector<std::string> channel_names;
  std::string backend;       // "cpu", "cuda:N" or "cuda:N,M" (several devices): what rendered it
  uint64_t rays_traced = 0;  // rays the kernel traced (camera, bounce, shadow), for benchmarks

  // ---- Where this part sits in the frame and in the sample sequence ----
  int frame = 1;
  int frame_width = 0;  // the whole frame
  int frame_height = 0;
  int x0 = 0;  // the region's top-left corner in the frame
  int y0 = 0;
  int sample_begin = 0;  // samples [sample_begin, sample_begin + sample_count) are summed
  int sample_count = 0;
  uint64_t scene_hash = 0;  // of the flattened frame: checkpoints of another scene are refused
  // The raw accumulation: per pixel and channel, the sum of the samples in 32.32 fixed point
  // (value * kFixedScale, each sample's values clamped to +-32767 first). Integer sums make
  // merging exact; RawSums() (shared/images/accumulation.h) gives them as floats.
  std::vector<int64_t> sums;
};

}  // namespace tessera::accumulation
