#pragma once
// Ray-primitive intersection and BVH traversal (an explicit stack, no recursion), shared by both
// backends.

#include "plugins/pathtracer/kernel_scene.h"

namespace tessera::pathtracer::kernel {

inline constexpr int kBvhStackSize = 64;  // the host builder caps the tree depth below this

TSR_KERNEL_HOT float IntersectSphere(const Sphere& sp, const Ray& ray, float t_max) {
  const Float3 oc = ray.origin - sp.center;
  const float b = Dot(oc, ray.dir);
  // disc = r^2 - |oc - b d|^2: stable for small spheres far away (Ray Tracing Gems ch. 7).
  const Float3 l = oc - ray.dir * b;
  const float disc = sp.radius * sp.radius - Dot(l, l);
  if (disc < 0.0f) return kInfinity;
  const float sq = sqrtf(disc);
  float t = -b - sq;
  if (t < kRayEpsilon) t = -b + sq;
  return (t < kRayEpsilon || t >= t_max) ? kInfinity : t;
}

TSR_KERNEL_HOT float IntersectQuad(const Quad& q, const Ray& ray, float t_max) {
  const float denom = Dot(q.normal, ray.dir);
  if (fabsf(denom) < 1e-8f) return kInfinity;
  const float t = (q.plane_d - Dot(q.normal, ray.origin)) / denom;
  if (t < kRayEpsilon || t >= t_max) return kInfinity;
  const Float3 p = ray.origin + ray.dir * t - q.corner;
  const float a = Dot(q.w, Cross(p, q.v));
  const float b = Dot(q.w, Cross(q.u, p));
  if (a < 0.0f || a > 1.0f || b < 0.0f || b > 1.0f) return kInfinity;
  return t;
}

// Moller-Trumbore; *bu, *bv are the barycentrics of p1 and p2.
TSR_KERNEL_HOT float IntersectTriangle(const Triangle& tri, const Ray& ray, float t_max, float* bu,
                                       float* bv) {
  const Float3 pv = Cross(ray.dir, tri.e2);
  const float det = Dot(tri.e1, pv);
  if (fabsf(det) < 1e-12f) return kInfinity;
  const float inv = 1.0f / det;
  const Float3 tv = ray.origin - tri.p0;
  const float u = Dot(tv, pv) * inv;
  if (u < 0.0f || u > 1.0f) return kInfinity;
  const Float3 qv = Cross(tv, tri.e1);
  const float v = Dot(ray.dir, qv) * inv;
  if (v < 0.0f || u + v > 1.0f) return kInfinity;
  const float t = Dot(tri.e2, qv) * inv;
  if (t < kRayEpsilon || t >= t_max) return kInfinity;
  *bu = u;
  *bv = v;
  return t;
}

// Slab test; returns the entry distance or kInfinity for a miss or an entry beyond t_max.
TSR_KERNEL_HOT float IntersectBox(const BvhNode& n, Float3 origin, Float3 inv_dir, float t_max) {
  const float tx0 = (n.lo.x - origin.x) * inv_dir.x, tx1 = (n.hi.x - origin.x) * inv_dir.x;
  const float ty0 = (n.lo.y - origin.y) * inv_dir.y, ty1 = (n.hi.y - origin.y) * inv_dir.y;
  const float tz0 = (n.lo.z - origin.z) * inv_dir.z, tz1 = (n.hi.z - origin.z) * inv_dir.z;
  const float t_near = FMax(FMax(FMin(tx0, tx1), FMin(ty0, ty1)), FMax(FMin(tz0, tz1), 0.0f));
  const float t_far = FMin(FMin(FMax(tx0, tx1), FMax(ty0, ty1)), FMin(FMax(tz0, tz1), t_max));
  return t_near <= t_far ? t_near : kInfinity;
}

// 1/0 = inf is what the slab test wants; a huge value keeps 0 * inf (NaN) out of it.
TSR_KERNEL_HOT Float3 InverseDir(Float3 d) {
  return {d.x != 0.0f ? 1.0f / d.x : 1e30f, d.y != 0.0f ? 1.0f / d.y : 1e30f,
          d.z != 0.0f ? 1.0f / d.z : 1e30f};
}

struct Hit {
  float t;
  PrimRef prim;
  int instance;  // -1, or the instance whose triangle `prim` was hit
  float bu, bv;  // triangle barycentrics
};

// Pops the next node to visit after `node` was handled: for an inner node, the nearer child
// that the ray enters (pushing the other when it too is entered); else the top of the stack.
// Returns -1 when traversal is over.
TSR_KERNEL_HOT int NextNode(const SceneView& s, const BvhNode& n, Float3 origin, Float3 inv_dir,
                            float closest, int* stack, int* top) {
  if (n.count == 0) {
    const int a = n.first, b = n.first + 1;
    const float ta = IntersectBox(s.nodes[a], origin, inv_dir, closest);
    const float tb = IntersectBox(s.nodes[b], origin, inv_dir, closest);
    if (ta != kInfinity || tb != kInfinity) {
      const bool a_first = ta <= tb;
      const float t_other = a_first ? tb : ta;
      if (t_other != kInfinity && *top < kBvhStackSize) stack[(*top)++] = a_first ? b : a;
      return a_first ? a : b;
    }
  }
  return *top == 0 ? -1 : stack[--*top];
}

// The bottom level of an instance, in object space: the direction is not renormalised, so t
// keeps its world-space meaning. Updates *closest and the hit record when it finds a closer hit.
TSR_KERNEL_FN bool TraceInstance(const SceneView& s, int instance, const Ray& world_ray,
                                 bool any_hit, float* closest, Hit* hit) {
  const Instance& inst = s.instances[instance];
  const Ray ray{XformPoint(inst.world_to_object, world_ray.origin),
                XformVector(inst.world_to_object, world_ray.dir)};
  const Float3 inv_dir = InverseDir(ray.dir);
  if (IntersectBox(s.nodes[inst.root], ray.origin, inv_dir, *closest) == kInfinity) return false;
  int stack[kBvhStackSize];
  int top = 0;
  bool found = false;
  for (int node = inst.root; node >= 0;) {
    const BvhNode& n = s.nodes[node];
    for (int i = n.first; i < n.first + n.count; ++i) {  // leaves only (inner: count 0)
      float u = 0, v = 0;  // set whenever t < *closest; initialised for -O3 -Wmaybe-uninitialized
      const float t = IntersectTriangle(s.triangles[s.prims[i].index], ray, *closest, &u, &v);
      if (t < *closest) {
        *closest = t;
        *hit = {t, s.prims[i], instance, u, v};
        found = true;
        if (any_hit) return true;
      }
    }
    node = NextNode(s, n, ray.origin, inv_dir, *closest, stack, &top);
  }
  return found;
}

// Closest hit before t_max (any_hit: stop at the first one, for shadow rays).
TSR_KERNEL_FN bool TraceBvh(const SceneView& s, const Ray& ray, float t_max, bool any_hit,
                            Hit* hit) {
  if (s.num_nodes == 0) return false;
  const Float3 inv_dir = InverseDir(ray.dir);
  float closest = t_max;
  if (IntersectBox(s.nodes[0], ray.origin, inv_dir, closest) == kInfinity) return false;
  int stack[kBvhStackSize];
  int top = 0;
  bool found = false;
  for (int node = 0; node >= 0;) {
    const BvhNode& n = s.nodes[node];
    for (int i = n.first; i < n.first + n.count; ++i) {  // leaves only (inner: count 0)
      const PrimRef p = s.prims[i];
      float t = kInfinity, u = 0.0f, v = 0.0f;
      switch (p.kind) {
        case PrimKind::kSphere:
          t = IntersectSphere(s.spheres[p.index], ray, closest);
          break;
        case PrimKind::kQuad:
          t = IntersectQuad(s.quads[p.index], ray, closest);
          break;
        case PrimKind::kTriangle:
          t = IntersectTriangle(s.triangles[p.index], ray, closest, &u, &v);
          break;
        default:
          if (TraceInstance(s, p.index, ray, any_hit, &closest, hit)) {
            found = true;
            if (any_hit) return true;
          }
          continue;
      }
      if (t < closest) {
        closest = t;
        *hit = {t, p, -1, u, v};
        found = true;
        if (any_hit) return true;
      }
    }
    node = NextNode(s, n, ray.origin, inv_dir, closest, stack, &top);
  }
  return found;
}

// Kept for callers that want (kind, index) without the BVH hit record.
TSR_KERNEL_FN bool IntersectScene(const SceneView& s, const Ray& ray, float* t_hit, int* kind,
                                  int* index) {
  Hit hit;
  if (!TraceBvh(s, ray, kInfinity, false, &hit)) {
    *t_hit = kInfinity;
    *kind = -1;
    *index = -1;
    return false;
  }
  *t_hit = hit.t;
  *kind = static_cast<int>(hit.prim.kind);
  *index = hit.prim.index;
  return true;
}

struct SurfacePoint {
  Float3 p;
  Float3 geometric_n;  // unit, as stored (not flipped to face the ray)
  Float3 shading_n;    // unit, interpolated vertex normal where the mesh has one
  float u, v;          // texture coordinates
  int material;
};

TSR_KERNEL_FN SurfacePoint DescribeHit(const SceneView& s, const Ray& ray, const Hit& hit) {
  SurfacePoint sp;
  sp.p = ray.origin + ray.dir * hit.t;
  switch (hit.prim.kind) {
    case PrimKind::kSphere: {
      const Sphere& sph = s.spheres[hit.prim.index];
      sp.geometric_n = (sp.p - sph.center) * sph.inv_radius;
      sp.shading_n = sp.geometric_n;
      sp.material = sph.material;
      sp.u = sp.v = 0.0f;
      if (s.materials[sp.material].texture >= 0) {  // trigonometry only where it is used
        const Float3 n = sp.geometric_n;
        sp.u = 0.5f + atan2f(n.x, -n.z) * (0.5f / kPi);
        sp.v = acosf(FMin(FMax(n.y, -1.0f), 1.0f)) * (1.0f / kPi);
      }
      break;
    }
    case PrimKind::kQuad: {
      const Quad& q = s.quads[hit.prim.index];
      sp.geometric_n = q.normal;
      sp.shading_n = q.normal;
      const Float3 d = sp.p - q.corner;
      sp.u = Dot(q.w, Cross(d, q.v));
      sp.v = 1.0f - Dot(q.w, Cross(q.u, d));
      sp.material = q.material;
      break;
    }
    default: {
      const Triangle& tri = s.triangles[hit.prim.index];
      const Affine* to_object =
          hit.instance >= 0 ? &s.instances[hit.instance].world_to_object : nullptr;
      Float3 n = Cross(tri.e1, tri.e2);
      if (to_object != nullptr) n = XformNormal(*to_object, n);
      sp.geometric_n = Normalize(n);
      sp.shading_n = sp.geometric_n;
      sp.u = hit.bu;
      sp.v = hit.bv;
      if (tri.shading >= 0) {
        const TriangleShading& sh = s.shading[tri.shading];
        const float w = 1.0f - hit.bu - hit.bv;
        Float3 ns = sh.n0 * w + sh.n1 * hit.bu + sh.n2 * hit.bv;
        if (to_object != nullptr) ns = XformNormal(*to_object, ns);
        if (Dot(ns, ns) > 1e-12f) sp.shading_n = Normalize(ns);
        sp.u = sh.uv[0] * w + sh.uv[2] * hit.bu + sh.uv[4] * hit.bv;
        sp.v = sh.uv[1] * w + sh.uv[3] * hit.bu + sh.uv[5] * hit.bv;
      }
      sp.material = hit.instance >= 0 ? s.instances[hit.instance].material : tri.material;
      break;
    }
  }
  return sp;
}

}  // namespace tessera::pathtracer::kernel
