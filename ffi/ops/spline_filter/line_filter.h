// The B-spline prefilter of one line and its transpose (adjoint), shared by
// the CPU handlers (C++) and the CUDA kernels (nvcc). The filter turns
// samples into the coefficients of the interpolating spline of degree 2 to
// 5: a gain, then per pole z a causal and an anticausal first-order
// recursion, each started from a closed form of the boundary (Unser's
// recursive filtering, as scipy.ndimage.spline_filter1d does it):
//
//   mirror   whole-sample symmetric extension (period 2n - 2);
//   reflect  half-sample symmetric extension (period 2n);
//   wrap     periodic extension (period n).
//
// Every step is linear, and each starting value replaces one element by a
// weighted sum of the line, so the transpose runs the steps' transposes in
// reverse: the recursions in the other direction, the starting values as
// scatters of one element into the line. Arithmetic is in double whatever
// the data's type; a line of one sample is left as it is.
//
// Each function runs kLanes lines of one length in lockstep, every step of
// the recursion for all of them before the next: a recursion is a chain of
// dependent multiply-adds, so one line at a time leaves a CPU core waiting on
// each; several lines side by side fill it (and, where the lines are adjacent
// in memory, the compiler's vectors). CUDA runs one line per thread.
#ifndef XLABIND_FFI_OPS_SPLINE_FILTER_LINE_FILTER_H_
#define XLABIND_FFI_OPS_SPLINE_FILTER_LINE_FILTER_H_

#include <cmath>
#include <cstdint>

#include "ffi/ops/bspline/bspline.h"
#include "xlabind/native/host_device.h"

namespace xlabind::spline_filter {

using bspline::Poles;
using bspline::PolesOf;

// The `boundary` attribute: whole-sample symmetric, half-sample symmetric,
// periodic. Python spells it python/xlabind/ops/modes.py's Boundary
// (tests/native/test_op_enums.py holds the two equal).
enum Boundary : int32_t { kMirror = 0, kReflect = 1, kWrap = 2 };

// kLanes lines of n values: value i of line l at data[l * lane_step + i * stride],
// read and written as doubles.
template <int kLanes>
struct LineBlock {
  double* data;
  int64_t n;
  int64_t stride;
  int64_t lane_step;
  XLABIND_HOST_DEVICE double& operator()(int l, int64_t i) const {
    return data[l * lane_step + i * stride];
  }
};

// One line (lane_step unused).
using Line = LineBlock<1>;

// Below this, a further power of z changes no double sum it is added to.
constexpr double kNegligible = 1e-18;

// The causal recursion's first value, c[0] <- w . c (the extension's past).
template <int kLanes>
XLABIND_HOST_DEVICE void CausalStart(const LineBlock<kLanes>& c, double z, int32_t boundary) {
  const int64_t n = c.n;
  double sum[kLanes];
  if (boundary == kWrap) {
    for (int l = 0; l < kLanes; ++l) sum[l] = c(l, 0);
    double zi = z;
    for (int64_t i = 1; i < n && fabs(zi) > kNegligible; ++i, zi *= z) {
      for (int l = 0; l < kLanes; ++l) sum[l] += zi * c(l, n - i);
    }
    const double d = 1.0 - pow(z, static_cast<double>(n));
    for (int l = 0; l < kLanes; ++l) c(l, 0) = sum[l] / d;
  } else if (boundary == kMirror) {
    const double q = pow(z, static_cast<double>(n - 1));
    for (int l = 0; l < kLanes; ++l) sum[l] = c(l, 0) + q * c(l, n - 1);
    double zi = z;
    for (int64_t i = 1; i < n - 1 && fabs(zi) > kNegligible; ++i, zi *= z) {
      for (int l = 0; l < kLanes; ++l) sum[l] += zi * (c(l, i) + q * c(l, n - 1 - i));
    }
    const double d = 1.0 - q * q;
    for (int l = 0; l < kLanes; ++l) c(l, 0) = sum[l] / d;
  } else {  // reflect (SciPy 1.17 and older misread one term on short lines)
    const double r = pow(z, static_cast<double>(n));
    for (int l = 0; l < kLanes; ++l) sum[l] = c(l, 0) + r * c(l, n - 1);
    double zi = z;
    for (int64_t i = 1; i < n && fabs(zi) > kNegligible; ++i, zi *= z) {
      for (int l = 0; l < kLanes; ++l) sum[l] += zi * (c(l, i) + r * c(l, n - 1 - i));
    }
    const double d = 1.0 - r * r;
    for (int l = 0; l < kLanes; ++l) c(l, 0) = c(l, 0) + sum[l] * z / d;
  }
}

// The anticausal recursion's first value, c[n-1] <- u . c.
template <int kLanes>
XLABIND_HOST_DEVICE void AnticausalStart(const LineBlock<kLanes>& c, double z, int32_t boundary) {
  const int64_t n = c.n;
  if (boundary == kWrap) {
    double sum[kLanes];
    for (int l = 0; l < kLanes; ++l) sum[l] = c(l, n - 1);
    double zi = z;
    for (int64_t i = 0; i < n - 1 && fabs(zi) > kNegligible; ++i, zi *= z) {
      for (int l = 0; l < kLanes; ++l) sum[l] += zi * c(l, i);
    }
    const double d = pow(z, static_cast<double>(n)) - 1.0;
    for (int l = 0; l < kLanes; ++l) c(l, n - 1) = sum[l] * z / d;
  } else if (boundary == kMirror) {
    for (int l = 0; l < kLanes; ++l) {
      c(l, n - 1) = (z * c(l, n - 2) + c(l, n - 1)) * z / (z * z - 1.0);
    }
  } else {
    for (int l = 0; l < kLanes; ++l) c(l, n - 1) = c(l, n - 1) * z / (z - 1.0);
  }
}

// Samples to spline coefficients, in place.
template <int kLanes>
XLABIND_HOST_DEVICE void FilterLine(const LineBlock<kLanes>& c, int order, int32_t boundary) {
  const int64_t n = c.n;
  if (n < 2) return;
  const Poles poles = PolesOf(order);
  for (int64_t i = 0; i < n; ++i) {
    for (int l = 0; l < kLanes; ++l) c(l, i) *= poles.gain;
  }
  for (int p = 0; p < poles.count; ++p) {
    const double z = poles.z[p];
    CausalStart(c, z, boundary);
    for (int64_t i = 1; i < n; ++i) {
      for (int l = 0; l < kLanes; ++l) c(l, i) += z * c(l, i - 1);
    }
    AnticausalStart(c, z, boundary);
    for (int64_t i = n - 2; i >= 0; --i) {
      for (int l = 0; l < kLanes; ++l) c(l, i) = z * (c(l, i + 1) - c(l, i));
    }
  }
}

// The weight of c[j] in CausalStart's new c[0].
XLABIND_HOST_DEVICE double CausalWeight(int64_t j, int64_t n, double z, int32_t boundary) {
  const double dn = static_cast<double>(n);
  const double dj = static_cast<double>(j);
  if (boundary == kWrap) {
    const double d = 1.0 - pow(z, dn);
    return j == 0 ? 1.0 / d : pow(z, dn - dj) / d;
  }
  if (boundary == kMirror) {
    const double d = 1.0 - pow(z, 2.0 * dn - 2.0);
    if (j == 0) return 1.0 / d;
    if (j == n - 1) return pow(z, dn - 1.0) / d;
    return (pow(z, dj) + pow(z, 2.0 * dn - 2.0 - dj)) / d;
  }
  const double s = pow(z, dj) + pow(z, 2.0 * dn - 1.0 - dj);
  return (j == 0 ? 1.0 : 0.0) + s * z / (1.0 - pow(z, 2.0 * dn));
}

// The weight of c[j] in AnticausalStart's new c[n-1].
XLABIND_HOST_DEVICE double AnticausalWeight(int64_t j, int64_t n, double z, int32_t boundary) {
  if (boundary == kWrap) {
    const double d = pow(z, static_cast<double>(n)) - 1.0;
    return j == n - 1 ? z / d : pow(z, static_cast<double>(j + 2)) / d;
  }
  if (boundary == kMirror) {
    if (j == n - 1) return z / (z * z - 1.0);
    return j == n - 2 ? z * z / (z * z - 1.0) : 0.0;
  }
  return j == n - 1 ? z / (z - 1.0) : 0.0;
}

// The starting values' weights the transpose spreads, for lines of n values:
// per pole p, CausalWeight(j) at table[2 p n + j] and AnticausalWeight(j) at
// table[(2 p + 1) n + j]; 2 n PolesOf(order).count doubles. They cost powers
// of z, the same for every line of an axis: the CPU makes the table once per
// axis (FilterLineTranspose computes them itself without one).
inline void TransposeWeights(int64_t n, int order, int32_t boundary, double* table) {
  const Poles poles = PolesOf(order);
  for (int p = 0; p < poles.count; ++p) {
    for (int64_t j = 0; j < n; ++j) {
      table[2 * p * n + j] = CausalWeight(j, n, poles.z[p], boundary);
      table[(2 * p + 1) * n + j] = AnticausalWeight(j, n, poles.z[p], boundary);
    }
  }
}

// The transpose of FilterLine, in place; `weights`: TransposeWeights' table
// for this line length, or null.
template <int kLanes>
XLABIND_HOST_DEVICE void FilterLineTranspose(const LineBlock<kLanes>& c, int order,
                                             int32_t boundary, const double* weights = nullptr) {
  const int64_t n = c.n;
  if (n < 2) return;
  const Poles poles = PolesOf(order);
  for (int p = poles.count - 1; p >= 0; --p) {
    const double z = poles.z[p];
    const double* causal = weights ? weights + 2 * p * n : nullptr;
    const double* anticausal = weights ? weights + (2 * p + 1) * n : nullptr;
    // The anticausal recursion, transposed: a causal one.
    for (int64_t i = 0; i < n - 1; ++i) {
      for (int l = 0; l < kLanes; ++l) {
        const double t = c(l, i);
        c(l, i) = -z * t;
        c(l, i + 1) += z * t;
      }
    }
    // Its start, transposed: c[n-1] spread over the line.
    double last[kLanes];
    for (int l = 0; l < kLanes; ++l) last[l] = c(l, n - 1);
    for (int64_t j = 0; j < n - 1; ++j) {
      const double u = anticausal ? anticausal[j] : AnticausalWeight(j, n, z, boundary);
      if (u == 0.0) continue;
      for (int l = 0; l < kLanes; ++l) c(l, j) += u * last[l];
    }
    const double u_last = anticausal ? anticausal[n - 1] : AnticausalWeight(n - 1, n, z, boundary);
    for (int l = 0; l < kLanes; ++l) c(l, n - 1) = u_last * last[l];
    // The causal recursion, transposed: an anticausal one.
    for (int64_t i = n - 1; i >= 1; --i) {
      for (int l = 0; l < kLanes; ++l) c(l, i - 1) += z * c(l, i);
    }
    // Its start, transposed: c[0] spread over the line.
    double first[kLanes];
    for (int l = 0; l < kLanes; ++l) first[l] = c(l, 0);
    for (int64_t j = 1; j < n; ++j) {
      const double w = causal ? causal[j] : CausalWeight(j, n, z, boundary);
      if (!(fabs(w) > kNegligible * kNegligible)) continue;
      for (int l = 0; l < kLanes; ++l) c(l, j) += w * first[l];
    }
    const double w_first = causal ? causal[0] : CausalWeight(0, n, z, boundary);
    for (int l = 0; l < kLanes; ++l) c(l, 0) = w_first * first[l];
  }
  for (int64_t i = 0; i < n; ++i) {
    for (int l = 0; l < kLanes; ++l) c(l, i) *= poles.gain;
  }
}

}  // namespace xlabind::spline_filter

#endif  // XLABIND_FFI_OPS_SPLINE_FILTER_LINE_FILTER_H_
