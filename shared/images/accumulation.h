#pragma once
// Farm helpers over RenderedImage accumulations (the farm's format for parts of split frames and
// checkpoints, shared/images/rendered_image.h): merge sample parts, paste tiles into a frame, and
// save/load checkpoints. All exact: the sums are integers (32.32 fixed point), so a frame
// assembled from tiles, merged from sample parts in any grouping, or resumed from a checkpoint is
// bit-identical to the frame rendered whole (on the same backend). The scheduler's assembler and
// broker use them without linking any renderer; renderers that return exact accumulations (the
// path tracer, TSR_CAP_SAMPLE_PARTS plugins) write this format.

#include <string>
#include <string_view>
#include <vector>

#include "shared/base/status.h"
#include "shared/images/image_io.h"
#include "shared/images/rendered_image.h"

namespace tessera::accumulation {

// Recomputes `pixels` from `sums` and `sample_count`.
void FinishPixels(RenderedImage* image);

// The accumulation as floats: per pixel and channel, the sum of the samples (pixels * count).
std::vector<float> RawSums(const RenderedImage& image);

// Sums parts of the same frame, region, scene and channels whose sample ranges do not overlap
// (in any order). The result's sample_count is the total and sample_begin the lowest start.
StatusOr<RenderedImage> MergeSampleParts(const std::vector<RenderedImage>& parts);

// A whole frame shaped like `part`'s frame (same channels, samples and scene), all zero.
RenderedImage EmptyFrameFor(const RenderedImage& part);

// Copies a tile (pixels and sums) into its place in `frame`; both must agree on the frame size,
// channels, samples and scene.
Status PasteTile(const RenderedImage& tile, RenderedImage* frame);

// Pastes tiles into a new frame; they must cover it exactly once.
StatusOr<RenderedImage> AssembleTiles(const std::vector<RenderedImage>& tiles);

// The same frame's pixels only (what the farm writes): each tile's finished pixels pasted into a
// frame-sized float image, without building the frame's sums. The tiles must be of one frame,
// scene, channels and sample range and cover it exactly once. Bit-identical to AssembleTiles'
// pixels (each pixel is finished from its own sums either way).
StatusOr<image::ImageBuffer> AssemblePixels(const std::vector<RenderedImage>& tiles);

// The accumulation (not the derived pixels) with its frame, region, sample range, channel names
// and scene hash as bytes: how the parts of a split frame travel to the scheduler and wait there
// for the rest of the frame. Parse checks the shape and recomputes the pixels.
StatusOr<std::string> SerializeAccumulation(const RenderedImage& image);
StatusOr<RenderedImage> ParseAccumulation(std::string_view data);

// Writes the accumulation (not the derived pixels) with its frame, region, sample range, channel
// names and scene hash; the file is replaced atomically (written aside, then renamed).
Status SaveCheckpoint(const RenderedImage& image, const std::string& path);

// Reads a checkpoint back (pixels recomputed); a renderer continues from it (the path tracer:
// RenderRequest::resume).
StatusOr<RenderedImage> LoadCheckpoint(const std::string& path);

}  // namespace tessera::accumulation
