// Scene format additions: AOVs, principled materials, textures, environment maps, meshes with
// transforms and keyframes, and the errors for bad values.

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "shared/scenes/scene_file.h"

namespace tessera::spec {
namespace {

constexpr const char* kBase = R"(
width: 16
height: 8
samples: 1
max_depth: 2
background: {color: [1, 1, 1]}
camera:
  keyframes: [{frame: 1, position: [0, 1, 5], look_at: [0, 1, 0], fov: 40}]
materials:
  clay: {type: diffuse, color: [0.5, 0.5, 0.5]}
objects:
  - {type: sphere, center: [0, 1, 0], radius: 1, material: clay}
)";

StatusOr<SceneSpec> Parse(const std::string& extra_top, const std::string& extra_materials = "",
                          const std::string& extra_objects = "") {
  std::string yaml = kBase;
  yaml = extra_top + yaml;
  yaml.replace(yaml.find("objects:"), 0, extra_materials);
  yaml += extra_objects;
  return ParseSceneYaml(yaml, "/assets");
}

void ExpectError(const StatusOr<SceneSpec>& scene, const std::string& part) {
  ASSERT_FALSE(scene.ok()) << "expected an error mentioning " << part;
  EXPECT_EQ(scene.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(scene.status().message().find(part), std::string::npos) << scene.status().message();
}

TEST(SceneSpecFeaturesTest, AovsAreSortedAndChecked) {
  StatusOr<SceneSpec> scene = Parse("aovs: [depth, albedo, normal]\n");
  ASSERT_TRUE(scene.ok()) << scene.status().ToString();
  EXPECT_EQ(scene->aovs, (std::vector<Aov>{Aov::kAlbedo, Aov::kNormal, Aov::kDepth}));
  ExpectError(Parse("aovs: [albedo, motion]\n"), "aovs[1]");
  ExpectError(Parse("aovs: [depth, depth]\n"), "listed twice");
  EXPECT_TRUE(Parse("")->aovs.empty());
}

TEST(SceneSpecFeaturesTest, PrincipledAndTexturedMaterials) {
  StatusOr<SceneSpec> scene =
      Parse("",
            "  p: {type: principled, base_color: [0.8, 0.2, 0.1], "
            "roughness: 0.3, metallic: 1, texture: wood.png}\n"
            "  t: {type: diffuse, color: [1, 1, 1], texture: /abs/t.exr}\n");
  ASSERT_TRUE(scene.ok()) << scene.status().ToString();
  const MaterialSpec& p = scene->materials[1];
  EXPECT_EQ(p.type, MaterialType::kPrincipled);
  EXPECT_DOUBLE_EQ(p.metallic, 1.0);
  EXPECT_DOUBLE_EQ(p.roughness, 0.3);
  EXPECT_EQ(ResolveAssetPath(*scene, p.texture), "/assets/wood.png");
  EXPECT_EQ(ResolveAssetPath(*scene, scene->materials[2].texture), "/abs/t.exr");
  ExpectError(Parse("", "  p: {type: principled, base_color: [1, 1, 1], metallic: 2}\n"),
              "materials.p.metallic");
  ExpectError(Parse("", "  p: {type: velvet, color: [1, 1, 1]}\n"), "principled");
}

TEST(SceneSpecFeaturesTest, EnvironmentBackground) {
  std::string yaml = kBase;
  yaml.replace(yaml.find("{color: [1, 1, 1]}"), 18, "{environment: sky.exr, strength: 2}");
  StatusOr<SceneSpec> scene = ParseSceneYaml(yaml, "/a");
  ASSERT_TRUE(scene.ok()) << scene.status().ToString();
  EXPECT_EQ(scene->background.environment, "sky.exr");
  EXPECT_DOUBLE_EQ(scene->background.strength, 2.0);
  yaml.replace(yaml.find("strength: 2"), 11, "strength: -1");
  ExpectError(ParseSceneYaml(yaml), "background.strength");
}

TEST(SceneSpecFeaturesTest, MeshWithTransformAndKeyframes) {
  StatusOr<SceneSpec> scene =
      Parse("", "",
            "  - {type: mesh, file: a.obj, material: clay, transform: {translate: [1, 2, 3], "
            "rotate_deg: [0, 90, 0], scale: 2}}\n"
            "  - type: mesh\n    file: a.obj\n    material: clay\n    keyframes:\n"
            "      - {frame: 1, translate: [0, 0, 0]}\n"
            "      - {frame: 11, translate: [10, 0, 0], scale: [1, 2, 3]}\n");
  ASSERT_TRUE(scene.ok()) << scene.status().ToString();
  ASSERT_EQ(scene->meshes.size(), 2u);
  EXPECT_EQ(scene->meshes[0].object_index, 1);
  EXPECT_EQ(scene->meshes[0].transform.scale, (Vec3{2, 2, 2}));
  EXPECT_EQ(scene->meshes[0].transform.rotate_deg, (Vec3{0, 90, 0}));
  const TransformSpec mid = MeshTransformAt(scene->meshes[1], 6);
  EXPECT_DOUBLE_EQ(mid.translate[0], 5.0);
  EXPECT_DOUBLE_EQ(mid.scale[1], 1.5);
  EXPECT_DOUBLE_EQ(MeshTransformAt(scene->meshes[1], 50).translate[0], 10.0);
  EXPECT_EQ(ResolveAssetPath(*scene, scene->meshes[0].file), "/assets/a.obj");
}

TEST(SceneSpecFeaturesTest, BadMeshesNameTheObject) {
  ExpectError(Parse("", "", "  - {type: mesh, file: a.obj, material: stone}\n"),
              "objects[1].material");
  ExpectError(
      Parse("", "", "  - {type: mesh, file: a.obj, material: clay, transform: {scale: 0}}\n"),
      "objects[1].transform.scale");
  ExpectError(Parse("", "", "  - {type: mesh, material: clay}\n"), "objects[1].file");
  ExpectError(Parse("", "", "  - {type: mesh, file: a.obj, material: clay, spin: 1}\n"),
              "objects[1].spin");
}

TEST(SceneSpecFeaturesTest, NonFiniteNumbersAreRejected) {
  ExpectError(
      Parse("", "", "  - {type: sphere, center: [0, .nan, 0], radius: 1, material: clay}\n"),
      "objects[1].center[1]");
  ExpectError(
      Parse("", "", "  - {type: sphere, center: [0, 0, 0], radius: .inf, material: clay}\n"),
      "objects[1].radius");
  ExpectError(Parse("", "  n: {type: diffuse, color: [.nan, 0, 0]}\n"), "materials.n.color[0]");
  ExpectError(Parse("", "  n: {type: emissive, color: [1, 1, 1], strength: .nan}\n"),
              "materials.n.strength");
  ExpectError(
      Parse("", "",
            "  - {type: mesh, file: a.obj, material: clay, transform: {translate: [.inf, 0, "
            "0]}}\n"),
      "objects[1].transform.translate[0]");
  std::string yaml = kBase;
  yaml.replace(yaml.find("position: [0, 1, 5]"), 19, "position: [0, .nan, 5]");
  ExpectError(ParseSceneYaml(yaml), "camera.keyframes[0].position[1]");
}

}  // namespace
}  // namespace tessera::spec
