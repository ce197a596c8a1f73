// Scene descriptions for the built-in path tracer (scene_file.h). Their parts:
//  - scene_file.cpp: validation: every field's range, every object's material, with the field's
//    path in each error;
//  - scene_file_yaml.cpp: reading the YAML format into SceneSpec;
//  - scene_file_lookup.cpp: what renderers ask of a scene: the camera, spheres and meshes at a
//    frame (keyframes interpolated), its asset files and where they may be opened from, its
//    result channels;
//  - scene_file_internal.h: what they share.
#include "shared/scenes/scene_file.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "shared/scenes/scene_file_internal.h"

namespace tessera::spec {
namespace scene_internal {

Status Invalid(const std::string& path, const std::string& what) {
  return Status::InvalidArgument(path + ": " + what);
}

std::string Index(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

double Length(const Vec3& v) { return std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]); }

Vec3 Sub(const Vec3& a, const Vec3& b) { return {a[0] - b[0], a[1] - b[1], a[2] - b[2]}; }

Vec3 Cross(const Vec3& a, const Vec3& b) {
  return {a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]};
}

Vec3 Lerp(const Vec3& a, const Vec3& b, double t) {
  return {a[0] + (b[0] - a[0]) * t, a[1] + (b[1] - a[1]) * t, a[2] + (b[2] - a[2]) * t};
}

// Checks lo <= value <= hi, naming the path and the allowed range.
Status CheckIntRange(const std::string& path, int value, int lo, int hi) {
  if (value < lo || value > hi) {
    return Invalid(path, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                             "], got " + std::to_string(value));
  }
  return Status::Ok();
}

Status CheckColor(const std::string& path, const Vec3& c, double max) {
  for (size_t i = 0; i < 3; ++i) {
    if (!(c[i] >= 0.0 && c[i] <= max) || std::isinf(c[i])) {
      return Invalid(Index(path, i),
                     max == HUGE_VAL
                         ? "must be >= 0"
                         : "must be in [0, " + std::to_string(static_cast<int>(max)) + "]");
    }
  }
  return Status::Ok();
}

Status CheckFinite(const std::string& path, const Vec3& v) {
  for (size_t i = 0; i < 3; ++i) {
    if (!std::isfinite(v[i])) return Invalid(Index(path, i), "must be a finite number");
  }
  return Status::Ok();
}

Status CheckUnit(const std::string& path, double v) {
  if (!(v >= 0.0 && v <= 1.0)) return Invalid(path, "must be in [0, 1]");
  return Status::Ok();
}

// Rules shared by the parser and ValidateScene. `path` names the element being checked.
Status ValidateCameraKey(const CameraKeyframe& k, const std::string& path) {
  TSR_RETURN_IF_ERROR(CheckFinite(path + ".position", k.position));
  TSR_RETURN_IF_ERROR(CheckFinite(path + ".look_at", k.look_at));
  TSR_RETURN_IF_ERROR(CheckFinite(path + ".up", k.up));
  const Vec3 dir = Sub(k.look_at, k.position);
  if (Length(dir) <= 1e-9) return Invalid(path + ".look_at", "must differ from position");
  if (Length(k.up) <= 1e-9) return Invalid(path + ".up", "must not be zero");
  if (Length(Cross(dir, k.up)) <= 1e-9 * Length(dir) * Length(k.up)) {
    return Invalid(path + ".up", "must not be parallel to the view direction");
  }
  if (!(k.fov > 0.0 && k.fov < 180.0)) return Invalid(path + ".fov", "must be in (0, 180)");
  if (!(k.aperture >= 0.0) || std::isinf(k.aperture)) {
    return Invalid(path + ".aperture", "must be >= 0");
  }
  if (!(k.focus_distance >= 0.0) || std::isinf(k.focus_distance)) {
    return Invalid(path + ".focus_distance", "must be >= 0");
  }
  return Status::Ok();
}

template <typename Key>
Status CheckFramesIncreasing(const std::vector<Key>& keys, const std::string& path) {
  if (keys.size() > static_cast<size_t>(kMaxKeyframes)) {
    return Invalid(path, "at most " + std::to_string(kMaxKeyframes) + " keyframes");
  }
  for (size_t i = 1; i < keys.size(); ++i) {
    if (keys[i].frame <= keys[i - 1].frame) {
      return Invalid(Index(path, i) + ".frame", "frames must be strictly increasing");
    }
  }
  return Status::Ok();
}

Status ValidateMaterial(const MaterialSpec& m, const std::string& path) {
  switch (m.type) {
    case MaterialType::kDiffuse:
      return CheckColor(path + ".color", m.color, 1.0);
    case MaterialType::kMetal:
      TSR_RETURN_IF_ERROR(CheckColor(path + ".color", m.color, 1.0));
      return CheckUnit(path + ".roughness", m.roughness);
    case MaterialType::kPrincipled:
      TSR_RETURN_IF_ERROR(CheckColor(path + ".base_color", m.color, 1.0));
      TSR_RETURN_IF_ERROR(CheckUnit(path + ".roughness", m.roughness));
      return CheckUnit(path + ".metallic", m.metallic);
    case MaterialType::kGlass:
      if (!(m.ior > 0.0 && m.ior <= kMaxIor)) return Invalid(path + ".ior", "must be in (0, 10]");
      return Status::Ok();
    case MaterialType::kEmissive:
      TSR_RETURN_IF_ERROR(CheckColor(path + ".color", m.color, HUGE_VAL));
      if (!(m.strength >= 0.0) || std::isinf(m.strength)) {
        return Invalid(path + ".strength", "must be >= 0");
      }
      return Status::Ok();
  }
  return Invalid(path + ".type", "unknown material type");
}

StatusOr<int> ResolveMaterial(const std::map<std::string, int>& by_name, const std::string& name,
                              const std::string& path) {
  auto it = by_name.find(name);
  if (it == by_name.end()) return Invalid(path, "material '" + name + "' is not defined");
  return it->second;
}

Status ValidateSphere(SphereSpec* s, const std::map<std::string, int>& materials,
                      const std::string& path) {
  if (!(s->radius > 0.0) || std::isinf(s->radius)) return Invalid(path + ".radius", "must be > 0");
  TSR_RETURN_IF_ERROR(CheckFinite(path + ".center", s->center));
  TSR_RETURN_IF_ERROR(CheckFramesIncreasing(s->keyframes, path + ".keyframes"));
  for (size_t i = 0; i < s->keyframes.size(); ++i) {
    TSR_RETURN_IF_ERROR(
        CheckFinite(Index(path + ".keyframes", i) + ".center", s->keyframes[i].center));
  }
  TSR_ASSIGN_OR_RETURN(s->material_index,
                       ResolveMaterial(materials, s->material, path + ".material"));
  return Status::Ok();
}

Status ValidateQuad(QuadSpec* q, const std::map<std::string, int>& materials,
                    const std::string& path) {
  TSR_RETURN_IF_ERROR(CheckFinite(path + ".corner", q->corner));
  TSR_RETURN_IF_ERROR(CheckFinite(path + ".u", q->u));
  TSR_RETURN_IF_ERROR(CheckFinite(path + ".v", q->v));
  if (Length(q->u) <= 1e-12) return Invalid(path + ".u", "must not be zero");
  if (Length(q->v) <= 1e-12) return Invalid(path + ".v", "must not be zero");
  if (Length(Cross(q->u, q->v)) <= 1e-9 * Length(q->u) * Length(q->v)) {
    return Invalid(path + ".v", "must not be parallel to u");
  }
  TSR_ASSIGN_OR_RETURN(q->material_index,
                       ResolveMaterial(materials, q->material, path + ".material"));
  return Status::Ok();
}

Status ValidateTransform(const TransformSpec& t, const std::string& path) {
  TSR_RETURN_IF_ERROR(CheckFinite(path + ".translate", t.translate));
  TSR_RETURN_IF_ERROR(CheckFinite(path + ".rotate_deg", t.rotate_deg));
  TSR_RETURN_IF_ERROR(CheckFinite(path + ".scale", t.scale));
  for (size_t i = 0; i < 3; ++i) {
    if (std::abs(t.scale[i]) < 1e-12) return Invalid(Index(path + ".scale", i), "must not be 0");
  }
  return Status::Ok();
}

Status ValidateMesh(MeshSpec* m, const std::map<std::string, int>& materials,
                    const std::string& path) {
  if (m->file.empty() && m->data == nullptr) return Invalid(path + ".file", "must not be empty");
  TSR_RETURN_IF_ERROR(ValidateTransform(m->transform, path + ".transform"));
  TSR_RETURN_IF_ERROR(CheckFramesIncreasing(m->keyframes, path + ".keyframes"));
  for (size_t i = 0; i < m->keyframes.size(); ++i) {
    TSR_RETURN_IF_ERROR(
        ValidateTransform(m->keyframes[i].transform, Index(path + ".keyframes", i)));
  }
  TSR_ASSIGN_OR_RETURN(m->material_index,
                       ResolveMaterial(materials, m->material, path + ".material"));
  return Status::Ok();
}

// Scalar settings, background, camera and materials; objects are checked by the caller so the
// parser can name them by their position in `objects`.
Status ValidateGlobals(const SceneSpec& s, std::map<std::string, int>* material_index) {
  TSR_RETURN_IF_ERROR(CheckIntRange("width", s.width, 1, kMaxResolution));
  TSR_RETURN_IF_ERROR(CheckIntRange("height", s.height, 1, kMaxResolution));
  TSR_RETURN_IF_ERROR(CheckIntRange("samples", s.samples, 1, kMaxSamples));
  TSR_RETURN_IF_ERROR(CheckIntRange("max_depth", s.max_depth, 1, kMaxDepth));
  TSR_RETURN_IF_ERROR(CheckColor("background.top", s.background.top, HUGE_VAL));
  TSR_RETURN_IF_ERROR(CheckColor("background.bottom", s.background.bottom, HUGE_VAL));
  if (!(s.background.strength >= 0.0) || std::isinf(s.background.strength)) {
    return Invalid("background.strength", "must be >= 0");
  }
  for (size_t i = 1; i < s.aovs.size(); ++i) {
    if (s.aovs[i] <= s.aovs[i - 1]) return Invalid("aovs", "must be sorted and unique");
  }
  if (s.camera.keyframes.empty()) {
    return Invalid("camera.keyframes", "at least one keyframe is required");
  }
  TSR_RETURN_IF_ERROR(CheckFramesIncreasing(s.camera.keyframes, "camera.keyframes"));
  for (size_t i = 0; i < s.camera.keyframes.size(); ++i) {
    TSR_RETURN_IF_ERROR(ValidateCameraKey(s.camera.keyframes[i], Index("camera.keyframes", i)));
  }
  if (s.materials.size() > static_cast<size_t>(kMaxMaterials)) {
    return Invalid("materials", "at most " + std::to_string(kMaxMaterials) + " materials");
  }
  material_index->clear();
  for (size_t i = 0; i < s.materials.size(); ++i) {
    const MaterialSpec& m = s.materials[i];
    const std::string path = "materials." + m.name;
    if (m.name.empty()) return Invalid("materials", "a material name must not be empty");
    if (!material_index->emplace(m.name, static_cast<int>(i)).second) {
      return Invalid(path, "defined more than once");
    }
    TSR_RETURN_IF_ERROR(ValidateMaterial(m, path));
  }
  if (s.spheres.size() + s.quads.size() + s.meshes.size() > static_cast<size_t>(kMaxObjects)) {
    return Invalid("objects", "at most " + std::to_string(kMaxObjects) + " objects");
  }
  return Status::Ok();
}

}  // namespace scene_internal

using scene_internal::Index;
using scene_internal::ValidateGlobals;
using scene_internal::ValidateMesh;
using scene_internal::ValidateQuad;
using scene_internal::ValidateSphere;

Status ValidateScene(SceneSpec* scene) {
  std::map<std::string, int> material_index;
  TSR_RETURN_IF_ERROR(ValidateGlobals(*scene, &material_index));
  for (size_t i = 0; i < scene->spheres.size(); ++i) {
    TSR_RETURN_IF_ERROR(ValidateSphere(&scene->spheres[i], material_index, Index("spheres", i)));
  }
  for (size_t i = 0; i < scene->quads.size(); ++i) {
    TSR_RETURN_IF_ERROR(ValidateQuad(&scene->quads[i], material_index, Index("quads", i)));
  }
  for (size_t i = 0; i < scene->meshes.size(); ++i) {
    TSR_RETURN_IF_ERROR(ValidateMesh(&scene->meshes[i], material_index, Index("meshes", i)));
  }
  return Status::Ok();
}

}  // namespace tessera::spec
