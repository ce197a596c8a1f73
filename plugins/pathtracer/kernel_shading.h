#pragma once
// Textures, the environment (gradient sky or importance-sampled HDR map) and area-light sampling
// for next event estimation.

#include "plugins/pathtracer/kernel_geometry.h"

namespace tessera::pathtracer::kernel {

// Bilinear lookup with wrap-around; v = 0 is the top row.
TSR_KERNEL_FN Float3 SampleTexture(const SceneView& s, int index, float u, float v) {
  const Texture& t = s.textures[index];
  u = u - floorf(u);
  v = v - floorf(v);
  const float fx = u * static_cast<float>(t.width) - 0.5f;
  const float fy = v * static_cast<float>(t.height) - 0.5f;
  const float x0f = floorf(fx), y0f = floorf(fy);
  const float ax = fx - x0f, ay = fy - y0f;
  auto wrap = [](int i, int n) { return ((i % n) + n) % n; };
  const int x0 = wrap(static_cast<int>(x0f), t.width),
            x1 = wrap(static_cast<int>(x0f) + 1, t.width);
  const int y0 = wrap(static_cast<int>(y0f), t.height);
  const int y1 = wrap(static_cast<int>(y0f) + 1, t.height);
  const float* px = s.texels + 3 * static_cast<size_t>(t.offset);
  auto at = [&](int x, int y) {
    const float* p = px + 3 * (static_cast<size_t>(y) * t.width + x);
    return Float3{p[0], p[1], p[2]};
  };
  return Lerp3(Lerp3(at(x0, y0), at(x1, y0), ax), Lerp3(at(x0, y1), at(x1, y1), ax), ay);
}

TSR_KERNEL_FN Float3 SurfaceAlbedo(const SceneView& s, const Material& m, const SurfacePoint& sp) {
  return m.texture >= 0 ? m.albedo * SampleTexture(s, m.texture, sp.u, sp.v) : m.albedo;
}

// ---- Environment ---------------------------------------------------------------------------

TSR_KERNEL_FN Float3 EnvDirection(float u, float v) {
  const float phi = (u - 0.5f) * 2.0f * kPi;
  const float theta = v * kPi;
  const float st = sinf(theta);
  return {st * sinf(phi), cosf(theta), -st * cosf(phi)};
}

TSR_KERNEL_FN Float3 EnvTexel(const EnvMap& e, int x, int y) {
  const float* p = e.rgb + 3 * (static_cast<size_t>(y) * e.width + x);
  return Float3{p[0], p[1], p[2]} * e.strength;
}

TSR_KERNEL_FN void EnvCell(const EnvMap& e, Float3 dir, int* x, int* y) {
  const float u = 0.5f + atan2f(dir.x, -dir.z) * (0.5f / kPi);
  const float v = acosf(FMin(FMax(dir.y, -1.0f), 1.0f)) * (1.0f / kPi);
  *x = static_cast<int>(FMin(FMax(u * e.width, 0.0f), static_cast<float>(e.width - 1)));
  *y = static_cast<int>(FMin(FMax(v * e.height, 0.0f), static_cast<float>(e.height - 1)));
}

TSR_KERNEL_FN Float3 Environment(const SceneView& s, Float3 dir) {
  if (s.env.rgb == nullptr) {
    const float t = 0.5f * (dir.y + 1.0f);
    return s.sky_bottom * (1.0f - t) + s.sky_top * t;
  }
  int x, y;
  EnvCell(s.env, dir, &x, &y);
  return EnvTexel(s.env, x, y);
}

// Solid-angle density of EnvSample choosing `dir`.
TSR_KERNEL_FN float EnvPdf(const EnvMap& e, Float3 dir) {
  if (e.integral <= 0.0f) return 0.0f;
  int x, y;
  EnvCell(e, dir, &x, &y);
  const float p_row = e.marginal[y + 1] - e.marginal[y];
  const float* row = e.conditional + static_cast<size_t>(y) * (e.width + 1);
  const float p_col = row[x + 1] - row[x];
  const float sin_theta = sinf((static_cast<float>(y) + 0.5f) * kPi / e.height);
  if (sin_theta <= 0.0f) return 0.0f;
  // Density over (u, v) is p_row * p_col * W * H; d(omega) = 2 pi^2 sin(theta) du dv.
  return p_row * p_col * static_cast<float>(e.width * e.height) / (2.0f * kPi * kPi * sin_theta);
}

TSR_KERNEL_FN Float3 EnvSample(const EnvMap& e, float u1, float u2, float u3, float u4,
                               float* pdf) {
  const int y = SampleCdf(e.marginal, e.height, u1);
  const int x = SampleCdf(e.conditional + static_cast<size_t>(y) * (e.width + 1), e.width, u2);
  const Float3 dir =
      EnvDirection((static_cast<float>(x) + u3) / e.width, (static_cast<float>(y) + u4) / e.height);
  *pdf = EnvPdf(e, dir);
  return dir;
}

// ---- Area lights ---------------------------------------------------------------------------

// Lights NEE chooses from uniformly: the emissive spheres and quads, plus the map if any.
TSR_KERNEL_FN int NumLightChoices(const SceneView& s) {
  return s.num_lights + (s.env.rgb != nullptr && s.env.integral > 0.0f ? 1 : 0);
}

// Solid-angle density of NEE picking the point `p` (normal n) on an area-sampled light.
TSR_KERNEL_FN float AreaLightPdf(const SceneView& s, float area, Float3 from, Float3 p, Float3 n) {
  const Float3 d = p - from;
  const float dist2 = Dot(d, d);
  const float cos_l = fabsf(Dot(n, d)) / sqrtf(dist2);
  if (cos_l <= 1e-6f || area <= 0.0f) return 0.0f;
  return dist2 / (cos_l * area * static_cast<float>(NumLightChoices(s)));
}

// 1 - cos(half angle) of the cone a sphere subtends from a point at squared distance d2 > r2,
// written so it keeps its precision for small, far spheres.
TSR_KERNEL_FN float ConeOneMinusCos(float r2, float d2) {
  const float sin2 = r2 / d2;
  return sin2 / (1.0f + sqrtf(FMax(0.0f, 1.0f - sin2)));
}

// Spheres seen from outside are sampled uniformly over the cone they subtend (no samples wasted
// on the far side: the sparkle-free way to light with small lamps); from inside, by area.
TSR_KERNEL_FN bool SphereConeSampled(const Sphere& sp, Float3 from, float* one_minus_cos) {
  const Float3 to_c = sp.center - from;
  const float d2 = Dot(to_c, to_c);
  const float r2 = sp.radius * sp.radius;
  if (d2 <= r2 * 1.0001f) return false;
  *one_minus_cos = ConeOneMinusCos(r2, d2);
  return *one_minus_cos > 0.0f;
}

// Solid-angle density with which NEE picks the point `p` (normal n) of emitter `prim` seen from
// `from`; 0 for emissive triangles, which NEE never picks.
TSR_KERNEL_FN float LightPdf(const SceneView& s, PrimRef prim, Float3 from, Float3 p, Float3 n) {
  if (prim.kind == PrimKind::kSphere) {
    const Sphere& sp = s.spheres[prim.index];
    float omc;
    if (SphereConeSampled(sp, from, &omc)) {
      return 1.0f / (2.0f * kPi * omc * static_cast<float>(NumLightChoices(s)));
    }
    return AreaLightPdf(s, 4.0f * kPi * sp.radius * sp.radius, from, p, n);
  }
  if (prim.kind == PrimKind::kQuad) {
    const Quad& q = s.quads[prim.index];
    return AreaLightPdf(s, Length(Cross(q.u, q.v)), from, p, n);
  }
  return 0.0f;
}

struct LightSample {
  Float3 dir;       // unit, from the shading point
  float distance;   // to the light point (kInfinity for the environment)
  Float3 radiance;  // emitted towards the shading point
  float pdf;        // solid angle, including the choice of the light
  bool is_env;
};

// Picks a light uniformly and a point on it uniformly by area (or a map direction).
TSR_KERNEL_FN bool SampleLight(const SceneView& s, Float3 from, float u0, float u1, float u2,
                               float u3, float u4, LightSample* out) {
  const int choices = NumLightChoices(s);
  if (choices == 0) return false;
  const int pick = static_cast<int>(FMin(u0 * choices, static_cast<float>(choices - 1)));
  if (pick == s.num_lights) {
    float pdf;
    out->dir = EnvSample(s.env, u1, u2, u3, u4, &pdf);
    out->pdf = pdf / static_cast<float>(choices);
    out->distance = kInfinity;
    out->radiance = Environment(s, out->dir);
    out->is_env = true;
    return out->pdf > 0.0f;
  }
  const Light& light = s.lights[pick];
  Float3 p, n;
  int material;
  if (light.kind == PrimKind::kSphere) {
    const Sphere& sp = s.spheres[light.index];
    material = sp.material;
    float omc;
    if (SphereConeSampled(sp, from, &omc)) {
      const Float3 to_c = sp.center - from;
      const float dist_c = Length(to_c);
      const Float3 w = to_c * (1.0f / dist_c);
      Float3 t, bt;
      Basis(w, &t, &bt);
      const float one_minus_cos_t = u1 * omc;
      const float cos_t = 1.0f - one_minus_cos_t;
      const float sin_t = sqrtf(FMax(0.0f, one_minus_cos_t * (2.0f - one_minus_cos_t)));
      const float phi = 2.0f * kPi * u2;
      const Float3 dir = Normalize(t * (sin_t * cosf(phi)) + bt * (sin_t * sinf(phi)) + w * cos_t);
      // Distance to the near side along dir (the chord's first end; the tangent at the rim).
      const float b = dist_c * cos_t;
      const float disc = sp.radius * sp.radius - dist_c * dist_c * sin_t * sin_t;
      const float dist = b - sqrtf(FMax(0.0f, disc));
      if (!(dist > kRayEpsilon)) return false;
      out->dir = dir;
      out->distance = dist;
      out->radiance = s.materials[material].emission;
      out->pdf = 1.0f / (2.0f * kPi * omc * static_cast<float>(choices));
      out->is_env = false;
      return true;
    }
    n = SampleUnitSphere(u1, u2);
    p = sp.center + n * sp.radius;
  } else {
    const Quad& q = s.quads[light.index];
    p = q.corner + q.u * u1 + q.v * u2;
    n = q.normal;
    material = q.material;
  }
  const Float3 d = p - from;
  const float dist = Length(d);
  if (dist <= kRayEpsilon) return false;
  out->dir = d * (1.0f / dist);
  out->distance = dist;
  out->radiance = s.materials[material].emission;
  out->pdf = AreaLightPdf(s, light.area, from, p, n);
  out->is_env = false;
  return out->pdf > 0.0f;
}

// True when nothing blocks the segment from `from` along `dir` for `distance` (the light's own
// surface at the far end does not count).
TSR_KERNEL_FN bool Unoccluded(const SceneView& s, Float3 from, Float3 dir, float distance) {
  Hit hit;
  const float t_max = distance == kInfinity ? kInfinity : distance * (1.0f - 1e-4f) - kRayEpsilon;
  return !TraceBvh(s, Ray{from, dir}, t_max, true, &hit);
}

}  // namespace tessera::pathtracer::kernel
