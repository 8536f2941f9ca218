// What the CPU a handler runs on can do, for handlers that carry kernels for
// more than the x86-64 baseline the toolchain targets: build such kernels with
// __attribute__((target("avx2,fma"))) and call them only when HasAvx2Fma().
//
// XLABIND_NO_SIMD=1 in the environment makes HasAvx2Fma() false, so the
// baseline path can be tested and compared on any machine, in one process:
// it is read at every call (a getenv, against a kernel's microseconds; the
// CPU itself is asked once).
#ifndef XLABIND_FFI_NATIVE_CPU_FEATURES_H_
#define XLABIND_FFI_NATIVE_CPU_FEATURES_H_

#include <cstdint>
#include <cstdlib>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace xlabind::native {

namespace cpu_features_internal {

inline bool DetectAvx2Fma() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  const bool fma = ecx & (1u << 12), osxsave = ecx & (1u << 27), avx = ecx & (1u << 28);
  if (!(fma && osxsave && avx)) return false;
  // The OS must save the YMM registers on context switches (XCR0 bits 1, 2);
  // xgetbv by its encoding, since the intrinsic needs the xsave target.
  uint32_t xcr0_low, xcr0_high;
  __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  if ((xcr0_low & 0x6) != 0x6) return false;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  return ebx & (1u << 5);  // AVX2
#else
  return false;
#endif
}

inline bool SimdDisabled() {
  const char* value = std::getenv("XLABIND_NO_SIMD");
  return value != nullptr && value[0] != '\0' && !(value[0] == '0' && value[1] == '\0');
}

}  // namespace cpu_features_internal

// Whether AVX2 and FMA kernels may run here: the CPU has both and the
// environment does not set XLABIND_NO_SIMD.
//
// Returns:
//   True where vector kernels may run (the CPU is asked once; the environment
//   at every call, so tests can compare both paths in one process).
// Example:
//   if (HasAvx2Fma()) return SumAvx2(x, n);
inline bool HasAvx2Fma() {
  static const bool has = cpu_features_internal::DetectAvx2Fma();
  return has && !cpu_features_internal::SimdDisabled();
}

}  // namespace xlabind::native

#endif  // XLABIND_FFI_NATIVE_CPU_FEATURES_H_
