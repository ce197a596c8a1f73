#include "plugins/pathtracer/assets.h"

#include <OpenImageIO/imageio.h>
#include <tiny_obj_loader.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "shared/base/utf8.h"
#include "shared/images/image_oiio.h"

namespace tessera::pathtracer {
namespace {

float SrgbToLinear(float c) {
  return c <= 0.04045f ? c / 12.92f : std::pow((c + 0.055f) / 1.055f, 2.4f);
}

float LinearToSrgb(float c) {
  c = std::clamp(c, 0.0f, 1.0f);
  return c <= 0.0031308f ? c * 12.92f : 1.055f * std::pow(c, 1.0f / 2.4f) - 0.055f;
}

Status CheckReadable(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return Status::NotFound("'" + path + "': no such file");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<spec::MeshData> LoadObjMesh(const std::string& path) {
  TSR_RETURN_IF_ERROR(CheckReadable(path));
  // Read from a stream with no material reader: an OBJ's `mtllib` line opens no other file
  // (only the file the scene names, already checked by the caller, is read).
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("'" + path + "': cannot open");
  tinyobj::attrib_t attrib;
  std::vector<tinyobj::shape_t> shapes;
  std::vector<tinyobj::material_t> materials;
  std::string warn, err;
  if (!tinyobj::LoadObj(&attrib, &shapes, &materials, &warn, &err, &in, nullptr,
                        /*triangulate=*/true)) {
    return Status::InvalidArgument("'" + path + "': " + utf8::Sanitize(err));
  }
  spec::MeshData mesh;
  mesh.positions.assign(attrib.vertices.begin(), attrib.vertices.end());
  mesh.normals.assign(attrib.normals.begin(), attrib.normals.end());
  mesh.uvs.assign(attrib.texcoords.begin(), attrib.texcoords.end());
  for (float v : mesh.positions) {
    if (!std::isfinite(v)) return Status::InvalidArgument("'" + path + "': non-finite vertex");
  }
  for (const auto& shape : shapes) {
    const auto& m = shape.mesh;
    size_t offset = 0;
    for (size_t f = 0; f < m.num_face_vertices.size(); ++f) {
      const size_t fv = m.num_face_vertices[f];
      if (fv == 3) {  // triangulate=true leaves only triangles; skip points/lines
        for (size_t k = 0; k < 3; ++k) {
          const tinyobj::index_t& idx = m.indices[offset + k];
          mesh.indices.push_back(idx.vertex_index);
          mesh.normal_indices.push_back(idx.normal_index);
          mesh.uv_indices.push_back(idx.texcoord_index);
        }
      }
      offset += fv;
    }
  }
  return mesh;
}

StatusOr<RgbImage> LoadRgbImage(const std::string& path) {
  TSR_RETURN_IF_ERROR(CheckReadable(path));
  StatusOr<std::unique_ptr<OIIO::ImageInput>> opened = image::OpenForReading(path);
  if (!opened.ok()) return Status::InvalidArgument(opened.status().message());
  std::unique_ptr<OIIO::ImageInput> in = std::move(opened).value();
  const OIIO::ImageSpec& spec = in->spec();
  if (spec.width <= 0 || spec.height <= 0 || spec.nchannels <= 0) {
    return Status::InvalidArgument("'" + path + "': empty image");
  }
  const int nch = spec.nchannels;
  std::vector<float> data(static_cast<size_t>(spec.width) * spec.height * nch);
  if (!in->read_image(0, 0, 0, nch, OIIO::TypeDesc::FLOAT, data.data())) {
    return Status::InvalidArgument("'" + path + "': " + in->geterror());
  }
  const bool srgb = spec.format == OIIO::TypeDesc::UINT8;
  RgbImage out;
  out.width = spec.width;
  out.height = spec.height;
  out.rgb.resize(static_cast<size_t>(spec.width) * spec.height * 3);
  for (size_t i = 0; i < static_cast<size_t>(spec.width) * spec.height; ++i) {
    for (int c = 0; c < 3; ++c) {
      float v = data[i * nch + std::min(c, nch >= 3 ? c : 0)];
      if (!std::isfinite(v)) return Status::InvalidArgument("'" + path + "': non-finite texel");
      out.rgb[i * 3 + c] = srgb ? SrgbToLinear(v) : std::max(v, 0.0f);
    }
  }
  return out;
}

Status SaveImage(const std::string& path, int width, int height, int channels,
                 const std::vector<float>& pixels) {
  auto out = OIIO::ImageOutput::create(path);
  if (!out) return Status::Internal("'" + path + "': " + OIIO::geterror());
  const bool png = path.size() > 4 && path.substr(path.size() - 4) == ".png";
  OIIO::ImageSpec spec(width, height, channels, png ? OIIO::TypeDesc::UINT8 : OIIO::TypeDesc::HALF);
  if (!out->open(path, spec)) return Status::Internal("'" + path + "': " + out->geterror());
  std::vector<float> data = pixels;
  if (png) {
    for (size_t i = 0; i < data.size(); ++i) {
      if (channels < 4 || i % channels != 3) data[i] = LinearToSrgb(data[i]);
    }
  }
  if (!out->write_image(OIIO::TypeDesc::FLOAT, data.data()) || !out->close()) {
    return Status::Internal("'" + path + "': " + out->geterror());
  }
  return Status::Ok();
}

}  // namespace tessera::pathtracer
