#pragma once
// The kernel's scene data: plain structs flattened on the host for one frame (scene_flatten.cpp)
// and read by both backends through a SceneView of raw pointers.

#include "plugins/pathtracer/kernel_math.h"

namespace tessera::pathtracer::kernel {

enum class MaterialKind : int {
  kDiffuse = 0,
  kMetal = 1,
  kGlass = 2,
  kEmissive = 3,
  kPrincipled = 4
};

struct Material {
  MaterialKind kind;
  Float3 albedo;    // diffuse / metal / principled base colour (multiplied by the texture)
  Float3 emission;  // emissive: color * strength
  float roughness;  // metal, principled
  float ior;        // glass
  float metallic;   // principled
  int texture;      // index into SceneView::textures, -1 for none
};

// RGB float texels at SceneView::texels + 3 * offset, row-major, top row first.
struct Texture {
  int offset;
  int width;
  int height;
};

struct Sphere {
  Float3 center;
  float radius;
  float inv_radius;
  int material;
};

struct Quad {
  Float3 corner, u, v;
  Float3 normal;  // unit normal of the plane
  float plane_d;  // dot(normal, corner)
  Float3 w;       // cross(u, v) / |cross(u, v)|^2: projects a point onto (a, b) coordinates
  int material;
};

struct Triangle {
  Float3 p0, e1, e2;  // p1 = p0 + e1, p2 = p0 + e2; object space when instanced
  int material;       // unused when instanced (the instance's material applies)
  int shading;        // index into SceneView::shading, -1: flat normal, no UVs
};

// Per-vertex attributes of a triangle from a mesh file; a zero normal means "use the flat one".
struct TriangleShading {
  Float3 n0, n1, n2;
  float uv[6];
};

enum class PrimKind : int { kSphere = 0, kQuad = 1, kTriangle = 2, kInstance = 3 };

// A row-major 3x4 affine transform.
struct Affine {
  Float3 r0, r1, r2;  // rows of the linear part
  Float3 t;
};

TSR_KERNEL_FN Float3 XformPoint(const Affine& a, Float3 p) {
  return {Dot(a.r0, p) + a.t.x, Dot(a.r1, p) + a.t.y, Dot(a.r2, p) + a.t.z};
}
TSR_KERNEL_FN Float3 XformVector(const Affine& a, Float3 v) {
  return {Dot(a.r0, v), Dot(a.r1, v), Dot(a.r2, v)};
}
// Multiplies by the transpose of the linear part: with a = world-to-object, this takes an
// object-space normal to world space.
TSR_KERNEL_FN Float3 XformNormal(const Affine& a, Float3 n) {
  return a.r0 * n.x + a.r1 * n.y + a.r2 * n.z;
}

// A placement of a mesh: its triangles stay in object space under their own BVH (the bottom
// level, rooted at nodes[root]) however many instances share them; the top level holds
// instances next to spheres and quads.
struct Instance {
  Affine world_to_object;
  int root;
  int material;
};

struct PrimRef {
  PrimKind kind;
  int index;
};

// A flattened BVH node. Leaves (count > 0) hold prims[first, first + count); inner nodes have
// their two children at `first` and `first + 1`. Node 0 is the root of the top level; each
// mesh's bottom level follows in the same array.
struct BvhNode {
  Float3 lo;
  int first;
  Float3 hi;
  int count;
};

// An emitter sampled by next event estimation: an emissive sphere or quad.
struct Light {
  PrimKind kind;
  int index;
  float area;
};

// A lat-long environment map (u = azimuth, v = polar angle from +y) with its sampling tables:
// marginal[0..height] over rows and conditional[row * (width + 1) + 0..width] within a row,
// both built from luminance * sin(theta).
struct EnvMap {
  const float* rgb;  // width * height * 3
  const float* marginal;
  const float* conditional;
  int width, height;
  float strength;
  float integral;  // sum of luminance * sin(theta) over texels * (2 pi^2 / (width * height))
};

struct Camera {
  Float3 origin;
  Float3 lower_left;  // on the focus plane
  Float3 horizontal;
  Float3 vertical;
  Float3 lens_u, lens_v;  // unit vectors spanning the lens
  float lens_radius;
};

struct SceneView {
  const Sphere* spheres;
  int num_spheres;
  const Quad* quads;
  int num_quads;
  const Triangle* triangles;
  int num_triangles;
  const TriangleShading* shading;
  const Instance* instances;
  const PrimRef* prims;  // BVH leaf order
  const BvhNode* nodes;
  int num_nodes;  // 0: no primitives
  const Material* materials;
  const Light* lights;
  int num_lights;
  const Texture* textures;
  const float* texels;
  EnvMap env;  // env.rgb == nullptr: the sky gradient below lights the scene
  Camera camera;
  Float3 sky_top, sky_bottom;
  int width, height;  // the whole frame, even when rendering a region
  int max_depth;      // scattering events per path
};

struct Ray {
  Float3 origin, dir;  // dir is unit length
};

}  // namespace tessera::pathtracer::kernel
