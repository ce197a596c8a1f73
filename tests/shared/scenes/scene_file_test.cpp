#include "shared/scenes/scene_file.h"

#include <gtest/gtest.h>

#include <string>

namespace tessera::spec {
namespace {

constexpr const char* kValid = R"(
width: 64
height: 32
samples: 4
max_depth: 5
background: {top: [0.5, 0.7, 1.0], bottom: [1, 1, 1]}
camera:
  keyframes:
    - {frame: 1, position: [0, 1, 5], look_at: [0, 1, 0], fov: 40}
    - {frame: 11, position: [2, 1, 5], look_at: [0, 1, 0], up: [0, 1, 0], fov: 60,
       aperture: 0.1, focus_distance: 5}
materials:
  ground: {type: diffuse, color: [0.5, 0.5, 0.5]}
  chrome: {type: metal, color: [0.9, 0.9, 0.9], roughness: 0.2}
  crystal: {type: glass, ior: 1.5}
  lamp: {type: emissive, color: [1, 1, 1], strength: 4}
objects:
  - {type: quad, corner: [-5, 0, -5], u: [10, 0, 0], v: [0, 0, 10], material: ground}
  - {type: sphere, center: [0, 1, 0], radius: 1, material: crystal}
  - type: sphere
    radius: 0.5
    material: chrome
    keyframes: [{frame: 1, center: [0, 0.5, 2]}, {frame: 5, center: [0, 2.5, 2]}]
  - {type: sphere, center: [1, 3, 0], radius: 0.2, material: lamp}
)";

// Replaces the first occurrence of `from` in the valid scene.
std::string With(const std::string& from, const std::string& to) {
  std::string s = kValid;
  const size_t pos = s.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  return s.replace(pos, from.size(), to);
}

void ExpectInvalid(const std::string& yaml, const std::string& message_part) {
  StatusOr<SceneSpec> scene = ParseSceneYaml(yaml);
  ASSERT_FALSE(scene.ok()) << "expected an error mentioning " << message_part;
  EXPECT_EQ(scene.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(scene.status().message().find(message_part), std::string::npos)
      << "message: " << scene.status().message();
}

TEST(SceneSpecTest, ValidSceneParses) {
  StatusOr<SceneSpec> scene = ParseSceneYaml(kValid);
  ASSERT_TRUE(scene.ok()) << scene.status().ToString();
  EXPECT_EQ(scene->width, 64);
  EXPECT_EQ(scene->height, 32);
  EXPECT_EQ(scene->samples, 4);
  EXPECT_EQ(scene->max_depth, 5);
  ASSERT_EQ(scene->camera.keyframes.size(), 2u);
  EXPECT_DOUBLE_EQ(scene->camera.keyframes[1].aperture, 0.1);
  EXPECT_DOUBLE_EQ(scene->camera.keyframes[0].up[1], 1.0);  // default up
  ASSERT_EQ(scene->materials.size(), 4u);
  EXPECT_EQ(scene->materials[1].name, "chrome");
  EXPECT_EQ(scene->materials[1].type, MaterialType::kMetal);
  ASSERT_EQ(scene->spheres.size(), 3u);
  ASSERT_EQ(scene->quads.size(), 1u);
  EXPECT_EQ(scene->spheres[0].material_index, 2);
  EXPECT_EQ(scene->spheres[1].keyframes.size(), 2u);
  EXPECT_EQ(scene->quads[0].material_index, 0);
}

TEST(SceneSpecTest, ConstantBackground) {
  StatusOr<SceneSpec> scene =
      ParseSceneYaml(With("{top: [0.5, 0.7, 1.0], bottom: [1, 1, 1]}", "{color: [0.2, 0.3, 0.4]}"));
  ASSERT_TRUE(scene.ok()) << scene.status().ToString();
  EXPECT_EQ(scene->background.top, scene->background.bottom);
  ExpectInvalid(With("bottom: [1, 1, 1]}", "bottom: [1, 1, 1], color: [1, 1, 1]}"),
                "background.color");
}

TEST(SceneSpecTest, ExampleSceneParses) {
  std::string path = std::string(TSR_SOURCE_DIR) + "/deploy/examples/bouncing-spheres/scene.yaml";
  FILE* f = fopen(path.c_str(), "rb");
  ASSERT_NE(f, nullptr) << path;
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  fclose(f);
  StatusOr<SceneSpec> scene = ParseSceneYaml(text);
  ASSERT_TRUE(scene.ok()) << scene.status().ToString();
}

TEST(SceneSpecTest, UnknownKeyNamesTheField) {
  ExpectInvalid(With("samples: 4", "samples: 4\nspp: 3"), "spp: unknown field");
  ExpectInvalid(With("fov: 40}", "fov: 40, zoom: 2}"), "camera.keyframes[0].zoom");
  ExpectInvalid(With("roughness: 0.2}", "roughness: 0.2, shiny: 1}"), "materials.chrome.shiny");
  ExpectInvalid(With("radius: 1, material: crystal}", "radius: 1, material: crystal, mass: 1}"),
                "objects[1].mass");
}

TEST(SceneSpecTest, WrongTypeNamesTheField) {
  ExpectInvalid(With("width: 64", "width: wide"), "width: expected an integer");
  ExpectInvalid(With("position: [0, 1, 5]", "position: [0, 1]"), "camera.keyframes[0].position");
  ExpectInvalid(With("radius: 0.5", "radius: [1]"), "objects[2].radius");
  ExpectInvalid(With("center: [0, 0.5, 2]", "center: [0, x, 2]"),
                "objects[2].keyframes[0].center[1]");
  ExpectInvalid(With("samples: 4", "samples: [4]"), "samples: expected an integer");
}

TEST(SceneSpecTest, MissingFieldNamesTheField) {
  ExpectInvalid(With("height: 32\n", ""), "height: required field is missing");
  ExpectInvalid(With(", fov: 40}", "}"), "camera.keyframes[0].fov: required field is missing");
  ExpectInvalid(With("crystal: {type: glass, ior: 1.5}", "crystal: {type: glass}"),
                "materials.crystal.ior: required field is missing");
  ExpectInvalid(With("{type: sphere, center: [0, 1, 0], radius: 1, ", "{type: sphere, radius: 1, "),
                "objects[1].center: required field is missing");
}

TEST(SceneSpecTest, OutOfRangeNamesTheField) {
  ExpectInvalid(With("width: 64", "width: 0"), "width: must be in [1, 16384]");
  ExpectInvalid(With("height: 32", "height: 16385"), "height: must be in [1, 16384]");
  ExpectInvalid(With("samples: 4", "samples: 65537"), "samples: must be in [1, 65536]");
  ExpectInvalid(With("max_depth: 5", "max_depth: 65"), "max_depth: must be in [1, 64]");
  ExpectInvalid(With("fov: 60", "fov: 180"), "camera.keyframes[1].fov: must be in (0, 180)");
  ExpectInvalid(With("radius: 1,", "radius: 0,"), "objects[1].radius: must be > 0");
  ExpectInvalid(With("roughness: 0.2", "roughness: 1.5"), "materials.chrome.roughness");
  ExpectInvalid(With("color: [0.5, 0.5, 0.5]", "color: [0.5, -1, 0.5]"),
                "materials.ground.color[1]");
  ExpectInvalid(With("{frame: 11,", "{frame: 1,"), "camera.keyframes[1].frame: frames must be");
  ExpectInvalid(With("look_at: [0, 1, 0], fov: 40", "look_at: [0, 1, 5], fov: 40"),
                "camera.keyframes[0].look_at: must differ");
  ExpectInvalid(With("v: [0, 0, 10]", "v: [5, 0, 0]"), "objects[0].v: must not be parallel");
}

TEST(SceneSpecTest, UndefinedMaterialNamesTheField) {
  ExpectInvalid(With("material: crystal}", "material: diamond}"),
                "objects[1].material: material 'diamond' is not defined");
  ExpectInvalid(With("crystal: {type: glass", "crystal: {type: plasma"),
                "materials.crystal.type: unknown material type 'plasma'");
}

TEST(SceneSpecTest, ValidateSceneChecksCodeBuiltScenes) {
  StatusOr<SceneSpec> scene = ParseSceneYaml(kValid);
  ASSERT_TRUE(scene.ok());
  SceneSpec s = *scene;
  s.width = 20000;
  Status st = ValidateScene(&s);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("width"), std::string::npos);
  s = *scene;
  s.spheres[0].material = "nothing";
  st = ValidateScene(&s);
  EXPECT_NE(st.message().find("spheres[0].material"), std::string::npos) << st.message();
}

TEST(SceneSpecTest, CameraInterpolationIsLinearAndClamped) {
  StatusOr<SceneSpec> scene = ParseSceneYaml(kValid);
  ASSERT_TRUE(scene.ok());
  const CameraKeyframe mid = InterpolateCamera(scene->camera, 6.0);  // halfway between 1 and 11
  EXPECT_DOUBLE_EQ(mid.position[0], 1.0);
  EXPECT_DOUBLE_EQ(mid.position[2], 5.0);
  EXPECT_DOUBLE_EQ(mid.fov, 50.0);
  EXPECT_DOUBLE_EQ(mid.aperture, 0.05);
  EXPECT_DOUBLE_EQ(mid.focus_distance, 5.0);  // both keys focus at 5
  const CameraKeyframe quarter = InterpolateCamera(scene->camera, 3.5);
  EXPECT_DOUBLE_EQ(quarter.position[0], 0.5);
  const CameraKeyframe before = InterpolateCamera(scene->camera, -10.0);
  EXPECT_DOUBLE_EQ(before.position[0], 0.0);
  EXPECT_DOUBLE_EQ(before.fov, 40.0);
  const CameraKeyframe after = InterpolateCamera(scene->camera, 100.0);
  EXPECT_DOUBLE_EQ(after.position[0], 2.0);
  EXPECT_DOUBLE_EQ(after.fov, 60.0);
}

TEST(SceneSpecTest, SphereCenterInterpolation) {
  StatusOr<SceneSpec> scene = ParseSceneYaml(kValid);
  ASSERT_TRUE(scene.ok());
  const SphereSpec& moving = scene->spheres[1];
  EXPECT_DOUBLE_EQ(SphereCenterAt(moving, 3.0)[1], 1.5);
  EXPECT_DOUBLE_EQ(SphereCenterAt(moving, 0.0)[1], 0.5);
  EXPECT_DOUBLE_EQ(SphereCenterAt(moving, 9.0)[1], 2.5);
  EXPECT_DOUBLE_EQ(SphereCenterAt(scene->spheres[0], 9.0)[1], 1.0);  // static
}

}  // namespace
}  // namespace tessera::spec
