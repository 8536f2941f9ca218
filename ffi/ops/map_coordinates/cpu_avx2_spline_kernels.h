// map_coordinates' B-spline (orders 2 to 5) CPU kernels with AVX2 and FMA,
// for runs of points of one batch element, 4 points at a time:
//   GatherSplineRunAvx2   the values;
//   ScatterSplineRunAvx2  the transpose: each value's cotangent times each
//                         node's weight, added into the grid.
// A spline of degree k touches k + 1 consecutive nodes along the grid's last
// (contiguous) axis: for a cubic exactly one vector of 4 float64s (or a
// 128-bit one of 4 float32s), for the others one or two, a partly filled
// last one read and written by narrower loads and stores. So each point's
// (k+1)^ndim nodes are (k+1)^(ndim-1) rows of vector loads (or
// read-add-writes), weighted along the leading axes by broadcasts. The
// weights are computed for 4 points at once, a point per lane (in vectors,
// but for the derivatives of degrees other than 3, which SplineWeights
// computes a lane at a time).
// Each point's nodes go through the boundary mode axis by axis (no work for
// the axes where all lie inside, most of them), so points near the edges
// take these paths too: on a 64^3 grid 14% of random points have a cubic
// node outside, and nearly half the groups of 4 such a point. Constant
// mode's edges (whose outside nodes are not read at all), NaN, infinite and
// huge coordinates, and the tail take the scalar path, point by point.
//
// Why: SplineCell sums its nodes one multiply-add each, reading each node
// alone; here the sum is a quarter to a third of the loads and multiply-adds,
// and the same share of the transpose's read-modify-writes: about twice as
// fast at every order (tools/benchmarks/main.py, the order-3 cases and
// --spline-orders; against XLABIND_NO_SIMD=1).
//
// Built with the target attribute, like cpu_avx2_kernels.h: callers check
// SplineAvx2KernelsApply() first, false without AVX2 and FMA or with
// XLABIND_NO_SIMD=1.
#ifndef XLABIND_FFI_OPS_MAP_COORDINATES_CPU_AVX2_SPLINE_KERNELS_H_
#define XLABIND_FFI_OPS_MAP_COORDINATES_CPU_AVX2_SPLINE_KERNELS_H_

#include <cstdint>

#include "xlabind/native/cpu_features.h"
#include "ffi/ops/map_coordinates/cpu_avx2_kernels.h"  // Avx2<double>, XLABIND_AVX2
#include "ffi/ops/map_coordinates/interpolation.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace xlabind::map_coordinates {

// Whether the kernels below can run call `g` here: order 2 to 5, 1 to 3
// dimensions, each grid side below 2^24 (so a float32 node index is exact),
// fewer than 2^52 grid elements (so a node's offset is exact in a double),
// and a CPU with AVX2 and FMA.
inline bool SplineAvx2KernelsApply(const Geometry& g) {
#if defined(__x86_64__)
  if (g.order < 2 || g.order > 5 || g.ndim < 1 || g.ndim > 3) return false;
  if (g.grid_size >= (int64_t{1} << 52)) return false;
  for (int a = 0; a < g.ndim; ++a) {
    if (g.grid_shape[a] >= (int64_t{1} << 24)) return false;
  }
  return native::HasAvx2Fma();
#else
  (void)g;
  return false;
#endif
}

#if defined(__x86_64__)

// Four values of T in one vector: a cubic's 4 nodes along the last axis, or
// one quantity of 4 points.
template <typename T>
struct Quad;

// Avx2<double> (cpu_avx2_kernels.h) has the loads, stores and arithmetic of
// 4 doubles already; these are what the splines add.
template <>
struct Quad<double> : Avx2<double> {
  XLABIND_AVX2_INLINE static __m256d ToDoubles(Vec v) { return v; }
  XLABIND_AVX2_INLINE static Vec Broadcast(const double* p) { return _mm256_broadcast_sd(p); }
  XLABIND_AVX2_INLINE static Vec Zero() { return _mm256_setzero_pd(); }
  // The first `lanes` (1 to 3) values only: the others read as 0 and are
  // neither read nor written (no fault past the end of the grid). Plain
  // narrower loads and stores: AVX's masked ones are slow on some CPUs
  // (AMD's masked store is microcoded).
  XLABIND_AVX2_INLINE static Vec LoadFirst(const double* p, int lanes) {
    const __m128d low = lanes == 1 ? _mm_load_sd(p) : _mm_loadu_pd(p);
    const __m128d high = lanes == 3 ? _mm_load_sd(p + 2) : _mm_setzero_pd();
    return _mm256_insertf128_pd(_mm256_castpd128_pd256(low), high, 1);
  }
  XLABIND_AVX2_INLINE static void StoreFirst(double* p, int lanes, Vec v) {
    const __m128d low = _mm256_castpd256_pd128(v);
    if (lanes == 1) {
      _mm_store_sd(p, low);
      return;
    }
    _mm_storeu_pd(p, low);
    if (lanes == 3) _mm_store_sd(p + 2, _mm256_extractf128_pd(v, 1));
  }
  XLABIND_AVX2_INLINE static Vec Add(Vec a, Vec b) { return _mm256_add_pd(a, b); }
  XLABIND_AVX2_INLINE static Vec Abs(Vec a) { return _mm256_andnot_pd(_mm256_set1_pd(-0.0), a); }
  XLABIND_AVX2_INLINE static Vec Div(Vec a, Vec b) { return _mm256_div_pd(a, b); }
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

// 4 floats in a 128-bit vector (Avx2<float> holds 8 in 256 bits).
template <>
struct Quad<float> {
  using Vec = __m128;
  XLABIND_AVX2_INLINE static __m256d ToDoubles(Vec v) { return _mm256_cvtps_pd(v); }
  XLABIND_AVX2_INLINE static Vec Load(const float* p) { return _mm_loadu_ps(p); }
  XLABIND_AVX2_INLINE static void Store(float* p, Vec v) { _mm_storeu_ps(p, v); }
  XLABIND_AVX2_INLINE static Vec LoadFirst(const float* p, int lanes) {
    if (lanes == 1) return _mm_load_ss(p);
    const __m128 two = _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(p)));
    return lanes == 2 ? two : _mm_movelh_ps(two, _mm_load_ss(p + 2));
  }
  XLABIND_AVX2_INLINE static void StoreFirst(float* p, int lanes, Vec v) {
    if (lanes == 1) {
      _mm_store_ss(p, v);
      return;
    }
    _mm_store_sd(reinterpret_cast<double*>(p), _mm_castps_pd(v));
    if (lanes == 3) _mm_store_ss(p + 2, _mm_movehl_ps(v, v));
  }
  XLABIND_AVX2_INLINE static Vec Splat(float x) { return _mm_set1_ps(x); }
  XLABIND_AVX2_INLINE static Vec Broadcast(const float* p) { return _mm_broadcast_ss(p); }
  XLABIND_AVX2_INLINE static Vec Zero() { return _mm_setzero_ps(); }
  XLABIND_AVX2_INLINE static Vec Floor(Vec x) {
    return _mm_round_ps(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  }
  XLABIND_AVX2_INLINE static int Within(Vec x, Vec highest) {
    return _mm_movemask_ps(
        _mm_and_ps(_mm_cmp_ps(x, Zero(), _CMP_GE_OQ), _mm_cmp_ps(x, highest, _CMP_LE_OQ)));
  }
  XLABIND_AVX2_INLINE static Vec Add(Vec a, Vec b) { return _mm_add_ps(a, b); }
  XLABIND_AVX2_INLINE static Vec Abs(Vec a) { return _mm_andnot_ps(_mm_set1_ps(-0.0f), a); }
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
// but one, differentiated `derivative` times (0 to 3): interpolation.h's
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

// Piece `piece` (1 nearest the centre) of the centred B-spline of degree
// kOrder (2, 4 or 5) at u = |t|, as ffi/ops/bspline/bspline.h's BSpline
// writes it.
template <typename T, int kOrder>
XLABIND_AVX2_INLINE typename Quad<T>::Vec BSplinePieceQuad(int piece, typename Quad<T>::Vec u) {
  using Q = Quad<T>;
  using V = typename Q::Vec;
  const V u2 = Q::Mul(u, u);
  if constexpr (kOrder == 2) {
    if (piece == 1) return Q::Sub(Q::Splat(T(0.75)), u2);
    const V v = Q::Sub(Q::Splat(T(1.5)), u);
    return Q::Div(Q::Mul(v, v), Q::Splat(T(2)));
  } else if constexpr (kOrder == 4) {
    if (piece == 1) {
      return Q::Add(Q::Splat(T(115) / T(192)),
                    Q::Mul(u2, Q::Sub(Q::Div(u2, Q::Splat(T(4))), Q::Splat(T(5) / T(8)))));
    }
    if (piece == 2) {
      V r = Q::Sub(Q::Splat(T(80)), Q::Mul(Q::Splat(T(16)), u));
      r = Q::Add(Q::Splat(T(-120)), Q::Mul(u, r));
      r = Q::Add(Q::Splat(T(20)), Q::Mul(u, r));
      r = Q::Add(Q::Splat(T(55)), Q::Mul(u, r));
      return Q::Div(r, Q::Splat(T(96)));
    }
    const V v = Q::Sub(Q::Splat(T(2.5)), u), v2 = Q::Mul(v, v);
    return Q::Div(Q::Mul(v2, v2), Q::Splat(T(24)));
  } else {  // 5
    if (piece == 1) {
      const V inner = Q::Sub(Q::Splat(T(0.25)), Q::Div(u, Q::Splat(T(12))));
      return Q::Add(Q::Splat(T(11) / T(20)),
                    Q::Mul(u2, Q::Add(Q::Splat(T(-0.5)), Q::Mul(u2, inner))));
    }
    if (piece == 2) {
      V r = Q::Add(Q::Splat(T(-3) / T(8)), Q::Div(u, Q::Splat(T(24))));
      r = Q::Add(Q::Splat(T(5) / T(4)), Q::Mul(u, r));
      r = Q::Add(Q::Splat(T(-7) / T(4)), Q::Mul(u, r));
      r = Q::Add(Q::Splat(T(5) / T(8)), Q::Mul(u, r));
      return Q::Add(Q::Splat(T(17) / T(40)), Q::Mul(u, r));
    }
    const V v = Q::Sub(Q::Splat(T(3)), u), v2 = Q::Mul(v, v);
    return Q::Div(Q::Mul(Q::Mul(v2, v2), v), Q::Splat(T(120)));
  }
}

// The values (not derivatives) of a degree-kOrder spline's weights at
// offsets x (a point per lane), as SplineWeights places them: node j sits
// |x + k/2 - j| away, always on the same piece of the B-spline, so no lane
// needs a branch; the last weight from its piece too, as there.
template <typename T, int kOrder>
XLABIND_AVX2_INLINE void SplineValueWeightsQuad(typename Quad<T>::Vec x, typename Quad<T>::Vec* w) {
  using Q = Quad<T>;
  constexpr int kHalf = kOrder / 2;
  for (int j = 0; j <= kOrder; ++j) {
    const typename Q::Vec t = Q::Sub(Q::Add(x, Q::Splat(T(kHalf))), Q::Splat(T(j)));
    const typename Q::Vec u = Q::Abs(t);
    // Odd degrees: x in [0, 1), u in [d, d + 1) or (d - 1, d]; even: x in
    // [-1/2, 1/2), u in [d - 1/2, d + 1/2), d being j's distance from the centre.
    const int piece = (kOrder & 1) ? (j <= kHalf ? kHalf - j + 1 : j - kHalf)
                                   : (j < kHalf ? kHalf - j : j - kHalf) + 1;
    w[j] = BSplinePieceQuad<T, kOrder>(piece, u);
  }
}

// Below this magnitude a coordinate's nodes go through the boundary mode
// here; past it (and for NaN and infinities) the scalar path takes the point.
constexpr double kSplineModerate = 1 << 22;

// The vectors of 4 that hold a row's k + 1 nodes along the last axis.
constexpr int ChunksOf(int nodes) { return (nodes + 3) / 4; }

// One point's nodes. Interior (every node inside the grid, most points):
// the offset of its first node, the others a stride apart along each axis.
// Otherwise per axis the offsets of its k + 1 nodes (index * stride),
// through the boundary mode, and whether the last axis' are consecutive
// (vector loads) or not (near an edge: one load each).
template <int kNodes, int kNdim>
struct SplineNodes {
  bool interior;
  bool consecutive;
  int64_t first;
  int64_t offset[kNdim][kNodes];
};

// A group of 4 points of a degree-kOrder spline: each point's nodes, and per
// axis the weights of every point, stored lane-major so a point's weight is
// one broadcast away.
template <typename T, int kOrder, int kNdim>
struct SplineGroup {
  using Q = Quad<T>;
  static constexpr int kNodes = kOrder + 1;
  static constexpr int kChunks = ChunksOf(kNodes);
  SplineNodes<kNodes, kNdim> nodes[4];
  int64_t stride[kNdim];                   // the grid's, in elements
  alignas(32) T weight[kNdim][kNodes][4];  // [axis][node][point]
  typename Q::Vec last[kChunks * 4];       // the last axis' weights per node; 0 past kNodes

  // Fills the group of the 4 points at coords[a] + p; returns the points it
  // could place, bit `lane` for each: those whose nodes all lie inside the
  // grid (every mode's identity), and, but in constant mode (whose nodes
  // outside are not read at all), those near an edge. The others (NaN,
  // infinite or huge coordinates, constant mode's edges) are the scalar
  // path's, their weights unused. SciPy's node placement, as AxisNodes.
  XLABIND_AVX2_INLINE int Load(const Geometry& g, const T* const* coords, int64_t p) {
    alignas(32) T start[kNdim][4];
    int inside[kNdim];
    // Each lane's first node offset, for the interior points: in doubles,
    // exact since every partial sum is an integer below 2^52.
    __m256d first_offset = _mm256_setzero_pd();
#pragma GCC unroll 3
    for (int a = 0; a < kNdim; ++a) {
      PrefetchStream(coords[a] + p);
      const typename Q::Vec c = Q::Load(coords[a] + p);
      const typename Q::Vec base = Q::Floor((kOrder & 1) ? c : Q::Add(c, Q::Splat(T(0.5))));
      const typename Q::Vec low = Q::Sub(base, Q::Splat(T(kOrder / 2)));
      inside[a] = Q::Within(low, Q::Splat(static_cast<T>(g.grid_shape[a] - kNodes)));
      Q::Store(start[a], low);
      first_offset = _mm256_fmadd_pd(
          Q::ToDoubles(low), _mm256_set1_pd(static_cast<double>(g.grid_strides[a])), first_offset);
      const typename Q::Vec x = Q::Sub(c, base);
      bool done = false;
      if constexpr (kOrder == 3) {
        if (g.derivative[a] <= 3) {
          typename Q::Vec w[4];
          CubicWeightsQuad<T>(x, g.derivative[a], w);
          for (int j = 0; j < 4; ++j) Q::Store(weight[a][j], w[j]);
          done = true;
        }
      } else {
        if (g.derivative[a] == 0) {
          typename Q::Vec w[kNodes];
          SplineValueWeightsQuad<T, kOrder>(x, w);
          for (int j = 0; j < kNodes; ++j) Q::Store(weight[a][j], w[j]);
          done = true;
        }
      }
      if (!done) {  // the derivatives of the other degrees, a lane at a time
        alignas(32) T offsets[4];
        Q::Store(offsets, x);
        for (int lane = 0; lane < 4; ++lane) {
          T w[kNodes];
          SplineWeights<T, kOrder>(offsets[lane], g.derivative[a], w);
          for (int j = 0; j < kNodes; ++j) weight[a][j][lane] = w[j];
        }
      }
    }
    for (int j = 0; j < kChunks * 4; ++j) {
      last[j] = j < kNodes ? Q::Load(weight[kNdim - 1][j]) : Q::Zero();
    }
    int interior = 0xF;
    for (int a = 0; a < kNdim; ++a) {
      stride[a] = g.grid_strides[a];
      interior &= inside[a];
    }
    // To int64 by the bits of x + 2^52 (AVX2 has no such conversion); lanes
    // outside get garbage, unused.
    const __m256d magic = _mm256_set1_pd(4503599627370496.0);  // 2^52
    alignas(32) int64_t firsts[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(firsts),
                       _mm256_sub_epi64(_mm256_castpd_si256(_mm256_add_pd(first_offset, magic)),
                                        _mm256_castpd_si256(magic)));
    int placed = 0xF;
    for (int lane = 0; lane < 4; ++lane) {
      SplineNodes<kNodes, kNdim>& point = nodes[lane];
      point.interior = interior >> lane & 1;
      if (point.interior) {  // no per-node offsets to write or read back
        point.first = firsts[lane];
        point.consecutive = true;
        continue;
      }
      for (int a = 0; a < kNdim; ++a) {
        const int64_t stride = g.grid_strides[a];
        if (inside[a] >> lane & 1) {
          const int64_t first = static_cast<int64_t>(start[a][lane]) * stride;
          for (int j = 0; j < kNodes; ++j) point.offset[a][j] = first + j * stride;
          continue;
        }
        const double low = static_cast<double>(start[a][lane]);
        if (g.mode == kConstant || !(low > -kSplineModerate && low < kSplineModerate)) {
          placed &= ~(1 << lane);
          break;
        }
        for (int j = 0; j < kNodes; ++j) {
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

// A row's last-axis nodes, 4 to a vector, the last vector's lanes past kNodes 0.
template <typename T, int kNodes>
struct Row {
  typename Quad<T>::Vec chunk[ChunksOf(kNodes)];
};

// kNodes consecutive last-axis nodes from `first`.
template <typename T, int kNodes>
XLABIND_AVX2_INLINE Row<T, kNodes> LoadConsecutive(const T* first) {
  using Q = Quad<T>;
  Row<T, kNodes> out;
#pragma GCC unroll 2
  for (int c = 0; c < ChunksOf(kNodes); ++c) {
    const int lanes = kNodes - 4 * c;
    out.chunk[c] = lanes >= 4 ? Q::Load(first + 4 * c) : Q::LoadFirst(first + 4 * c, lanes);
  }
  return out;
}

// The last-axis nodes of a row of `point`, from `row`.
template <typename T, int kNodes, int kNdim>
XLABIND_AVX2_INLINE Row<T, kNodes> LoadRow(const SplineNodes<kNodes, kNdim>& point, const T* row) {
  using Q = Quad<T>;
  constexpr int kChunks = ChunksOf(kNodes);
  const int64_t* at = point.offset[kNdim - 1];
  if (point.consecutive) return LoadConsecutive<T, kNodes>(row + at[0]);
  Row<T, kNodes> out;
  alignas(32) T values[kChunks * 4] = {};
  for (int j = 0; j < kNodes; ++j) values[j] = row[at[j]];
  for (int c = 0; c < kChunks; ++c) out.chunk[c] = Q::Load(values + 4 * c);
  return out;
}

// Point `lane`'s weighted sum of its rows along the last axis, axis by axis
// from kAxis on: per last-axis node, a partial sum. `at` is where the rows
// start: an interior point's first node (kInterior: rows a grid stride
// apart), else the grid (rows at the point's offsets).
template <typename T, int kOrder, int kNdim, bool kInterior, int kAxis = 0>
XLABIND_AVX2_INLINE Row<T, kOrder + 1> SumRowsFrom(const SplineGroup<T, kOrder, kNdim>& group,
                                                   int lane, const T* at) {
  using Q = Quad<T>;
  constexpr int kNodes = kOrder + 1, kChunks = ChunksOf(kNodes);
  const SplineNodes<kNodes, kNdim>& point = group.nodes[lane];
  if constexpr (kAxis == kNdim - 1) {
    if constexpr (kInterior) return LoadConsecutive<T, kNodes>(at);
    return LoadRow<T, kNodes, kNdim>(point, at);
  } else {
    Row<T, kNodes> sum;
#pragma GCC unroll 2
    for (int c = 0; c < kChunks; ++c) sum.chunk[c] = Q::Zero();
#pragma GCC unroll 6
    for (int j = 0; j < kNodes; ++j) {
      const typename Q::Vec w = Q::Broadcast(&group.weight[kAxis][j][lane]);
      const T* next = kInterior ? at + j * group.stride[kAxis] : at + point.offset[kAxis][j];
      const Row<T, kNodes> rows =
          SumRowsFrom<T, kOrder, kNdim, kInterior, kAxis + 1>(group, lane, next);
#pragma GCC unroll 2
      for (int c = 0; c < kChunks; ++c) sum.chunk[c] = Q::MulAdd(w, rows.chunk[c], sum.chunk[c]);
    }
    return sum;
  }
}

// Point `lane`'s weighted sum of its rows along the last axis.
template <typename T, int kOrder, int kNdim>
XLABIND_AVX2_INLINE Row<T, kOrder + 1> SumRows(const SplineGroup<T, kOrder, kNdim>& group, int lane,
                                               const T* grid) {
  const auto& point = group.nodes[lane];
  if (point.interior) return SumRowsFrom<T, kOrder, kNdim, true>(group, lane, grid + point.first);
  return SumRowsFrom<T, kOrder, kNdim, false>(group, lane, grid);
}

// Adds w times `add`, a row's terms, into the row's last-axis nodes of
// `point` (w: the row's weight along the axis before the last, broadcast;
// multiplied in with the add).
template <typename T, int kNodes>
XLABIND_AVX2_INLINE void AddConsecutive(T* first, typename Quad<T>::Vec w,
                                        const Row<T, kNodes>& add) {
  using Q = Quad<T>;
#pragma GCC unroll 2
  for (int c = 0; c < ChunksOf(kNodes); ++c) {
    T* to = first + 4 * c;
    const int lanes = kNodes - 4 * c;
    if (lanes >= 4) {
      Q::Store(to, Q::MulAdd(w, add.chunk[c], Q::Load(to)));
    } else {
      Q::StoreFirst(to, lanes, Q::MulAdd(w, add.chunk[c], Q::LoadFirst(to, lanes)));
    }
  }
}

template <typename T, int kNodes, int kNdim>
XLABIND_AVX2_INLINE void AddRow(const SplineNodes<kNodes, kNdim>& point, T* row,
                                typename Quad<T>::Vec w, const Row<T, kNodes>& add) {
  using Q = Quad<T>;
  constexpr int kChunks = ChunksOf(kNodes);
  const int64_t* at = point.offset[kNdim - 1];
  if (point.consecutive) {
    AddConsecutive<T, kNodes>(row + at[0], w, add);
    return;
  }
  // One by one: near an edge two nodes may be one (mirrored, say).
  alignas(32) T terms[kChunks * 4];
  for (int c = 0; c < kChunks; ++c) Q::Store(terms + 4 * c, Q::Mul(w, add.chunk[c]));
  for (int j = 0; j < kNodes; ++j) row[at[j]] += terms[j];
}

// AddRow, or for an interior point (rows start at `row`) AddConsecutive.
template <typename T, int kNodes, int kNdim, bool kInterior>
XLABIND_AVX2_INLINE void AddRowOf(const SplineNodes<kNodes, kNdim>& point, T* row,
                                  typename Quad<T>::Vec w, const Row<T, kNodes>& add) {
  if constexpr (kInterior) {
    AddConsecutive<T, kNodes>(row, w, add);
  } else {
    AddRow<T, kNodes, kNdim>(point, row, w, add);
  }
}

// Adds `add` (a row's terms, already weighted along the last axis) times
// point `lane`'s weights along the leading axes from kAxis on, into its rows
// from `at` (as SumRowsFrom reads them).
template <typename T, int kOrder, int kNdim, bool kInterior, int kAxis = 0>
XLABIND_AVX2_INLINE void AddRowsFrom(const SplineGroup<T, kOrder, kNdim>& group, int lane, T* at,
                                     const Row<T, kOrder + 1>& add) {
  using Q = Quad<T>;
  constexpr int kNodes = kOrder + 1, kChunks = ChunksOf(kNodes);
  const SplineNodes<kNodes, kNdim>& point = group.nodes[lane];
  if constexpr (kAxis == kNdim - 1) {  // 1-D
    AddRowOf<T, kNodes, kNdim, kInterior>(point, at, Q::Splat(T(1)), add);
  } else {
#pragma GCC unroll 6
    for (int j = 0; j < kNodes; ++j) {
      const typename Q::Vec w = Q::Broadcast(&group.weight[kAxis][j][lane]);
      T* next = kInterior ? at + j * group.stride[kAxis] : at + point.offset[kAxis][j];
      if constexpr (kAxis == kNdim - 2) {
        AddRowOf<T, kNodes, kNdim, kInterior>(point, next, w, add);
      } else {
        Row<T, kNodes> scaled;
#pragma GCC unroll 2
        for (int c = 0; c < kChunks; ++c) scaled.chunk[c] = Q::Mul(w, add.chunk[c]);
        AddRowsFrom<T, kOrder, kNdim, kInterior, kAxis + 1>(group, lane, next, scaled);
      }
    }
  }
}

// Adds `add` times point `lane`'s weights along the leading axes into its rows.
template <typename T, int kOrder, int kNdim>
XLABIND_AVX2_INLINE void AddRows(const SplineGroup<T, kOrder, kNdim>& group, int lane, T* grid,
                                 const Row<T, kOrder + 1>& add) {
  const auto& point = group.nodes[lane];
  if (point.interior) {
    AddRowsFrom<T, kOrder, kNdim, true>(group, lane, grid + point.first, add);
  } else {
    AddRowsFrom<T, kOrder, kNdim, false>(group, lane, grid, add);
  }
}

// values[p] for the `count` points p of one batch element: grid is that
// element's grid, coords[a] + p the points' coordinates along axis a.
// scalar(p) computes one point the general way.
template <typename T, int kOrder, int kNdim, typename Scalar>
XLABIND_AVX2 void GatherSplineRunAvx2(const Geometry& g, const T* grid, const T* const* coords,
                                      T* values, int64_t count, Scalar& scalar) {
  using Q = Quad<T>;
  constexpr int kNodes = kOrder + 1, kChunks = ChunksOf(kNodes);
  int64_t p = 0;
  for (; p + 4 <= count; p += 4) {
    SplineGroup<T, kOrder, kNdim> group;
    const int placed = group.Load(g, coords, p);
    if (placed == 0) {
      for (int lane = 0; lane < 4; ++lane) scalar(p + lane);
      continue;
    }
    Row<T, kNodes> rows[4];
    for (int lane = 0; lane < 4; ++lane) {
      if (placed >> lane & 1) {
        rows[lane] = SumRows<T, kOrder, kNdim>(group, lane, grid);
      } else {
        for (int c = 0; c < kChunks; ++c) rows[lane].chunk[c] = Q::Zero();
      }
    }
    // rows[lane] holds the point's partial sum per last-axis node; each
    // chunk transposed holds node j's for every point, weighted by last[j].
    typename Q::Vec value = Q::Zero();
    for (int c = 0; c < kChunks; ++c) {
      typename Q::Vec column[4] = {rows[0].chunk[c], rows[1].chunk[c], rows[2].chunk[c],
                                   rows[3].chunk[c]};
      Q::Transpose(column);
      for (int j = 0; j < 4 && 4 * c + j < kNodes; ++j) {
        value = Q::MulAdd(group.last[4 * c + j], column[j], value);
      }
    }
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
// points p of one batch element (as GatherSplineRunAvx2 reads them), one
// lane after the other, so two points sharing a node add in order.
// scalar(p) adds one point the general way.
template <typename T, int kOrder, int kNdim, typename Scalar>
XLABIND_AVX2 void ScatterSplineRunAvx2(const Geometry& g, T* grid, const T* const* coords,
                                       const T* cotangents, int64_t count, Scalar& scalar) {
  using Q = Quad<T>;
  constexpr int kNodes = kOrder + 1, kChunks = ChunksOf(kNodes);
  int64_t p = 0;
  for (; p + 4 <= count; p += 4) {
    SplineGroup<T, kOrder, kNdim> group;
    const int placed = group.Load(g, coords, p);
    if (placed == 0) {
      for (int lane = 0; lane < 4; ++lane) scalar(p + lane);
      continue;
    }
    // Node j's last-axis weight times each point's cotangent, transposed a
    // chunk at a time: terms[lane] is the point's row of terms.
    PrefetchStream(cotangents + p);
    const typename Q::Vec ct = Q::Load(cotangents + p);
    Row<T, kNodes> terms[4];
    for (int c = 0; c < kChunks; ++c) {
      typename Q::Vec column[4];
      for (int j = 0; j < 4; ++j) column[j] = Q::Mul(group.last[4 * c + j], ct);
      Q::Transpose(column);
      for (int lane = 0; lane < 4; ++lane) terms[lane].chunk[c] = column[lane];
    }
    for (int lane = 0; lane < 4; ++lane) {
      if (placed >> lane & 1) {
        AddRows<T, kOrder, kNdim>(group, lane, grid, terms[lane]);
      } else {
        scalar(p + lane);  // the general way, in the points' order
      }
    }
  }
  for (; p < count; ++p) scalar(p);
}

#else  // not x86-64: never called, since SplineAvx2KernelsApply() is false.

template <typename T, int kOrder, int kNdim, typename Scalar>
void GatherSplineRunAvx2(const Geometry&, const T*, const T* const*, T*, int64_t count,
                         Scalar& scalar) {
  for (int64_t p = 0; p < count; ++p) scalar(p);
}

template <typename T, int kOrder, int kNdim, typename Scalar>
void ScatterSplineRunAvx2(const Geometry&, T*, const T* const*, const T*, int64_t count,
                          Scalar& scalar) {
  for (int64_t p = 0; p < count; ++p) scalar(p);
}

#endif

}  // namespace xlabind::map_coordinates

#endif  // XLABIND_FFI_OPS_MAP_COORDINATES_CPU_AVX2_SPLINE_KERNELS_H_
