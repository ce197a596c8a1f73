// The BVH builder's invariants and quality, and the pixels of a mesh scene (BVH traversal) being
// the same however the frame is threaded or split.

#include "plugins/pathtracer/bvh.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <vector>

#include "plugins/pathtracer/kernel_geometry.h"
#include "shared/images/accumulation.h"
#include "tests/plugins/pathtracer/test_scenes.h"

namespace tessera::pathtracer {
namespace {

using kernel::BvhNode;
using kernel::Float3;
using testing::BitIdentical;
using testing::DataScene;

// A torus of rings x sides quads, two triangles each, as builder inputs.
std::vector<BvhInput> TorusTriangles(int rings, int sides) {
  auto at = [&](int i, int j) {
    const double u = 2 * M_PI * (i % rings) / rings, v = 2 * M_PI * (j % sides) / sides;
    return Float3{static_cast<float>((1.0 + 0.4 * std::cos(v)) * std::cos(u)),
                  static_cast<float>(0.4 * std::sin(v)),
                  static_cast<float>((1.0 + 0.4 * std::cos(v)) * std::sin(u))};
  };
  std::vector<BvhInput> out;
  auto add = [&](Float3 a, Float3 b, Float3 c) {
    const int index = static_cast<int>(out.size());
    out.push_back({kernel::Min3(a, kernel::Min3(b, c)),
                   kernel::Max3(a, kernel::Max3(b, c)),
                   {kernel::PrimKind::kTriangle, index}});
  };
  for (int i = 0; i < rings; ++i) {
    for (int j = 0; j < sides; ++j) {
      add(at(i, j), at(i + 1, j), at(i + 1, j + 1));
      add(at(i, j), at(i + 1, j + 1), at(i, j + 1));
    }
  }
  return out;
}

float Area(Float3 lo, Float3 hi) {
  const Float3 d = hi - lo;
  return 2.0f * (d.x * d.y + d.y * d.z + d.z * d.x);
}

bool Inside(Float3 lo, Float3 hi, Float3 outer_lo, Float3 outer_hi) {
  return lo.x >= outer_lo.x && lo.y >= outer_lo.y && lo.z >= outer_lo.z && hi.x <= outer_hi.x &&
         hi.y <= outer_hi.y && hi.z <= outer_hi.z;
}

// Expected cost of a ray through the tree (surface area heuristic, one unit per node visited
// and per primitive tested), relative to the root's area.
double SahCost(const std::vector<BvhNode>& nodes) {
  const double root = Area(nodes[0].lo, nodes[0].hi);
  double cost = 0;
  for (const BvhNode& n : nodes) cost += Area(n.lo, n.hi) / root * (n.count > 0 ? n.count : 1);
  return cost;
}

// The same cost for a tree split at the median centroid along the widest axis, down to leaves
// of at most 4 primitives (tight boxes: no padding, which only flatters it).
double MedianSplitCost(std::vector<BvhInput> prims) {
  double root_area = 0;
  std::function<double(int, int)> build = [&](int begin, int end) -> double {
    Float3 lo = prims[begin].lo, hi = prims[begin].hi;
    Float3 clo = (prims[begin].lo + prims[begin].hi) * 0.5f, chi = clo;
    for (int i = begin; i < end; ++i) {
      lo = kernel::Min3(lo, prims[i].lo);
      hi = kernel::Max3(hi, prims[i].hi);
      const Float3 c = (prims[i].lo + prims[i].hi) * 0.5f;
      clo = kernel::Min3(clo, c);
      chi = kernel::Max3(chi, c);
    }
    const double area = Area(lo, hi);
    if (root_area == 0) root_area = area;
    if (end - begin <= 4) return area / root_area * (end - begin);
    const Float3 ext = chi - clo;
    const int axis = ext.x >= ext.y && ext.x >= ext.z ? 0 : (ext.y >= ext.z ? 1 : 2);
    const int mid = (begin + end) / 2;
    std::nth_element(prims.begin() + begin, prims.begin() + mid, prims.begin() + end,
                     [&](const BvhInput& a, const BvhInput& b) {
                       return kernel::Component(a.lo + a.hi, axis) <
                              kernel::Component(b.lo + b.hi, axis);
                     });
    return area / root_area + build(begin, mid) + build(mid, end);
  };
  return build(0, static_cast<int>(prims.size()));
}

TEST(BvhTest, EveryPrimitiveIsInExactlyOneLeafAndChildrenLieInsideTheirParents) {
  const std::vector<BvhInput> input = TorusTriangles(64, 32);
  const Bvh bvh = BuildBvh(input);
  ASSERT_FALSE(bvh.nodes.empty());
  ASSERT_EQ(bvh.prims.size(), input.size());
  EXPECT_LT(bvh.depth, kernel::kBvhStackSize);
  std::vector<int> seen(input.size(), 0);
  std::vector<int> parents(bvh.nodes.size(), 0);
  parents[0] = 1;  // the root has none; counted so every node is reached exactly once
  for (size_t i = 0; i < bvh.nodes.size(); ++i) {
    const BvhNode& n = bvh.nodes[i];
    if (n.count > 0) {
      EXPECT_LE(n.count, 8) << "node " << i;
      for (int p = n.first; p < n.first + n.count; ++p) {
        const int prim = bvh.prims[p].index;
        ASSERT_GE(prim, 0);
        ASSERT_LT(prim, static_cast<int>(input.size()));
        ++seen[prim];
        EXPECT_TRUE(Inside(input[prim].lo, input[prim].hi, n.lo, n.hi)) << "prim " << prim;
      }
      continue;
    }
    for (int c = n.first; c < n.first + 2; ++c) {
      ASSERT_GT(c, static_cast<int>(i));
      ASSERT_LT(c, static_cast<int>(bvh.nodes.size()));
      ++parents[c];
      EXPECT_TRUE(Inside(bvh.nodes[c].lo, bvh.nodes[c].hi, n.lo, n.hi)) << "child " << c;
    }
  }
  for (size_t p = 0; p < seen.size(); ++p) EXPECT_EQ(seen[p], 1) << "prim " << p;
  for (size_t i = 0; i < parents.size(); ++i) EXPECT_EQ(parents[i], 1) << "node " << i;
  // Leaves hold several triangles: a tree of single-triangle leaves has 2n - 1 nodes.
  EXPECT_LT(bvh.nodes.size(), input.size() * 3 / 2);
}

TEST(BvhTest, SahTreeIsCheaperThanAMedianSplit) {
  const std::vector<BvhInput> input = TorusTriangles(96, 48);
  const double sah = SahCost(BuildBvh(input).nodes);
  const double median = MedianSplitCost(input);
  EXPECT_LT(sah, median) << "sah " << sah << " median " << median;
}

TEST(BvhTest, SameInputGivesTheSameTree) {
  const std::vector<BvhInput> input = TorusTriangles(40, 20);
  const Bvh a = BuildBvh(input), b = BuildBvh(input);
  ASSERT_EQ(a.nodes.size(), b.nodes.size());
  EXPECT_EQ(0, std::memcmp(a.nodes.data(), b.nodes.data(), a.nodes.size() * sizeof(BvhNode)));
  ASSERT_EQ(a.prims.size(), b.prims.size());
  for (size_t i = 0; i < a.prims.size(); ++i) EXPECT_EQ(a.prims[i].index, b.prims[i].index);
}

TEST(BvhTest, EmptyAndSinglePrimitiveInputs) {
  EXPECT_TRUE(BuildBvh({}).nodes.empty());
  const Bvh one = BuildBvh(TorusTriangles(1, 1));  // two triangles
  ASSERT_FALSE(one.nodes.empty());
  EXPECT_EQ(one.prims.size(), 2u);
}

RenderedImage MeshRender(const spec::SceneSpec& scene, int threads,
                         std::optional<PixelRegion> region = std::nullopt) {
  RenderRequest request;
  request.backend = Backend::kCpu;
  request.cpu_threads = threads;
  request.region = region;
  StatusOr<RenderedImage> image = RenderFrame(scene, request);
  EXPECT_TRUE(image.ok()) << image.status().ToString();
  return image.ok() ? std::move(image).value() : RenderedImage{};
}

TEST(BvhTest, MeshScenePixelsDoNotDependOnThreadsOrTiles) {
  spec::SceneSpec scene = DataScene("textured_mesh.yaml");
  scene.width = 32;
  scene.height = 24;
  scene.samples = 2;
  const RenderedImage whole = MeshRender(scene, 1);
  EXPECT_TRUE(BitIdentical(whole, MeshRender(scene, 3)));
  EXPECT_TRUE(BitIdentical(whole, MeshRender(scene, 1)));
  std::vector<RenderedImage> tiles;
  for (int ty = 0; ty < 2; ++ty) {
    for (int tx = 0; tx < 2; ++tx) {
      tiles.push_back(
          MeshRender(scene, 2, PixelRegion{tx * 16, ty * 12, tx * 16 + 16, ty * 12 + 12}));
    }
  }
  StatusOr<RenderedImage> frame = accumulation::AssembleTiles(tiles);
  ASSERT_TRUE(frame.ok()) << frame.status().ToString();
  EXPECT_TRUE(BitIdentical(whole, *frame));
}

}  // namespace
}  // namespace tessera::pathtracer
