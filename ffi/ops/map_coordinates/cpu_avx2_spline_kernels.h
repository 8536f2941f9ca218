// map_coordinates' cubic (order-3) CPU kernels with AVX2 and FMA, for runs of
// points of one batch element, 4 points at a time:
//   GatherCubicRunAvx2   the values;
//   ScatterCubicRunAvx2  the transpose: each value's cotangent times each
//                        node's weight, added into the grid.
// A cubic touches 4 consecutive nodes along the grid's last (contiguous)
// axis: exactly one vector of 4 float64s (or a 128-bit one of 4 float32s).
// So each point's 4^ndim nodes are 4^(ndim-1) vector loads (or
// read-add-writes), weighted along the leading axes by broadcasts, while the
// weights themselves are computed for 4 points at once, a point per lane.
// Each point's nodes go through the boundary mode axis by axis (no work for
// the axes where all 4 lie inside, most of them), so points near the edges
// take these paths too: on a 64^3 grid 14% of random points have a node
// outside, and nearly half the groups of 4 such a point. Constant mode's
// edges (whose outside nodes are not read at all), NaN, infinite and huge
// coordinates, and the tail take the scalar path, point by point.
//
// Why: SplineCell sums its 64 nodes (3-D) one multiply-add each, reading each
// node alone; here the sum is a quarter of the loads and multiply-adds, and
// the adds of the transpose a quarter of the read-modify-writes
// (tools/benchmark.py, the order-3 cases).
//
// Built with the target attribute, like cpu_avx2_kernels.h: callers check
// CubicAvx2KernelsApply() first, false without AVX2 and FMA or with
// XLABIND_NO_SIMD=1.
#ifndef XLABIND_FFI_OPS_MAP_COORDINATES_CPU_AVX2_SPLINE_KERNELS_H_
#define XLABIND_FFI_OPS_MAP_COORDINATES_CPU_AVX2_SPLINE_KERNELS_H_

#include <cstdint>

#include "ffi/native/cpu_features.h"
#include "ffi/ops/map_coordinates/interpolation.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace xlabind::map_coordinates {

// The highest weight derivative the vector weights have closed forms for: a
// cubic's third derivative is its last non-zero one.
constexpr int32_t kCubicMaxDerivative = 3;

// Whether the kernels below can run call `g` here: order 3, 1 to 3
// dimensions, each grid side below 2^24 (so a float32 node index is exact),
// weights differentiated at most three times, and a CPU with AVX2 and FMA.
inline bool CubicAvx2KernelsApply(const Geometry& g) {
#if defined(__x86_64__)
  if (g.order != 3 || g.ndim < 1 || g.ndim > 3) return false;
  for (int a = 0; a < g.ndim; ++a) {
    if (g.grid_shape[a] >= (int64_t{1} << 24) || g.derivative[a] > kCubicMaxDerivative) {
      return false;
    }
  }
  return native::HasAvx2Fma();
#else
  (void)g;
  return false;
#endif
}

#if defined(__x86_64__)

#define XLABIND_AVX2 __attribute__((target("avx2,fma")))
#define XLABIND_AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) inline

// Four values of T in one vector: a cubic's 4 nodes along the last axis, or
// one quantity of 4 points.
template <typename T>
struct Quad;

template <>
struct Quad<double> {
  using Vec = __m256d;
  XLABIND_AVX2_INLINE static Vec Load(const double* p) { return _mm256_loadu_pd(p); }
  XLABIND_AVX2_INLINE static void Store(double* p, Vec v) { _mm256_storeu_pd(p, v); }
  XLABIND_AVX2_INLINE static Vec Splat(double x) { return _mm256_set1_pd(x); }
  XLABIND_AVX2_INLINE static Vec Broadcast(const double* p) { return _mm256_broadcast_sd(p); }
  XLABIND_AVX2_INLINE static Vec Zero() { return _mm256_setzero_pd(); }
  XLABIND_AVX2_INLINE static Vec Floor(Vec x) {
    return _mm256_round_pd(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  }
  // Lanes with 0 <= x <= highest as bits; NaN lanes fail.
  XLABIND_AVX2_INLINE static int Within(Vec x, Vec highest) {
    return _mm256_movemask_pd(_mm256_and_pd(_mm256_cmp_pd(x, Zero(), _CMP_GE_OQ),
                                            _mm256_cmp_pd(x, highest, _CMP_LE_OQ)));
  }
  XLABIND_AVX2_INLINE static Vec Add(Vec a, Vec b) { return _mm256_add_pd(a, b); }
  XLABIND_AVX2_INLINE static Vec Sub(Vec a, Vec b) { return _mm256_sub_pd(a, b); }
  XLABIND_AVX2_INLINE static Vec Mul(Vec a, Vec b) { return _mm256_mul_pd(a, b); }
  XLABIND_AVX2_INLINE static Vec Div(Vec a, Vec b) { return _mm256_div_pd(a, b); }
  XLABIND_AVX2_INLINE static Vec MulAdd(Vec a, Vec b, Vec c) { return _mm256_fmadd_pd(a, b, c); }
  // Rows to columns: v[i] lane j becomes v[j] lane i.
  XLABIND_AVX2_INLINE static void Transpose(Vec* v) {
    const Vec t0 = _mm256_unpacklo_pd(v[0], v[1]), t1 = _mm256_unpackhi_pd(v[0], v[1]);
    const Vec t2 = _mm256_unpacklo_pd(v[2], v[3]), t3 = _mm256_unpackhi_pd(v[2], v[3]);
    v[0] = _mm256_permute2f128_pd(t0, t2, 0x20);
    v[1] = _mm256_permute2f128_pd(t1, t3, 0x20);
    v[2] = _mm256_permute2f128_pd(t0, t2, 0x31);
    v[3] = _mm256_permute2f128_pd(t1, t3, 0x31);
  }
};

template <>
struct Quad<float> {
  using Vec = __m128;
  XLABIND_AVX2_INLINE static Vec Load(const float* p) { return _mm_loadu_ps(p); }
  XLABIND_AVX2_INLINE static void Store(float* p, Vec v) { _mm_storeu_ps(p, v); }
  XLABIND_AVX2_INLINE static Vec Splat(float x) { return _mm_set1_ps(x); }
  XLABIND_AVX2_INLINE static Vec Broadcast(const float* p) { return _mm_broadcast_ss(p); }
  XLABIND_AVX2_INLINE static Vec Zero() { return _mm_setzero_ps(); }
  XLABIND_AVX2_INLINE static Vec Floor(Vec x) {
    return _mm_round_ps(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  }
  XLABIND_AVX2_INLINE static int Within(Vec x, Vec highest) {
    return _mm_movemask_ps(_mm_and_ps(_mm_cmp_ps(x, Zero(), _CMP_GE_OQ),
                                      _mm_cmp_ps(x, highest, _CMP_LE_OQ)));
  }
  XLABIND_AVX2_INLINE static Vec Add(Vec a, Vec b) { return _mm_add_ps(a, b); }
  XLABIND_AVX2_INLINE static Vec Sub(Vec a, Vec b) { return _mm_sub_ps(a, b); }
  XLABIND_AVX2_INLINE static Vec Mul(Vec a, Vec b) { return _mm_mul_ps(a, b); }
  XLABIND_AVX2_INLINE static Vec Div(Vec a, Vec b) { return _mm_div_ps(a, b); }
  XLABIND_AVX2_INLINE static Vec MulAdd(Vec a, Vec b, Vec c) { return _mm_fmadd_ps(a, b, c); }
  XLABIND_AVX2_INLINE static void Transpose(Vec* v) {
    const Vec t0 = _mm_unpacklo_ps(v[0], v[1]), t1 = _mm_unpackhi_ps(v[0], v[1]);
    const Vec t2 = _mm_unpacklo_ps(v[2], v[3]), t3 = _mm_unpackhi_ps(v[2], v[3]);
    v[0] = _mm_movelh_ps(t0, t2);
    v[1] = _mm_movehl_ps(t2, t0);
    v[2] = _mm_movelh_ps(t1, t3);
    v[3] = _mm_movehl_ps(t3, t1);
  }
};

// The cubic's 4 weights at offsets x (a point per lane) from the first node
// but one, differentiated `derivative` times (at most 3): interpolation.h's
// CubicWeights, operation for operation.
template <typename T>
XLABIND_AVX2_INLINE void CubicWeightsQuad(typename Quad<T>::Vec x, int32_t derivative,
                                          typename Quad<T>::Vec* w) {
  using Q = Quad<T>;
  using V = typename Q::Vec;
  const V one = Q::Splat(T(1)), three = Q::Splat(T(3));
  const V y = Q::Sub(one, x), x2 = Q::Mul(x, x);
  switch (derivative) {
    case 0: {
      const V six = Q::Splat(T(6)), x3 = Q::Mul(x2, x);
      w[0] = Q::Div(Q::Mul(Q::Mul(y, y), y), six);
      w[1] = Q::Div(Q::Add(Q::Sub(Q::Mul(three, x3), Q::Mul(six, x2)), Q::Splat(T(4))), six);
      w[3] = Q::Div(x3, six);
      w[2] = Q::Sub(Q::Sub(Q::Sub(one, w[0]), w[1]), w[3]);
      return;
    }
    case 1: {
      const V half = Q::Splat(T(0.5));
      w[0] = Q::Mul(Q::Mul(Q::Splat(T(-0.5)), y), y);
      w[1] = Q::Mul(Q::Sub(Q::Mul(three, x2), Q::Mul(Q::Splat(T(4)), x)), half);
      w[2] = Q::Mul(Q::Add(Q::Sub(Q::Mul(Q::Splat(T(2)), x), Q::Mul(three, x2)), one), half);
      w[3] = Q::Mul(x2, half);
      return;
    }
    case 2:
      w[0] = y;
      w[1] = Q::Sub(Q::Mul(three, x), Q::Splat(T(2)));
      w[2] = Q::Sub(one, Q::Mul(three, x));
      w[3] = x;
      return;
    default:  // 3
      w[0] = Q::Splat(T(-1));
      w[1] = three;
      w[2] = Q::Splat(T(-3));
      w[3] = one;
      return;
  }
}

// Below this magnitude a coordinate's nodes go through the boundary mode
// here; past it (and for NaN and infinities) the scalar path takes the point.
constexpr double kCubicModerate = 1 << 22;

// One point's nodes: per axis, the offsets of its 4 nodes (index * stride),
// through the boundary mode; and whether the last axis' 4 are consecutive
// (one vector) or not (near an edge: 4 loads).
template <int kNdim>
struct CubicNodes {
  int64_t offset[kNdim][4];
  bool consecutive;
};

// A group of 4 points: each point's nodes, and per axis the 4 weights of
// every point, stored lane-major so a point's weight is one broadcast away.
template <typename T, int kNdim>
struct CubicGroup {
  using Q = Quad<T>;
  CubicNodes<kNdim> nodes[4];
  alignas(32) T weight[kNdim][4][4];   // [axis][node][point]
  typename Q::Vec last[4];             // the last axis' weights, a vector per node

  // Fills the group of the 4 points at coords[a] + p; returns the points it
  // could place, bit `lane` for each: those whose nodes all lie inside the
  // grid (every mode's identity), and, but in constant mode (whose nodes
  // outside are not read at all), those near an edge. The others (NaN,
  // infinite or huge coordinates, constant mode's edges) are the scalar
  // path's, their weights unused.
  XLABIND_AVX2_INLINE int Load(const Geometry& g, const T* const* coords, int64_t p) {
    alignas(32) T start[kNdim][4];
    int inside[kNdim];
#pragma GCC unroll 3
    for (int a = 0; a < kNdim; ++a) {
      const typename Q::Vec c = Q::Load(coords[a] + p);
      const typename Q::Vec base = Q::Floor(c);
      const typename Q::Vec low = Q::Sub(base, Q::Splat(T(1)));
      inside[a] = Q::Within(low, Q::Splat(static_cast<T>(g.grid_shape[a] - 4)));
      Q::Store(start[a], low);
      typename Q::Vec w[4];
      CubicWeightsQuad<T>(Q::Sub(c, base), g.derivative[a], w);
      if (a == kNdim - 1) {
        for (int j = 0; j < 4; ++j) last[j] = w[j];
      }
      for (int j = 0; j < 4; ++j) Q::Store(weight[a][j], w[j]);
    }
    int placed = 0xF;
    for (int lane = 0; lane < 4; ++lane) {
      CubicNodes<kNdim>& point = nodes[lane];
      for (int a = 0; a < kNdim; ++a) {
        const int64_t stride = g.grid_strides[a];
        if (inside[a] >> lane & 1) {
          const int64_t first = static_cast<int64_t>(start[a][lane]) * stride;
          for (int j = 0; j < 4; ++j) point.offset[a][j] = first + j * stride;
          continue;
        }
        const double low = static_cast<double>(start[a][lane]);
        if (g.mode == kConstant || !(low > -kCubicModerate && low < kCubicModerate)) {
          placed &= ~(1 << lane);
          break;
        }
        for (int j = 0; j < 4; ++j) {
          int64_t index;
          FixIndex(low + j, g.grid_shape[a], g.mode, &index);
          point.offset[a][j] = index * stride;
        }
      }
      point.consecutive = inside[kNdim - 1] >> lane & 1;
    }
    return placed;
  }
};

// The 4 last-axis nodes of a row of `point`, from `row`.
template <typename T, int kNdim>
XLABIND_AVX2_INLINE typename Quad<T>::Vec LoadRow(const CubicNodes<kNdim>& point, const T* row) {
  using Q = Quad<T>;
  const int64_t* at = point.offset[kNdim - 1];
  if (point.consecutive) return Q::Load(row + at[0]);
  alignas(32) T values[4] = {row[at[0]], row[at[1]], row[at[2]], row[at[3]]};
  return Q::Load(values);
}

// Point `lane`'s weighted sum of its rows along the last axis, axis by axis
// from kAxis on: a vector of 4 partial sums, one per last-axis node.
template <typename T, int kNdim, int kAxis = 0>
XLABIND_AVX2_INLINE typename Quad<T>::Vec SumRows(const CubicGroup<T, kNdim>& group, int lane,
                                                  const T* grid) {
  using Q = Quad<T>;
  const CubicNodes<kNdim>& point = group.nodes[lane];
  if constexpr (kAxis == kNdim - 1) {
    return LoadRow<T, kNdim>(point, grid);
  } else {
    typename Q::Vec sum =
        Q::Mul(Q::Broadcast(&group.weight[kAxis][0][lane]),
               SumRows<T, kNdim, kAxis + 1>(group, lane, grid + point.offset[kAxis][0]));
    for (int j = 1; j < 4; ++j) {
      sum = Q::MulAdd(Q::Broadcast(&group.weight[kAxis][j][lane]),
                      SumRows<T, kNdim, kAxis + 1>(group, lane, grid + point.offset[kAxis][j]),
                      sum);
    }
    return sum;
  }
}

// Adds `add`, a row's 4 terms, into the row's last-axis nodes of `point`.
template <typename T, int kNdim>
XLABIND_AVX2_INLINE void AddRow(const CubicNodes<kNdim>& point, T* row,
                                typename Quad<T>::Vec add) {
  using Q = Quad<T>;
  const int64_t* at = point.offset[kNdim - 1];
  if (point.consecutive) {
    Q::Store(row + at[0], Q::Add(Q::Load(row + at[0]), add));
    return;
  }
  // One by one: near an edge two nodes may be one (mirrored, say).
  alignas(32) T terms[4];
  Q::Store(terms, add);
  for (int j = 0; j < 4; ++j) row[at[j]] += terms[j];
}

// Adds `add` (a row's 4 terms, already weighted along the last axis) times
// point `lane`'s weights along the leading axes from kAxis on, into its rows.
template <typename T, int kNdim, int kAxis = 0>
XLABIND_AVX2_INLINE void AddRows(const CubicGroup<T, kNdim>& group, int lane, T* grid,
                                 typename Quad<T>::Vec add) {
  using Q = Quad<T>;
  const CubicNodes<kNdim>& point = group.nodes[lane];
  if constexpr (kAxis == kNdim - 1) {
    AddRow<T, kNdim>(point, grid, add);
  } else {
    for (int j = 0; j < 4; ++j) {
      AddRows<T, kNdim, kAxis + 1>(group, lane, grid + point.offset[kAxis][j],
                                   Q::Mul(Q::Broadcast(&group.weight[kAxis][j][lane]), add));
    }
  }
}

// values[p] for the `count` points p of one batch element: grid is that
// element's grid, coords[a] + p the points' coordinates along axis a.
// scalar(p) computes one point the general way.
template <typename T, int kNdim, typename Scalar>
XLABIND_AVX2 void GatherCubicRunAvx2(const Geometry& g, const T* grid, const T* const* coords,
                                     T* values, int64_t count, Scalar& scalar) {
  using Q = Quad<T>;
  int64_t p = 0;
  for (; p + 4 <= count; p += 4) {
    CubicGroup<T, kNdim> group;
    const int placed = group.Load(g, coords, p);
    if (placed == 0) {
      for (int lane = 0; lane < 4; ++lane) scalar(p + lane);
      continue;
    }
    typename Q::Vec rows[4];
    for (int lane = 0; lane < 4; ++lane) {
      rows[lane] = (placed >> lane & 1) ? SumRows<T, kNdim>(group, lane, grid) : Q::Zero();
    }
    // rows[lane] holds the point's partial sum per last-axis node; transposed,
    // rows[j] holds node j's for every point, weighted by group.last[j].
    Q::Transpose(rows);
    typename Q::Vec value = Q::Mul(group.last[0], rows[0]);
    for (int j = 1; j < 4; ++j) value = Q::MulAdd(group.last[j], rows[j], value);
    Q::Store(values + p, value);
    if (placed != 0xF) {
      for (int lane = 0; lane < 4; ++lane) {
        if (!(placed >> lane & 1)) scalar(p + lane);
      }
    }
  }
  for (; p < count; ++p) scalar(p);
}

// Adds cotangents[p] times each node's weight into the grid, for the `count`
// points p of one batch element (as GatherCubicRunAvx2 reads them), one lane
// after the other, so two points sharing a node add in order. scalar(p) adds
// one point the general way.
template <typename T, int kNdim, typename Scalar>
XLABIND_AVX2 void ScatterCubicRunAvx2(const Geometry& g, T* grid, const T* const* coords,
                                      const T* cotangents, int64_t count, Scalar& scalar) {
  using Q = Quad<T>;
  int64_t p = 0;
  for (; p + 4 <= count; p += 4) {
    CubicGroup<T, kNdim> group;
    const int placed = group.Load(g, coords, p);
    if (placed == 0) {
      for (int lane = 0; lane < 4; ++lane) scalar(p + lane);
      continue;
    }
    // Node j's last-axis weight times each point's cotangent, transposed:
    // terms[lane] is the point's row of 4 terms.
    const typename Q::Vec ct = Q::Load(cotangents + p);
    typename Q::Vec terms[4];
    for (int j = 0; j < 4; ++j) terms[j] = Q::Mul(group.last[j], ct);
    Q::Transpose(terms);
    for (int lane = 0; lane < 4; ++lane) {
      if (placed >> lane & 1) {
        AddRows<T, kNdim>(group, lane, grid, terms[lane]);
      } else {
        scalar(p + lane);  // the general way, in the points' order
      }
    }
  }
  for (; p < count; ++p) scalar(p);
}

#undef XLABIND_AVX2
#undef XLABIND_AVX2_INLINE

#else  // not x86-64: never called, since CubicAvx2KernelsApply() is false.

template <typename T, int kNdim, typename Scalar>
void GatherCubicRunAvx2(const Geometry&, const T*, const T* const*, T*, int64_t count,
                        Scalar& scalar) {
  for (int64_t p = 0; p < count; ++p) scalar(p);
}

template <typename T, int kNdim, typename Scalar>
void ScatterCubicRunAvx2(const Geometry&, T*, const T* const*, const T*, int64_t count,
                         Scalar& scalar) {
  for (int64_t p = 0; p < count; ++p) scalar(p);
}

#endif

}  // namespace xlabind::map_coordinates

#endif  // XLABIND_FFI_OPS_MAP_COORDINATES_CPU_AVX2_SPLINE_KERNELS_H_
