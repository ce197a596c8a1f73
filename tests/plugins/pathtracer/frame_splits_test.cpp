// The farm splits of a frame give the same bits as the whole frame on the CPU backend: tiles,
// sample parts, a render interrupted at a checkpoint file and resumed.

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>

#include "shared/images/accumulation.h"
#include "tests/plugins/pathtracer/test_scenes.h"

namespace tessera::pathtracer {
namespace {

using accumulation::AssemblePixels;
using accumulation::AssembleTiles;
using accumulation::LoadCheckpoint;
using accumulation::MergeSampleParts;
using accumulation::RawSums;
using accumulation::SaveCheckpoint;
using testing::BitIdentical;
using testing::ExampleScene;

RenderRequest CpuRequest(int frame) {
  RenderRequest request;
  request.frame = frame;
  request.backend = Backend::kCpu;
  request.cpu_threads = 2;
  return request;
}

RenderedImage MustRender(const spec::SceneSpec& scene, const RenderRequest& request) {
  StatusOr<RenderedImage> image = RenderFrame(scene, request);
  EXPECT_TRUE(image.ok()) << image.status().ToString();
  return image.ok() ? std::move(image).value() : RenderedImage{};
}

spec::SceneSpec SceneWithAovs() {
  spec::SceneSpec scene = ExampleScene(32, 24, 8);
  scene.aovs = {spec::Aov::kAlbedo, spec::Aov::kNormal, spec::Aov::kDepth};
  return scene;
}

TEST(AccumulationTest, WholeFrameCarriesItsAccumulation) {
  const RenderedImage image = MustRender(ExampleScene(16, 12, 4), CpuRequest(2));
  EXPECT_EQ(image.sample_begin, 0);
  EXPECT_EQ(image.sample_count, 4);
  EXPECT_EQ(image.frame_width, 16);
  EXPECT_EQ(image.frame_height, 12);
  ASSERT_EQ(image.sums.size(), image.pixels.size());
  const std::vector<float> raw = RawSums(image);
  for (size_t i = 0; i < raw.size(); ++i) {
    EXPECT_NEAR(raw[i], image.pixels[i] * 4.0f, 1e-4f * (1.0f + raw[i])) << i;
  }
  EXPECT_EQ(image.channel_names, (std::vector<std::string>{"R", "G", "B", "A"}));
}

TEST(AccumulationTest, TilesAssembleToTheWholeFrame) {
  const spec::SceneSpec scene = SceneWithAovs();
  const RenderedImage whole = MustRender(scene, CpuRequest(3));
  std::vector<RenderedImage> tiles;
  for (int ty = 0; ty < 4; ++ty) {
    for (int tx = 0; tx < 4; ++tx) {
      RenderRequest request = CpuRequest(3);
      request.region = PixelRegion{tx * 8, ty * 6, tx * 8 + 8, ty * 6 + 6};
      tiles.push_back(MustRender(scene, request));
      EXPECT_EQ(tiles.back().width, 8);
      EXPECT_EQ(tiles.back().height, 6);
    }
  }
  StatusOr<RenderedImage> frame = AssembleTiles(tiles);
  ASSERT_TRUE(frame.ok()) << frame.status().ToString();
  EXPECT_TRUE(BitIdentical(whole, *frame));
  // The farm's pixels-only assembly gives the same pixels without the frame's sums.
  StatusOr<image::ImageBuffer> pixels = AssemblePixels(tiles);
  ASSERT_TRUE(pixels.ok()) << pixels.status().ToString();
  EXPECT_EQ(pixels->width, whole.width);
  EXPECT_EQ(pixels->channel_names, whole.channel_names);
  EXPECT_TRUE(pixels->pixels == whole.pixels);
  // A missing tile is an error, not a hole; so is one pasted twice.
  std::vector<RenderedImage> twice = tiles;
  twice.back() = tiles.front();
  EXPECT_FALSE(AssemblePixels(twice).ok());
  tiles.pop_back();
  EXPECT_FALSE(AssembleTiles(tiles).ok());
  EXPECT_FALSE(AssemblePixels(tiles).ok());
}

TEST(AccumulationTest, SamplePartsMergeToTheWholeFrame) {
  const spec::SceneSpec scene = SceneWithAovs();
  const RenderedImage whole = MustRender(scene, CpuRequest(5));
  std::vector<RenderedImage> parts;
  for (int p : {3, 0, 2, 1}) {  // any order
    RenderRequest request = CpuRequest(5);
    request.sample_begin = 2 * p;
    request.sample_end = 2 * p + 2;
    parts.push_back(MustRender(scene, request));
    EXPECT_EQ(parts.back().sample_count, 2);
  }
  StatusOr<RenderedImage> merged = MergeSampleParts(parts);
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ(merged->sample_count, 8);
  EXPECT_TRUE(BitIdentical(whole, *merged));
  // Merging in another grouping gives the same bits too.
  StatusOr<RenderedImage> left = MergeSampleParts({parts[1], parts[3]});
  StatusOr<RenderedImage> right = MergeSampleParts({parts[0], parts[2]});
  ASSERT_TRUE(left.ok() && right.ok());
  StatusOr<RenderedImage> regrouped = MergeSampleParts({*right, *left});
  ASSERT_TRUE(regrouped.ok());
  EXPECT_TRUE(BitIdentical(whole, *regrouped));
  // Overlapping parts are refused.
  EXPECT_FALSE(MergeSampleParts({parts[0], parts[0]}).ok());
}

TEST(AccumulationTest, InterruptedAtACheckpointAndResumedMatchesWhole) {
  const spec::SceneSpec scene = SceneWithAovs();
  const RenderedImage whole = MustRender(scene, CpuRequest(7));
  const std::string path =
      (std::filesystem::temp_directory_path() / "tsr_accumulation_test.ckpt").string();
  std::filesystem::remove(path);

  std::atomic<bool> cancel{false};
  RenderRequest first = CpuRequest(7);
  first.pass_samples = 3;
  first.cancel = &cancel;
  int passes = 0;
  first.on_pass = [&](const RenderedImage& so_far) {
    ++passes;
    EXPECT_EQ(so_far.sample_count, 3);
    ASSERT_TRUE(SaveCheckpoint(so_far, path).ok());
    cancel = true;  // the machine goes away after the first pass
  };
  StatusOr<RenderedImage> interrupted = RenderFrame(scene, first);
  ASSERT_FALSE(interrupted.ok());
  EXPECT_EQ(interrupted.status().code(), StatusCode::kCancelled);
  EXPECT_EQ(passes, 1);

  StatusOr<RenderedImage> checkpoint = LoadCheckpoint(path);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status().ToString();
  EXPECT_EQ(checkpoint->sample_count, 3);
  RenderRequest resume = CpuRequest(7);
  resume.resume = &*checkpoint;
  resume.pass_samples = 2;  // pass sizes do not change the bits
  const RenderedImage resumed = MustRender(scene, resume);
  EXPECT_EQ(resumed.sample_count, 8);
  EXPECT_TRUE(BitIdentical(whole, resumed));

  // A checkpoint of another frame or scene is refused.
  RenderRequest other_frame = CpuRequest(8);
  other_frame.resume = &*checkpoint;
  EXPECT_EQ(RenderFrame(scene, other_frame).status().code(), StatusCode::kFailedPrecondition);
  spec::SceneSpec changed = scene;
  changed.materials[0].color[0] = 0.1;
  RenderRequest other_scene = CpuRequest(7);
  other_scene.resume = &*checkpoint;
  EXPECT_EQ(RenderFrame(changed, other_scene).status().code(), StatusCode::kFailedPrecondition);
  std::filesystem::remove(path);
}

TEST(AccumulationTest, ProgressivePassesReportGrowingSampleCounts) {
  RenderRequest request = CpuRequest(1);
  request.pass_samples = 2;
  std::vector<int> counts;
  request.on_pass = [&](const RenderedImage& so_far) { counts.push_back(so_far.sample_count); };
  const RenderedImage image = MustRender(ExampleScene(16, 8, 5), request);
  EXPECT_EQ(counts, (std::vector<int>{2, 4, 5}));
  EXPECT_TRUE(BitIdentical(image, MustRender(ExampleScene(16, 8, 5), CpuRequest(1))));
}

TEST(AccumulationTest, BadRegionsAndRangesAreErrors) {
  const spec::SceneSpec scene = ExampleScene(16, 8, 2);
  RenderRequest request = CpuRequest(1);
  request.region = PixelRegion{0, 0, 17, 8};
  EXPECT_EQ(RenderFrame(scene, request).status().code(), StatusCode::kInvalidArgument);
  request.region = PixelRegion{4, 4, 4, 8};
  EXPECT_EQ(RenderFrame(scene, request).status().code(), StatusCode::kInvalidArgument);
  request.region.reset();
  request.sample_begin = 3;
  request.sample_end = 3;
  EXPECT_EQ(RenderFrame(scene, request).status().code(), StatusCode::kInvalidArgument);
}

TEST(AccumulationTest, CorruptCheckpointIsAnError) {
  const std::string path = (std::filesystem::temp_directory_path() / "tsr_corrupt.ckpt").string();
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fputs("TSRACC01 garbage", f);
  std::fclose(f);
  EXPECT_EQ(LoadCheckpoint(path).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadCheckpoint(path + ".missing").status().code(), StatusCode::kNotFound);
  std::filesystem::remove(path);
}

TEST(AccumulationTest, AovChannelsAreNamedAndPlausible) {
  const RenderedImage image = MustRender(SceneWithAovs(), CpuRequest(1));
  ASSERT_EQ(image.channels, 11);
  EXPECT_EQ(image.channel_names,
            (std::vector<std::string>{"R", "G", "B", "A", "albedo.R", "albedo.G", "albedo.B", "N.X",
                                      "N.Y", "N.Z", "Z"}));
  ASSERT_EQ(image.pixels.size(), 32u * 24u * 11u);
  // Bottom-centre pixel looks at the ground: normal ~ +y, depth > 0, albedo ~ ground colour.
  const float* px = &image.pixels[((23 * 32) + 16) * 11];
  EXPECT_EQ(px[3], 1.0f);
  EXPECT_NEAR(px[8], 1.0f, 0.05f);
  EXPECT_GT(px[10], 1.0f);
  EXPECT_NEAR(px[4], 0.55f, 0.05f);
  // Top-left looks at the sky: no hit, zero depth.
  EXPECT_EQ(image.pixels[10], 0.0f);
}

}  // namespace
}  // namespace tessera::pathtracer
