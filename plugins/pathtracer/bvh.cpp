#include "plugins/pathtracer/bvh.h"

#include <algorithm>
#include <array>

#include "plugins/pathtracer/kernel_geometry.h"

namespace tessera::pathtracer {
namespace {

using kernel::Float3;

constexpr int kBins = 16;
constexpr int kMaxLeafSize = 4;
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

Float3 Centroid(const BvhInput& p) { return (p.lo + p.hi) * 0.5f; }

class Builder {
 public:
  explicit Builder(std::vector<BvhInput>* inputs) : in_(*inputs) {}

  Bvh Run() {
    Bvh out;
    if (in_.empty()) return out;
    nodes_.push_back({});
    Build(0, 0, static_cast<int>(in_.size()), 0);
    out.nodes = std::move(nodes_);
    out.prims.reserve(in_.size());
    for (const auto& p : in_) out.prims.push_back(p.ref);
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
      box.Grow(in_[i].lo, in_[i].hi);
      const Float3 c = Centroid(in_[i]);
      centroids.Grow(c, c);
    }
    // Pad so flat boxes (an axis-aligned quad) never lose a hit to slab-test rounding.
    const Float3 extent = box.hi - box.lo;
    const float pad = 1e-5f * kernel::MaxComponent(extent) + 1e-6f;
    box.lo = box.lo - Float3{pad, pad, pad};
    box.hi = box.hi + Float3{pad, pad, pad};
    const int count = end - begin;
    if (count <= 1 || depth >= kMaxDepth) return MakeLeaf(node, begin, end, box, depth);

    // Binned SAH along each axis; pick the cheapest split.
    int best_axis = -1, best_split = 0;
    float best_cost = kernel::kInfinity;
    for (int axis = 0; axis < 3; ++axis) {
      const float lo = kernel::Component(centroids.lo, axis);
      const float hi = kernel::Component(centroids.hi, axis);
      if (!(hi > lo)) continue;
      const float scale = kBins / (hi - lo);
      std::array<Box, kBins> bins;
      std::array<int, kBins> counts{};
      for (int i = begin; i < end; ++i) {
        const int b = BinOf(kernel::Component(Centroid(in_[i]), axis), lo, scale);
        bins[b].Grow(in_[i].lo, in_[i].hi);
        ++counts[b];
      }
      std::array<float, kBins> right_area{};
      std::array<int, kBins> right_count{};
      Box acc;
      int n = 0;
      for (int b = kBins - 1; b > 0; --b) {
        if (counts[b] > 0) acc.Grow(bins[b].lo, bins[b].hi);
        n += counts[b];
        right_area[b] = acc.Area();
        right_count[b] = n;
      }
      acc = Box{};
      n = 0;
      for (int b = 0; b < kBins - 1; ++b) {
        if (counts[b] > 0) acc.Grow(bins[b].lo, bins[b].hi);
        n += counts[b];
        if (n == 0 || right_count[b + 1] == 0) continue;
        const float cost = acc.Area() * n + right_area[b + 1] * right_count[b + 1];
        if (cost < best_cost) {
          best_cost = cost;
          best_axis = axis;
          best_split = b + 1;
        }
      }
    }
    const float leaf_cost = box.Area() * count;
    if (best_axis < 0) {
      if (count <= kMaxLeafSize) return MakeLeaf(node, begin, end, box, depth);
      return MedianSplit(node, begin, end, depth, box);
    }
    if (count <= kMaxLeafSize && best_cost >= leaf_cost) {
      return MakeLeaf(node, begin, end, box, depth);
    }
    const float lo = kernel::Component(centroids.lo, best_axis);
    const float scale = kBins / (kernel::Component(centroids.hi, best_axis) - lo);
    const auto mid_it =
        std::partition(in_.begin() + begin, in_.begin() + end, [&](const BvhInput& p) {
          return BinOf(kernel::Component(Centroid(p), best_axis), lo, scale) < best_split;
        });
    const int mid = static_cast<int>(mid_it - in_.begin());
    if (mid == begin || mid == end) return MedianSplit(node, begin, end, depth, box);
    Split(node, begin, mid, end, depth, box);
  }

  // All centroids (nearly) equal along every axis: split by order so the tree stays shallow.
  void MedianSplit(int node, int begin, int end, int depth, const Box& box) {
    Split(node, begin, begin + (end - begin) / 2, end, depth, box);
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

  std::vector<BvhInput>& in_;
  std::vector<kernel::BvhNode> nodes_;
  int depth_ = 0;
};

}  // namespace

Bvh BuildBvh(std::vector<BvhInput> inputs) { return Builder(&inputs).Run(); }

}  // namespace tessera::pathtracer
