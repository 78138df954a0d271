//===- ProgramPrelude.h - The device environment of emulated programs -----===//
//
// Included ahead of a run-time generated CUDA program (Programs.cpp) that
// the emulator compiles with the host C++ compiler: the CUDA qualifiers,
// the thread position (read through the function the emulator passes to
// every entry) and the intrinsics the programs use. Self-contained: no CUDA
// headers, no Loom headers.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_RUNTIME_CUDA_EMULATOR_PROGRAMPRELUDE_H
#define LOOM_LIB_RUNTIME_CUDA_EMULATOR_PROGRAMPRELUDE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#define __global__
#define __device__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __restrict__ __restrict
#define __grid_constant__

/// emulator::ThreadPosition's layout.
struct LoomEmulatorDim3 {
  unsigned x, y, z;
};
struct LoomEmulatorPosition {
  LoomEmulatorDim3 thread, block, blockDim, gridDim;
};
/// Set by each entry before it calls its kernel.
static const void *(*loomEmulatorPosition)();
#define LOOM_EMULATOR_POSITION                                                 \
  (static_cast<const LoomEmulatorPosition *>(loomEmulatorPosition()))
#define threadIdx (LOOM_EMULATOR_POSITION->thread)
#define blockIdx (LOOM_EMULATOR_POSITION->block)
#define blockDim (LOOM_EMULATOR_POSITION->blockDim)
#define gridDim (LOOM_EMULATOR_POSITION->gridDim)

static inline unsigned __float_as_uint(float x) {
  unsigned bits;
  memcpy(&bits, &x, sizeof bits);
  return bits;
}
static inline float __uint_as_float(unsigned bits) {
  float x;
  memcpy(&x, &bits, sizeof x);
  return x;
}
static inline double __longlong_as_double(long long bits) {
  double x;
  memcpy(&x, &bits, sizeof x);
  return x;
}
/// The standard normal distribution's CDF (CUDA's math library).
static inline float normcdff(float x) {
  return 0.5f * erfcf(-x * 0.70710678118654752f);
}
static inline double normcdf(double x) {
  return 0.5 * erfc(-x * 0.70710678118654752440);
}
/// double -> float, rounded toward zero.
static inline float __double2float_rz(double v) {
  float f = (float)v;
  if (isfinite(v) && (double)f != v && fabs((double)f) > fabs(v))
    f = nextafterf(f, 0.0f);
  return f;
}

#endif // LOOM_LIB_RUNTIME_CUDA_EMULATOR_PROGRAMPRELUDE_H
