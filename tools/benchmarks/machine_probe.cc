// The machine's ceilings for the benchmark's roofline (tools/benchmarks/
// roofline.py), built by the same toolchain and flags as the native ops and
// run on as many threads as they get. Each mode prints one JSON line:
//
//   machine_probe stream <f32|f64> <reads> <writes> <elements> <threads>
//       `reads` arrays summed into `writes` arrays, element by element (the
//       coordinate and value streams of a call; reads 0: a fill, as the
//       transpose zeroes its grid): the seconds a pass takes, and its bytes.
//   machine_probe fma <f32|f64> <threads>
//       independent 256-bit fused multiply-add chains: floating-point
//       operations a second (an FMA counts two per lane).
//   machine_probe nodes <gather|scatter> <f32|f64> <side> <nodes> <points> <threads>
//       per random point, the nodes^3 block of a side^3 grid that an
//       interpolation of order nodes - 1 reads (gather) or adds into
//       (scatter, a grid per thread as the transpose does), each row of
//       `nodes` elements by the fewest loads (and stores) that cover it, with
//       nothing computed: the seconds the accesses alone take for `points`
//       points.
//
// Every time is the fastest of several passes over warm data. The vector code
// is built for AVX2 and FMA, as the kernels are (cpu_avx2_kernels.h).
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kPasses = 7;

#define PROBE_AVX2 __attribute__((target("avx2,fma")))

double Now() {
  using Clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

// Runs body(thread, begin, end) over [0, count) split evenly on `threads`
// threads; returns the fastest of kPasses passes, in seconds.
template <typename Body>
double Timed(int threads, int64_t count, Body body) {
  double best = 1e30;
  for (int pass = 0; pass < kPasses; ++pass) {
    std::vector<std::thread> pool;
    const double start = Now();
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] { body(t, count * t / threads, count * (t + 1) / threads); });
    }
    for (auto& thread : pool) thread.join();
    best = std::min(best, Now() - start);
  }
  return best;
}

// Keeps a result alive past the optimizer.
volatile double sink;

// kReads and kWrites fixed at compile time, so the loop vectorizes as the
// kernels' streams do.
template <typename T, int kReads, int kWrites>
double StreamPass(T* const* in, T* const* out, int64_t begin, int64_t end) {
  double keep = 0;
  for (int64_t i = begin; i < end; ++i) {
    T sum = T(0);
    for (int r = 0; r < kReads; ++r) sum += in[r][i];
    for (int w = 0; w < kWrites; ++w) out[w][i] = sum;
    if constexpr (kWrites == 0) keep += sum;
  }
  return keep;
}

template <typename T, int kReads, int kWrites>
int Stream(int64_t n, int threads) {
  std::vector<std::vector<T>> in(kReads, std::vector<T>(n, T(1)));
  std::vector<std::vector<T>> out(kWrites, std::vector<T>(n));
  T* in_p[kReads + 1];
  T* out_p[kWrites + 1];
  for (int r = 0; r < kReads; ++r) in_p[r] = in[r].data();
  for (int w = 0; w < kWrites; ++w) out_p[w] = out[w].data();
  const double seconds = Timed(threads, n, [&](int, int64_t begin, int64_t end) {
    const double keep = StreamPass<T, kReads, kWrites>(in_p, out_p, begin, end);
    if (keep != 0) sink = keep;
  });
  std::printf("{\"seconds\": %.9g, \"bytes\": %lld}\n", seconds,
              static_cast<long long>(n * (kReads + kWrites) * sizeof(T)));
  return 0;
}

// The shapes the roofline asks for: up to 5 arrays read (coordinates and a
// cotangent) and one written or none; a fill; a gradient's 3 coordinates.
template <typename T>
int StreamOf(int reads, int writes, int64_t n, int threads) {
  if (writes == 0) {
    switch (reads) {
      case 1:
        return Stream<T, 1, 0>(n, threads);
      case 2:
        return Stream<T, 2, 0>(n, threads);
      case 3:
        return Stream<T, 3, 0>(n, threads);
      case 4:
        return Stream<T, 4, 0>(n, threads);
      case 5:
        return Stream<T, 5, 0>(n, threads);
    }
  } else if (writes == 1) {
    switch (reads) {
      case 0:
        return Stream<T, 0, 1>(n, threads);
      case 1:
        return Stream<T, 1, 1>(n, threads);
      case 2:
        return Stream<T, 2, 1>(n, threads);
      case 3:
        return Stream<T, 3, 1>(n, threads);
      case 4:
        return Stream<T, 4, 1>(n, threads);
      case 5:
        return Stream<T, 5, 1>(n, threads);
    }
  } else if (writes == 3 && reads == 4) {
    return Stream<T, 4, 3>(n, threads);  // a gradient in three coordinates
  }
  std::fprintf(stderr, "machine_probe stream: reads 0-5 and writes 0-1, or 4 and 3; not %d, %d\n",
               reads, writes);
  return 2;
}

template <typename T>
struct Vec256;
template <>
struct Vec256<double> {
  using V = __m256d;
  static constexpr int kLanes = 4;
  PROBE_AVX2 static V Zero() { return _mm256_setzero_pd(); }
  PROBE_AVX2 static V Splat(double x) { return _mm256_set1_pd(x); }
  PROBE_AVX2 static V Load(const double* p) { return _mm256_loadu_pd(p); }
  PROBE_AVX2 static void Store(double* p, V v) { _mm256_storeu_pd(p, v); }
  PROBE_AVX2 static V Add(V a, V b) { return _mm256_add_pd(a, b); }
  PROBE_AVX2 static V Fma(V a, V b, V c) { return _mm256_fmadd_pd(a, b, c); }
  PROBE_AVX2 static double Sum(V v) {
    alignas(32) double x[4];
    _mm256_store_pd(x, v);
    return x[0] + x[1] + x[2] + x[3];
  }
};
template <>
struct Vec256<float> {
  using V = __m256;
  static constexpr int kLanes = 8;
  PROBE_AVX2 static V Zero() { return _mm256_setzero_ps(); }
  PROBE_AVX2 static V Splat(float x) { return _mm256_set1_ps(x); }
  PROBE_AVX2 static V Load(const float* p) { return _mm256_loadu_ps(p); }
  PROBE_AVX2 static void Store(float* p, V v) { _mm256_storeu_ps(p, v); }
  PROBE_AVX2 static V Add(V a, V b) { return _mm256_add_ps(a, b); }
  PROBE_AVX2 static V Fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  PROBE_AVX2 static double Sum(V v) {
    alignas(32) float x[8];
    _mm256_store_ps(x, v);
    double s = 0;
    for (float e : x) s += e;
    return s;
  }
};

// Twelve chains: more than an FMA's latency times the units' throughput on
// current x86 cores (4 cycles x 2 units), so the units never wait.
template <typename T>
PROBE_AVX2 double FmaChains(int64_t iterations) {
  using W = Vec256<T>;
  constexpr int kChains = 12;
  typename W::V acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = W::Splat(T(c) * T(1e-3));
  const typename W::V a = W::Splat(T(0.999999)), b = W::Splat(T(1e-7));
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c) acc[c] = W::Fma(acc[c], a, b);
  }
  typename W::V total = W::Zero();
  for (int c = 0; c < kChains; ++c) total = W::Add(total, acc[c]);
  return W::Sum(total) + kChains * 0.0;
}

template <typename T>
int Fma(int threads) {
  constexpr int64_t kIterations = int64_t{1} << 24;
  constexpr int kChains = 12;
  const double seconds =
      Timed(threads, threads, [&](int, int64_t, int64_t) { sink = FmaChains<T>(kIterations); });
  const double flops = 2.0 * kChains * Vec256<T>::kLanes * kIterations * threads;
  std::printf("{\"seconds\": %.9g, \"flops\": %.9g}\n", seconds, flops);
  return 0;
}

// The first node of each point's block, uniform over the cells that hold a
// whole block, as the benchmark's uniform points are.
std::vector<int32_t> BlockStarts(int64_t side, int nodes, int64_t points) {
  std::mt19937_64 rng(12345);
  std::uniform_int_distribution<int64_t> cell(0, side - nodes);
  std::vector<int32_t> first(points);
  for (auto& f : first) f = static_cast<int32_t>((cell(rng) * side + cell(rng)) * side + cell(rng));
  return first;
}

// A row of kBytes consecutive bytes, read (summed into `acc`) or read,
// changed and written back, by the widest loads that fit: 32, 16, 8 and 4
// bytes, as few as a kernel reading just those nodes would issue. The bits
// are added as integers: what they hold does not matter here.
template <int kBytes>
PROBE_AVX2 inline void ReadRow(const char* row, __m256i* acc) {
  if constexpr (kBytes >= 32) {
    *acc = _mm256_add_epi64(*acc, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row)));
    ReadRow<kBytes - 32>(row + 32, acc);
  } else if constexpr (kBytes >= 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row));
    *acc = _mm256_add_epi64(*acc, _mm256_castsi128_si256(v));
    ReadRow<kBytes - 16>(row + 16, acc);
  } else if constexpr (kBytes >= 8) {
    const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row));
    *acc = _mm256_add_epi64(*acc, _mm256_castsi128_si256(v));
    ReadRow<kBytes - 8>(row + 8, acc);
  } else if constexpr (kBytes >= 4) {
    const __m128i v = _mm_cvtsi32_si128(*reinterpret_cast<const int32_t*>(row));
    *acc = _mm256_add_epi64(*acc, _mm256_castsi128_si256(v));
  }
}

template <int kBytes>
PROBE_AVX2 inline void UpdateRow(char* row) {
  if constexpr (kBytes >= 32) {
    auto* p = reinterpret_cast<__m256i*>(row);
    _mm256_storeu_si256(p, _mm256_add_epi64(_mm256_loadu_si256(p), _mm256_set1_epi64x(1)));
    UpdateRow<kBytes - 32>(row + 32);
  } else if constexpr (kBytes >= 16) {
    auto* p = reinterpret_cast<__m128i*>(row);
    _mm_storeu_si128(p, _mm_add_epi64(_mm_loadu_si128(p), _mm_set1_epi64x(1)));
    UpdateRow<kBytes - 16>(row + 16);
  } else if constexpr (kBytes >= 8) {
    auto* p = reinterpret_cast<int64_t*>(row);
    *p += 1;
    UpdateRow<kBytes - 8>(row + 8);
  } else if constexpr (kBytes >= 4) {
    *reinterpret_cast<int32_t*>(row) += 1;
  }
}

// The kNodes^3 blocks of points [begin, end): kNodes^2 rows of kNodes
// elements of kSize bytes each.
template <int kSize, int kNodes, bool kScatter>
PROBE_AVX2 double VisitBlocks(char* grid, const int32_t* first, int64_t begin, int64_t end,
                              int64_t side) {
  constexpr int kBytes = kSize * kNodes;
  __m256i acc = _mm256_setzero_si256();
  const int64_t row_step = side * kSize, plane_step = side * side * kSize;
  for (int64_t p = begin; p < end; ++p) {
    char* block = grid + int64_t{first[p]} * kSize;
#pragma GCC unroll 6
    for (int i = 0; i < kNodes; ++i) {
#pragma GCC unroll 6
      for (int j = 0; j < kNodes; ++j) {
        char* row = block + i * plane_step + j * row_step;
        if constexpr (kScatter) {
          UpdateRow<kBytes>(row);
        } else {
          ReadRow<kBytes>(row, &acc);
        }
      }
    }
  }
  alignas(32) int64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc);
  return static_cast<double>(lanes[0] + lanes[1] + lanes[2] + lanes[3]);
}

template <int kSize, bool kScatter>
double VisitBlocksOf(int nodes, char* grid, const int32_t* first, int64_t begin, int64_t end,
                     int64_t side) {
  switch (nodes) {
    case 1:
      return VisitBlocks<kSize, 1, kScatter>(grid, first, begin, end, side);
    case 2:
      return VisitBlocks<kSize, 2, kScatter>(grid, first, begin, end, side);
    case 3:
      return VisitBlocks<kSize, 3, kScatter>(grid, first, begin, end, side);
    case 4:
      return VisitBlocks<kSize, 4, kScatter>(grid, first, begin, end, side);
    case 5:
      return VisitBlocks<kSize, 5, kScatter>(grid, first, begin, end, side);
    default:
      return VisitBlocks<kSize, 6, kScatter>(grid, first, begin, end, side);
  }
}

template <typename T>
int Nodes(bool scatter, int64_t side, int nodes, int64_t points, int threads) {
  if (nodes < 1 || nodes > 6 || side < nodes) {
    std::fprintf(stderr, "machine_probe nodes: 1 to 6 nodes within the side, not %d\n", nodes);
    return 2;
  }
  const int64_t size = side * side * side;
  std::vector<std::vector<T>> grids(scatter ? threads : 1, std::vector<T>(size, T(1)));
  const std::vector<int32_t> first = BlockStarts(side, nodes, points);
  const double seconds = Timed(threads, points, [&](int t, int64_t begin, int64_t end) {
    char* grid = reinterpret_cast<char*>(grids[scatter ? t : 0].data());
    sink = scatter ? VisitBlocksOf<sizeof(T), true>(nodes, grid, first.data(), begin, end, side)
                   : VisitBlocksOf<sizeof(T), false>(nodes, grid, first.data(), begin, end, side);
  });
  std::printf("{\"seconds\": %.9g}\n", seconds);
  return 0;
}

int Usage() {
  std::fprintf(stderr,
               "usage: machine_probe stream <f32|f64> <reads> <writes> <elements> <threads>\n"
               "       machine_probe fma <f32|f64> <threads>\n"
               "       machine_probe nodes <gather|scatter> <f32|f64> <side> <nodes> <points> "
               "<threads>\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> a(argv + 1, argv + argc);
  auto f64 = [](const std::string& dtype) { return dtype == "f64"; };
  auto number = [](const std::string& s) { return std::atoll(s.c_str()); };
  if (a.size() == 6 && a[0] == "stream") {
    return f64(a[1]) ? StreamOf<double>(number(a[2]), number(a[3]), number(a[4]), number(a[5]))
                     : StreamOf<float>(number(a[2]), number(a[3]), number(a[4]), number(a[5]));
  }
  if (a.size() == 3 && a[0] == "fma") {
    return f64(a[1]) ? Fma<double>(number(a[2])) : Fma<float>(number(a[2]));
  }
  if (a.size() == 7 && a[0] == "nodes") {
    const bool scatter = a[1] == "scatter";
    return f64(a[2])
               ? Nodes<double>(scatter, number(a[3]), number(a[4]), number(a[5]), number(a[6]))
               : Nodes<float>(scatter, number(a[3]), number(a[4]), number(a[5]), number(a[6]));
  }
  return Usage();
}
