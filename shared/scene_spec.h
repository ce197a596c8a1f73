#pragma once
// Scene description for the built-in path tracer: plain structs parsed and fully validated from
// YAML. Every error names the field path ("camera.keyframes[1].fov: must be in (0, 180)").
//
// Scene YAML format (every key; defaults in brackets, vectors are [x, y, z] lists):
//
//   width: 480                  # required, 1..16384 pixels
//   height: 270                 # required, 1..16384 pixels
//   samples: 32                 # required, samples per pixel, 1..65536
//   max_depth: 8                # required, max bounces (scattering events) per path, 1..64
//   background:                 # required: radiance of escaping rays, >= 0; a vertical
//     top: [0.5, 0.7, 1.0]      #   gradient over the ray direction's y (top = straight up,
//     bottom: [1, 1, 1]         #   bottom = straight down). [bottom = top]. Or
//                               #   `color: [r, g, b]` for a constant.
//   camera:                     # required
//     keyframes:                # required, at least one, frames strictly increasing; linear
//       - frame: 1              #   interpolation between keys, clamped outside their range
//         position: [0, 1, 5]   #   required
//         look_at: [0, 1, 0]    #   required, must differ from position
//         up: [0, 1, 0]         #   [[0, 1, 0]], must not be parallel to the view direction
//         fov: 40               #   required, vertical field of view in degrees, (0, 180)
//         aperture: 0           #   [0] lens diameter, >= 0; 0 is a pinhole
//         focus_distance: 0     #   [0] >= 0; 0 focuses on look_at
//   materials:                  # required, a map from name to material
//     ground: {type: diffuse, color: [0.5, 0.5, 0.5]}                # color in [0, 1]
//     chrome: {type: metal, color: [0.9, 0.9, 0.9], roughness: 0.1}  # roughness [0] in [0, 1]
//     crystal: {type: glass, ior: 1.5}                               # ior in (0, 10]
//     lamp: {type: emissive, color: [1, 0.9, 0.8], strength: 4}     # color >= 0; strength [1] >= 0
//   objects:                    # required, a list (may be empty)
//     - {type: sphere, center: [0, 1, 0], radius: 1, material: crystal}   # radius > 0
//     - type: sphere            # an animated sphere: `keyframes` instead of `center`,
//       radius: 0.5             #   frames strictly increasing, interpolated like the camera
//       material: chrome
//       keyframes: [{frame: 1, center: [0, 0.5, 0]}, {frame: 12, center: [0, 3, 0]}]
//     - {type: quad, corner: [-50, 0, -50], u: [100, 0, 0], v: [0, 0, 100], material: ground}
//                               # a parallelogram corner + a*u + b*v, a, b in [0, 1]; u, v
//                               #   non-zero and not parallel
//
// Unknown keys, wrong types, missing required fields, out-of-range values and references to
// undefined materials are all InvalidArgument errors.

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "shared/status.h"

namespace tessera::spec {

inline constexpr int kMaxResolution = 16384;  // width and height, each
inline constexpr int kMaxSamples = 65536;     // samples per pixel
inline constexpr int kMaxDepth = 64;          // bounces per path
inline constexpr int kMaxKeyframes = 10000;   // per camera or per object
inline constexpr int kMaxObjects = 100000;    // spheres + quads
inline constexpr int kMaxMaterials = 10000;
inline constexpr double kMaxIor = 10.0;

using Vec3 = std::array<double, 3>;

struct BackgroundSpec {
  Vec3 top{0.0, 0.0, 0.0};
  Vec3 bottom{0.0, 0.0, 0.0};
};

struct CameraKeyframe {
  int frame = 1;
  Vec3 position{0.0, 0.0, 0.0};
  Vec3 look_at{0.0, 0.0, -1.0};
  Vec3 up{0.0, 1.0, 0.0};
  double fov = 40.0;            // vertical, degrees
  double aperture = 0.0;        // lens diameter; 0 = pinhole
  double focus_distance = 0.0;  // 0 = distance from position to look_at
};

struct CameraSpec {
  std::vector<CameraKeyframe> keyframes;  // at least one, frames strictly increasing
};

enum class MaterialType { kDiffuse, kMetal, kGlass, kEmissive };

struct MaterialSpec {
  std::string name;
  MaterialType type = MaterialType::kDiffuse;
  Vec3 color{0.8, 0.8, 0.8};  // albedo (diffuse, metal) or emitted colour (emissive)
  double roughness = 0.0;     // metal
  double ior = 1.5;           // glass
  double strength = 1.0;      // emissive: radiance = color * strength
};

struct CenterKeyframe {
  int frame = 1;
  Vec3 center{0.0, 0.0, 0.0};
};

struct SphereSpec {
  Vec3 center{0.0, 0.0, 0.0};             // used when keyframes is empty
  std::vector<CenterKeyframe> keyframes;  // animated center, frames strictly increasing
  double radius = 1.0;
  std::string material;
  int material_index = 0;  // index into SceneSpec::materials, resolved by the parser
};

struct QuadSpec {
  Vec3 corner{0.0, 0.0, 0.0};
  Vec3 u{1.0, 0.0, 0.0};
  Vec3 v{0.0, 0.0, 1.0};
  std::string material;
  int material_index = 0;
};

struct SceneSpec {
  int width = 0;
  int height = 0;
  int samples = 0;
  int max_depth = 0;
  BackgroundSpec background;
  CameraSpec camera;
  std::vector<MaterialSpec> materials;  // in document order
  std::vector<SphereSpec> spheres;      // objects of type sphere, in document order
  std::vector<QuadSpec> quads;          // objects of type quad, in document order
};

// Parses and validates a scene document.
StatusOr<SceneSpec> ParseSceneYaml(std::string_view yaml_text);

// Checks a SceneSpec built or modified in code (e.g. a job overriding the resolution) with the
// same rules as the parser, and resolves material names to indices.
Status ValidateScene(SceneSpec* scene);

// The camera at `frame`: keyframes interpolated linearly, clamped outside the key range.
// Requires at least one keyframe.
CameraKeyframe InterpolateCamera(const CameraSpec& camera, double frame);

// The sphere's center at `frame` (its static center when it has no keyframes).
Vec3 SphereCenterAt(const SphereSpec& sphere, double frame);

}  // namespace tessera::spec
