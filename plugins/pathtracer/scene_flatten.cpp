#include "plugins/pathtracer/scene_flatten.h"

#include <cmath>

namespace tessera::pathtracer {
namespace {

using kernel::Float3;

Float3 ToFloat3(const spec::Vec3& v) {
  return {static_cast<float>(v[0]), static_cast<float>(v[1]), static_cast<float>(v[2])};
}

double Length(const spec::Vec3& v) { return std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]); }

kernel::Material ToMaterial(const spec::MaterialSpec& m) {
  kernel::Material out{};
  out.albedo = ToFloat3(m.color);
  out.roughness = static_cast<float>(m.roughness);
  out.ior = static_cast<float>(m.ior);
  switch (m.type) {
    case spec::MaterialType::kDiffuse:
      out.kind = kernel::MaterialKind::kDiffuse;
      break;
    case spec::MaterialType::kMetal:
      out.kind = kernel::MaterialKind::kMetal;
      break;
    case spec::MaterialType::kGlass:
      out.kind = kernel::MaterialKind::kGlass;
      break;
    case spec::MaterialType::kEmissive:
      out.kind = kernel::MaterialKind::kEmissive;
      out.emission = ToFloat3(m.color) * static_cast<float>(m.strength);
      break;
  }
  return out;
}

}  // namespace

kernel::SceneView FlatScene::View() const {
  kernel::SceneView v{};
  v.spheres = spheres.data();
  v.num_spheres = static_cast<int>(spheres.size());
  v.quads = quads.data();
  v.num_quads = static_cast<int>(quads.size());
  v.materials = materials.data();
  v.camera = camera;
  v.sky_top = sky_top;
  v.sky_bottom = sky_bottom;
  v.width = width;
  v.height = height;
  v.max_depth = max_depth;
  return v;
}

kernel::Camera MakeCamera(const spec::CameraKeyframe& key, int width, int height) {
  // Built in double: the basis of a far-away camera loses little, then stored as float.
  const spec::Vec3 to_target = {key.look_at[0] - key.position[0], key.look_at[1] - key.position[1],
                                key.look_at[2] - key.position[2]};
  const double dist = Length(to_target);
  const double focus = key.focus_distance > 0.0 ? key.focus_distance : dist;
  const double h = std::tan(key.fov * M_PI / 360.0);
  const double viewport_h = 2.0 * h * focus;
  const double viewport_w = viewport_h * static_cast<double>(width) / height;
  auto normalize = [](spec::Vec3 v) {
    const double l = Length(v);
    return spec::Vec3{v[0] / l, v[1] / l, v[2] / l};
  };
  auto cross = [](const spec::Vec3& a, const spec::Vec3& b) {
    return spec::Vec3{a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2],
                      a[0] * b[1] - a[1] * b[0]};
  };
  const spec::Vec3 w = normalize({-to_target[0], -to_target[1], -to_target[2]});
  spec::Vec3 u = cross(key.up, w);
  // Interpolated keys can in principle produce an up parallel to the view; pick any other up.
  if (Length(u) < 1e-9)
    u = cross(std::abs(w[1]) < 0.9 ? spec::Vec3{0, 1, 0} : spec::Vec3{1, 0, 0}, w);
  u = normalize(u);
  const spec::Vec3 v = cross(w, u);

  kernel::Camera c{};
  c.origin = ToFloat3(key.position);
  const Float3 fu = ToFloat3(u), fv = ToFloat3(v), fw = ToFloat3(w);
  c.horizontal = fu * static_cast<float>(viewport_w);
  c.vertical = fv * static_cast<float>(viewport_h);
  c.lower_left =
      c.origin - c.horizontal * 0.5f - c.vertical * 0.5f - fw * static_cast<float>(focus);
  c.lens_u = fu;
  c.lens_v = fv;
  c.lens_radius = static_cast<float>(key.aperture * 0.5);
  return c;
}

FlatScene FlattenScene(const spec::SceneSpec& scene, int frame) {
  FlatScene out;
  out.width = scene.width;
  out.height = scene.height;
  out.samples = scene.samples;
  out.max_depth = scene.max_depth;
  out.sky_top = ToFloat3(scene.background.top);
  out.sky_bottom = ToFloat3(scene.background.bottom);
  out.camera = MakeCamera(spec::InterpolateCamera(scene.camera, frame), scene.width, scene.height);
  out.materials.reserve(scene.materials.size());
  for (const auto& m : scene.materials) out.materials.push_back(ToMaterial(m));
  out.spheres.reserve(scene.spheres.size());
  for (const auto& s : scene.spheres) {
    kernel::Sphere k{};
    k.center = ToFloat3(spec::SphereCenterAt(s, frame));
    k.radius = static_cast<float>(s.radius);
    k.inv_radius = static_cast<float>(1.0 / s.radius);
    k.material = s.material_index;
    out.spheres.push_back(k);
  }
  out.quads.reserve(scene.quads.size());
  for (const auto& q : scene.quads) {
    kernel::Quad k{};
    k.corner = ToFloat3(q.corner);
    k.u = ToFloat3(q.u);
    k.v = ToFloat3(q.v);
    const spec::Vec3 n = {q.u[1] * q.v[2] - q.u[2] * q.v[1], q.u[2] * q.v[0] - q.u[0] * q.v[2],
                          q.u[0] * q.v[1] - q.u[1] * q.v[0]};
    const double len = Length(n);
    k.normal = ToFloat3({n[0] / len, n[1] / len, n[2] / len});
    k.plane_d = kernel::Dot(k.normal, k.corner);
    const double inv_len2 = 1.0 / (len * len);
    k.w = ToFloat3({n[0] * inv_len2, n[1] * inv_len2, n[2] * inv_len2});
    k.material = q.material_index;
    out.quads.push_back(k);
  }
  return out;
}

}  // namespace tessera::pathtracer
