// What renderers ask of a parsed scene (scene_file.h; the parts are listed in scene_file.cpp):
// the camera, spheres and meshes at a frame, keyframes interpolated; its asset files, and the
// paths they may be opened at; its result channels.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "shared/scenes/scene_file.h"
#include "shared/scenes/scene_file_internal.h"

namespace tessera::spec {
namespace {

using scene_internal::Length;
using scene_internal::Lerp;
using scene_internal::Sub;

// Where `frame` falls among keyframes sorted by frame: the keys either side and how far it is
// from `a` to `b` (0..1). Outside the keys' range `a` is the nearest key and `b` is null.
template <typename Key>
struct Bracket {
  const Key* a = nullptr;
  const Key* b = nullptr;
  double t = 0;
};

template <typename Key>
Bracket<Key> BracketOf(const std::vector<Key>& keys, double frame) {
  // First key with key.frame > frame.
  const size_t hi = static_cast<size_t>(
      std::upper_bound(keys.begin(), keys.end(), frame,
                       [](double f, const Key& k) { return f < static_cast<double>(k.frame); }) -
      keys.begin());
  if (hi == 0) return {&keys.front()};
  if (hi == keys.size()) return {&keys.back()};
  const Key& a = keys[hi - 1];
  const Key& b = keys[hi];
  return {&a, &b, (frame - a.frame) / static_cast<double>(b.frame - a.frame)};
}

}  // namespace

CameraKeyframe InterpolateCamera(const CameraSpec& camera, double frame) {
  TSR_CHECK(!camera.keyframes.empty());
  const auto [key_a, key_b, t] = BracketOf(camera.keyframes, frame);
  if (key_b == nullptr) return *key_a;
  const CameraKeyframe& a = *key_a;
  const CameraKeyframe& b = *key_b;
  CameraKeyframe out;
  out.frame = static_cast<int>(std::lround(frame));
  out.position = Lerp(a.position, b.position, t);
  out.look_at = Lerp(a.look_at, b.look_at, t);
  out.up = Lerp(a.up, b.up, t);
  out.fov = a.fov + (b.fov - a.fov) * t;
  out.aperture = a.aperture + (b.aperture - a.aperture) * t;
  // 0 means "focus on look_at"; interpolate the effective distances so a mix stays sensible.
  const double fa = a.focus_distance > 0 ? a.focus_distance : Length(Sub(a.look_at, a.position));
  const double fb = b.focus_distance > 0 ? b.focus_distance : Length(Sub(b.look_at, b.position));
  out.focus_distance = (a.focus_distance > 0 || b.focus_distance > 0) ? fa + (fb - fa) * t : 0.0;
  return out;
}

Vec3 SphereCenterAt(const SphereSpec& sphere, double frame) {
  if (sphere.keyframes.empty()) return sphere.center;
  const auto [a, b, t] = BracketOf(sphere.keyframes, frame);
  return b == nullptr ? a->center : Lerp(a->center, b->center, t);
}

TransformSpec MeshTransformAt(const MeshSpec& mesh, double frame) {
  if (mesh.keyframes.empty()) return mesh.transform;
  const auto [key_a, key_b, t] = BracketOf(mesh.keyframes, frame);
  if (key_b == nullptr) return key_a->transform;
  const TransformSpec& a = key_a->transform;
  const TransformSpec& b = key_b->transform;
  return {Lerp(a.translate, b.translate, t), Lerp(a.rotate_deg, b.rotate_deg, t),
          Lerp(a.scale, b.scale, t)};
}

std::vector<std::string> RelativeAssetFiles(const SceneSpec& scene) {
  std::set<std::string> files;
  auto add = [&](const std::string& file) {
    if (!file.empty() && file[0] != '/') files.insert(file);
  };
  add(scene.background.environment);
  for (const MaterialSpec& m : scene.materials) add(m.texture);
  for (const MeshSpec& m : scene.meshes) add(m.file);
  return {files.begin(), files.end()};
}

std::string ResolveAssetPath(const SceneSpec& scene, const std::string& file) {
  if (file.empty() || file[0] == '/' || scene.asset_dir.empty()) return file;
  if (scene.asset_dir.back() == '/') return scene.asset_dir + file;
  return scene.asset_dir + "/" + file;
}

bool PathInside(const std::string& root, const std::string& path) {
  if (root.empty() || path.compare(0, root.size(), root) != 0) return false;
  return path.size() == root.size() || root.back() == '/' || path[root.size()] == '/';
}

int ResultChannels(const SceneSpec& scene) {
  int channels = 4;
  for (Aov aov : scene.aovs) channels += aov == Aov::kDepth ? 1 : 3;
  return channels;
}

StatusOr<std::string> OpenableAssetPath(const SceneSpec& scene, const std::string& file,
                                        const std::string& key) {
  const std::string path = ResolveAssetPath(scene, file);
  if (!scene.confine_inputs) return path;
  namespace fs = std::filesystem;
  const bool absolute = !file.empty() && file[0] == '/';
  if (!absolute && scene.asset_dir.empty()) {
    return Status::PermissionDenied(key + ": '" + file +
                                    "' is relative, and there is no task folder to read it from");
  }
  if (absolute && scene.input_roots.empty()) {
    return Status::PermissionDenied(
        key + ": '" + file +
        "' is an absolute path; this worker reads no files outside the task folder "
        "(worker.input_roots is empty)");
  }
  std::error_code ec;
  // Symlinks and '..' resolved: what is checked is what will be opened.
  const std::string canonical = fs::canonical(path, ec).string();
  if (ec) return Status::NotFound(key + ": '" + file + "': no such file");
  if (absolute) {
    std::string roots;
    for (const std::string& root : scene.input_roots) {
      if (PathInside(root, canonical)) return canonical;
      roots += (roots.empty() ? "" : ", ") + root;
    }
    return Status::PermissionDenied(key + ": '" + file + "'" +
                                    (canonical != file ? " (" + canonical + ")" : "") +
                                    " is outside this worker's input roots (" + roots + ")");
  }
  const std::string dir = fs::canonical(scene.asset_dir, ec).string();
  if (ec || !PathInside(dir, canonical)) {
    return Status::PermissionDenied(key + ": '" + file + "' leads outside the task folder");
  }
  return canonical;
}

}  // namespace tessera::spec
