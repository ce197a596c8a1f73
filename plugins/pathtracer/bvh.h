#pragma once
// Host-side BVH builder: binned SAH over primitive bounds, flattened into the kernel's node array
// (children adjacent, no pointers) so both backends traverse it with a small explicit stack.

#include <vector>

#include "plugins/pathtracer/kernel_scene.h"

namespace tessera::pathtracer {

struct BvhInput {
  kernel::Float3 lo, hi;  // bounds
  kernel::PrimRef ref;
};

struct Bvh {
  std::vector<kernel::BvhNode> nodes;  // empty when there are no primitives
  std::vector<kernel::PrimRef> prims;  // leaf order
  int depth = 0;                       // deepest leaf (root = 0), below kernel::kBvhStackSize
};

// Builds a BVH over `inputs` (reordered in place). Deterministic: the same input gives the same
// tree.
Bvh BuildBvh(std::vector<BvhInput> inputs);

}  // namespace tessera::pathtracer
