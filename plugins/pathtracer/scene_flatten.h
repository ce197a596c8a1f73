#pragma once
// Host side: turns a SceneSpec at one frame into the kernel's flat arrays (camera interpolated,
// animated sphere centers evaluated). The result owns its arrays; View() points into them.

#include <vector>

#include "plugins/pathtracer/kernel.h"
#include "shared/scene_spec.h"

namespace tessera::pathtracer {

struct FlatScene {
  std::vector<kernel::Sphere> spheres;
  std::vector<kernel::Quad> quads;
  std::vector<kernel::Material> materials;
  kernel::Camera camera{};
  kernel::Float3 sky_top{}, sky_bottom{};
  int width = 0;
  int height = 0;
  int samples = 0;
  int max_depth = 0;

  // A view over this object's arrays; valid while it lives and is not modified.
  kernel::SceneView View() const;
};

// Builds the camera for an interpolated keyframe and an image aspect ratio.
kernel::Camera MakeCamera(const spec::CameraKeyframe& key, int width, int height);

// Requires a scene that passed spec::ValidateScene (material indices resolved).
FlatScene FlattenScene(const spec::SceneSpec& scene, int frame);

}  // namespace tessera::pathtracer
