#include "plugins/pathtracer/kernel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "plugins/pathtracer/bvh.h"
#include "plugins/pathtracer/scene_flatten.h"

namespace tessera::pathtracer {
namespace {

using kernel::Float3;

TEST(KernelTest, RandomNumbersAreInRangeAndDependOnEveryInput) {
  const uint32_t seed = kernel::SampleSeed(1, 2, 3, 4);
  EXPECT_EQ(seed, kernel::SampleSeed(1, 2, 3, 4));
  EXPECT_NE(seed, kernel::SampleSeed(2, 2, 3, 4));
  EXPECT_NE(seed, kernel::SampleSeed(1, 3, 3, 4));
  EXPECT_NE(seed, kernel::SampleSeed(1, 2, 4, 4));
  EXPECT_NE(seed, kernel::SampleSeed(1, 2, 3, 5));
  double sum = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const float u = kernel::Random01(kernel::SampleSeed(7, i % 317, i / 317, 0), 1, 0);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.01);
}

TEST(KernelTest, IntersectsSpheresAndQuads) {
  kernel::Sphere sphere{{0, 0, -5}, 1.0f, 1.0f, 0};
  kernel::Quad quad{};
  quad.corner = {-10, -10, -10};
  quad.u = {20, 0, 0};
  quad.v = {0, 20, 0};
  quad.normal = {0, 0, 1};
  quad.plane_d = -10.0f;
  quad.w = {0, 0, 1.0f / 400.0f};
  const Bvh bvh = BuildBvh({{{-1, -1, -6}, {1, 1, -4}, {kernel::PrimKind::kSphere, 0}},
                            {{-10, -10, -10}, {10, 10, -10}, {kernel::PrimKind::kQuad, 0}}});
  kernel::SceneView view{};
  view.spheres = &sphere;
  view.num_spheres = 1;
  view.quads = &quad;
  view.num_quads = 1;
  view.prims = bvh.prims.data();
  view.nodes = bvh.nodes.data();
  view.num_nodes = static_cast<int>(bvh.nodes.size());

  float t;
  int kind, index;
  ASSERT_TRUE(kernel::IntersectScene(view, {{0, 0, 0}, {0, 0, -1}}, &t, &kind, &index));
  EXPECT_EQ(kind, 0);
  EXPECT_NEAR(t, 4.0f, 1e-5f);
  // From inside the sphere the far side is hit.
  ASSERT_TRUE(kernel::IntersectScene(view, {{0, 0, -5}, {0, 0, -1}}, &t, &kind, &index));
  EXPECT_EQ(kind, 0);
  EXPECT_NEAR(t, 1.0f, 1e-5f);
  // Past the sphere's edge, the quad behind it.
  ASSERT_TRUE(kernel::IntersectScene(view, {{0.0f, 0.0f, 0.0f}, kernel::Normalize({0.3f, 0, -1})},
                                     &t, &kind, &index));
  EXPECT_EQ(kind, 1);
  EXPECT_FALSE(kernel::IntersectScene(view, {{0, 0, 0}, {0, 0, 1}}, &t, &kind, &index));
  EXPECT_FALSE(kernel::IntersectScene(view, {{0, 0, 0}, kernel::Normalize({2.0f, 0, -1})}, &t,
                                      &kind, &index));
}

TEST(KernelTest, FixedPointIsExactForSumsAndClampsTheRest) {
  EXPECT_EQ(kernel::ToFixed(1.0f), int64_t{1} << 32);
  EXPECT_EQ(kernel::ToFixed(-0.5f), -(int64_t{1} << 31));
  EXPECT_EQ(kernel::ToFixed(NAN), 0);
  EXPECT_EQ(kernel::ToFixed(1e30f), kernel::ToFixed(kernel::kFixedMax));
  // 65536 samples at the clamp do not overflow.
  EXPECT_LT(static_cast<double>(kernel::ToFixed(kernel::kFixedMax)) * 65536.0,
            static_cast<double>(std::numeric_limits<int64_t>::max()));
}

TEST(KernelTest, SampleCdfPicksTheBucketAndSkipsEmptyOnes) {
  const float cdf[5] = {0.0f, 0.25f, 0.25f, 0.75f, 1.0f};  // bucket 1 is empty
  EXPECT_EQ(kernel::SampleCdf(cdf, 4, 0.0f), 0);
  EXPECT_EQ(kernel::SampleCdf(cdf, 4, 0.2f), 0);
  EXPECT_EQ(kernel::SampleCdf(cdf, 4, 0.25f), 2);
  EXPECT_EQ(kernel::SampleCdf(cdf, 4, 0.5f), 2);
  EXPECT_EQ(kernel::SampleCdf(cdf, 4, 0.99f), 3);
}

TEST(KernelTest, CameraLooksAtTarget) {
  spec::CameraKeyframe key;
  key.position = {1, 2, 3};
  key.look_at = {1, 2, -7};
  key.fov = 90;
  const kernel::Camera cam = MakeCamera(key, 200, 100);
  const Float3 center = cam.lower_left + cam.horizontal * 0.5f + cam.vertical * 0.5f;
  const Float3 dir = kernel::Normalize(center - cam.origin);
  EXPECT_NEAR(dir.x, 0.0f, 1e-6f);
  EXPECT_NEAR(dir.y, 0.0f, 1e-6f);
  EXPECT_NEAR(dir.z, -1.0f, 1e-6f);
  // fov 90 at distance 10: the viewport is 20 high and 40 wide; x grows to the right, y up.
  EXPECT_NEAR(cam.vertical.y, 20.0f, 1e-4f);
  EXPECT_NEAR(cam.horizontal.x, 40.0f, 1e-4f);
}

}  // namespace
}  // namespace tessera::pathtracer
