#include "plugins/pathtracer/renderer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "tests/plugins/pathtracer/test_scenes.h"

namespace tessera::pathtracer {
namespace {

using testing::ExampleScene;

RenderedImage Render(const spec::SceneSpec& scene, int frame, int threads) {
  RenderRequest request;
  request.frame = frame;
  request.backend = Backend::kCpu;
  request.cpu_threads = threads;
  StatusOr<RenderedImage> image = RenderFrame(scene, request);
  EXPECT_TRUE(image.ok()) << image.status().ToString();
  return image.ok() ? std::move(image).value() : RenderedImage{};
}

bool BitIdentical(const RenderedImage& a, const RenderedImage& b) {
  return a.width == b.width && a.height == b.height && a.pixels.size() == b.pixels.size() &&
         std::equal(a.pixels.begin(), a.pixels.end(), b.pixels.begin(),
                    [](float x, float y) { return std::memcmp(&x, &y, sizeof x) == 0; });
}

TEST(RendererTest, OutputLayout) {
  const RenderedImage image = Render(ExampleScene(12, 7, 2), 1, 2);
  EXPECT_EQ(image.width, 12);
  EXPECT_EQ(image.height, 7);
  EXPECT_EQ(image.channels, 4);
  EXPECT_EQ(image.backend, "cpu");
  ASSERT_EQ(image.pixels.size(), 12u * 7u * 4u);
  for (size_t i = 3; i < image.pixels.size(); i += 4) EXPECT_EQ(image.pixels[i], 1.0f);
  EXPECT_GE(image.rays_traced, 12u * 7u * 2u);
}

TEST(RendererTest, SameFrameTwiceIsBitIdentical) {
  const spec::SceneSpec scene = ExampleScene(24, 16, 4);
  EXPECT_TRUE(BitIdentical(Render(scene, 3, 2), Render(scene, 3, 2)));
}

TEST(RendererTest, ThreadCountDoesNotChangePixels) {
  const spec::SceneSpec scene = ExampleScene(24, 16, 4);
  const RenderedImage one = Render(scene, 5, 1);
  EXPECT_TRUE(BitIdentical(one, Render(scene, 5, 2)));
  EXPECT_TRUE(BitIdentical(one, Render(scene, 5, 7)));
}

TEST(RendererTest, ExampleSceneHasFiniteVariedLitPixels) {
  const RenderedImage image = Render(ExampleScene(48, 27, 8), 1, 0);
  float lo = 1e30f, hi = -1e30f;
  double sum = 0;
  for (size_t i = 0; i < image.pixels.size(); ++i) {
    if (i % 4 == 3) continue;
    const float v = image.pixels[i];
    ASSERT_TRUE(std::isfinite(v)) << "pixel value " << i;
    ASSERT_GE(v, 0.0f);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
  }
  EXPECT_GT(sum / (image.pixels.size() * 3 / 4), 0.05);  // not black
  EXPECT_GT(hi - lo, 0.2f);                              // not constant
}

// A white diffuse sphere in a uniform environment reflects exactly the environment: every
// pixel, on the sphere or not, sees the background radiance.
TEST(RendererTest, WhiteFurnace) {
  StatusOr<spec::SceneSpec> scene = spec::ParseSceneYaml(R"(
width: 32
height: 32
samples: 16
max_depth: 16
background: {color: [0.6, 0.6, 0.6]}
camera:
  keyframes: [{frame: 1, position: [0, 0, 4], look_at: [0, 0, 0], fov: 35}]
materials:
  white: {type: diffuse, color: [1, 1, 1]}
objects:
  - {type: sphere, center: [0, 0, 0], radius: 1, material: white}
)");
  ASSERT_TRUE(scene.ok()) << scene.status().ToString();
  const RenderedImage image = Render(*scene, 1, 2);
  double sum = 0;
  for (size_t i = 0; i < image.pixels.size(); i += 4) sum += image.pixels[i + 1];
  EXPECT_NEAR(sum / (image.width * image.height), 0.6, 0.6 * 0.03);
  // The sphere covers the image centre: it too must be ~ the background.
  const size_t centre = (16 * 32 + 16) * 4;
  EXPECT_NEAR(image.pixels[centre], 0.6, 0.6 * 0.03);
}

TEST(RendererTest, AnimatedFramesDiffer) {
  const spec::SceneSpec scene = ExampleScene(24, 16, 2);
  EXPECT_FALSE(BitIdentical(Render(scene, 1, 2), Render(scene, 10, 2)));
}

TEST(RendererTest, CancelFlagAlreadySetReturnsCancelled) {
  std::atomic<bool> cancel{true};
  RenderRequest request;
  request.backend = Backend::kCpu;
  request.cancel = &cancel;
  StatusOr<RenderedImage> image = RenderFrame(ExampleScene(24, 16, 2), request);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kCancelled);
}

TEST(RendererTest, CancelDuringRenderStops) {
  std::atomic<bool> cancel{false};
  RenderRequest request;
  request.backend = Backend::kCpu;
  request.cpu_threads = 2;
  request.cancel = &cancel;
  request.on_progress = [&](double) { cancel = true; };
  // Long enough (~seconds) that the first progress report comes before the end.
  StatusOr<RenderedImage> image = RenderFrame(ExampleScene(320, 180, 64), request);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kCancelled);
}

TEST(RendererTest, ReportsProgressUpToOne) {
  double last = -1;
  RenderRequest request;
  request.backend = Backend::kCpu;
  request.on_progress = [&](double f) {
    EXPECT_GE(f, last);
    last = f;
  };
  ASSERT_TRUE(RenderFrame(ExampleScene(16, 8, 1), request).ok());
  EXPECT_EQ(last, 1.0);
}

TEST(RendererTest, InvalidSceneIsAnError) {
  spec::SceneSpec scene = ExampleScene(16, 8, 1);
  scene.samples = 0;
  StatusOr<RenderedImage> image = RenderFrame(scene, RenderRequest{});
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(image.status().message().find("samples"), std::string::npos);
}

TEST(RendererTest, CudaRequestedWithoutDeviceIsAClearError) {
  if (CudaAvailable()) GTEST_SKIP() << "a CUDA device is present";
  RenderRequest request;
  request.backend = Backend::kCuda;
  StatusOr<RenderedImage> image = RenderFrame(ExampleScene(16, 8, 1), request);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(image.status().message().find("CUDA"), std::string::npos);
  // Auto falls back to the CPU.
  request.backend = Backend::kAuto;
  StatusOr<RenderedImage> fallback = RenderFrame(ExampleScene(16, 8, 1), request);
  ASSERT_TRUE(fallback.ok()) << fallback.status().ToString();
  EXPECT_EQ(fallback->backend, "cpu");
}

}  // namespace
}  // namespace tessera::pathtracer
