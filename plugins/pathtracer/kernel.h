#pragma once
// The path tracing kernel: plain data and inline host/device functions, compiled by nvcc for the
// GPU and by the host compiler for the CPU backend. No STL, no virtuals, no exceptions, no
// allocation. Random numbers are a pure function of (frame, pixel, sample, bounce, dimension), so
// a pixel's value does not depend on the backend's thread scheduling or on how a frame is split.
//
// Accumulation is in 32.32 fixed point (int64): integer sums are associative, so a pixel summed
// whole, in sample parts merged in any grouping, or resumed from a checkpoint is bit-identical.
//
// Files: kernel_math.h (vectors, random numbers, sampling), kernel_scene.h (the flat scene),
// kernel_geometry.h (intersection, BVH), kernel_shading.h (textures, environment, lights).

#include "plugins/pathtracer/kernel_shading.h"

namespace tessera::pathtracer::kernel {

// Every value one camera sample produces, in this order: beauty R, G, B, A; first-hit albedo
// R, G, B; first-hit shading normal X, Y, Z (facing the camera); first-hit distance Z. Misses
// give albedo, normal and Z of 0.
inline constexpr int kNumSampleValues = 11;
enum SampleValue : int { kR = 0, kA = 3, kAlbedo = 4, kNormal = 7, kDepth = 10 };

// Which sample values an image stores, in channel order.
struct ChannelMap {
  int count;
  int src[kNumSampleValues];
};

// 32.32 fixed point: per-sample values are clamped to +-kFixedMax so 65536 samples cannot
// overflow an int64 sum.
inline constexpr double kFixedScale = 4294967296.0;
inline constexpr float kFixedMax = 32767.0f;

TSR_KERNEL_FN int64_t ToFixed(float v) {
  if (!(v == v)) return 0;  // NaN
  v = FMin(FMax(v, -kFixedMax), kFixedMax);
  return static_cast<int64_t>(floor(static_cast<double>(v) * kFixedScale + 0.5));
}

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

TSR_KERNEL_FN Float3 SanitizeSample(Float3 v) { return IsFinite(v) ? v : Float3{0.0f, 0.0f, 0.0f}; }

// One camera path through pixel (x, y) of the frame; writes kNumSampleValues values to `out`
// and counts the rays traced (camera, bounce and shadow rays) in *rays.
//
// Diffuse lobes use next event estimation towards the area lights and the environment map,
// combined with the BSDF sample by multiple importance sampling (power heuristic); specular
// lobes (metal, glass, principled specular) see emitters only by hitting them.
TSR_KERNEL_FN void TracePixelSample(const SceneView& s, uint32_t frame, int x, int y,
                                    uint32_t sample_index, float* out, uint32_t* rays) {
  const uint32_t seed =
      SampleSeed(frame, static_cast<uint32_t>(x), static_cast<uint32_t>(y), sample_index);
  for (int i = 0; i < kNumSampleValues; ++i) out[i] = 0.0f;
  out[kA] = 1.0f;
  Ray ray = CameraRay(s.camera, s.width, s.height, x, y, seed);
  Float3 radiance = {0.0f, 0.0f, 0.0f};
  Float3 throughput = {1.0f, 1.0f, 1.0f};
  bool specular_prev = true;  // the camera ray counts as specular: emitters it sees count fully
  float prev_pdf = 0.0f;      // solid-angle pdf of the last diffuse BSDF sample
  Float3 prev_p = ray.origin;
  for (int bounce = 0;; ++bounce) {
    ++*rays;
    Hit hit;
    if (!TraceBvh(s, ray, kInfinity, false, &hit)) {
      float w = 1.0f;
      if (!specular_prev && s.env.rgb != nullptr && s.env.integral > 0.0f) {
        w = PowerHeuristic(prev_pdf, EnvPdf(s.env, ray.dir) / NumLightChoices(s));
      }
      radiance += throughput * Environment(s, ray.dir) * w;
      break;
    }
    const SurfacePoint sp = DescribeHit(s, ray, hit);
    const bool front = Dot(ray.dir, sp.geometric_n) < 0.0f;
    const Float3 ng = front ? sp.geometric_n : -sp.geometric_n;  // on the side the ray came from
    const Float3 ns = Dot(sp.shading_n, ng) < 0.0f ? -sp.shading_n : sp.shading_n;
    const Material& m = s.materials[sp.material];
    if (bounce == 0) {
      const Float3 albedo = m.kind == MaterialKind::kGlass      ? Float3{1.0f, 1.0f, 1.0f}
                            : m.kind == MaterialKind::kEmissive ? m.emission
                                                                : SurfaceAlbedo(s, m, sp);
      out[kAlbedo] = albedo.x;
      out[kAlbedo + 1] = albedo.y;
      out[kAlbedo + 2] = albedo.z;
      out[kNormal] = ns.x;
      out[kNormal + 1] = ns.y;
      out[kNormal + 2] = ns.z;
      out[kDepth] = hit.t;
    }
    if (m.kind == MaterialKind::kEmissive) {
      float w = 1.0f;
      if (!specular_prev) {
        const float light_pdf = LightPdf(s, hit.prim, prev_p, sp.p, sp.geometric_n);
        if (light_pdf > 0.0f) w = PowerHeuristic(prev_pdf, light_pdf);
      }
      radiance += throughput * m.emission * w;
      break;
    }
    if (bounce >= s.max_depth) break;

    const uint32_t b = static_cast<uint32_t>(bounce) + 1;  // bounce 0's dims are the camera's
    const float u1 = Random01(seed, b, 0);
    const float u2 = Random01(seed, b, 1);
    Float3 dir;
    bool diffuse = false;
    Float3 albedo = m.albedo;
    Float3 spec_tint = m.albedo;
    switch (m.kind) {
      case MaterialKind::kDiffuse:
        diffuse = true;
        albedo = SurfaceAlbedo(s, m, sp);
        break;
      case MaterialKind::kPrincipled: {
        // A mix of a Lambert lobe and a rough mirror lobe, picked with the Schlick weight of a
        // 4% dielectric blended towards 1 by `metallic`; each lobe's weight is its pick
        // probability, so the estimator needs no further division.
        const Float3 base = SurfaceAlbedo(s, m, sp);
        const float c = 1.0f - FMin(FMax(-Dot(ray.dir, ns), 0.0f), 1.0f);
        const float fresnel = 0.04f + 0.96f * c * c * c * c * c;
        const float p_spec = m.metallic + (1.0f - m.metallic) * fresnel;
        if (Random01(seed, b, 3) >= p_spec) {
          diffuse = true;
          albedo = base;
        } else {
          spec_tint = Lerp3(Float3{1.0f, 1.0f, 1.0f}, base, m.metallic);
        }
        break;
      }
      default:
        break;
    }
    if (diffuse) {
      LightSample ls;
      if (SampleLight(s, sp.p, Random01(seed, b, 4), Random01(seed, b, 5), Random01(seed, b, 6),
                      Random01(seed, b, 7), Random01(seed, b, 8), &ls)) {
        const float cos_l = Dot(ns, ls.dir);
        if (cos_l > 0.0f && Dot(ng, ls.dir) > 0.0f) {
          ++*rays;
          if (Unoccluded(s, sp.p, ls.dir, ls.distance)) {
            const float bsdf_pdf = cos_l * (1.0f / kPi);
            const float w = PowerHeuristic(ls.pdf, bsdf_pdf);
            radiance += throughput * albedo * ls.radiance * (bsdf_pdf * w / ls.pdf);
          }
        }
      }
      dir = SampleCosineHemisphere(ns, u1, u2);
      const float cos_o = Dot(dir, ns);
      if (Dot(dir, ng) <= 0.0f || cos_o <= 0.0f) break;  // below the geometric surface
      throughput = throughput * albedo;
      prev_pdf = cos_o * (1.0f / kPi);
      specular_prev = false;
    } else if (m.kind == MaterialKind::kGlass) {
      const float eta = front ? 1.0f / m.ior : m.ior;
      const float cos_i = FMin(-Dot(ray.dir, ns), 1.0f);
      const float sin2_t = eta * eta * (1.0f - cos_i * cos_i);
      float r0 = (1.0f - eta) / (1.0f + eta);
      r0 = r0 * r0;
      const float c = 1.0f - cos_i;
      const float fresnel = r0 + (1.0f - r0) * c * c * c * c * c;  // Schlick
      if (sin2_t > 1.0f || u1 < fresnel) {
        dir = Reflect(ray.dir, ns);
      } else {
        const float cos_t = sqrtf(1.0f - sin2_t);
        dir = ray.dir * eta + ns * (eta * cos_i - cos_t);
      }
      specular_prev = true;
    } else {  // metal, principled specular
      dir = Reflect(ray.dir, ns);
      if (m.roughness > 0.0f) dir = Normalize(dir + SampleUnitSphere(u1, u2) * m.roughness);
      if (Dot(dir, ng) <= 0.0f) break;  // scattered below the surface: absorbed
      throughput = throughput * spec_tint;
      specular_prev = true;
    }
    // Russian roulette after a few bounces keeps long paths cheap without bias.
    if (bounce >= 3) {
      const float q = FMin(MaxComponent(throughput), 0.95f);
      if (Random01(seed, b, 2) >= q) break;
      throughput = throughput * (1.0f / q);
    }
    prev_p = sp.p;
    ray = Ray{sp.p, Normalize(dir)};
  }
  radiance = SanitizeSample(radiance);
  out[kR] = radiance.x;
  out[kR + 1] = radiance.y;
  out[kR + 2] = radiance.z;
}

// Adds samples [first, end) of pixel (x, y) to its `map.count` fixed-point sums, in sample order.
TSR_KERNEL_FN void AccumulatePixel(const SceneView& s, uint32_t frame, int x, int y, int first,
                                   int end, const ChannelMap& map, int64_t* sums, uint32_t* rays) {
  float values[kNumSampleValues];
  for (int i = first; i < end; ++i) {
    TracePixelSample(s, frame, x, y, static_cast<uint32_t>(i), values, rays);
    for (int c = 0; c < map.count; ++c) sums[c] += ToFixed(values[map.src[c]]);
  }
}

}  // namespace tessera::pathtracer::kernel
