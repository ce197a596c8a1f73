#include "plugins/pathtracer/scene_flatten.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <string>

#include "plugins/pathtracer/assets.h"
#include "plugins/pathtracer/bvh.h"

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
  out.metallic = static_cast<float>(m.metallic);
  out.texture = -1;
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
    case spec::MaterialType::kPrincipled:
      out.kind = kernel::MaterialKind::kPrincipled;
      break;
  }
  return out;
}

// An instance's placement: scale, then rotation about x, y, z, then translation. Built in
// double; the kernel gets the object-to-world box (for the top-level BVH) and the inverse.
struct Placement {
  double m[3][3];    // object to world, linear part: R * S
  double t[3];       // translation
  double inv[3][3];  // (R * S)^-1 = S^-1 * R^T
  double inv_t[3];   // -inv * t

  Float3 ToWorld(Float3 p) const {
    const double q[3] = {p.x, p.y, p.z};
    double r[3];
    for (int i = 0; i < 3; ++i) r[i] = m[i][0] * q[0] + m[i][1] * q[1] + m[i][2] * q[2] + t[i];
    return {static_cast<float>(r[0]), static_cast<float>(r[1]), static_cast<float>(r[2])};
  }
  kernel::Affine WorldToObject() const {
    auto row = [&](int i) {
      return Float3{static_cast<float>(inv[i][0]), static_cast<float>(inv[i][1]),
                    static_cast<float>(inv[i][2])};
    };
    return {
        row(0),
        row(1),
        row(2),
        {static_cast<float>(inv_t[0]), static_cast<float>(inv_t[1]), static_cast<float>(inv_t[2])}};
  }
};

Placement MakePlacement(const spec::TransformSpec& ts) {
  const double rx = ts.rotate_deg[0] * M_PI / 180, ry = ts.rotate_deg[1] * M_PI / 180,
               rz = ts.rotate_deg[2] * M_PI / 180;
  const double cx = std::cos(rx), sx = std::sin(rx), cy = std::cos(ry), sy = std::sin(ry),
               cz = std::cos(rz), sz = std::sin(rz);
  // R = Rz * Ry * Rx
  const double r[3][3] = {{cz * cy, cz * sy * sx - sz * cx, cz * sy * cx + sz * sx},
                          {sz * cy, sz * sy * sx + cz * cx, sz * sy * cx - cz * sx},
                          {-sy, cy * sx, cy * cx}};
  Placement a{};
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      a.m[i][j] = r[i][j] * ts.scale[j];
      a.inv[i][j] = r[j][i] / ts.scale[i];
    }
    a.t[i] = ts.translate[i];
  }
  for (int i = 0; i < 3; ++i) {
    a.inv_t[i] = -(a.inv[i][0] * a.t[0] + a.inv[i][1] * a.t[1] + a.inv[i][2] * a.t[2]);
  }
  return a;
}

std::string MeshName(const spec::MeshSpec& mesh) {
  return "objects[" + std::to_string(mesh.object_index) + "] (mesh" +
         (mesh.file.empty() ? std::string(")") : " '" + mesh.file + "')");
}

Float3 ReadFloat3(const std::vector<float>& v, int index) {
  const size_t i = 3 * static_cast<size_t>(index);
  return {v[i], v[i + 1], v[i + 2]};
}

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// Appends the mesh's non-degenerate triangles in object space (shared by its instances);
// `mesh` names the first object using them in errors.
Status AddMeshTriangles(const spec::MeshSpec& mesh, const spec::MeshData& data, FlatScene* out) {
  const size_t corners = data.indices.size();
  if (corners == 0) return Status::InvalidArgument(MeshName(mesh) + ": the mesh has no triangles");
  if (corners % 3 != 0) {
    return Status::InvalidArgument(MeshName(mesh) + ": index count is not a multiple of 3");
  }
  const int num_pos = static_cast<int>(data.positions.size() / 3);
  const int num_nrm = static_cast<int>(data.normals.size() / 3);
  const int num_uv = static_cast<int>(data.uvs.size() / 2);
  const bool has_n = data.normal_indices.size() == corners;
  const bool has_uv = data.uv_indices.size() == corners;
  size_t kept = 0;
  // Reserved up front: growing 100k-triangle arrays by doubling costs more than building the BVH.
  out->triangles.reserve(out->triangles.size() + corners / 3);
  if (has_n || has_uv) out->shading.reserve(out->shading.size() + corners / 3);
  for (size_t c = 0; c < corners; c += 3) {
    kernel::Float3 p[3];
    for (int k = 0; k < 3; ++k) {
      const int vi = data.indices[c + k];
      if (vi < 0 || vi >= num_pos) {
        return Status::InvalidArgument(MeshName(mesh) + ": triangle " + std::to_string(c / 3) +
                                       " refers to vertex " + std::to_string(vi) + " of " +
                                       std::to_string(num_pos));
      }
      p[k] = ReadFloat3(data.positions, vi);
    }
    kernel::Triangle tri{};
    tri.p0 = p[0];
    tri.e1 = p[1] - p[0];
    tri.e2 = p[2] - p[0];
    tri.material = -1;  // the instance's material applies
    tri.shading = -1;
    const kernel::Float3 cross = kernel::Cross(tri.e1, tri.e2);
    const float scale2 = std::max(kernel::Dot(tri.e1, tri.e1), kernel::Dot(tri.e2, tri.e2));
    if (!(kernel::Dot(cross, cross) > 1e-12f * scale2 * scale2) || !kernel::IsFinite(cross)) {
      continue;  // zero-area (or non-finite) triangle: never hit, skip it
    }
    bool any_attr = false;
    kernel::TriangleShading sh{};
    for (int k = 0; k < 3; ++k) {
      const int ni = has_n ? data.normal_indices[c + k] : -1;
      const int ti = has_uv ? data.uv_indices[c + k] : -1;
      kernel::Float3& n = k == 0 ? sh.n0 : (k == 1 ? sh.n1 : sh.n2);
      n = {0.0f, 0.0f, 0.0f};
      if (ni >= 0 && ni < num_nrm) {
        n = ReadFloat3(data.normals, ni);
        if (kernel::IsFinite(n) && kernel::Dot(n, n) > 1e-20f) {
          n = kernel::Normalize(n);
          any_attr = true;
        } else {
          n = {0.0f, 0.0f, 0.0f};
        }
      }
      // Without UVs the corners get (0,0), (1,0), (0,1): barycentric lookups.
      sh.uv[2 * k] = k == 1 ? 1.0f : 0.0f;
      sh.uv[2 * k + 1] = k == 2 ? 1.0f : 0.0f;
      if (ti >= 0 && ti < num_uv) {
        sh.uv[2 * k] = data.uvs[2 * static_cast<size_t>(ti)];
        sh.uv[2 * k + 1] = 1.0f - data.uvs[2 * static_cast<size_t>(ti) + 1];  // OBJ v is up
        any_attr = true;
      }
    }
    if (any_attr) {
      tri.shading = static_cast<int>(out->shading.size());
      out->shading.push_back(sh);
    }
    out->triangles.push_back(tri);
    ++kept;
  }
  if (kept == 0) {
    return Status::InvalidArgument(MeshName(mesh) + ": all " + std::to_string(corners / 3) +
                                   " triangles have zero area");
  }
  return Status::Ok();
}

Status LoadEnvironment(const spec::SceneSpec& scene, FlatScene* out) {
  TSR_ASSIGN_OR_RETURN(
      const std::string path,
      spec::OpenableAssetPath(scene, scene.background.environment, "background.environment"));
  StatusOr<RgbImage> image = LoadRgbImage(path);
  if (!image.ok()) return image.status().WithContext("background.environment");
  const int w = image->width, h = image->height;
  out->env_width = w;
  out->env_height = h;
  out->env_strength = static_cast<float>(scene.background.strength);
  out->env_rgb = std::move(image->rgb);
  // Tables in double, stored as float: luminance * sin(theta) per texel.
  out->env_conditional.assign(static_cast<size_t>(h) * (w + 1), 0.0f);
  out->env_marginal.assign(h + 1, 0.0f);
  std::vector<double> row_sum(h, 0.0);
  double total = 0.0;
  for (int y = 0; y < h; ++y) {
    const double sin_theta = std::sin((y + 0.5) * M_PI / h);
    std::vector<double> acc(w + 1, 0.0);
    for (int x = 0; x < w; ++x) {
      const float* p = &out->env_rgb[3 * (static_cast<size_t>(y) * w + x)];
      acc[x + 1] = acc[x] + kernel::Luminance({p[0], p[1], p[2]}) * sin_theta;
    }
    row_sum[y] = acc[w];
    total += acc[w];
    float* row = &out->env_conditional[static_cast<size_t>(y) * (w + 1)];
    for (int x = 0; x <= w; ++x) {
      row[x] = acc[w] > 0.0 ? static_cast<float>(acc[x] / acc[w]) : static_cast<float>(x) / w;
    }
    row[w] = 1.0f;
  }
  double acc = 0.0;
  for (int y = 0; y < h; ++y) {
    acc += row_sum[y];
    out->env_marginal[y + 1] = total > 0.0 ? static_cast<float>(acc / total) : 0.0f;
  }
  out->env_marginal[h] = 1.0f;
  out->env_integral = static_cast<float>(total * out->env_strength * 2.0 * M_PI * M_PI /
                                         (static_cast<double>(w) * h));
  return Status::Ok();
}

// FNV-1a over 8-byte words (the tail byte-wise): fast enough to fingerprint 100k triangles
// on every frame.
void Fnv(uint64_t* h, const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t word;
    std::memcpy(&word, p + i, 8);
    *h ^= word;
    *h *= 1099511628211ull;
  }
  for (; i < bytes; ++i) {
    *h ^= p[i];
    *h *= 1099511628211ull;
  }
}

template <typename T>
void FnvVector(uint64_t* h, const std::vector<T>& v) {
  const uint64_t n = v.size();
  Fnv(h, &n, sizeof n);
  if (!v.empty()) Fnv(h, v.data(), v.size() * sizeof(T));
}

}  // namespace

kernel::SceneView FlatScene::View() const {
  kernel::SceneView v{};
  v.spheres = spheres.data();
  v.num_spheres = static_cast<int>(spheres.size());
  v.quads = quads.data();
  v.num_quads = static_cast<int>(quads.size());
  v.triangles = triangles.data();
  v.num_triangles = static_cast<int>(triangles.size());
  v.shading = shading.data();
  v.instances = instances.data();
  v.prims = prims.data();
  v.nodes = nodes.data();
  v.num_nodes = static_cast<int>(nodes.size());
  v.materials = materials.data();
  v.lights = lights.data();
  v.num_lights = static_cast<int>(lights.size());
  v.textures = textures.data();
  v.texels = texels.data();
  if (!env_rgb.empty()) {
    v.env.rgb = env_rgb.data();
    v.env.marginal = env_marginal.data();
    v.env.conditional = env_conditional.data();
    v.env.width = env_width;
    v.env.height = env_height;
    v.env.strength = env_strength;
    v.env.integral = env_integral;
  }
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

StatusOr<FlatScene> FlattenScene(const spec::SceneSpec& scene, int frame) {
  FlatScene out;
  out.width = scene.width;
  out.height = scene.height;
  out.samples = scene.samples;
  out.max_depth = scene.max_depth;
  out.sky_top = ToFloat3(scene.background.top);
  out.sky_bottom = ToFloat3(scene.background.bottom);
  out.camera = MakeCamera(spec::InterpolateCamera(scene.camera, frame), scene.width, scene.height);
  out.channel_names = {"R", "G", "B", "A"};
  out.channel_map.count = 4;
  for (int c = 0; c < 4; ++c) out.channel_map.src[c] = c;
  auto add_channels = [&](int src, std::initializer_list<const char*> names) {
    for (const char* name : names) {
      out.channel_map.src[out.channel_map.count++] = src++;
      out.channel_names.push_back(name);
    }
  };
  for (spec::Aov aov : scene.aovs) {
    if (aov == spec::Aov::kAlbedo)
      add_channels(kernel::kAlbedo, {"albedo.R", "albedo.G", "albedo.B"});
    if (aov == spec::Aov::kNormal) add_channels(kernel::kNormal, {"N.X", "N.Y", "N.Z"});
    if (aov == spec::Aov::kDepth) add_channels(kernel::kDepth, {"Z"});
  }
  if (!scene.background.environment.empty()) TSR_RETURN_IF_ERROR(LoadEnvironment(scene, &out));

  std::map<std::string, int> texture_index;  // resolved path -> index, loaded once
  out.materials.reserve(scene.materials.size());
  for (const auto& m : scene.materials) {
    kernel::Material k = ToMaterial(m);
    if (!m.texture.empty()) {
      TSR_ASSIGN_OR_RETURN(
          const std::string path,
          spec::OpenableAssetPath(scene, m.texture, "materials." + m.name + ".texture"));
      auto it = texture_index.find(path);
      if (it == texture_index.end()) {
        StatusOr<RgbImage> image = LoadRgbImage(path);
        if (!image.ok()) return image.status().WithContext("materials." + m.name + ".texture");
        const int index = static_cast<int>(out.textures.size());
        out.textures.push_back(
            {static_cast<int>(out.texels.size() / 3), image->width, image->height});
        out.texels.insert(out.texels.end(), image->rgb.begin(), image->rgb.end());
        it = texture_index.emplace(path, index).first;
      }
      k.texture = it->second;
    }
    out.materials.push_back(k);
  }
  const auto is_light = [&](int material) {
    const kernel::Material& m = out.materials[material];
    return m.kind == kernel::MaterialKind::kEmissive && kernel::MaxComponent(m.emission) > 0.0f;
  };
  std::vector<BvhInput> bvh_inputs;
  out.spheres.reserve(scene.spheres.size());
  for (const auto& s : scene.spheres) {
    kernel::Sphere k{};
    k.center = ToFloat3(spec::SphereCenterAt(s, frame));
    k.radius = static_cast<float>(s.radius);
    k.inv_radius = static_cast<float>(1.0 / s.radius);
    k.material = s.material_index;
    const int index = static_cast<int>(out.spheres.size());
    const Float3 r = {k.radius, k.radius, k.radius};
    bvh_inputs.push_back({k.center - r, k.center + r, {kernel::PrimKind::kSphere, index}});
    if (is_light(k.material)) {
      out.lights.push_back(
          {kernel::PrimKind::kSphere, index, 4.0f * kernel::kPi * k.radius * k.radius});
    }
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
    const int index = static_cast<int>(out.quads.size());
    const Float3 far = k.corner + k.u + k.v;
    const Float3 lo =
        kernel::Min3(kernel::Min3(k.corner, far), kernel::Min3(k.corner + k.u, k.corner + k.v));
    const Float3 hi =
        kernel::Max3(kernel::Max3(k.corner, far), kernel::Max3(k.corner + k.u, k.corner + k.v));
    bvh_inputs.push_back({lo, hi, {kernel::PrimKind::kQuad, index}});
    if (is_light(k.material)) {
      out.lights.push_back({kernel::PrimKind::kQuad, index, static_cast<float>(len)});
    }
    out.quads.push_back(k);
  }
  // Meshes: each file (or code-given MeshData) becomes one bottom-level BVH over its
  // object-space triangles, shared by every object (instance) that uses it.
  std::map<std::string, spec::MeshData> loaded;
  std::map<const spec::MeshData*, int> blas_of_data;
  std::vector<Bvh> blases;
  std::vector<int> instance_blas;
  for (const auto& mesh : scene.meshes) {
    const spec::MeshData* data = mesh.data.get();
    if (data == nullptr) {
      TSR_ASSIGN_OR_RETURN(
          const std::string path,
          spec::OpenableAssetPath(scene, mesh.file,
                                  "objects[" + std::to_string(mesh.object_index) + "].file"));
      auto it = loaded.find(path);
      if (it == loaded.end()) {
        StatusOr<spec::MeshData> read = LoadObjMesh(path);
        if (!read.ok()) return read.status().WithContext(MeshName(mesh));
        it = loaded.emplace(path, std::move(read).value()).first;
      }
      data = &it->second;
    }
    auto blas = blas_of_data.find(data);
    if (blas == blas_of_data.end()) {
      const size_t first = out.triangles.size();
      const size_t first_shading = out.shading.size();
      TSR_RETURN_IF_ERROR(AddMeshTriangles(mesh, *data, &out));
      std::vector<BvhInput> tris;
      tris.reserve(out.triangles.size() - first);
      for (size_t i = first; i < out.triangles.size(); ++i) {
        const kernel::Triangle& t = out.triangles[i];
        const Float3 p1 = t.p0 + t.e1, p2 = t.p0 + t.e2;
        tris.push_back({kernel::Min3(t.p0, kernel::Min3(p1, p2)),
                        kernel::Max3(t.p0, kernel::Max3(p1, p2)),
                        {kernel::PrimKind::kTriangle, static_cast<int>(i)}});
      }
      const auto build_start = std::chrono::steady_clock::now();
      Bvh bvh = BuildBvh(std::move(tris));
      out.bvh_build_ms += MsSince(build_start);
      // Store the triangles in leaf order: a leaf's triangles are then adjacent in memory.
      // Their shading records follow the same order, so a hit's attributes sit near its
      // neighbours' too.
      std::vector<kernel::Triangle> ordered;
      ordered.reserve(bvh.prims.size());
      std::vector<kernel::TriangleShading> shading;
      shading.reserve(out.shading.size() - first_shading);
      for (kernel::PrimRef& ref : bvh.prims) {
        kernel::Triangle tri = out.triangles[ref.index];
        if (tri.shading >= 0) {
          shading.push_back(out.shading[tri.shading]);
          tri.shading = static_cast<int>(first_shading + shading.size() - 1);
        }
        ordered.push_back(tri);
        ref.index = static_cast<int>(first + ordered.size() - 1);
      }
      std::copy(ordered.begin(), ordered.end(), out.triangles.begin() + first);
      std::copy(shading.begin(), shading.end(), out.shading.begin() + first_shading);
      blas = blas_of_data.emplace(data, static_cast<int>(blases.size())).first;
      blases.push_back(std::move(bvh));
    }
    const Placement place = MakePlacement(spec::MeshTransformAt(mesh, frame));
    const kernel::BvhNode& root = blases[blas->second].nodes[0];
    Float3 lo = {kernel::kInfinity, kernel::kInfinity, kernel::kInfinity};
    Float3 hi = -lo;
    for (int c = 0; c < 8; ++c) {
      const Float3 corner = {(c & 1) ? root.hi.x : root.lo.x, (c & 2) ? root.hi.y : root.lo.y,
                             (c & 4) ? root.hi.z : root.lo.z};
      const Float3 w = place.ToWorld(corner);
      lo = kernel::Min3(lo, w);
      hi = kernel::Max3(hi, w);
    }
    const int index = static_cast<int>(out.instances.size());
    out.instances.push_back({place.WorldToObject(), 0, mesh.material_index});
    instance_blas.push_back(blas->second);
    bvh_inputs.push_back({lo, hi, {kernel::PrimKind::kInstance, index}});
  }
  // The top level first (node 0), then each bottom level with its indices shifted.
  const auto top_start = std::chrono::steady_clock::now();
  Bvh top = BuildBvh(std::move(bvh_inputs));
  out.bvh_build_ms += MsSince(top_start);
  out.nodes = std::move(top.nodes);
  out.prims = std::move(top.prims);
  std::vector<int> blas_root(blases.size());
  size_t total_nodes = out.nodes.size(), total_prims = out.prims.size();
  for (const Bvh& b : blases) {
    total_nodes += b.nodes.size();
    total_prims += b.prims.size();
  }
  out.nodes.reserve(total_nodes);
  out.prims.reserve(total_prims);
  for (size_t b = 0; b < blases.size(); ++b) {
    const int node_offset = static_cast<int>(out.nodes.size());
    const int prim_offset = static_cast<int>(out.prims.size());
    blas_root[b] = node_offset;
    for (kernel::BvhNode n : blases[b].nodes) {
      n.first += n.count > 0 ? prim_offset : node_offset;
      out.nodes.push_back(n);
    }
    out.prims.insert(out.prims.end(), blases[b].prims.begin(), blases[b].prims.end());
  }
  for (size_t i = 0; i < out.instances.size(); ++i) {
    out.instances[i].root = blas_root[instance_blas[i]];
  }
  return out;
}

// Raised whenever the flattened layout or the BVH builder changes the pixels a scene gives.
constexpr uint32_t kFlatLayoutVersion = 2;

uint64_t SceneHash(const FlatScene& s) {
  uint64_t h = 14695981039346656037ull;
  // The BVH is not hashed, yet its shape decides which of two equally near surfaces a ray hits
  // and in which order a mesh's triangles are stored: checkpoints of an older layout are refused
  // (their frame starts over) rather than resumed with other pixels.
  Fnv(&h, &kFlatLayoutVersion, sizeof kFlatLayoutVersion);
  FnvVector(&h, s.spheres);
  FnvVector(&h, s.quads);
  FnvVector(&h, s.triangles);
  FnvVector(&h, s.shading);
  FnvVector(&h, s.instances);
  FnvVector(&h, s.materials);
  FnvVector(&h, s.textures);
  FnvVector(&h, s.texels);
  FnvVector(&h, s.env_rgb);
  Fnv(&h, &s.env_strength, sizeof s.env_strength);
  Fnv(&h, &s.camera, sizeof s.camera);
  Fnv(&h, &s.sky_top, sizeof s.sky_top);
  Fnv(&h, &s.sky_bottom, sizeof s.sky_bottom);
  const int dims[3] = {s.width, s.height, s.max_depth};
  Fnv(&h, dims, sizeof dims);
  Fnv(&h, &s.channel_map, sizeof s.channel_map);
  return h;
}

}  // namespace tessera::pathtracer
