#pragma once
// Host-side asset loading for the path tracer: Wavefront OBJ meshes (tinyobjloader) and images
// (OpenImageIO). Errors name the file; callers add which scene object asked for it.

#include <string>
#include <vector>

#include "shared/base/status.h"
#include "shared/scenes/scene_file.h"

namespace tessera::pathtracer {

// Triangulated OBJ geometry with all shapes merged. NotFound when the file is missing,
// InvalidArgument when it cannot be parsed or holds non-finite numbers.
StatusOr<spec::MeshData> LoadObjMesh(const std::string& path);

struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<float> rgb;  // linear, row-major, top row first
};

// Any format OIIO reads. 8-bit images are taken as sRGB and decoded to linear; grey is
// replicated to RGB; alpha and extra channels are dropped.
StatusOr<RgbImage> LoadRgbImage(const std::string& path);

// Writes a float RGB(A...) image (any OIIO format by extension; PNG is 8-bit sRGB).
Status SaveImage(const std::string& path, int width, int height, int channels,
                 const std::vector<float>& pixels);

}  // namespace tessera::pathtracer
