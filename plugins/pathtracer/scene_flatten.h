#pragma once
// Host side: turns a SceneSpec at one frame into the kernel's flat arrays (camera interpolated,
// animated objects evaluated, meshes loaded once each with a bottom-level BVH and placed by
// instances, textures and the environment map loaded, the top-level BVH built). The result owns its
// arrays; View() points into them.

#include <cstdint>
#include <vector>

#include "plugins/pathtracer/kernel.h"
#include "shared/base/status.h"
#include "shared/scenes/scene_file.h"

namespace tessera::pathtracer {

struct FlatScene {
  std::vector<kernel::Sphere> spheres;
  std::vector<kernel::Quad> quads;
  std::vector<kernel::Triangle> triangles;
  std::vector<kernel::TriangleShading> shading;
  std::vector<kernel::Instance> instances;
  std::vector<kernel::PrimRef> prims;
  std::vector<kernel::BvhNode> nodes;
  std::vector<kernel::Material> materials;
  std::vector<kernel::Light> lights;
  std::vector<kernel::Texture> textures;
  std::vector<float> texels;
  // Environment map and its sampling tables (empty without one).
  std::vector<float> env_rgb, env_marginal, env_conditional;
  int env_width = 0, env_height = 0;
  float env_strength = 0.0f, env_integral = 0.0f;
  kernel::Camera camera{};
  kernel::Float3 sky_top{}, sky_bottom{};
  int width = 0;
  int height = 0;
  int samples = 0;
  int max_depth = 0;
  // Wall time spent building the BVHs (all levels), for benchmarks; not part of the scene.
  double bvh_build_ms = 0.0;
  kernel::ChannelMap channel_map{};
  std::vector<std::string> channel_names;

  // A view over this object's arrays; valid while it lives and is not modified.
  kernel::SceneView View() const;
};

// Builds the camera for an interpolated keyframe and an image aspect ratio.
kernel::Camera MakeCamera(const spec::CameraKeyframe& key, int width, int height);

// Requires a scene that passed spec::ValidateScene (material indices resolved). Fails when an
// asset cannot be loaded or a mesh has no usable triangles, naming the object and the file.
StatusOr<FlatScene> FlattenScene(const spec::SceneSpec& scene, int frame);

// A fingerprint of everything that decides the pixels except the sample count: checkpoints
// record it so a resume against another scene is refused.
uint64_t SceneHash(const FlatScene& scene);

}  // namespace tessera::pathtracer
