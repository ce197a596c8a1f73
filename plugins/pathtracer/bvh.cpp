#include "plugins/pathtracer/bvh.h"

#include <algorithm>
#include <array>

#include "plugins/pathtracer/kernel_geometry.h"

namespace tessera::pathtracer {
namespace {

using kernel::Float3;

constexpr int kBins = 16;
// A leaf holds at most this many primitives; below it the SAH decides between leaf and split.
constexpr int kMaxLeafSize = 8;
// Cost of visiting an inner node relative to one primitive test. Without it the SAH splits down
// to single-primitive leaves: twice the nodes, deeper trees and a slower build for no gain.
constexpr float kTraversalCost = 1.0f;
// Leaves are forced at this depth; the traversal stack holds at most one entry per level.
constexpr int kMaxDepth = kernel::kBvhStackSize - 4;

struct Box {
  Float3 lo{kernel::kInfinity, kernel::kInfinity, kernel::kInfinity};
  Float3 hi{-kernel::kInfinity, -kernel::kInfinity, -kernel::kInfinity};

  void Grow(Float3 p_lo, Float3 p_hi) {
    lo = kernel::Min3(lo, p_lo);
    hi = kernel::Max3(hi, p_hi);
  }
  float Area() const {
    if (hi.x < lo.x) return 0.0f;
    const Float3 d = hi - lo;
    return 2.0f * (d.x * d.y + d.y * d.z + d.z * d.x);
  }
};

class Builder {
 public:
  explicit Builder(const std::vector<BvhInput>& inputs) : in_(inputs) {
    // Centroids once; the build moves indices, never the 32-byte inputs.
    centroids_.reserve(in_.size());
    order_.reserve(in_.size());
    for (size_t i = 0; i < in_.size(); ++i) {
      centroids_.push_back((in_[i].lo + in_[i].hi) * 0.5f);
      order_.push_back(static_cast<int>(i));
    }
    // A binary tree over n primitives has at most 2n - 1 nodes.
    nodes_.reserve(in_.empty() ? 0 : 2 * in_.size() - 1);
  }

  Bvh Run() {
    Bvh out;
    if (in_.empty()) return out;
    nodes_.push_back({});
    Build(0, 0, static_cast<int>(in_.size()), 0);
    nodes_.shrink_to_fit();
    out.nodes = std::move(nodes_);
    out.prims.reserve(in_.size());
    for (int i : order_) out.prims.push_back(in_[i].ref);
    out.depth = depth_;
    return out;
  }

 private:
  void MakeLeaf(int node, int begin, int end, const Box& box, int depth) {
    nodes_[node] = {box.lo, begin, box.hi, end - begin};
    depth_ = std::max(depth_, depth);
  }

  void Build(int node, int begin, int end, int depth) {
    Box box, centroids;
    for (int i = begin; i < end; ++i) {
      const BvhInput& p = in_[order_[i]];
      box.Grow(p.lo, p.hi);
      const Float3 c = centroids_[order_[i]];
      centroids.Grow(c, c);
    }
    // Pad so flat boxes (an axis-aligned quad) never lose a hit to slab-test rounding.
    const Float3 extent = box.hi - box.lo;
    const float pad = 1e-5f * kernel::MaxComponent(extent) + 1e-6f;
    box.lo = box.lo - Float3{pad, pad, pad};
    box.hi = box.hi + Float3{pad, pad, pad};
    const int count = end - begin;
    if (count <= 1 || depth >= kMaxDepth) return MakeLeaf(node, begin, end, box, depth);

    // Binned SAH along all three axes in one pass over the primitives.
    std::array<std::array<Box, kBins>, 3> bins;
    std::array<std::array<int, kBins>, 3> counts{};
    std::array<float, 3> lo{}, scale{};
    for (int axis = 0; axis < 3; ++axis) {
      lo[axis] = kernel::Component(centroids.lo, axis);
      const float hi = kernel::Component(centroids.hi, axis);
      scale[axis] = hi > lo[axis] ? kBins / (hi - lo[axis]) : 0.0f;
    }
    for (int i = begin; i < end; ++i) {
      const int p = order_[i];
      const Float3 c = centroids_[p];
      for (int axis = 0; axis < 3; ++axis) {
        const int b = BinOf(kernel::Component(c, axis), lo[axis], scale[axis]);
        bins[axis][b].Grow(in_[p].lo, in_[p].hi);
        ++counts[axis][b];
      }
    }
    int best_axis = -1, best_split = 0;
    float best_cost = kernel::kInfinity;
    for (int axis = 0; axis < 3; ++axis) {
      if (scale[axis] == 0.0f) continue;
      std::array<float, kBins> right_area{};
      std::array<int, kBins> right_count{};
      Box acc;
      int n = 0;
      for (int b = kBins - 1; b > 0; --b) {
        if (counts[axis][b] > 0) acc.Grow(bins[axis][b].lo, bins[axis][b].hi);
        n += counts[axis][b];
        right_area[b] = acc.Area();
        right_count[b] = n;
      }
      acc = Box{};
      n = 0;
      for (int b = 0; b < kBins - 1; ++b) {
        if (counts[axis][b] > 0) acc.Grow(bins[axis][b].lo, bins[axis][b].hi);
        n += counts[axis][b];
        if (n == 0 || right_count[b + 1] == 0) continue;
        const float cost = acc.Area() * n + right_area[b + 1] * right_count[b + 1];
        if (cost < best_cost) {
          best_cost = cost;
          best_axis = axis;
          best_split = b + 1;
        }
      }
    }
    if (best_axis < 0) {
      if (count <= kMaxLeafSize) return MakeLeaf(node, begin, end, box, depth);
      return Split(node, begin, begin + count / 2, end, depth, box);
    }
    // Expected cost of the split relative to the leaf's (one test per primitive).
    const float area = box.Area();
    const float split_cost = kTraversalCost + (area > 0.0f ? best_cost / area : 0.0f);
    if (count <= kMaxLeafSize && split_cost >= static_cast<float>(count)) {
      return MakeLeaf(node, begin, end, box, depth);
    }
    const float axis_lo = lo[best_axis], axis_scale = scale[best_axis];
    const auto mid_it = std::partition(order_.begin() + begin, order_.begin() + end, [&](int p) {
      return BinOf(kernel::Component(centroids_[p], best_axis), axis_lo, axis_scale) < best_split;
    });
    const int mid = static_cast<int>(mid_it - order_.begin());
    // All centroids (nearly) equal: split by order so the tree stays shallow.
    if (mid == begin || mid == end) return Split(node, begin, begin + count / 2, end, depth, box);
    Split(node, begin, mid, end, depth, box);
  }

  void Split(int node, int begin, int mid, int end, int depth, const Box& box) {
    const int left = static_cast<int>(nodes_.size());
    nodes_.push_back({});
    nodes_.push_back({});
    nodes_[node] = {box.lo, left, box.hi, 0};
    Build(left, begin, mid, depth + 1);
    Build(left + 1, mid, end, depth + 1);
  }

  static int BinOf(float c, float lo, float scale) {
    return std::clamp(static_cast<int>((c - lo) * scale), 0, kBins - 1);
  }

  const std::vector<BvhInput>& in_;
  std::vector<Float3> centroids_;
  std::vector<int> order_;  // primitive indices, in leaf order once built
  std::vector<kernel::BvhNode> nodes_;
  int depth_ = 0;
};

}  // namespace

Bvh BuildBvh(std::vector<BvhInput> inputs) { return Builder(inputs).Run(); }

}  // namespace tessera::pathtracer
