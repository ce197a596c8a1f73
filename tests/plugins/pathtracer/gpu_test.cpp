// CUDA backend against the CPU backend (label `gpu`; every test skips without a CUDA device).
//
// Tolerance: both backends run the same kernel code on the same random numbers, but CUDA's math
// functions (sinf, cosf, sqrtf, FMA contraction) round differently from the host's, so a few
// paths flip a decision and diverge. Per image and channel group: the mean must agree within
// 1%, and at least 95% of the values must agree within 1e-3 * (1 + |cpu value|). The GPU's own
// splits (tiles, sample parts, resume) are exact like the CPU's: bit-identical to its whole frame.

#include <gtest/gtest.h>

#include <cmath>

#include "shared/images/accumulation.h"
#include "tests/plugins/pathtracer/test_scenes.h"
#include "worker/hardware_probe.h"

namespace tessera::pathtracer {
namespace {

using accumulation::AssembleTiles;
using accumulation::MergeSampleParts;
using testing::BitIdentical;
using testing::DataScene;
using testing::ExampleScene;

RenderedImage Render(const spec::SceneSpec& scene, Backend backend, RenderRequest request = {}) {
  request.backend = backend;
  StatusOr<RenderedImage> image = RenderFrame(scene, request);
  EXPECT_TRUE(image.ok()) << image.status().ToString();
  return image.ok() ? std::move(image).value() : RenderedImage{};
}

void ExpectClose(const RenderedImage& gpu, const RenderedImage& cpu, const std::string& what) {
  ASSERT_EQ(gpu.pixels.size(), cpu.pixels.size()) << what;
  ASSERT_EQ(gpu.channel_names, cpu.channel_names) << what;
  for (int c = 0; c < cpu.channels; ++c) {
    double sum_gpu = 0, sum_cpu = 0;
    size_t close = 0, n = 0;
    for (size_t i = c; i < cpu.pixels.size(); i += cpu.channels) {
      sum_gpu += gpu.pixels[i];
      sum_cpu += cpu.pixels[i];
      if (std::fabs(gpu.pixels[i] - cpu.pixels[i]) <= 1e-3f * (1.0f + std::fabs(cpu.pixels[i]))) {
        ++close;
      }
      ++n;
    }
    const std::string channel = what + " channel " + cpu.channel_names[c];
    EXPECT_NEAR(sum_gpu, sum_cpu, 0.01 * std::fabs(sum_cpu) + 1e-3 * n) << channel;
    EXPECT_GT(static_cast<double>(close) / n, 0.95) << channel;
  }
}

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!CudaAvailable()) {
      worker::ListCudaDevices(&why);
      GTEST_SKIP() << "no CUDA device (" << why << "): CUDA-vs-CPU checks skipped";
    }
  }
};

TEST_F(GpuTest, ExampleMatchesCpu) {
  const spec::SceneSpec scene = ExampleScene(64, 36, 16);
  RenderRequest request;
  request.frame = 4;
  const RenderedImage gpu = Render(scene, Backend::kCuda, request);
  EXPECT_EQ(gpu.backend, "cuda:0");
  EXPECT_GT(gpu.rays_traced, 0u);
  ExpectClose(gpu, Render(scene, Backend::kCpu, request), "example");
}

TEST_F(GpuTest, FeatureScenesMatchCpu) {
  for (const char* name : {"cornell.yaml", "spheres_env.yaml", "textured_mesh.yaml"}) {
    const spec::SceneSpec scene = DataScene(name);
    ExpectClose(Render(scene, Backend::kCuda), Render(scene, Backend::kCpu), name);
  }
}

TEST_F(GpuTest, GpuSplitsAreBitIdentical) {
  const spec::SceneSpec scene = DataScene("textured_mesh.yaml");
  const RenderedImage whole = Render(scene, Backend::kCuda);
  std::vector<RenderedImage> tiles;
  for (int ty = 0; ty < 2; ++ty) {
    for (int tx = 0; tx < 2; ++tx) {
      RenderRequest request;
      request.region = PixelRegion{tx * 32, ty * 24, tx * 32 + 32, ty * 24 + 24};
      tiles.push_back(Render(scene, Backend::kCuda, request));
    }
  }
  StatusOr<RenderedImage> assembled = AssembleTiles(tiles);
  ASSERT_TRUE(assembled.ok()) << assembled.status().ToString();
  EXPECT_TRUE(BitIdentical(whole, *assembled));
  std::vector<RenderedImage> parts;
  for (int p = 0; p < 4; ++p) {
    RenderRequest request;
    request.sample_begin = 4 * p;
    request.sample_end = 4 * p + 4;
    parts.push_back(Render(scene, Backend::kCuda, request));
  }
  StatusOr<RenderedImage> merged = MergeSampleParts(parts);
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_TRUE(BitIdentical(whole, *merged));
  RenderRequest resume;
  resume.resume = &parts[0];
  resume.pass_samples = 5;
  EXPECT_TRUE(BitIdentical(whole, Render(scene, Backend::kCuda, resume)));
}

}  // namespace
}  // namespace tessera::pathtracer
