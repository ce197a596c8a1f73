#pragma once
// What the files implementing scene descriptions (scene_file*.cpp) share: error wording, vector
// arithmetic, and the checks the YAML reader runs on each object as it reads it. Not part of
// the API (scene_file.h).

#include <map>
#include <string>

#include "shared/base/status.h"
#include "shared/scenes/scene_file.h"

namespace tessera::spec::scene_internal {

// "<path>: <what>" as InvalidArgument.
Status Invalid(const std::string& path, const std::string& what);
// "<path>[i]".
std::string Index(const std::string& path, size_t i);

double Length(const Vec3& v);
Vec3 Sub(const Vec3& a, const Vec3& b);
Vec3 Lerp(const Vec3& a, const Vec3& b, double t);

// Each object checked, and its material resolved through `materials` (name -> index).
Status ValidateSphere(SphereSpec* s, const std::map<std::string, int>& materials,
                      const std::string& path);
Status ValidateQuad(QuadSpec* q, const std::map<std::string, int>& materials,
                    const std::string& path);
Status ValidateMesh(MeshSpec* m, const std::map<std::string, int>& materials,
                    const std::string& path);
// Scalar settings, background, camera and materials; objects are checked by the caller so the
// parser can name them by their position in `objects`.
Status ValidateGlobals(const SceneSpec& s, std::map<std::string, int>* material_index);

}  // namespace tessera::spec::scene_internal
