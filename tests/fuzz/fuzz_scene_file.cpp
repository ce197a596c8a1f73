// Fuzzes the scene file parser (shared/scenes/scene_file.h): ParseSceneYaml, and what a worker and
// the scheduler read from an accepted scene (its asset files, its channels, the camera at a frame).

#include <cstdint>
#include <string_view>

#include "shared/scenes/scene_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  tessera::StatusOr<tessera::spec::SceneSpec> scene = tessera::spec::ParseSceneYaml(text);
  if (!scene.ok()) return 0;
  (void)tessera::spec::RelativeAssetFiles(*scene);
  (void)tessera::spec::ResultChannels(*scene);
  if (!scene->camera.keyframes.empty()) {
    (void)tessera::spec::InterpolateCamera(scene->camera, 1.5);
    (void)tessera::spec::InterpolateCamera(scene->camera, -1e9);
  }
  (void)tessera::spec::ValidateScene(&*scene);
  return 0;
}
