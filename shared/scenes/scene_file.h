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
//   aovs: [albedo, normal, depth]  # [[]] extra channels after RGBA, any of these three, each
//                               #   at most once; they are stored in this order whatever the
//                               #   list's: albedo.R/G/B, N.X/Y/Z (first-hit shading normal),
//                               #   Z (first-hit distance along the ray; 0 where rays miss)
//   background:                 # required: radiance of escaping rays, >= 0; a vertical
//     top: [0.5, 0.7, 1.0]      #   gradient over the ray direction's y (top = straight up,
//     bottom: [1, 1, 1]         #   bottom = straight down). [bottom = top]. Or
//                               #   `color: [r, g, b]` for a constant. Or an HDR lat-long
//                               #   map: `{environment: sky.exr, strength: 1}` (strength [1]
//                               #   >= 0; +y up, the map's centre column looks down -z),
//                               #   importance sampled.
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
//     plastic: {type: principled, base_color: [0.8, 0.2, 0.2], roughness: 0.3, metallic: 0}
//                               # base_color in [0, 1]; roughness [0.5], metallic [0] in [0, 1]
//     wood: {type: diffuse, color: [1, 1, 1], texture: wood.png}
//                               # texture [none] on diffuse and principled: an image file
//                               #   multiplied into color / base_color, looked up by the
//                               #   surface's UVs (meshes: from the file; quads: (a, 1 - b);
//                               #   spheres: longitude, latitude)
//   objects:                    # required, a list (may be empty)
//     - {type: sphere, center: [0, 1, 0], radius: 1, material: crystal}   # radius > 0
//     - type: sphere            # an animated sphere: `keyframes` instead of `center`,
//       radius: 0.5             #   frames strictly increasing, interpolated like the camera
//       material: chrome
//       keyframes: [{frame: 1, center: [0, 0.5, 0]}, {frame: 12, center: [0, 3, 0]}]
//     - {type: quad, corner: [-50, 0, -50], u: [100, 0, 0], v: [0, 0, 100], material: ground}
//                               # a parallelogram corner + a*u + b*v, a, b in [0, 1]; u, v
//                               #   non-zero and not parallel
//     - type: mesh              # triangles from a Wavefront OBJ file (normals and UVs used
//       file: bunny.obj         #   when present); relative paths are resolved against the
//       material: clay          #   scene's asset directory. Objects using the same file are
//       transform:              #   instances: one copy of its triangles and BVH, each object
//                               #   with its own material and transform. [identity]; applied as
//         translate: [0, 0, 0]  #   scale, then rotation about x, y, z (degrees), then
//         rotate_deg: [0, 45, 0]#   translation; scale is a number or [sx, sy, sz], non-zero.
//         scale: 1              # Or `keyframes: [{frame: 1, translate: .., rotate_deg: ..,
//                               #   scale: ..}, ...]` instead of `transform`: linear
//                               #   interpolation of each part, clamped outside the keys.
//
// Asset files (meshes, textures, environment maps) are read when a frame is rendered. On a worker
// a relative path must stay inside the task folder and an absolute one must lie inside one of the
// worker's `worker.input_roots` (none by default), both after symlinks and '..' are resolved; any
// other path fails the task with an error naming the key and the path. A missing
// or unreadable file, an empty mesh or one whose triangles all have zero area fails the render
// with an error naming the object and the path (zero-area triangles among good ones are
// skipped). Non-finite numbers (.nan, .inf) are rejected. Emissive spheres and quads are lights
// the renderer samples directly (next event estimation); emissive mesh triangles only glow.
//
// Unknown keys, wrong types, missing required fields, out-of-range values and references to
// undefined materials are all InvalidArgument errors.

#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "shared/base/status.h"

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
  std::string environment;  // an HDR lat-long map file; empty: the gradient above
  double strength = 1.0;    // multiplies the map
};

enum class Aov { kAlbedo, kNormal, kDepth };

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

enum class MaterialType { kDiffuse, kMetal, kGlass, kEmissive, kPrincipled };

struct MaterialSpec {
  std::string name;
  MaterialType type = MaterialType::kDiffuse;
  Vec3 color{0.8, 0.8, 0.8};  // albedo (diffuse, metal), base_color (principled) or emitted
  double roughness = 0.0;     // metal, principled
  double ior = 1.5;           // glass
  double strength = 1.0;      // emissive: radiance = color * strength
  double metallic = 0.0;      // principled
  std::string texture;        // diffuse, principled: image file; empty for none
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

struct TransformSpec {
  Vec3 translate{0.0, 0.0, 0.0};
  Vec3 rotate_deg{0.0, 0.0, 0.0};  // about x, then y, then z
  Vec3 scale{1.0, 1.0, 1.0};
};

struct TransformKeyframe {
  int frame = 1;
  TransformSpec transform;
};

// Triangle geometry given in code rather than a file (benchmarks, generated scenes). Indices are
// per corner, 3 per triangle; normal/uv index lists are empty or as long as `indices`.
struct MeshData {
  std::vector<float> positions;  // xyz per vertex
  std::vector<float> normals;    // xyz per normal
  std::vector<float> uvs;        // uv per texture coordinate
  std::vector<int> indices;
  std::vector<int> normal_indices;
  std::vector<int> uv_indices;
};

struct MeshSpec {
  std::string file;                          // OBJ path (relative: to SceneSpec::asset_dir)
  std::shared_ptr<const MeshData> data;      // used instead of `file` when set (code only)
  TransformSpec transform;                   // used when keyframes is empty
  std::vector<TransformKeyframe> keyframes;  // frames strictly increasing
  std::string material;
  int material_index = 0;
  int object_index = 0;  // position in the document's `objects`, for error messages
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
  std::vector<MeshSpec> meshes;         // objects of type mesh, in document order
  std::vector<Aov> aovs;                // sorted, unique
  std::string asset_dir;                // relative asset paths are resolved against this
  // Set by the host that renders it (a worker): every file must resolve inside asset_dir
  // (relative paths) or inside one of input_roots (absolute ones; canonical folders).
  bool confine_inputs = false;
  std::vector<std::string> input_roots;
};

// Parses and validates a scene document. Relative asset paths (meshes, textures, environment)
// are resolved against `asset_dir` when a frame is rendered (empty: the working directory).
StatusOr<SceneSpec> ParseSceneYaml(std::string_view yaml_text, const std::string& asset_dir = "");

// An asset path as the renderer opens it: `file` when absolute or asset_dir is empty, else
// asset_dir/file.
std::string ResolveAssetPath(const SceneSpec& scene, const std::string& file);

// The path to open for an asset `file` the scene names under `key` ("objects[2].file"):
// ResolveAssetPath's, and when scene.confine_inputs its canonical form, checked to lie inside
// asset_dir (relative paths) or one of input_roots (absolute ones). PermissionDenied names the
// key and the path; NotFound when it does not exist.
StatusOr<std::string> OpenableAssetPath(const SceneSpec& scene, const std::string& file,
                                        const std::string& key);

// Whether `path` is `root` or lies below it, comparing whole components of two canonical paths.
bool PathInside(const std::string& root, const std::string& path);

// Float channels of the scene's frames: RGBA plus 3 (albedo), 3 (normal), 1 (depth) per AOV.
int ResultChannels(const SceneSpec& scene);

// The relative asset files the scene names (mesh files, textures, the environment map), sorted
// and unique: what travels with a job as blobs. Absolute paths are left out (a shared-storage
// farm's files, read where they are).
std::vector<std::string> RelativeAssetFiles(const SceneSpec& scene);

// Checks a SceneSpec built or modified in code (e.g. a job overriding the resolution) with the
// same rules as the parser, and resolves material names to indices.
Status ValidateScene(SceneSpec* scene);

// The camera at `frame`: keyframes interpolated linearly, clamped outside the key range.
// Requires at least one keyframe.
CameraKeyframe InterpolateCamera(const CameraSpec& camera, double frame);

// The sphere's center at `frame` (its static center when it has no keyframes).
Vec3 SphereCenterAt(const SphereSpec& sphere, double frame);

// The mesh's transform at `frame` (its static transform when it has no keyframes).
TransformSpec MeshTransformAt(const MeshSpec& mesh, double frame);

}  // namespace tessera::spec
