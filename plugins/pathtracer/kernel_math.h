#pragma once
// Kernel math: vectors, counter-based random numbers and sampling helpers. Plain inline
// host/device functions (see kernel.h for the rules every kernel header follows).

#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define TSR_HOST_DEVICE __host__ __device__
#else
#define TSR_HOST_DEVICE
#endif
#define TSR_KERNEL_FN TSR_HOST_DEVICE inline
// For the few functions of the traversal inner loop: GCC at -O2 otherwise keeps the triangle and
// box tests as calls, one per primitive and per node.
#if defined(__CUDACC__)
#define TSR_KERNEL_HOT __host__ __device__ __forceinline__
#else
#define TSR_KERNEL_HOT __attribute__((always_inline)) inline
#endif

namespace tessera::pathtracer::kernel {

// min/max as compare-and-select: the host compiler turns these into single instructions, where
// fminf/fmaxf are library calls (their NaN rules block inlining without -ffast-math).
TSR_KERNEL_FN float FMin(float a, float b) { return a < b ? a : b; }
TSR_KERNEL_FN float FMax(float a, float b) { return a > b ? a : b; }

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
TSR_KERNEL_FN float Length(Float3 a) { return sqrtf(Dot(a, a)); }
TSR_KERNEL_FN Float3 Normalize(Float3 a) { return a * (1.0f / sqrtf(Dot(a, a))); }
TSR_KERNEL_FN float MaxComponent(Float3 a) { return FMax(a.x, FMax(a.y, a.z)); }
TSR_KERNEL_FN Float3 Min3(Float3 a, Float3 b) {
  return {FMin(a.x, b.x), FMin(a.y, b.y), FMin(a.z, b.z)};
}
TSR_KERNEL_FN Float3 Max3(Float3 a, Float3 b) {
  return {FMax(a.x, b.x), FMax(a.y, b.y), FMax(a.z, b.z)};
}
TSR_KERNEL_FN Float3 Lerp3(Float3 a, Float3 b, float t) { return a * (1.0f - t) + b * t; }
TSR_KERNEL_FN float Luminance(Float3 c) { return 0.2126f * c.x + 0.7152f * c.y + 0.0722f * c.z; }
// False for NaN and +-inf (no -ffast-math anywhere, so this is not folded away).
TSR_KERNEL_FN bool IsFinite(Float3 a) {
  return (a.x - a.x) == 0.0f && (a.y - a.y) == 0.0f && (a.z - a.z) == 0.0f;
}
TSR_KERNEL_FN float Component(Float3 a, int i) { return i == 0 ? a.x : (i == 1 ? a.y : a.z); }

inline constexpr float kPi = 3.14159265358979f;
// Rays start this far along their direction, so a surface does not shadow itself.
inline constexpr float kRayEpsilon = 1e-3f;
inline constexpr float kInfinity = 3.0e38f;

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

inline constexpr uint32_t kDimsPerBounce = 16;

// A uniform float in [0, 1) for dimension `dim` of bounce `bounce` of the sample.
TSR_KERNEL_FN float Random01(uint32_t seed, uint32_t bounce, uint32_t dim) {
  const uint32_t h = PcgHash(seed ^ PcgHash(bounce * kDimsPerBounce + dim));
  return static_cast<float>(h >> 8) * (1.0f / 16777216.0f);
}

// ---- Sampling helpers ----------------------------------------------------------------------

// Orthonormal basis (t, bt, n) around unit n (Duff et al. 2017).
TSR_KERNEL_FN void Basis(Float3 n, Float3* t, Float3* bt) {
  const float sign = copysignf(1.0f, n.z);
  const float a = -1.0f / (sign + n.z);
  const float b = n.x * n.y * a;
  *t = {1.0f + sign * n.x * n.x * a, sign * b, -sign * n.x};
  *bt = {b, sign + n.y * n.y * a, -n.y};
}

// Cosine-weighted direction around unit normal n; pdf = cos / pi.
TSR_KERNEL_FN Float3 SampleCosineHemisphere(Float3 n, float u1, float u2) {
  Float3 t, bt;
  Basis(n, &t, &bt);
  const float r = sqrtf(u1);
  const float phi = 2.0f * kPi * u2;
  const float z = sqrtf(FMax(0.0f, 1.0f - u1));
  return t * (r * cosf(phi)) + bt * (r * sinf(phi)) + n * z;
}

TSR_KERNEL_FN Float3 SampleUnitSphere(float u1, float u2) {
  const float z = 1.0f - 2.0f * u1;
  const float r = sqrtf(FMax(0.0f, 1.0f - z * z));
  const float phi = 2.0f * kPi * u2;
  return {r * cosf(phi), r * sinf(phi), z};
}

TSR_KERNEL_FN Float3 Reflect(Float3 d, Float3 n) { return d - n * (2.0f * Dot(d, n)); }

// Power heuristic (beta = 2) weight of the strategy with density a against b.
TSR_KERNEL_FN float PowerHeuristic(float a, float b) {
  const float a2 = a * a, b2 = b * b;
  return a2 + b2 > 0.0f ? a2 / (a2 + b2) : 0.0f;
}

// Index of the first entry of cdf[0..n] (non-decreasing, cdf[0] = 0, cdf[n] = 1) greater than u,
// minus one: the bucket u falls in. A binary search so both backends take the same branches.
TSR_KERNEL_FN int SampleCdf(const float* cdf, int n, float u) {
  int lo = 0, hi = n;  // invariant: cdf[lo] <= u < cdf[hi] (treating cdf[n] as 1)
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (cdf[mid] <= u) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

}  // namespace tessera::pathtracer::kernel
