#pragma once
// Test support: small scenes for the built-in path tracer, shared by the worker, integration and
// CLI tests.

#include <string>

namespace tessera::testing {

// A tiny, fast scene (milliseconds per frame on one core at the defaults) whose camera moves
// between frame 1 and frame 100, so consecutive frames differ.
inline std::string TinySceneYaml(int width = 64, int height = 48, int samples = 4) {
  return "width: " + std::to_string(width) + "\nheight: " + std::to_string(height) +
         "\nsamples: " + std::to_string(samples) + R"(
max_depth: 4
background:
  top: [0.5, 0.7, 1.0]
  bottom: [1.0, 1.0, 1.0]
camera:
  keyframes:
    - {frame: 1, position: [0, 1, 5], look_at: [0, 0.5, 0], fov: 40}
    - {frame: 100, position: [3, 1.5, 4], look_at: [0, 0.5, 0], fov: 40}
materials:
  ground: {type: diffuse, color: [0.6, 0.6, 0.6]}
  ball: {type: metal, color: [0.9, 0.8, 0.7], roughness: 0.2}
objects:
  - {type: quad, corner: [-10, 0, -10], u: [0, 0, 20], v: [20, 0, 0], material: ground}
  - {type: sphere, center: [0, 0.5, 0], radius: 0.5, material: ball}
)";
}

}  // namespace tessera::testing
