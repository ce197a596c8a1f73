// Rendering features: BVH against brute force, meshes from OBJ files with transforms and
// instances, asset errors, next event estimation and the environment map (unbiasedness checks
// against closed-form values).

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "plugins/pathtracer/assets.h"
#include "plugins/pathtracer/bvh.h"
#include "plugins/pathtracer/kernel.h"
#include "plugins/pathtracer/scene_flatten.h"
#include "tests/plugins/pathtracer/test_scenes.h"

namespace tessera::pathtracer {
namespace {

using kernel::Float3;
using testing::DataDir;
using testing::DataScene;

StatusOr<RenderedImage> RenderCpu(const spec::SceneSpec& scene, int frame = 1) {
  RenderRequest request;
  request.frame = frame;
  request.backend = Backend::kCpu;
  request.cpu_threads = 2;
  return RenderFrame(scene, request);
}

// Mean of channel c over a centred square of the image.
double CentreMean(const RenderedImage& image, int half, int c = 1) {
  double sum = 0;
  int n = 0;
  for (int y = image.height / 2 - half; y < image.height / 2 + half; ++y) {
    for (int x = image.width / 2 - half; x < image.width / 2 + half; ++x) {
      sum += image.pixels[(static_cast<size_t>(y) * image.width + x) * image.channels + c];
      ++n;
    }
  }
  return sum / n;
}

TEST(FeaturesTest, BvhFindsTheSameClosestHitAsBruteForce) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-5.0f, 5.0f);
  FlatScene flat;
  std::vector<BvhInput> inputs;
  for (int i = 0; i < 150; ++i) {
    kernel::Sphere s{{u(rng), u(rng), u(rng)}, 0.3f, 1.0f / 0.3f, 0};
    inputs.push_back({s.center - Float3{0.3f, 0.3f, 0.3f},
                      s.center + Float3{0.3f, 0.3f, 0.3f},
                      {kernel::PrimKind::kSphere, i}});
    flat.spheres.push_back(s);
  }
  for (int i = 0; i < 300; ++i) {
    const Float3 p = {u(rng), u(rng), u(rng)};
    kernel::Triangle t{
        p, {u(rng) * 0.2f, u(rng) * 0.2f, 0.1f}, {0.1f, u(rng) * 0.2f, u(rng) * 0.2f}, 0, -1};
    const Float3 p1 = p + t.e1, p2 = p + t.e2;
    inputs.push_back({kernel::Min3(p, kernel::Min3(p1, p2)),
                      kernel::Max3(p, kernel::Max3(p1, p2)),
                      {kernel::PrimKind::kTriangle, i}});
    flat.triangles.push_back(t);
  }
  Bvh bvh = BuildBvh(inputs);
  EXPECT_LT(bvh.depth, kernel::kBvhStackSize);
  flat.nodes = bvh.nodes;
  flat.prims = bvh.prims;
  const kernel::SceneView view = flat.View();
  int hits = 0;
  for (int r = 0; r < 2000; ++r) {
    const kernel::Ray ray{{u(rng), u(rng), u(rng)}, kernel::Normalize({u(rng), u(rng), u(rng)})};
    float best = kernel::kInfinity, bu, bv;
    for (const auto& s : flat.spheres) best = std::min(best, kernel::IntersectSphere(s, ray, best));
    for (const auto& t : flat.triangles) {
      best = std::min(best, kernel::IntersectTriangle(t, ray, best, &bu, &bv));
    }
    kernel::Hit hit;
    const bool found = kernel::TraceBvh(view, ray, kernel::kInfinity, false, &hit);
    ASSERT_EQ(found, best < kernel::kInfinity) << "ray " << r;
    if (found) {
      ++hits;
      EXPECT_EQ(hit.t, best) << "ray " << r;
      EXPECT_TRUE(kernel::TraceBvh(view, ray, kernel::kInfinity, true, &hit));
    }
  }
  EXPECT_GT(hits, 200);
}

TEST(FeaturesTest, TexturedMeshSceneRendersWithInstancesAndAnimation) {
  const spec::SceneSpec scene = DataScene("textured_mesh.yaml");
  StatusOr<FlatScene> flat = FlattenScene(scene, 1);
  ASSERT_TRUE(flat.ok()) << flat.status().ToString();
  EXPECT_EQ(flat->triangles.size(), 320u + 12u);  // the cube's triangles serve two instances
  EXPECT_EQ(flat->instances.size(), 3u);
  EXPECT_EQ(flat->textures.size(), 1u);  // one texture file, two materials
  StatusOr<RenderedImage> frame1 = RenderCpu(scene, 1);
  ASSERT_TRUE(frame1.ok()) << frame1.status().ToString();
  EXPECT_EQ(frame1->channels, 11);
  // The icosphere sits in the middle: its normals face the camera and its depth is ~3.6.
  const size_t centre = (static_cast<size_t>(24) * 64 + 32) * 11;
  EXPECT_GT(frame1->pixels[centre + 9], 0.5f);  // N.Z towards the camera
  EXPECT_NEAR(frame1->pixels[centre + 10], 3.6f, 0.4f);
  StatusOr<RenderedImage> frame10 = RenderCpu(scene, 10);
  ASSERT_TRUE(frame10.ok());
  EXPECT_NE(frame1->sums, frame10->sums);  // the keyframed cube moved
}

TEST(FeaturesTest, InstancesPlaceTheirMeshes) {
  spec::SceneSpec scene = DataScene("textured_mesh.yaml");
  // The cube (unit size) scaled by 2, turned 45 degrees about y, 5 units down -z, 2 up.
  scene.meshes[1].transform = {{0, 2, -5}, {0, 45, 0}, {2, 2, 2}};
  StatusOr<FlatScene> flat = FlattenScene(scene, 1);
  ASSERT_TRUE(flat.ok()) << flat.status().ToString();
  const kernel::SceneView view = flat->View();
  kernel::Hit hit;
  // Straight down -z the ray meets the cube's vertical edge at distance sqrt(2) from the centre.
  ASSERT_TRUE(kernel::TraceBvh(view, {{0, 2, 0}, {0, 0, -1}}, kernel::kInfinity, false, &hit));
  EXPECT_EQ(hit.instance, 1);
  EXPECT_NEAR(hit.t, 5.0f - std::sqrt(2.0f), 1e-4f);
  // The world-space normal of a face hit off the edge is tilted 45 degrees about y.
  const kernel::Ray ray{{0.3f, 2, 0}, {0, 0, -1}};
  ASSERT_TRUE(kernel::TraceBvh(view, ray, kernel::kInfinity, false, &hit));
  const kernel::SurfacePoint sp = kernel::DescribeHit(view, ray, hit);
  EXPECT_NEAR(std::fabs(sp.geometric_n.x), std::sqrt(0.5f), 1e-4f);
  EXPECT_NEAR(std::fabs(sp.geometric_n.z), std::sqrt(0.5f), 1e-4f);
  EXPECT_EQ(sp.material, scene.meshes[1].material_index);
  // The icosphere instance: unit radius scaled by 0.6 around (0, 0.6, 0), seen from above.
  ASSERT_TRUE(kernel::TraceBvh(view, {{0, 2, 0}, {0, -1, 0}}, kernel::kInfinity, false, &hit));
  EXPECT_EQ(hit.instance, 0);
  EXPECT_NEAR(hit.t, 2.0f - 1.2f, 2e-2f);  // a faceted sphere: within its flatness
}

// Quads and spheres take their UVs from the surface: a checker texture shows up in the albedo
// AOV as a two-valued pattern.
TEST(FeaturesTest, TexturesOnQuadsAndSpheres) {
  StatusOr<spec::SceneSpec> scene = spec::ParseSceneYaml(R"(
width: 32
height: 16
samples: 4
max_depth: 1
aovs: [albedo]
background: {color: [0, 0, 0]}
camera:
  keyframes: [{frame: 1, position: [0, 0, 3], look_at: [0, 0, 0], fov: 40}]
materials:
  tex: {type: diffuse, color: [1, 1, 1], texture: checker.png}
objects:
  - {type: quad, corner: [-1.9, -0.9, 0], u: [1.8, 0, 0], v: [0, 1.8, 0], material: tex}
  - {type: sphere, center: [1, 0, 0], radius: 0.9, material: tex}
)",
                                                         DataDir());
  ASSERT_TRUE(scene.ok()) << scene.status().ToString();
  StatusOr<RenderedImage> image = RenderCpu(*scene);
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  for (int half : {0, 1}) {  // left: quad, right: sphere
    int light = 0, dark = 0;
    for (int y = 5; y < 11; ++y) {
      for (int x = 16 * half + 5; x < 16 * half + 11; ++x) {
        const float a = image->pixels[(static_cast<size_t>(y) * 32 + x) * 7 + 4];
        light += a > 0.6f;
        dark += a < 0.3f;
      }
    }
    EXPECT_GT(light, 3) << (half ? "sphere" : "quad");
    EXPECT_GT(dark, 3) << (half ? "sphere" : "quad");
  }
}

void ExpectRenderError(const spec::SceneSpec& scene, StatusCode code,
                       std::initializer_list<std::string> parts) {
  StatusOr<RenderedImage> image = RenderCpu(scene);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), code) << image.status().ToString();
  for (const auto& part : parts) {
    EXPECT_NE(image.status().message().find(part), std::string::npos) << image.status().message();
  }
}

TEST(FeaturesTest, MissingAndBadAssetsAreClearErrors) {
  spec::SceneSpec scene = DataScene("textured_mesh.yaml");
  scene.meshes[1].file = "nowhere.obj";
  ExpectRenderError(scene, StatusCode::kNotFound,
                    {"objects[3] (mesh 'nowhere.obj')", DataDir() + "/nowhere.obj"});
  scene = DataScene("textured_mesh.yaml");
  scene.meshes[0].file = "empty.obj";
  ExpectRenderError(scene, StatusCode::kInvalidArgument, {"objects[2]", "no triangles"});
  scene.meshes[0].file = "degenerate.obj";
  ExpectRenderError(scene, StatusCode::kInvalidArgument, {"objects[2]", "zero area"});
  scene = DataScene("textured_mesh.yaml");
  scene.materials[1].texture = "missing.png";
  ExpectRenderError(scene, StatusCode::kNotFound, {"materials.checker.texture", "missing.png"});
  scene = DataScene("spheres_env.yaml");
  scene.background.environment = "cornell.yaml";  // not an image
  ExpectRenderError(scene, StatusCode::kInvalidArgument, {"background.environment"});
  scene = DataScene("textured_mesh.yaml");
  scene.meshes[0].material = "nothing";
  ExpectRenderError(scene, StatusCode::kInvalidArgument, {"meshes[0].material", "nothing"});
}

// A diffuse floor (albedo 0.5) lit only by a small lamp of area A and radiance Le at height 1:
// radiance towards the camera is albedo / pi * Le * A / d^2. With NEE + MIS this converges at a
// few samples; a bias in the MIS weights would shift it.
TEST(FeaturesTest, NextEventEstimationMatchesTheClosedForm) {
  StatusOr<spec::SceneSpec> scene = spec::ParseSceneYaml(R"(
width: 16
height: 16
samples: 64
max_depth: 1
background: {color: [0, 0, 0]}
camera:
  keyframes: [{frame: 1, position: [0, 0.5, 0.001], look_at: [0, 0, 0], fov: 2}]
materials:
  floor: {type: diffuse, color: [0.5, 0.5, 0.5]}
  lamp: {type: emissive, color: [1, 1, 1], strength: 100}
objects:
  - {type: quad, corner: [-5, 0, -5], u: [0, 0, 10], v: [10, 0, 0], material: floor}
  - {type: quad, corner: [-0.05, 1, -0.05], u: [0.1, 0, 0], v: [0, 0, 0.1], material: lamp}
)");
  ASSERT_TRUE(scene.ok()) << scene.status().ToString();
  StatusOr<RenderedImage> image = RenderCpu(*scene);
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  const double expected = 0.5 / M_PI * 100 * 0.01;  // cos terms ~1 for a small lamp overhead
  EXPECT_NEAR(CentreMean(*image, 4), expected, expected * 0.03);
}

// The same with a small sphere lamp (cone sampling): irradiance pi * Le * r^2 / h^2 exactly, so
// radiance albedo * Le * r^2 / h^2.
TEST(FeaturesTest, SphereLampNextEventEstimationMatchesTheClosedForm) {
  StatusOr<spec::SceneSpec> scene = spec::ParseSceneYaml(R"(
width: 16
height: 16
samples: 64
max_depth: 1
background: {color: [0, 0, 0]}
camera:
  keyframes: [{frame: 1, position: [0, 0.5, 0.001], look_at: [0, 0, 0], fov: 2}]
materials:
  floor: {type: diffuse, color: [0.5, 0.5, 0.5]}
  lamp: {type: emissive, color: [1, 1, 1], strength: 100}
objects:
  - {type: quad, corner: [-5, 0, -5], u: [0, 0, 10], v: [10, 0, 0], material: floor}
  - {type: sphere, center: [0, 1, 0], radius: 0.05, material: lamp}
)");
  ASSERT_TRUE(scene.ok()) << scene.status().ToString();
  StatusOr<RenderedImage> image = RenderCpu(*scene);
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  const double expected = 0.5 * 100 * 0.05 * 0.05;
  EXPECT_NEAR(CentreMean(*image, 4), expected, expected * 0.03);
}

// A white diffuse sphere under a constant environment map reflects exactly the map: tests the
// map's importance sampling and its MIS with the BSDF sample.
TEST(FeaturesTest, EnvironmentMapWhiteFurnace) {
  const std::string path = (std::filesystem::temp_directory_path() / "tsr_furnace.exr").string();
  ASSERT_TRUE(SaveImage(path, 16, 8, 3, std::vector<float>(16 * 8 * 3, 0.5f)).ok());
  StatusOr<spec::SceneSpec> scene = spec::ParseSceneYaml(R"(
width: 16
height: 16
samples: 32
max_depth: 16
background: {environment: tsr_furnace.exr, strength: 1.2}
camera:
  keyframes: [{frame: 1, position: [0, 0, 4], look_at: [0, 0, 0], fov: 20}]
materials:
  white: {type: diffuse, color: [1, 1, 1]}
objects:
  - {type: sphere, center: [0, 0, 0], radius: 1, material: white}
)",
                                                         path.substr(0, path.rfind('/')));
  ASSERT_TRUE(scene.ok()) << scene.status().ToString();
  StatusOr<RenderedImage> image = RenderCpu(*scene);
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_NEAR(CentreMean(*image, 4), 0.6, 0.6 * 0.03);
  std::filesystem::remove(path);
}

// Importance sampling follows the map: the pdf integrates to 1 over the sphere.
TEST(FeaturesTest, EnvironmentPdfIntegratesToOne) {
  spec::SceneSpec scene = DataScene("spheres_env.yaml");
  StatusOr<FlatScene> flat = FlattenScene(scene, 1);
  ASSERT_TRUE(flat.ok()) << flat.status().ToString();
  const kernel::SceneView view = flat->View();
  ASSERT_NE(view.env.rgb, nullptr);
  double integral = 0;
  const int n = 400;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      const float uu = (i + 0.5f) / n, vv = (j + 0.5f) / n;
      const double d_omega = 2 * M_PI * M_PI * std::sin(vv * M_PI) / (double(n) * n);
      integral += kernel::EnvPdf(view.env, kernel::EnvDirection(uu, vv)) * d_omega;
    }
  }
  EXPECT_NEAR(integral, 1.0, 0.02);
}

}  // namespace
}  // namespace tessera::pathtracer
