#include "shared/scene_spec.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "shared/yaml_util.h"

namespace tessera::spec {
namespace {

// A scene as a job carries it (job_spec.h kMaxSceneBytes), with room for a job file around it.
constexpr size_t kMaxSceneBytesParsed = (16u << 20) + (1u << 20);

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

// ---- YAML reading ----------------------------------------------------------------------------

Status ReadBackground(const YAML::Node& node, BackgroundSpec* out) {
  yaml::MapReader r(node, "background");
  if (r.Has("environment")) {
    r.Required("environment", &out->environment).Optional("strength", &out->strength);
    if (r.ok() && out->environment.empty()) {
      r.Fail(Invalid("background.environment", "must not be empty"));
    }
    return r.Finish();
  }
  if (r.Has("color")) {
    if (r.Has("top") || r.Has("bottom")) {
      r.Fail(Invalid("background.color", "give either color or top/bottom, not both"));
    }
    r.Required("color", &out->top);
    out->bottom = out->top;
  } else {
    r.Child("color");
    r.Required("top", &out->top);
    out->bottom = out->top;
    r.Optional("bottom", &out->bottom);
  }
  return r.Finish();
}

Status ReadCamera(const YAML::Node& node, CameraSpec* out) {
  yaml::MapReader r(node, "camera");
  YAML::Node keys = r.Child("keyframes");
  TSR_RETURN_IF_ERROR(r.Finish());
  if (!keys.IsDefined() || keys.IsNull()) {
    return Invalid("camera.keyframes", "required field is missing");
  }
  if (!keys.IsSequence()) {
    return Invalid("camera.keyframes", "expected a list, got " + yaml::KindName(keys));
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    CameraKeyframe k;
    yaml::MapReader kr(keys[i], Index("camera.keyframes", i));
    kr.Required("frame", &k.frame)
        .Required("position", &k.position)
        .Required("look_at", &k.look_at)
        .Optional("up", &k.up)
        .Required("fov", &k.fov)
        .Optional("aperture", &k.aperture)
        .Optional("focus_distance", &k.focus_distance);
    TSR_RETURN_IF_ERROR(kr.Finish());
    out->keyframes.push_back(k);
  }
  return Status::Ok();
}

Status ReadMaterials(const YAML::Node& node, std::vector<MaterialSpec>* out) {
  if (!node.IsDefined() || node.IsNull()) return Invalid("materials", "required field is missing");
  if (!node.IsMap()) return Invalid("materials", "expected a map, got " + yaml::KindName(node));
  for (const auto& kv : node) {
    MaterialSpec m;
    if (!kv.first.IsScalar()) return Invalid("materials", "material names must be strings");
    m.name = kv.first.Scalar();
    const std::string path = "materials." + m.name;
    yaml::MapReader r(kv.second, path);
    std::string type;
    r.Required("type", &type);
    if (!r.ok()) return r.Finish();
    if (type == "diffuse") {
      m.type = MaterialType::kDiffuse;
      r.Required("color", &m.color).Optional("texture", &m.texture);
    } else if (type == "principled") {
      m.type = MaterialType::kPrincipled;
      m.roughness = 0.5;
      r.Required("base_color", &m.color)
          .Optional("roughness", &m.roughness)
          .Optional("metallic", &m.metallic)
          .Optional("texture", &m.texture);
    } else if (type == "metal") {
      m.type = MaterialType::kMetal;
      r.Required("color", &m.color).Optional("roughness", &m.roughness);
    } else if (type == "glass") {
      m.type = MaterialType::kGlass;
      r.Required("ior", &m.ior);
    } else if (type == "emissive") {
      m.type = MaterialType::kEmissive;
      r.Required("color", &m.color).Optional("strength", &m.strength);
    } else {
      return Invalid(path + ".type", "unknown material type '" + type +
                                         "' (known: diffuse, metal, glass, emissive, principled)");
    }
    TSR_RETURN_IF_ERROR(r.Finish());
    out->push_back(std::move(m));
  }
  return Status::Ok();
}

// A transform map; with `frame` non-null, a keyframe (a transform plus a required `frame`).
Status ReadTransform(const YAML::Node& node, const std::string& path, TransformSpec* out,
                     int* frame = nullptr) {
  yaml::MapReader r(node, path);
  if (frame != nullptr) r.Required("frame", frame);
  r.Optional("translate", &out->translate).Optional("rotate_deg", &out->rotate_deg);
  YAML::Node scale = r.Child("scale");
  if (r.ok() && scale.IsDefined() && !scale.IsNull()) {
    if (scale.IsScalar()) {
      double uniform = 1.0;
      r.Fail(yaml::Convert(scale, path + ".scale", &uniform));
      out->scale = {uniform, uniform, uniform};
    } else {
      r.Fail(yaml::Convert(scale, path + ".scale", &out->scale));
    }
  }
  return r.Finish();
}

// Reads `objects` and validates each one where it stands, so errors say "objects[3].radius".
Status ReadObjects(const YAML::Node& node, const std::map<std::string, int>& materials,
                   SceneSpec* scene) {
  if (!node.IsDefined() || node.IsNull()) return Invalid("objects", "required field is missing");
  if (!node.IsSequence()) return Invalid("objects", "expected a list, got " + yaml::KindName(node));
  if (node.size() > static_cast<size_t>(kMaxObjects)) {
    return Invalid("objects", "at most " + std::to_string(kMaxObjects) + " objects");
  }
  for (size_t i = 0; i < node.size(); ++i) {
    const std::string path = Index("objects", i);
    yaml::MapReader r(node[i], path);
    std::string type;
    r.Required("type", &type);
    if (!r.ok()) return r.Finish();
    if (type == "sphere") {
      SphereSpec s;
      r.Required("radius", &s.radius).Required("material", &s.material);
      YAML::Node keys = r.Child("keyframes");
      if (keys.IsDefined() && !keys.IsNull()) {
        if (r.Has("center")) {
          return Invalid(path + ".center", "give either center or keyframes, not both");
        }
        r.Child("center");
        if (!keys.IsSequence() || keys.size() == 0) {
          return Invalid(path + ".keyframes",
                         "expected a non-empty list, got " + yaml::KindName(keys));
        }
        for (size_t k = 0; k < keys.size(); ++k) {
          CenterKeyframe key;
          yaml::MapReader kr(keys[k], Index(path + ".keyframes", k));
          kr.Required("frame", &key.frame).Required("center", &key.center);
          TSR_RETURN_IF_ERROR(kr.Finish());
          s.keyframes.push_back(key);
        }
      } else {
        r.Required("center", &s.center);
      }
      TSR_RETURN_IF_ERROR(r.Finish());
      TSR_RETURN_IF_ERROR(ValidateSphere(&s, materials, path));
      scene->spheres.push_back(std::move(s));
    } else if (type == "quad") {
      QuadSpec q;
      r.Required("corner", &q.corner)
          .Required("u", &q.u)
          .Required("v", &q.v)
          .Required("material", &q.material);
      TSR_RETURN_IF_ERROR(r.Finish());
      TSR_RETURN_IF_ERROR(ValidateQuad(&q, materials, path));
      scene->quads.push_back(std::move(q));
    } else if (type == "mesh") {
      MeshSpec m;
      m.object_index = static_cast<int>(i);
      r.Required("file", &m.file).Required("material", &m.material);
      YAML::Node transform = r.Child("transform");
      YAML::Node keys = r.Child("keyframes");
      TSR_RETURN_IF_ERROR(r.Finish());
      const bool has_transform = transform.IsDefined() && !transform.IsNull();
      if (has_transform && keys.IsDefined() && !keys.IsNull()) {
        return Invalid(path + ".keyframes", "give either transform or keyframes, not both");
      }
      if (has_transform) {
        TSR_RETURN_IF_ERROR(ReadTransform(transform, path + ".transform", &m.transform));
      }
      if (keys.IsDefined() && !keys.IsNull()) {
        if (!keys.IsSequence() || keys.size() == 0) {
          return Invalid(path + ".keyframes",
                         "expected a non-empty list, got " + yaml::KindName(keys));
        }
        for (size_t k = 0; k < keys.size(); ++k) {
          TransformKeyframe key;
          TSR_RETURN_IF_ERROR(
              ReadTransform(keys[k], Index(path + ".keyframes", k), &key.transform, &key.frame));
          m.keyframes.push_back(key);
        }
      }
      TSR_RETURN_IF_ERROR(ValidateMesh(&m, materials, path));
      scene->meshes.push_back(std::move(m));
    } else {
      return Invalid(path + ".type",
                     "unknown object type '" + type + "' (known: sphere, quad, mesh)");
    }
  }
  return Status::Ok();
}

template <typename Key>
size_t UpperKey(const std::vector<Key>& keys, double frame) {
  // First key with key.frame > frame; keys are sorted by frame.
  return static_cast<size_t>(
      std::upper_bound(keys.begin(), keys.end(), frame,
                       [](double f, const Key& k) { return f < static_cast<double>(k.frame); }) -
      keys.begin());
}

StatusOr<SceneSpec> ParseSceneNode(std::string_view yaml_text);

}  // namespace

StatusOr<SceneSpec> ParseSceneYaml(std::string_view yaml_text, const std::string& asset_dir) {
  // yaml-cpp reports malformed access by throwing; MapReader avoids the known cases, and this
  // turns anything left into an error instead of a crash of the daemon reading the scene.
  try {
    StatusOr<SceneSpec> scene = ParseSceneNode(yaml_text);
    if (scene.ok()) scene->asset_dir = asset_dir;
    return scene;
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(std::string("scene: ") + e.what());
  }
}

namespace {
StatusOr<SceneSpec> ParseSceneNode(std::string_view yaml_text) {
  yaml::Limits limits;
  limits.max_document_bytes = kMaxSceneBytesParsed;
  TSR_ASSIGN_OR_RETURN(YAML::Node root, yaml::Parse(yaml_text, "scene", limits));
  SceneSpec scene;
  yaml::MapReader r(root, "");
  r.Required("width", &scene.width)
      .Required("height", &scene.height)
      .Required("samples", &scene.samples)
      .Required("max_depth", &scene.max_depth);
  YAML::Node background = r.Child("background");
  YAML::Node camera = r.Child("camera");
  YAML::Node materials = r.Child("materials");
  YAML::Node objects = r.Child("objects");
  std::vector<std::string> aovs;
  r.OptionalList("aovs", &aovs, 3);
  TSR_RETURN_IF_ERROR(r.Finish());
  for (size_t i = 0; i < aovs.size(); ++i) {
    Aov aov;
    if (aovs[i] == "albedo") {
      aov = Aov::kAlbedo;
    } else if (aovs[i] == "normal") {
      aov = Aov::kNormal;
    } else if (aovs[i] == "depth") {
      aov = Aov::kDepth;
    } else {
      return Invalid(Index("aovs", i),
                     "unknown AOV '" + aovs[i] + "' (known: albedo, normal, depth)");
    }
    if (std::find(scene.aovs.begin(), scene.aovs.end(), aov) != scene.aovs.end()) {
      return Invalid(Index("aovs", i), "'" + aovs[i] + "' is listed twice");
    }
    scene.aovs.push_back(aov);
  }
  std::sort(scene.aovs.begin(), scene.aovs.end());

  if (!background.IsDefined() || background.IsNull()) {
    return Invalid("background", "required field is missing");
  }
  TSR_RETURN_IF_ERROR(ReadBackground(background, &scene.background));
  if (!camera.IsDefined() || camera.IsNull()) return Invalid("camera", "required field is missing");
  TSR_RETURN_IF_ERROR(ReadCamera(camera, &scene.camera));
  TSR_RETURN_IF_ERROR(ReadMaterials(materials, &scene.materials));

  std::map<std::string, int> material_index;
  TSR_RETURN_IF_ERROR(ValidateGlobals(scene, &material_index));
  TSR_RETURN_IF_ERROR(ReadObjects(objects, material_index, &scene));
  return scene;
}
}  // namespace

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

CameraKeyframe InterpolateCamera(const CameraSpec& camera, double frame) {
  const auto& keys = camera.keyframes;
  TSR_CHECK(!keys.empty());
  const size_t hi = UpperKey(keys, frame);
  if (hi == 0) return keys.front();
  if (hi == keys.size()) return keys.back();
  const CameraKeyframe& a = keys[hi - 1];
  const CameraKeyframe& b = keys[hi];
  const double t = (frame - a.frame) / static_cast<double>(b.frame - a.frame);
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
  const auto& keys = sphere.keyframes;
  if (keys.empty()) return sphere.center;
  const size_t hi = UpperKey(keys, frame);
  if (hi == 0) return keys.front().center;
  if (hi == keys.size()) return keys.back().center;
  const CenterKeyframe& a = keys[hi - 1];
  const CenterKeyframe& b = keys[hi];
  const double t = (frame - a.frame) / static_cast<double>(b.frame - a.frame);
  return Lerp(a.center, b.center, t);
}

}  // namespace tessera::spec

namespace tessera::spec {

TransformSpec MeshTransformAt(const MeshSpec& mesh, double frame) {
  const auto& keys = mesh.keyframes;
  if (keys.empty()) return mesh.transform;
  const size_t hi = UpperKey(keys, frame);
  if (hi == 0) return keys.front().transform;
  if (hi == keys.size()) return keys.back().transform;
  const TransformSpec& a = keys[hi - 1].transform;
  const TransformSpec& b = keys[hi].transform;
  const double t =
      (frame - keys[hi - 1].frame) / static_cast<double>(keys[hi].frame - keys[hi - 1].frame);
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

}  // namespace tessera::spec

namespace tessera::spec {

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
