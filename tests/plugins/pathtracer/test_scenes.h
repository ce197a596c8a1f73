#pragma once
// Scenes and helpers shared by the path tracer's tests.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "plugins/pathtracer/renderer.h"

namespace tessera::pathtracer::testing {

inline std::string ReadFile(const std::string& path) {
  std::string text;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  std::fclose(f);
  return text;
}

inline std::string DataDir() {
  return std::string(TSR_SOURCE_DIR) + "/tests/plugins/pathtracer/data";
}

// A scene file from tests/plugins/pathtracer/data, assets resolved next to it.
inline spec::SceneSpec DataScene(const std::string& name) {
  const std::string path = DataDir() + "/" + name;
  StatusOr<spec::SceneSpec> scene = spec::ParseSceneYaml(ReadFile(path), DataDir());
  EXPECT_TRUE(scene.ok()) << path << ": " << scene.status().ToString();
  return scene.ok() ? *scene : spec::SceneSpec{};
}

inline spec::SceneSpec ExampleScene(int width, int height, int samples) {
  const std::string path =
      std::string(TSR_SOURCE_DIR) + "/deploy/examples/bouncing-spheres/scene.yaml";
  StatusOr<spec::SceneSpec> scene = spec::ParseSceneYaml(ReadFile(path));
  EXPECT_TRUE(scene.ok()) << path << ": " << scene.status().ToString();
  if (!scene.ok()) return {};
  scene->width = width;
  scene->height = height;
  scene->samples = samples;
  return *scene;
}

inline bool BitIdentical(const RenderedImage& a, const RenderedImage& b) {
  return a.width == b.width && a.height == b.height && a.pixels.size() == b.pixels.size() &&
         a.sums == b.sums &&
         std::equal(a.pixels.begin(), a.pixels.end(), b.pixels.begin(),
                    [](float x, float y) { return std::memcmp(&x, &y, sizeof x) == 0; });
}

// Root-mean-square difference over the RGB channels of two same-size images.
inline double RmseRgb(const RenderedImage& a, const RenderedImage& b) {
  double sum = 0;
  size_t n = 0;
  for (size_t i = 0; i < a.pixels.size() && i < b.pixels.size(); ++i) {
    if (i % a.channels >= 3) continue;
    const double d = a.pixels[i] - b.pixels[i];
    sum += d * d;
    ++n;
  }
  return n ? std::sqrt(sum / n) : 1e30;
}

}  // namespace tessera::pathtracer::testing
