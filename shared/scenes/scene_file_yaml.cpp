// Scene descriptions read from YAML (scene_file.h has the format; the parts are listed in
// scene_file.cpp): each section read with the field's path in every error, objects checked as
// they are read, and yaml-cpp's exceptions turned into errors.
#include <algorithm>
#include <map>

#include "shared/base/yaml_util.h"
#include "shared/scenes/scene_file.h"
#include "shared/scenes/scene_file_internal.h"

namespace tessera::spec {
namespace {

using scene_internal::Index;
using scene_internal::Invalid;
using scene_internal::ValidateGlobals;
using scene_internal::ValidateMesh;
using scene_internal::ValidateQuad;
using scene_internal::ValidateSphere;

// A scene as a job carries it (job_file.h kMaxSceneBytes), with room for a job file around it.
constexpr size_t kMaxSceneBytesParsed = (16u << 20) + (1u << 20);

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

}  // namespace tessera::spec
