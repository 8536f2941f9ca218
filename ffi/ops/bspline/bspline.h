// The B-splines of degrees 0 to 5, shared by map_coordinates (their weights,
// ffi/ops/map_coordinates/interpolation.h) and spline_filter (the poles of
// the prefilter that turns samples into their coefficients,
// ffi/ops/spline_filter/line_filter.h), on the CPU and in CUDA kernels alike.
#ifndef XLABIND_FFI_OPS_BSPLINE_BSPLINE_H_
#define XLABIND_FFI_OPS_BSPLINE_BSPLINE_H_

#include <cstdint>

#include "xlabind/native/host_device.h"

namespace xlabind::bspline {

// The centred B-spline of degree k (0 to 5) at t: (k + 1) polynomial pieces
// in u = |t|, zero from u = (k + 1) / 2 on.
template <typename T>
XLABIND_HOST_DEVICE T BSpline(int k, T t) {
  const T u = t < T(0) ? -t : t;
  switch (k) {
    case 0:
      return u < T(0.5) ? T(1) : T(0);
    case 1:
      return u < T(1) ? T(1) - u : T(0);
    case 2:
      if (u < T(0.5)) return T(0.75) - u * u;
      if (u < T(1.5)) return (T(1.5) - u) * (T(1.5) - u) / T(2);
      return T(0);
    case 3:
      if (u < T(1)) return T(2) / T(3) + u * u * (u / T(2) - T(1));
      if (u < T(2)) {
        const T v = T(2) - u;
        return v * v * v / T(6);
      }
      return T(0);
    case 4: {
      const T u2 = u * u;
      if (u < T(0.5)) return T(115) / T(192) + u2 * (u2 / T(4) - T(5) / T(8));
      if (u < T(1.5)) {
        return (T(55) + u * (T(20) + u * (T(-120) + u * (T(80) - T(16) * u)))) / T(96);
      }
      if (u < T(2.5)) {
        const T v = T(2.5) - u;
        return v * v * v * v / T(24);
      }
      return T(0);
    }
    default: {  // 5
      const T u2 = u * u;
      if (u < T(1)) return T(11) / T(20) + u2 * (T(-0.5) + u2 * (T(0.25) - u / T(12)));
      if (u < T(2)) {
        return T(17) / T(40) +
               u * (T(5) / T(8) +
                    u * (T(-7) / T(4) + u * (T(5) / T(4) + u * (T(-3) / T(8) + u / T(24)))));
      }
      if (u < T(3)) {
        const T v = T(3) - u;
        return v * v * v * v * v / T(120);
      }
      return T(0);
    }
  }
}

// The m-th derivative of the degree-k B-spline at t (m <= k): the m-th
// central difference of the degree k - m one.
template <typename T>
XLABIND_HOST_DEVICE T BSplineDerivative(int k, int m, T t) {
  if (m == 0) return BSpline(k, t);
  if (m > k) return T(0);
  T sum = T(0), binomial = T(1);
  for (int i = 0; i <= m; ++i) {
    const T term = binomial * BSpline(k - m, t + T(m) / T(2) - T(i));
    sum += (i & 1) ? -term : term;
    binomial = binomial * T(m - i) / T(i + 1);
  }
  return sum;
}

// The cubic's 4 weights at x in [0, 1), differentiated `derivative` times:
// the derivatives of the one polynomial piece each node has on [0, 1), so a
// node (x = 0, a knot of the third derivative) gets the piece to its right.
// cpu_avx2_spline_kernels.h computes the same in vectors.
template <typename T>
XLABIND_HOST_DEVICE void CubicWeights(T x, int32_t derivative, T* weight) {
  const T y = T(1) - x, x2 = x * x;
  switch (derivative) {
    case 0: {
      const T x3 = x2 * x;
      weight[0] = y * y * y / T(6);
      weight[1] = (T(3) * x3 - T(6) * x2 + T(4)) / T(6);
      weight[3] = x3 / T(6);
      weight[2] = T(1) - weight[0] - weight[1] - weight[3];
      return;
    }
    case 1:
      weight[0] = T(-0.5) * y * y;
      weight[1] = (T(3) * x2 - T(4) * x) * T(0.5);
      weight[2] = (T(2) * x - T(3) * x2 + T(1)) * T(0.5);
      weight[3] = x2 * T(0.5);
      return;
    case 2:
      weight[0] = y;
      weight[1] = T(3) * x - T(2);
      weight[2] = T(1) - T(3) * x;
      weight[3] = x;
      return;
    case 3:
      weight[0] = T(-1);
      weight[1] = T(3);
      weight[2] = T(-3);
      weight[3] = T(1);
      return;
    default:  // a cubic's fourth derivative and up
      weight[0] = weight[1] = weight[2] = weight[3] = T(0);
      return;
  }
}

// The weights of a degree-k spline's k + 1 nodes at offset x (AxisNodes'
// placement), differentiated `derivative` times: closed forms for the cubic
// and the quadratic values, the B-spline's pieces otherwise.
template <typename T, int kOrder>
XLABIND_HOST_DEVICE void SplineWeights(T x, int32_t derivative, T* weight) {
  if (kOrder == 3) {  // x in [0, 1)
    CubicWeights(x, derivative, weight);
    return;
  }
  if (kOrder == 2 && derivative == 0) {  // x in [-1/2, 1/2)
    weight[0] = (T(0.5) - x) * (T(0.5) - x) / T(2);
    weight[2] = (T(0.5) + x) * (T(0.5) + x) / T(2);
    weight[1] = T(1) - weight[0] - weight[2];
    return;
  }
  // Every weight from its own piece, the last one too (not 1 minus the
  // others): a weight that is 0 (the last node's at a node, odd degrees) is
  // then exactly 0 here and in the vector kernels (cpu_avx2_spline_kernels.h)
  // alike, whose rounding of the others differs.
  for (int j = 0; j <= kOrder; ++j) {
    weight[j] = BSplineDerivative<T>(kOrder, derivative, x + T(kOrder / 2) - T(j));
  }
}

// The filter's poles for a degree (SciPy's decimal values: computing the
// closed forms in double loses up to 2e-13 on the small pole of degree 4).
struct Poles {
  int count;
  double z[2];
  double gain;  // prod (1 - z)(1 - 1/z)
};

XLABIND_HOST_DEVICE Poles PolesOf(int order) {
  switch (order) {
    case 2:
      return {1, {-0.171572875253809902396622551580603843, 0.0}, 8.0};
    case 3:
      return {1, {-0.267949192431122706472553658494127633, 0.0}, 6.0};
    case 4:
      return {2,
              {-0.361341225900220177092212841325675255, -0.013725429297339121360331226939128204},
              384.0};
    default:
      return {2,
              {-0.430575347099973791851434783493520110, -0.043096288203264653822712376822550182},
              120.0};
  }
}

}  // namespace xlabind::bspline

#endif  // XLABIND_FFI_OPS_BSPLINE_BSPLINE_H_
