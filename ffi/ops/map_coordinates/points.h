// One point of map_coordinates, for the CPU loops (cpu_gather_handler.cc,
// cpu_scatter_handler.cc) and the CUDA kernels (cuda_kernels.cu) alike: its
// value, and its cotangent added into the grid, by the interior cell of its
// order where the point lies inside (every boundary mode is then the
// identity: no per-node index arithmetic, no validity checks; most points of
// a typical call), else every node through the boundary mode
// (interpolation.h). The CPU's vector kernels (cpu_avx2_*.h) compute the
// same sums eight or four points at a time.
#ifndef XLABIND_FFI_OPS_MAP_COORDINATES_POINTS_H_
#define XLABIND_FFI_OPS_MAP_COORDINATES_POINTS_H_

#include <cstdint>

#include "ffi/ops/map_coordinates/interpolation.h"
#include "xlabind/native/host_device.h"

namespace xlabind::map_coordinates {

// The interpolation cell of a point strictly inside the grid, for order 1:
// offset of its first node and, per axis, the weights of its two nodes. There
// every boundary mode is the identity, so the 2^ndim nodes sit at fixed
// offsets from the first: no per-node index arithmetic, no validity checks.
// That is most points of a typical call, and several times faster than the
// general path.
template <typename T, int kNdim>
struct LinearCell {
  int64_t first;
  T weight[kNdim][2];

  // Whether the point lies inside; fills the cell if so.
  XLABIND_HOST_DEVICE bool Load(const Geometry& g, const Coordinates<T>& coords, int64_t at) {
    first = 0;
    for (int a = 0; a < kNdim; ++a) {
      const T c = coords.axis[a][at];
      const T lower = FloorOf(c);
      // Compared as floats first: NaN, infinities and huge values fail here.
      if (!(lower >= T(0) && lower + T(1) < static_cast<T>(g.grid_shape[a])) ||
          g.derivative[a] > 1) {
        return false;
      }
      const int64_t low = static_cast<int64_t>(lower);
      if (low + 1 >= g.grid_shape[a]) return false;  // rounding in float32 near 2^24
      first += low * g.grid_strides[a];
      const T t = c - lower;
      weight[a][0] = g.derivative[a] ? T(-1) : T(1) - t;
      weight[a][1] = g.derivative[a] ? T(1) : t;
    }
    return true;
  }

  // The weighted sum of the cell's nodes, axis by axis (nested lerps).
  template <int kAxis = 0>
  XLABIND_HOST_DEVICE T Sum(const Geometry& g, const T* grid) const {
    if constexpr (kAxis == kNdim - 1) {
      return weight[kAxis][0] * grid[0] + weight[kAxis][1] * grid[g.grid_strides[kAxis]];
    } else {
      return weight[kAxis][0] * Sum<kAxis + 1>(g, grid) +
             weight[kAxis][1] * Sum<kAxis + 1>(g, grid + g.grid_strides[kAxis]);
    }
  }

  // Adds `value` times each node's weight into the cell's nodes, each with
  // add(address, amount) (AddTo: +=; CUDA: atomicAdd).
  template <int kAxis = 0, typename Adder>
  XLABIND_HOST_DEVICE void Add(const Geometry& g, T* grid, T value, Adder&& add) const {
    if constexpr (kAxis == kNdim - 1) {
      add(grid, weight[kAxis][0] * value);
      add(grid + g.grid_strides[kAxis], weight[kAxis][1] * value);
    } else {
      Add<kAxis + 1>(g, grid, weight[kAxis][0] * value, add);
      Add<kAxis + 1>(g, grid + g.grid_strides[kAxis], weight[kAxis][1] * value, add);
    }
  }
};

// Order 0's one node, for a point whose node (lax.round of each coordinate)
// lies inside on every axis: there, too, every mode is the identity. The
// derivatives of order 0's weights are 0, which the general path gives.
template <typename T, int kNdim>
struct NearestCell {
  int64_t first;

  XLABIND_HOST_DEVICE bool Load(const Geometry& g, const Coordinates<T>& coords, int64_t at) {
    first = 0;
    for (int a = 0; a < kNdim; ++a) {
      const T c = coords.axis[a][at];
      // Compared as floats first: NaN, infinities and huge values fail here.
      if (!(c >= T(0) && c < static_cast<T>(g.grid_shape[a])) || g.derivative[a] != 0) {
        return false;
      }
      const double index = RoundHalfAwayFromZero(static_cast<double>(c));
      if (index >= static_cast<double>(g.grid_shape[a])) return false;
      first += static_cast<int64_t>(index) * g.grid_strides[a];
    }
    return true;
  }
};

// What the scatter adds with where one thread owns the grid (the CPU's
// private grids); the CUDA kernels pass atomicAdd instead.
struct AddTo {
  template <typename T>
  XLABIND_HOST_DEVICE void operator()(T* address, T amount) const {
    *address += amount;
  }
};

// One value the general way: the interior fast path where it applies, else
// every node through the boundary mode.
template <typename T, int kOrder, int kNdim, bool kFast>
XLABIND_HOST_DEVICE T GatherPoint(const Geometry& g, const T* grid, const Coordinates<T>& coords,
                                  int64_t at) {
  if constexpr (kFast && kOrder == 0) {
    NearestCell<T, kNdim> cell;
    if (cell.Load(g, coords, at)) return grid[cell.first];
  } else if constexpr (kFast && kOrder == 1) {
    LinearCell<T, kNdim> cell;
    if (cell.Load(g, coords, at)) return cell.Sum(g, grid + cell.first);
  } else if constexpr (kFast) {
    SplineCell<T, kOrder, kNdim> cell;
    if (cell.Load(g, coords, at)) return cell.Sum(g, grid + cell.first);
  }
  if constexpr (kNdim > 0) {
    return SumNodes<T, kOrder, kNdim>(g, coords, at, grid);
  } else {
    // One sum through all (k + 1)^ndim nodes (up to 6^8): in float32 its
    // roundings add up to ~1e-4 at rank 8, so it is kept in double.
    double sum = 0.0;
    ForEachNode<T, kOrder, kNdim>(g, coords, at, [&](int64_t node, T weight) {
      sum += static_cast<double>(weight) * static_cast<double>(grid[node]);
    });
    return static_cast<T>(sum);
  }
}

// Adds one value's cotangent into the grid nodes it was interpolated from.
template <typename T, int kOrder, int kNdim, bool kFast, typename Adder>
XLABIND_HOST_DEVICE void ScatterPoint(const Geometry& g, T* grid, const Coordinates<T>& coords,
                                      int64_t at, T ct, Adder&& add) {
  // No shortcut for a zero cotangent: a NaN weight (a NaN coordinate) makes it
  // NaN, as in jax.
  if constexpr (kFast && kOrder == 0) {
    NearestCell<T, kNdim> cell;
    if (cell.Load(g, coords, at)) {
      add(grid + cell.first, ct);
      return;
    }
  } else if constexpr (kFast && kOrder == 1) {
    LinearCell<T, kNdim> cell;
    if (cell.Load(g, coords, at)) {
      cell.Add(g, grid + cell.first, ct, add);
      return;
    }
  } else if constexpr (kFast) {
    SplineCell<T, kOrder, kNdim> cell;
    if (cell.Load(g, coords, at)) {
      cell.Add(g, grid + cell.first, ct, add);
      return;
    }
  }
  ForEachNode<T, kOrder, kNdim>(g, coords, at,
                                [&](int64_t node, T weight) { add(grid + node, weight * ct); });
}

}  // namespace xlabind::map_coordinates

#endif  // XLABIND_FFI_OPS_MAP_COORDINATES_POINTS_H_
