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
#ifndef XLABIND_FFI_OPS_SPLINE_FILTER_LINE_FILTER_H_
#define XLABIND_FFI_OPS_SPLINE_FILTER_LINE_FILTER_H_

#include <cmath>
#include <cstdint>

#include "ffi/ops/map_coordinates/interpolation.h"  // XLABIND_HOST_DEVICE

namespace xlabind::spline_filter {

enum Boundary : int32_t { kMirror = 0, kReflect = 1, kWrap = 2 };

// The filter's poles for a degree (SciPy's decimal values: computing the
// closed forms in double loses up to 2e-13 on the small pole of degree 4).
struct Poles {
  int count;
  double z[2];
  double gain;  // prod (1 - z)(1 - 1/z)
};

XLABIND_HOST_DEVICE Poles PolesOf(int order) {
  switch (order) {
    case 2: return {1, {-0.171572875253809902396622551580603843, 0.0}, 8.0};
    case 3: return {1, {-0.267949192431122706472553658494127633, 0.0}, 6.0};
    case 4: return {2, {-0.361341225900220177092212841325675255,
                        -0.013725429297339121360331226939128204}, 384.0};
    default: return {2, {-0.430575347099973791851434783493520110,
                         -0.043096288203264653822712376822550182}, 120.0};
  }
}

// A line of n values `stride` apart, read and written as doubles.
struct Line {
  double* data;
  int64_t n;
  int64_t stride;
  XLABIND_HOST_DEVICE double& operator[](int64_t i) const { return data[i * stride]; }
};

// Below this, a further power of z changes no double sum it is added to.
constexpr double kNegligible = 1e-18;

// The causal recursion's first value, c[0] <- w . c (the extension's past).
XLABIND_HOST_DEVICE void CausalStart(const Line& c, double z, int32_t boundary) {
  const int64_t n = c.n;
  if (boundary == kWrap) {
    double sum = c[0], zi = z;
    for (int64_t i = 1; i < n && fabs(zi) > kNegligible; ++i, zi *= z) sum += zi * c[n - i];
    c[0] = sum / (1.0 - pow(z, static_cast<double>(n)));
  } else if (boundary == kMirror) {
    const double q = pow(z, static_cast<double>(n - 1));
    double sum = c[0] + q * c[n - 1], zi = z;
    for (int64_t i = 1; i < n - 1 && fabs(zi) > kNegligible; ++i, zi *= z) {
      sum += zi * (c[i] + q * c[n - 1 - i]);
    }
    c[0] = sum / (1.0 - q * q);
  } else {  // reflect (SciPy 1.17 and older misread one term on short lines)
    const double r = pow(z, static_cast<double>(n));
    double sum = c[0] + r * c[n - 1], zi = z;
    for (int64_t i = 1; i < n && fabs(zi) > kNegligible; ++i, zi *= z) {
      sum += zi * (c[i] + r * c[n - 1 - i]);
    }
    c[0] = c[0] + sum * z / (1.0 - r * r);
  }
}

// The anticausal recursion's first value, c[n-1] <- u . c.
XLABIND_HOST_DEVICE void AnticausalStart(const Line& c, double z, int32_t boundary) {
  const int64_t n = c.n;
  if (boundary == kWrap) {
    double sum = c[n - 1], zi = z;
    for (int64_t i = 0; i < n - 1 && fabs(zi) > kNegligible; ++i, zi *= z) sum += zi * c[i];
    c[n - 1] = sum * z / (pow(z, static_cast<double>(n)) - 1.0);
  } else if (boundary == kMirror) {
    c[n - 1] = (z * c[n - 2] + c[n - 1]) * z / (z * z - 1.0);
  } else {
    c[n - 1] = c[n - 1] * z / (z - 1.0);
  }
}

// Samples to spline coefficients, in place.
XLABIND_HOST_DEVICE void FilterLine(const Line& c, int order, int32_t boundary) {
  const int64_t n = c.n;
  if (n < 2) return;
  const Poles poles = PolesOf(order);
  for (int64_t i = 0; i < n; ++i) c[i] *= poles.gain;
  for (int p = 0; p < poles.count; ++p) {
    const double z = poles.z[p];
    CausalStart(c, z, boundary);
    for (int64_t i = 1; i < n; ++i) c[i] += z * c[i - 1];
    AnticausalStart(c, z, boundary);
    for (int64_t i = n - 2; i >= 0; --i) c[i] = z * (c[i + 1] - c[i]);
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

// The transpose of FilterLine, in place.
XLABIND_HOST_DEVICE void FilterLineTranspose(const Line& c, int order, int32_t boundary) {
  const int64_t n = c.n;
  if (n < 2) return;
  const Poles poles = PolesOf(order);
  for (int p = poles.count - 1; p >= 0; --p) {
    const double z = poles.z[p];
    // The anticausal recursion, transposed: a causal one.
    for (int64_t i = 0; i < n - 1; ++i) {
      const double t = c[i];
      c[i] = -z * t;
      c[i + 1] += z * t;
    }
    // Its start, transposed: c[n-1] spread over the line.
    const double last = c[n - 1];
    for (int64_t j = 0; j < n - 1; ++j) {
      const double u = AnticausalWeight(j, n, z, boundary);
      if (u != 0.0) c[j] += u * last;
    }
    c[n - 1] = AnticausalWeight(n - 1, n, z, boundary) * last;
    // The causal recursion, transposed: an anticausal one.
    for (int64_t i = n - 1; i >= 1; --i) c[i - 1] += z * c[i];
    // Its start, transposed: c[0] spread over the line.
    const double first = c[0];
    for (int64_t j = 1; j < n; ++j) {
      const double w = CausalWeight(j, n, z, boundary);
      if (fabs(w) > kNegligible * kNegligible) c[j] += w * first;
    }
    c[0] = CausalWeight(0, n, z, boundary) * first;
  }
  for (int64_t i = 0; i < n; ++i) c[i] *= poles.gain;
}

}  // namespace xlabind::spline_filter

#endif  // XLABIND_FFI_OPS_SPLINE_FILTER_LINE_FILTER_H_
