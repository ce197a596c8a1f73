#pragma once
// The path tracing kernel: plain data and inline host/device functions, compiled by nvcc for the
// GPU and by the host compiler for the CPU backend. No STL, no virtuals, no exceptions, no
// allocation. Random numbers are a pure function of (frame, pixel, sample, bounce, dimension), so
// a pixel's value does not depend on the backend's thread scheduling or on how a frame is split.

#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define TSR_HOST_DEVICE __host__ __device__
#else
#define TSR_HOST_DEVICE
#endif
#define TSR_KERNEL_FN TSR_HOST_DEVICE inline

namespace tessera::pathtracer::kernel {

// ---- Math ------------------------------------------------------------------------------------

struct Float3 {
  float x, y, z;
};

TSR_KERNEL_FN Float3 Make3(float x, float y, float z) { return Float3{x, y, z}; }
TSR_KERNEL_FN Float3 operator+(Float3 a, Float3 b) { return {a.x + b.x, a.y + b.y, a.z + b.z}; }
TSR_KERNEL_FN Float3 operator-(Float3 a, Float3 b) { return {a.x - b.x, a.y - b.y, a.z - b.z}; }
TSR_KERNEL_FN Float3 operator-(Float3 a) { return {-a.x, -a.y, -a.z}; }
TSR_KERNEL_FN Float3 operator*(Float3 a, Float3 b) { return {a.x * b.x, a.y * b.y, a.z * b.z}; }
TSR_KERNEL_FN Float3 operator*(Float3 a, float s) { return {a.x * s, a.y * s, a.z * s}; }
TSR_KERNEL_FN Float3 operator*(float s, Float3 a) { return {a.x * s, a.y * s, a.z * s}; }
TSR_KERNEL_FN Float3& operator+=(Float3& a, Float3 b) {
  a = a + b;
  return a;
}
TSR_KERNEL_FN float Dot(Float3 a, Float3 b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
TSR_KERNEL_FN Float3 Cross(Float3 a, Float3 b) {
  return {a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x};
}
TSR_KERNEL_FN Float3 Normalize(Float3 a) { return a * (1.0f / sqrtf(Dot(a, a))); }
TSR_KERNEL_FN float MaxComponent(Float3 a) { return fmaxf(a.x, fmaxf(a.y, a.z)); }
// False for NaN and +-inf (no -ffast-math anywhere, so this is not folded away).
TSR_KERNEL_FN bool IsFinite(Float3 a) {
  return (a.x - a.x) == 0.0f && (a.y - a.y) == 0.0f && (a.z - a.z) == 0.0f;
}

inline constexpr float kPi = 3.14159265358979f;
// Rays start this far along their direction, so a surface does not shadow itself.
inline constexpr float kRayEpsilon = 1e-3f;
inline constexpr float kInfinity = 3.0e38f;

// ---- Scene data (flattened on the host for one frame) -------------------------------------

enum class MaterialKind : int { kDiffuse = 0, kMetal = 1, kGlass = 2, kEmissive = 3 };

struct Material {
  MaterialKind kind;
  Float3 albedo;    // diffuse / metal
  Float3 emission;  // emissive: color * strength
  float roughness;  // metal
  float ior;        // glass
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
  const Material* materials;
  Camera camera;
  Float3 sky_top, sky_bottom;
  int width, height;
  int max_depth;  // scattering events per path
};

struct Ray {
  Float3 origin, dir;  // dir is unit length
};

// ---- Counter-based random numbers --------------------------------------------------------

// PCG-RXS-M-XS hash (Jarzynski & Olano, "Hash Functions for GPU Rendering", JCGT 2020).
TSR_KERNEL_FN uint32_t PcgHash(uint32_t v) {
  const uint32_t state = v * 747796405u + 2891336453u;
  const uint32_t word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
  return (word >> 22u) ^ word;
}

// One seed per (frame, pixel, sample); every draw below is a hash of it and a counter.
TSR_KERNEL_FN uint32_t SampleSeed(uint32_t frame, uint32_t x, uint32_t y, uint32_t sample) {
  return PcgHash(sample + PcgHash(x + PcgHash(y + PcgHash(frame))));
}

inline constexpr uint32_t kDimsPerBounce = 8;

// A uniform float in [0, 1) for dimension `dim` of bounce `bounce` of the sample.
TSR_KERNEL_FN float Random01(uint32_t seed, uint32_t bounce, uint32_t dim) {
  const uint32_t h = PcgHash(seed ^ PcgHash(bounce * kDimsPerBounce + dim));
  return static_cast<float>(h >> 8) * (1.0f / 16777216.0f);
}

// ---- Sampling helpers ----------------------------------------------------------------------

// Cosine-weighted direction around unit normal n (orthonormal basis: Duff et al. 2017).
TSR_KERNEL_FN Float3 SampleCosineHemisphere(Float3 n, float u1, float u2) {
  const float sign = copysignf(1.0f, n.z);
  const float a = -1.0f / (sign + n.z);
  const float b = n.x * n.y * a;
  const Float3 t = {1.0f + sign * n.x * n.x * a, sign * b, -sign * n.x};
  const Float3 bt = {b, sign + n.y * n.y * a, -n.y};
  const float r = sqrtf(u1);
  const float phi = 2.0f * kPi * u2;
  const float z = sqrtf(fmaxf(0.0f, 1.0f - u1));
  return t * (r * cosf(phi)) + bt * (r * sinf(phi)) + n * z;
}

TSR_KERNEL_FN Float3 SampleUnitSphere(float u1, float u2) {
  const float z = 1.0f - 2.0f * u1;
  const float r = sqrtf(fmaxf(0.0f, 1.0f - z * z));
  const float phi = 2.0f * kPi * u2;
  return {r * cosf(phi), r * sinf(phi), z};
}

TSR_KERNEL_FN Float3 Reflect(Float3 d, Float3 n) { return d - n * (2.0f * Dot(d, n)); }

// ---- Intersection --------------------------------------------------------------------------

// Closest hit; returns the primitive as (kind 0 sphere / 1 quad, index) through out-params.
TSR_KERNEL_FN bool IntersectScene(const SceneView& s, const Ray& ray, float* t_hit, int* kind,
                                  int* index) {
  float closest = kInfinity;
  int hit_kind = -1;
  int hit_index = -1;
  for (int i = 0; i < s.num_spheres; ++i) {
    const Sphere& sp = s.spheres[i];
    const Float3 oc = ray.origin - sp.center;
    const float b = Dot(oc, ray.dir);
    // disc = r^2 - |oc - b d|^2: stable for small spheres far away (Ray Tracing Gems ch. 7).
    const Float3 l = oc - ray.dir * b;
    const float disc = sp.radius * sp.radius - Dot(l, l);
    if (disc < 0.0f) continue;
    const float sq = sqrtf(disc);
    float t = -b - sq;
    if (t < kRayEpsilon) t = -b + sq;
    if (t < kRayEpsilon || t >= closest) continue;
    closest = t;
    hit_kind = 0;
    hit_index = i;
  }
  for (int i = 0; i < s.num_quads; ++i) {
    const Quad& q = s.quads[i];
    const float denom = Dot(q.normal, ray.dir);
    if (fabsf(denom) < 1e-8f) continue;
    const float t = (q.plane_d - Dot(q.normal, ray.origin)) / denom;
    if (t < kRayEpsilon || t >= closest) continue;
    const Float3 p = ray.origin + ray.dir * t - q.corner;
    const float a = Dot(q.w, Cross(p, q.v));
    const float bb = Dot(q.w, Cross(q.u, p));
    if (a < 0.0f || a > 1.0f || bb < 0.0f || bb > 1.0f) continue;
    closest = t;
    hit_kind = 1;
    hit_index = i;
  }
  *t_hit = closest;
  *kind = hit_kind;
  *index = hit_index;
  return hit_kind >= 0;
}

TSR_KERNEL_FN Float3 Sky(const SceneView& s, Float3 dir) {
  const float t = 0.5f * (dir.y + 1.0f);
  return s.sky_bottom * (1.0f - t) + s.sky_top * t;
}

// ---- The path --------------------------------------------------------------------------------

TSR_KERNEL_FN Ray CameraRay(const Camera& c, int width, int height, int x, int y, uint32_t seed) {
  const float sx = (static_cast<float>(x) + Random01(seed, 0, 0)) / static_cast<float>(width);
  const float sy =
      1.0f - (static_cast<float>(y) + Random01(seed, 0, 1)) / static_cast<float>(height);
  Float3 origin = c.origin;
  if (c.lens_radius > 0.0f) {
    const float r = c.lens_radius * sqrtf(Random01(seed, 0, 2));
    const float phi = 2.0f * kPi * Random01(seed, 0, 3);
    origin = origin + c.lens_u * (r * cosf(phi)) + c.lens_v * (r * sinf(phi));
  }
  const Float3 target = c.lower_left + c.horizontal * sx + c.vertical * sy;
  return Ray{origin, Normalize(target - origin)};
}

// Radiance of one camera path through pixel (x, y); *rays counts the rays traced.
TSR_KERNEL_FN Float3 TracePixelSample(const SceneView& s, uint32_t frame, int x, int y,
                                      uint32_t sample_index, uint32_t* rays) {
  const uint32_t seed =
      SampleSeed(frame, static_cast<uint32_t>(x), static_cast<uint32_t>(y), sample_index);
  Ray ray = CameraRay(s.camera, s.width, s.height, x, y, seed);
  Float3 radiance = {0.0f, 0.0f, 0.0f};
  Float3 throughput = {1.0f, 1.0f, 1.0f};
  for (int bounce = 0;; ++bounce) {
    ++*rays;
    float t;
    int kind, index;
    if (!IntersectScene(s, ray, &t, &kind, &index)) {
      radiance += throughput * Sky(s, ray.dir);
      break;
    }
    const Float3 p = ray.origin + ray.dir * t;
    Float3 n;
    int material;
    if (kind == 0) {
      const Sphere& sp = s.spheres[index];
      n = (p - sp.center) * sp.inv_radius;
      material = sp.material;
    } else {
      n = s.quads[index].normal;
      material = s.quads[index].material;
    }
    const bool front = Dot(ray.dir, n) < 0.0f;
    const Float3 facing = front ? n : -n;  // normal on the side the ray came from
    const Material& m = s.materials[material];
    if (m.kind == MaterialKind::kEmissive) {
      radiance += throughput * m.emission;
      break;
    }
    if (bounce >= s.max_depth) break;

    const uint32_t b = static_cast<uint32_t>(bounce) + 1;  // bounce 0's dims are the camera's
    const float u1 = Random01(seed, b, 0);
    const float u2 = Random01(seed, b, 1);
    Float3 dir;
    switch (m.kind) {
      case MaterialKind::kDiffuse:
        dir = SampleCosineHemisphere(facing, u1, u2);
        throughput = throughput * m.albedo;
        break;
      case MaterialKind::kMetal:
        dir = Reflect(ray.dir, facing);
        if (m.roughness > 0.0f) dir = Normalize(dir + SampleUnitSphere(u1, u2) * m.roughness);
        if (Dot(dir, facing) <= 0.0f) return radiance;  // scattered below the surface: absorbed
        throughput = throughput * m.albedo;
        break;
      case MaterialKind::kGlass: {
        const float eta = front ? 1.0f / m.ior : m.ior;
        const float cos_i = fminf(-Dot(ray.dir, facing), 1.0f);
        const float sin2_t = eta * eta * (1.0f - cos_i * cos_i);
        float r0 = (1.0f - eta) / (1.0f + eta);
        r0 = r0 * r0;
        const float c = 1.0f - cos_i;
        const float fresnel = r0 + (1.0f - r0) * c * c * c * c * c;  // Schlick
        if (sin2_t > 1.0f || u1 < fresnel) {
          dir = Reflect(ray.dir, facing);
        } else {
          const float cos_t = sqrtf(1.0f - sin2_t);
          dir = ray.dir * eta + facing * (eta * cos_i - cos_t);
        }
        break;
      }
      default:  // kEmissive handled above
        return radiance;
    }
    // Russian roulette after a few bounces keeps long paths cheap without bias.
    if (bounce >= 3) {
      const float q = fminf(MaxComponent(throughput), 0.95f);
      if (Random01(seed, b, 2) >= q) break;
      throughput = throughput * (1.0f / q);
    }
    ray = Ray{p, Normalize(dir)};
  }
  return radiance;
}

// Mean of samples [0, samples) for one pixel, summed in sample order (both backends use this
// order, so their sums differ only by floating-point math library differences).
TSR_KERNEL_FN Float3 FinishPixel(Float3 sum, int samples) {
  return sum * (1.0f / static_cast<float>(samples));
}

TSR_KERNEL_FN Float3 SanitizeSample(Float3 v) { return IsFinite(v) ? v : Float3{0.0f, 0.0f, 0.0f}; }

}  // namespace tessera::pathtracer::kernel
