// map_coordinates' order-1 and order-0 CPU kernels with AVX2 and FMA, for
// runs of points of one batch element, 4 (float64) or 8 (float32) points at
// a time:
//   GatherRunAvx2          the values: the 2^ndim nodes of each cell, a
//                          last-axis pair per load (LoadPairs), summed
//                          with fused multiply-adds;
//   ScatterRunAvx2         the transpose: each node's weight in vectors, the
//                          adds into the grid one by one (lanes may share
//                          nodes);
//   Gather/ScatterNearestRunAvx2  order 0: each point's one node, its
//                          coordinates rounded in vectors.
// Points whose cell lies inside the grid (where every boundary mode is the
// identity) take these paths; a group of lanes with any other point goes to
// the scalar path, lane by lane.
//
// Why: the scalar loops spend most of their time on per-point index
// arithmetic and issue one point's loads at a time; a vector group issues
// them for several points, which keeps more of them in flight. This is what
// makes the gather faster than XLA's fused one on the benchmark's 2-core
// machines (tools/benchmarks/main.py, the map_coordinates cases).
//
// Built with the target attribute, so the library still runs on any x86-64
// (and builds elsewhere): callers check Avx2KernelsApply() first, which is
// false without AVX2 and FMA, or with XLABIND_NO_SIMD=1.
#ifndef XLABIND_FFI_OPS_MAP_COORDINATES_CPU_AVX2_KERNELS_H_
#define XLABIND_FFI_OPS_MAP_COORDINATES_CPU_AVX2_KERNELS_H_

#include <cstdint>
#include <limits>

#include "xlabind/native/cpu_features.h"
#include "ffi/ops/map_coordinates/interpolation.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace xlabind::map_coordinates {

// Whether the kernels below can run call `g` here: order 0 or 1, 1 to 3
// dimensions, weights differentiated at most once per axis (order 0: never),
// offsets that fit the 32-bit indices of the gather instructions, and a CPU
// with AVX2 and FMA.
inline bool Avx2KernelsApply(const Geometry& g) {
#if defined(__x86_64__)
  if (g.order > 1 || g.ndim < 1 || g.ndim > 3) return false;
  if (g.grid_size > std::numeric_limits<int32_t>::max()) return false;
  if (g.grid_strides[g.ndim - 1] != 1) return false;  // a cell's last-axis pair is adjacent
  for (int a = 0; a < g.ndim; ++a) {
    if (g.derivative[a] > g.order) return false;  // order 0: its value alone
  }
  return native::HasAvx2Fma();
#else
  (void)g;
  return false;
#endif
}

#if defined(__x86_64__)

// For the kernels here and in cpu_avx2_spline_kernels.h, which includes this.
#define XLABIND_AVX2 __attribute__((target("avx2,fma")))
#define XLABIND_AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) inline

// Asks for the line a few groups past `at` in a stream read in order (the
// coordinates, the cotangents). The hardware's own stream prefetch fell
// behind beside the grid's random reads: in a profile of the order-3
// gather (64^3 float64, 2^20 points) the coordinates' load was the hottest
// instruction, and asking ahead made the call 1.2x faster. By address, not
// by pointer: past the array's end is not an object (a prefetch never
// faults).
template <typename T>
XLABIND_AVX2_INLINE void PrefetchStream(const T* at) {
  constexpr uintptr_t kAheadBytes = 512;
  _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(at) + kAheadBytes),
               _MM_HINT_T0);
}

// One vector of points' worth of each operation, per element type.
template <typename T>
struct Avx2;

template <>
struct Avx2<double> {
  static constexpr int kLanes = 4;
  static constexpr int kAllInside = 0xF;
  using Vec = __m256d;
  using Index = __m128i;
  XLABIND_AVX2_INLINE static Vec Load(const double* p) { return _mm256_loadu_pd(p); }
  XLABIND_AVX2_INLINE static void Store(double* p, Vec v) { _mm256_storeu_pd(p, v); }
  XLABIND_AVX2_INLINE static Vec Splat(double x) { return _mm256_set1_pd(x); }
  XLABIND_AVX2_INLINE static Vec Floor(Vec x) {
    return _mm256_round_pd(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  }
  // Lanes with 0 <= lower <= highest as bits; NaN lanes are outside.
  XLABIND_AVX2_INLINE static int Within(Vec lower, Vec highest) {
    const Vec ok = _mm256_and_pd(_mm256_cmp_pd(lower, _mm256_setzero_pd(), _CMP_GE_OQ),
                                 _mm256_cmp_pd(lower, highest, _CMP_LE_OQ));
    return _mm256_movemask_pd(ok);
  }
  XLABIND_AVX2_INLINE static void StoreIndex(int32_t* p, Index i) {
    _mm_store_si128(reinterpret_cast<__m128i*>(p), i);
  }
  // A cell's offset, summed axis by axis as offset + lower * stride. In
  // float64 every partial sum is an integer below 2^31, so exact: fused
  // multiply-adds instead of the slower integer multiplies.
  using Offset = Vec;
  XLABIND_AVX2_INLINE static Offset ZeroOffset() { return _mm256_setzero_pd(); }
  XLABIND_AVX2_INLINE static Offset AddScaled(Offset offset, Vec lower, int32_t stride) {
    return _mm256_fmadd_pd(lower, _mm256_set1_pd(stride), offset);
  }
  // Lanes whose offset is out of range (outside the grid) are not used.
  XLABIND_AVX2_INLINE static Index ToIndex(Offset offset) { return _mm256_cvttpd_epi32(offset); }
  XLABIND_AVX2_INLINE static Vec Gather(const double* base, Index offset) {
    return _mm256_i32gather_pd(base, offset, 8);
  }
  // Each lane's two nodes base[first] and base[first + 1] (a cell's last
  // axis), as two vectors: one 16-byte load a lane, not two gathered
  // elements (AMD's gathers are slow).
  XLABIND_AVX2_INLINE static void LoadPairs(const double* base, Index, const int32_t* first,
                                            Vec* lower, Vec* upper) {
    const __m128d p0 = _mm_loadu_pd(base + first[0]), p1 = _mm_loadu_pd(base + first[1]);
    const __m128d p2 = _mm_loadu_pd(base + first[2]), p3 = _mm_loadu_pd(base + first[3]);
    const Vec t02 = _mm256_insertf128_pd(_mm256_castpd128_pd256(p0), p2, 1);
    const Vec t13 = _mm256_insertf128_pd(_mm256_castpd128_pd256(p1), p3, 1);
    *lower = _mm256_unpacklo_pd(t02, t13);
    *upper = _mm256_unpackhi_pd(t02, t13);
  }
  // p[0] += lower; p[1] += upper, as two scalar adds would.
  XLABIND_AVX2_INLINE static void AddPair(double* p, double lower, double upper) {
    _mm_storeu_pd(p, _mm_add_pd(_mm_loadu_pd(p), _mm_set_pd(upper, lower)));
  }
  // x rounded half up, given lower = floor(x): lower + (x - lower >= 1/2),
  // exact (x - lower is), which for x >= 0 is lax.round's half away from zero.
  XLABIND_AVX2_INLINE static Vec RoundUpFrom(Vec x, Vec lower) {
    const Vec up = _mm256_cmp_pd(_mm256_sub_pd(x, lower), _mm256_set1_pd(0.5), _CMP_GE_OQ);
    return _mm256_add_pd(lower, _mm256_and_pd(up, _mm256_set1_pd(1.0)));
  }
  XLABIND_AVX2_INLINE static Vec Sub(Vec a, Vec b) { return _mm256_sub_pd(a, b); }
  XLABIND_AVX2_INLINE static Vec Mul(Vec a, Vec b) { return _mm256_mul_pd(a, b); }
  XLABIND_AVX2_INLINE static Vec MulAdd(Vec a, Vec b, Vec c) { return _mm256_fmadd_pd(a, b, c); }
};

template <>
struct Avx2<float> {
  static constexpr int kLanes = 8;
  static constexpr int kAllInside = 0xFF;
  using Vec = __m256;
  using Index = __m256i;
  XLABIND_AVX2_INLINE static Vec Load(const float* p) { return _mm256_loadu_ps(p); }
  XLABIND_AVX2_INLINE static void Store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
  XLABIND_AVX2_INLINE static Vec Splat(float x) { return _mm256_set1_ps(x); }
  XLABIND_AVX2_INLINE static Vec Floor(Vec x) {
    return _mm256_round_ps(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  }
  XLABIND_AVX2_INLINE static int Within(Vec lower, Vec highest) {
    const Vec ok = _mm256_and_ps(_mm256_cmp_ps(lower, _mm256_setzero_ps(), _CMP_GE_OQ),
                                 _mm256_cmp_ps(lower, highest, _CMP_LE_OQ));
    return _mm256_movemask_ps(ok);
  }
  XLABIND_AVX2_INLINE static void StoreIndex(int32_t* p, Index i) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(p), i);
  }
  // In integers: float32 holds integers exactly only up to 2^24.
  using Offset = Index;
  XLABIND_AVX2_INLINE static Offset ZeroOffset() { return _mm256_setzero_si256(); }
  XLABIND_AVX2_INLINE static Offset AddScaled(Offset offset, Vec lower, int32_t stride) {
    return _mm256_add_epi32(
        offset, _mm256_mullo_epi32(_mm256_cvttps_epi32(lower), _mm256_set1_epi32(stride)));
  }
  XLABIND_AVX2_INLINE static Index ToIndex(Offset offset) { return offset; }
  XLABIND_AVX2_INLINE static Vec Gather(const float* base, Index offset) {
    return _mm256_i32gather_ps(base, offset, 4);
  }
  // Each lane's two nodes, gathered as one 8-byte element a lane (half the
  // elements of two float gathers), then split into the two vectors.
  XLABIND_AVX2_INLINE static void LoadPairs(const float* base, Index offset, const int32_t*,
                                            Vec* lower, Vec* upper) {
    const double* pairs = reinterpret_cast<const double*>(base);
    const __m256 low4 = _mm256_castpd_ps(
        _mm256_i32gather_pd(pairs, _mm256_castsi256_si128(offset), 4));  // lanes 0-3
    const __m256 high4 = _mm256_castpd_ps(
        _mm256_i32gather_pd(pairs, _mm256_extracti128_si256(offset, 1), 4));  // lanes 4-7
    // Per 128-bit half: lanes 0, 1, 4, 5 then 2, 3, 6, 7; the quarters reordered.
    const __m256 even = _mm256_shuffle_ps(low4, high4, _MM_SHUFFLE(2, 0, 2, 0));
    const __m256 odd = _mm256_shuffle_ps(low4, high4, _MM_SHUFFLE(3, 1, 3, 1));
    *lower =
        _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(even), _MM_SHUFFLE(3, 1, 2, 0)));
    *upper =
        _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(odd), _MM_SHUFFLE(3, 1, 2, 0)));
  }
  XLABIND_AVX2_INLINE static void AddPair(float* p, float lower, float upper) {
    __m128i* pair = reinterpret_cast<__m128i*>(p);  // 8 bytes, unaligned: movq
    const __m128 sum =
        _mm_add_ps(_mm_castsi128_ps(_mm_loadl_epi64(pair)), _mm_setr_ps(lower, upper, 0.0f, 0.0f));
    _mm_storel_epi64(pair, _mm_castps_si128(sum));
  }
  XLABIND_AVX2_INLINE static Vec RoundUpFrom(Vec x, Vec lower) {
    const Vec up = _mm256_cmp_ps(_mm256_sub_ps(x, lower), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
    return _mm256_add_ps(lower, _mm256_and_ps(up, _mm256_set1_ps(1.0f)));
  }
  XLABIND_AVX2_INLINE static Vec Sub(Vec a, Vec b) { return _mm256_sub_ps(a, b); }
  XLABIND_AVX2_INLINE static Vec Mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
  XLABIND_AVX2_INLINE static Vec MulAdd(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
};

// The weighted sum of a group's cells, axis by axis from kAxis on: for each
// axis, weight[0] times the lower half plus weight[1] times the upper one,
// as LinearCell::Sum in points.h does for one point. Not the one-operation-
// shorter lower + t * (upper - lower): that is NaN on a node next to an
// infinite one (inf - inf) and overflows between nodes near the largest
// finite value, where the two-weight sum gives the scalar path's answer.
// The last axis' two nodes are adjacent in memory (its stride is 1): one pair
// load a lane (LoadPairs) gives both.
template <typename T, int kNdim, int kAxis = 0>
XLABIND_AVX2_INLINE typename Avx2<T>::Vec SumCells(const T* grid, typename Avx2<T>::Index offset,
                                                   const int32_t* first, const int32_t* stride,
                                                   const typename Avx2<T>::Vec (*weight)[2]) {
  using V = Avx2<T>;
  typename V::Vec lower, upper;
  if constexpr (kAxis == kNdim - 1) {
    V::LoadPairs(grid, offset, first, &lower, &upper);
  } else {
    lower = SumCells<T, kNdim, kAxis + 1>(grid, offset, first, stride, weight);
    upper = SumCells<T, kNdim, kAxis + 1>(grid + stride[kAxis], offset, first, stride, weight);
  }
  return V::MulAdd(weight[kAxis][1], upper, V::Mul(weight[kAxis][0], lower));
}

// What every group of points needs about the call, as vectors.
template <typename T, int kNdim>
struct Avx2Axes {
  using V = Avx2<T>;
  // Per axis: the last cell's lower node, and the weights as constants, so a
  // group has no branch on them: upper = t * scale + shift (t, or 1 for a
  // differentiated axis), lower = scale - upper (1 - t, or -1).
  typename V::Vec highest[kNdim], scale[kNdim], shift[kNdim];
  int32_t stride[kNdim];

  XLABIND_AVX2_INLINE explicit Avx2Axes(const Geometry& g) {
    for (int a = 0; a < kNdim; ++a) {
      const bool slope = g.derivative[a] == 1;
      highest[a] = V::Splat(static_cast<T>(g.grid_shape[a] - 2));
      scale[a] = V::Splat(slope ? T(0) : T(1));
      shift[a] = V::Splat(slope ? T(1) : T(0));
      stride[a] = static_cast<int32_t>(g.grid_strides[a]);
    }
  }

  // The cells of the group of points at coords[a] + p: the offset of each
  // one's first node, and each axis' two weights (kPlain, no axis
  // differentiated: 1 - t and t without the constants). Returns whether every cell lies inside the
  // grid; when not, the offsets are garbage and unused.
  template <bool kPlain = false>
  XLABIND_AVX2_INLINE bool Load(const T* const* coords, int64_t p, typename V::Index* offset,
                                typename V::Vec (*weight)[2]) const {
    typename V::Offset sum = V::ZeroOffset();
    int inside = V::kAllInside;
#pragma GCC unroll 4
    for (int a = 0; a < kNdim; ++a) {
      const typename V::Vec c = V::Load(coords[a] + p);
      const typename V::Vec lower = V::Floor(c);
      inside &= V::Within(lower, highest[a]);
      sum = V::AddScaled(sum, lower, stride[a]);
      if constexpr (kPlain) {
        weight[a][1] = V::Sub(c, lower);
        weight[a][0] = V::Sub(V::Splat(T(1)), weight[a][1]);
      } else {
        weight[a][1] = V::MulAdd(V::Sub(c, lower), scale[a], shift[a]);
        weight[a][0] = V::Sub(scale[a], weight[a][1]);
      }
    }
    *offset = V::ToIndex(sum);
    return inside == V::kAllInside;
  }
};

// values[p] for the `count` points p of one batch element: grid is that
// element's grid, coords[a] + p the points' coordinate along axis a.
// scalar(p) computes one point the general way; it gets the groups with a
// point outside the interior, and the tail.
template <typename T, int kNdim, bool kPlain, typename Scalar>
XLABIND_AVX2_INLINE void GatherGroupsAvx2(const Avx2Axes<T, kNdim>& axes, const T* grid,
                                          const T* const* coords, T* values, int64_t count,
                                          Scalar& scalar) {
  using V = Avx2<T>;
  int64_t p = 0;
  for (; p + V::kLanes <= count; p += V::kLanes) {
    typename V::Index offset;
    typename V::Vec weight[kNdim][2];
    if (!axes.template Load<kPlain>(coords, p, &offset, weight)) {
      for (int lane = 0; lane < V::kLanes; ++lane) scalar(p + lane);
      continue;
    }
    alignas(32) int32_t first[V::kLanes];
    V::StoreIndex(first, offset);
    V::Store(values + p, SumCells<T, kNdim>(grid, offset, first, axes.stride, weight));
  }
  for (; p < count; ++p) scalar(p);
}

template <typename T, int kNdim, typename Scalar>
XLABIND_AVX2 void GatherRunAvx2(const Geometry& g, const T* grid, const T* const* coords, T* values,
                                int64_t count, Scalar& scalar) {
  const Avx2Axes<T, kNdim> axes(g);
  bool slopes = false;
  for (int a = 0; a < kNdim; ++a) slopes = slopes || g.derivative[a] != 0;
  if (slopes) {
    GatherGroupsAvx2<T, kNdim, false>(axes, grid, coords, values, count, scalar);
  } else {
    GatherGroupsAvx2<T, kNdim, true>(axes, grid, coords, values, count, scalar);
  }
}

// The weight times the cotangent of every node of a group's cells, node by
// node from kAxis on, with the node's offset from the cell's first.
template <typename T, int kNdim, int kAxis = 0>
XLABIND_AVX2_INLINE void NodeWeights(typename Avx2<T>::Vec factor, int32_t node,
                                     const int32_t* stride,
                                     const typename Avx2<T>::Vec (*weight)[2],
                                     typename Avx2<T>::Vec* node_weight, int32_t* node_offset,
                                     int* nodes) {
  using V = Avx2<T>;
  if constexpr (kAxis == kNdim) {
    node_weight[*nodes] = factor;
    node_offset[*nodes] = node;
    ++*nodes;
  } else {
    NodeWeights<T, kNdim, kAxis + 1>(V::Mul(factor, weight[kAxis][0]), node, stride, weight,
                                     node_weight, node_offset, nodes);
    NodeWeights<T, kNdim, kAxis + 1>(V::Mul(factor, weight[kAxis][1]), node + stride[kAxis], stride,
                                     weight, node_weight, node_offset, nodes);
  }
}

// Adds cotangents[p] times each node's weight into the grid, for the `count`
// points p of one batch element (as GatherRunAvx2 reads them). The weights
// are computed in vectors; the adds are scalar, since two lanes may share a
// node. scalar(p) adds one point the general way.
template <typename T, int kNdim, typename Scalar>
XLABIND_AVX2 void ScatterRunAvx2(const Geometry& g, T* grid, const T* const* coords,
                                 const T* cotangents, int64_t count, Scalar& scalar) {
  using V = Avx2<T>;
  constexpr int kNodes = 1 << kNdim;
  const Avx2Axes<T, kNdim> axes(g);
  int64_t p = 0;
  for (; p + V::kLanes <= count; p += V::kLanes) {
    typename V::Index offset;
    typename V::Vec weight[kNdim][2];
    if (!axes.Load(coords, p, &offset, weight)) {
      for (int lane = 0; lane < V::kLanes; ++lane) scalar(p + lane);
      continue;
    }
    typename V::Vec node_weight[kNodes];
    int32_t node_offset[kNodes];
    int nodes = 0;
    NodeWeights<T, kNdim>(V::Load(cotangents + p), 0, axes.stride, weight, node_weight, node_offset,
                          &nodes);
    alignas(32) int32_t first[V::kLanes];
    alignas(32) T add[kNodes][V::kLanes];
    V::StoreIndex(first, offset);
    for (int n = 0; n < kNodes; ++n) V::Store(add[n], node_weight[n]);
    // Nodes 2k and 2k + 1 are a pair along the last axis (NodeWeights' order).
    for (int lane = 0; lane < V::kLanes; ++lane) {
      T* cell = grid + first[lane];
      for (int n = 0; n < kNodes; n += 2) {
        V::AddPair(cell + node_offset[n], add[n][lane], add[n + 1][lane]);
      }
    }
  }
  for (; p < count; ++p) scalar(p);
}

// Order 0: per axis the node nearest each point (lax.round: half away from
// zero), for points whose node lies inside on every axis.
template <typename T, int kNdim>
struct Avx2Nearest {
  using V = Avx2<T>;
  typename V::Vec highest[kNdim];  // the last node along each axis
  int32_t stride[kNdim];

  XLABIND_AVX2_INLINE explicit Avx2Nearest(const Geometry& g) {
    for (int a = 0; a < kNdim; ++a) {
      highest[a] = V::Splat(static_cast<T>(g.grid_shape[a] - 1));
      stride[a] = static_cast<int32_t>(g.grid_strides[a]);
    }
  }

  // The group's nodes at coords[a] + p; whether all lie inside. A coordinate
  // below 0 (whose floor is below 0) is the scalar path's even when it
  // rounds to node 0: RoundUpFrom is lax.round for x >= 0 only.
  XLABIND_AVX2_INLINE bool Load(const T* const* coords, int64_t p,
                                typename V::Index* offset) const {
    typename V::Offset sum = V::ZeroOffset();
    int inside = V::kAllInside;
#pragma GCC unroll 3
    for (int a = 0; a < kNdim; ++a) {
      const typename V::Vec c = V::Load(coords[a] + p);
      const typename V::Vec lower = V::Floor(c);
      const typename V::Vec node = V::RoundUpFrom(c, lower);
      inside &= V::Within(lower, highest[a]) & V::Within(node, highest[a]);
      sum = V::AddScaled(sum, node, stride[a]);
    }
    *offset = V::ToIndex(sum);
    return inside == V::kAllInside;
  }
};

template <typename T, int kNdim, typename Scalar>
XLABIND_AVX2 void GatherNearestRunAvx2(const Geometry& g, const T* grid, const T* const* coords,
                                       T* values, int64_t count, Scalar& scalar) {
  using V = Avx2<T>;
  const Avx2Nearest<T, kNdim> nearest(g);
  int64_t p = 0;
  for (; p + V::kLanes <= count; p += V::kLanes) {
    typename V::Index offset;
    if (!nearest.Load(coords, p, &offset)) {
      for (int lane = 0; lane < V::kLanes; ++lane) scalar(p + lane);
      continue;
    }
    V::Store(values + p, V::Gather(grid, offset));
  }
  for (; p < count; ++p) scalar(p);
}

// The adds one lane after the other: two points may share their node.
template <typename T, int kNdim, typename Scalar>
XLABIND_AVX2 void ScatterNearestRunAvx2(const Geometry& g, T* grid, const T* const* coords,
                                        const T* cotangents, int64_t count, Scalar& scalar) {
  using V = Avx2<T>;
  const Avx2Nearest<T, kNdim> nearest(g);
  int64_t p = 0;
  for (; p + V::kLanes <= count; p += V::kLanes) {
    typename V::Index offset;
    if (!nearest.Load(coords, p, &offset)) {
      for (int lane = 0; lane < V::kLanes; ++lane) scalar(p + lane);
      continue;
    }
    alignas(32) int32_t node[V::kLanes];
    V::StoreIndex(node, offset);
    for (int lane = 0; lane < V::kLanes; ++lane) grid[node[lane]] += cotangents[p + lane];
  }
  for (; p < count; ++p) scalar(p);
}

#else  // not x86-64: never called, since Avx2KernelsApply() is false.

template <typename T, int kNdim, typename Scalar>
void GatherRunAvx2(const Geometry&, const T*, const T* const*, T*, int64_t count, Scalar& scalar) {
  for (int64_t p = 0; p < count; ++p) scalar(p);
}

template <typename T, int kNdim, typename Scalar>
void ScatterRunAvx2(const Geometry&, T*, const T* const*, const T*, int64_t count, Scalar& scalar) {
  for (int64_t p = 0; p < count; ++p) scalar(p);
}

template <typename T, int kNdim, typename Scalar>
void GatherNearestRunAvx2(const Geometry&, const T*, const T* const*, T*, int64_t count,
                          Scalar& scalar) {
  for (int64_t p = 0; p < count; ++p) scalar(p);
}

template <typename T, int kNdim, typename Scalar>
void ScatterNearestRunAvx2(const Geometry&, T*, const T* const*, const T*, int64_t count,
                           Scalar& scalar) {
  for (int64_t p = 0; p < count; ++p) scalar(p);
}

#endif

}  // namespace xlabind::map_coordinates

#endif  // XLABIND_FFI_OPS_MAP_COORDINATES_CPU_AVX2_KERNELS_H_
